//! gpuplan: a local catalog of cloud GPU prices, purchase planning and alerts.
//!
//! Data flows one way: providers -> [`sync`] -> [`store`] -> [`catalog`] -> [`cli`].

pub mod store;
pub mod config;
pub mod sync;
pub mod catalog;
