//! gpuplan: a local catalog of cloud GPU prices, purchase planning and alerts.
//!
//! Data flows one way: providers -> [`sync`] -> [`store`] -> [`catalog`] -> [`cli`].

pub mod alerts;
pub mod api;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod fingerprint;
pub mod forecast;
pub mod metrics;
pub mod optimizer;
pub mod planner;
pub mod planning;
pub mod scheduler;
pub mod solver_pool;
pub mod store;
pub mod sync;
pub mod telemetry;
