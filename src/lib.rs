//! gpuplan: a local catalog of cloud GPU prices, purchase planning and alerts.
//!
//! Prices flow one way: providers -> [`sync`] -> [`store`] -> [`catalog`] ->
//! [`cli`], [`api`] and the dashboard ([`ui`]). Two readers also write their own tables: the plan
//! pipeline ([`planning`]) saves plans, and [`alerts`] keeps its state and
//! outbox. docs/catalog.md draws the whole picture.

pub mod alerts;
pub mod bills;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod fingerprint;
pub mod optimizer;
pub mod plan;
pub mod store;
pub mod telemetry;
