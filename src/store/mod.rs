//! The catalog store: the typed reads and writes the rest of gpuplan uses,
//! behind one interface ([`Store`]) with two backends: SQLite (a local file,
//! the default) and PostgreSQL (shared by several replicas). SQL lives under
//! this module and nowhere else; nothing above it knows which backend it has.
//!
//! One snapshot is written in one transaction (see [`Writes::write_snapshot`]),
//! so a crash or error leaves either all of a sync or none of it.

mod alerts;
pub mod bills;
pub mod copy;
mod lease;
mod migrations;
mod pool;
mod postgres;
pub mod prune;
mod read;
pub mod scratch;
mod snapshot;
mod sql;
mod sqlite;
mod write;

use chrono::{DateTime, SecondsFormat, Utc};

pub use alerts::{AlertState, Alerts, NewMessage, OutboxMessage};
pub use bills::Bills;
pub use lease::DutyLease;
pub use pool::{Location, Pool};
pub use prune::{Prunable, Prune, PruneCounts, Retention, prune};
pub use read::{
    CurrentPrice, Generation, LeaseRow, PricePart, Reads, SavedPlan, SpotPoint, SpotPrice,
    SpotQuote, SpotSeriesFilter, SpotSeriesPoints, SyncRun, WindowOffering,
};
pub use snapshot::{Suspicion, SuspiciousPrice, WriteStats};
pub use sqlite::SqliteStore;
pub use write::{NewPlan, Writes};

/// Everything a caller can do with the catalog, on either backend.
pub trait Store: Reads + Writes + Alerts + Prune + Bills + Send {}

impl<T: Reads + Writes + Alerts + Prune + Bills + Send> Store for T {}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("cannot open the catalog database {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "{path} was written by a newer gpuplan (schema version {found}, this build knows up to {known}); upgrade gpuplan or use another database"
    )]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("migration {name} failed on {path}: {source}")]
    Migration {
        path: String,
        name: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("catalog database error: {0}")]
    Db(#[from] rusqlite::Error),
    /// The PostgreSQL server refused or lost a connection, or a statement
    /// failed there. `at` is the server's address without credentials.
    #[error("PostgreSQL at {at}: {message}")]
    Postgres { at: String, message: String },
    #[error("catalog holds a value it cannot read back: {0}")]
    Corrupt(String),
    /// A read asked for more rows than its caller allows (outside input must
    /// not make one answer unbounded).
    #[error("more than {limit} {what} match; narrow the query")]
    TooLarge { what: &'static str, limit: usize },
    /// A sync's run row was closed (marked interrupted) by another process
    /// while the sync went on, so its snapshot must not be stored.
    #[error(
        "sync run {run_id} was closed by another process while it ran; its snapshot was not stored"
    )]
    RunClosed { run_id: i64 },
    /// A write of a cluster duty whose lease another replica has taken since.
    #[error(
        "{duty}: this replica's lease (epoch {held}) was taken over (epoch {current}); the write was dropped"
    )]
    Fenced {
        duty: String,
        held: i64,
        current: i64,
    },
}

/// A duty's lease as its holder took it. Writes made for the duty carry it,
/// and a shared backend refuses them (`Fenced`) once another replica has taken
/// the duty with a newer epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub duty: String,
    pub epoch: i64,
}

/// The error of a run closed because its process stopped during it.
const INTERRUPTED: &str = "interrupted: gpuplan stopped during this sync; nothing of it was stored";

/// Timestamps are stored as fixed-width RFC 3339 UTC text, so text order is time order.
fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn parse_ts(s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("timestamp `{s}`: {e}")))
}

/// Spot observations keep their time as microseconds since the epoch: eight
/// bytes instead of the text's twenty-seven, in a store of tens of millions.
fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn from_micros(n: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp_micros(n)
        .ok_or_else(|| StoreError::Corrupt(format!("timestamp {n} µs is out of range")))
}

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
