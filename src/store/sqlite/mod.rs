//! The SQLite backend: one catalog file, shared by the daemon and CLI
//! commands on one machine (WAL, a busy timeout, migrations that tolerate
//! being run by two processes at once).

mod db;
mod migrate;

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::StoreError;

/// How long a writer waits for another process's transaction before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 128;

pub struct SqliteStore {
    pub(in crate::store) conn: Connection,
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

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up
    /// to date. A database from an older gpuplan is upgraded in place.
    ///
    /// # Errors
    /// `Open` when the file cannot be opened, `TooNew` when a newer gpuplan wrote
    /// it, `Migration` when a migration fails (that migration is rolled back).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_at_version(path, super::migrations::latest_version())
    }

    pub(in crate::store) fn open_at_version(path: &Path, version: i64) -> Result<Self, StoreError> {
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
        // Off while migrating (see `migrate::run`), on for everything after.
        conn.pragma_update(None, "foreign_keys", "OFF")
            .map_err(open_err)?;
        migrate::run(&mut conn, &shown, version)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        // Every statement of `store::sql` is prepared once per connection;
        // rusqlite keeps 16 by default, fewer than the catalog's statements.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(Self { conn })
    }

    /// Lets this connection keep `mib` MiB of pages in memory. With SQLite's
    /// default of 2 MiB, a bill period's write (tens of MiB of rows and index
    /// entries in one transaction) spills pages to the WAL before it commits.
    ///
    /// # Errors
    /// On a database error.
    pub fn set_cache_mib(&self, mib: u32) -> Result<(), StoreError> {
        self.conn
            .pragma_update(None, "cache_size", -1024 * i64::from(mib))?;
        Ok(())
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

#[cfg(test)]
mod tests;
