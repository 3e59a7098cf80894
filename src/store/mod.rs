//! The SQLite catalog: opening, migrating, and the typed reads and writes the rest
//! of gpuplan uses. SQL lives here and nowhere else.
//!
//! One snapshot is written in one transaction (see [`Store::write_snapshot`]), so a
//! crash or error leaves either all of a sync or none of it.

mod alerts;
mod migrate;
mod pool;
pub mod prune;
mod read;
mod write;

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{Connection, OpenFlags};

pub use alerts::{AlertState, NewMessage, OutboxMessage};
pub use pool::Pool;
pub use prune::{Prunable, PruneCounts, Retention, prune};
pub use read::{CurrentPrice, SavedPlan, SpotPoint, SyncRun};
pub use write::{NewPlan, WriteStats};

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
        "{path} was written by a newer gpuplan (schema version {found}, this build knows up to {known}); upgrade gpuplan or use another database file"
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
        source: rusqlite::Error,
    },
    #[error("catalog database error: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("catalog holds a value it cannot read back: {0}")]
    Corrupt(String),
    /// A read asked for more rows than its caller allows (outside input must
    /// not make one answer unbounded).
    #[error("more than {limit} {what} match; narrow the query")]
    TooLarge { what: &'static str, limit: usize },
}

/// How long a writer waits for another process's transaction before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Store {
    conn: Connection,
}

/// Switches the file to WAL. SQLite does not run the busy handler for this
/// pragma, so two processes opening one fresh file would see "database is
/// locked" at once; WAL is a property of the file, so it is read first and the
/// switch is retried within the usual busy timeout.
fn use_wal(conn: &Connection) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    loop {
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(());
        }
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up
    /// to date. A database from an older gpuplan is upgraded in place.
    ///
    /// # Errors
    /// `Open` when the file cannot be opened, `TooNew` when a newer gpuplan wrote
    /// it, `Migration` when a migration fails (that migration is rolled back).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_at_version(path, migrate::latest_version())
    }

    fn open_at_version(path: &Path, version: i64) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let open_err = |source| StoreError::Open {
            path: shown.clone(),
            source,
        };
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        use_wal(&conn).map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        migrate::run(&mut conn, &shown, version)?;
        Ok(Self { conn })
    }

    /// `PRAGMA integrity_check`; `"ok"` for a sound file.
    ///
    /// # Errors
    /// On a database error.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
    }
}

/// Timestamps are stored as fixed-width RFC 3339 UTC text, so text order is time order.
fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn parse_ts(s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("timestamp `{s}`: {e}")))
}

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
