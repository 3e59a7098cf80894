//! gpuplan: a local catalog of cloud GPU prices, purchase planning and alerts.
//!
//! The top-level modules follow the data. Prices flow one way: providers ->
//! [`catalog::sync`] -> [`store`] -> [`catalog`] -> [`cli`] and the daemon's
//! HTTP face ([`daemon::http`]: the API and the dashboard). Bills flow the same
//! way through [`bills`]. [`plan`] turns the catalog (or a problem file, or
//! the bills) into problems for the pure [`optimizer`] and saves the plans;
//! [`alerts`] keeps its state and outbox; [`daemon`] runs all of it on a
//! schedule; [`config`] parses and validates the settings each of them owns.
//! docs/catalog.md draws the whole picture.

pub mod alerts;
pub mod bills;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod facts;
pub mod fingerprint;
pub mod optimizer;
pub mod plan;
pub mod store;
pub mod telemetry;
