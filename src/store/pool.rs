//! Shared access to the catalog from many tasks, on either backend.
//!
//! SQLite: one writer connection (SQLite allows one writer at a time anyway)
//! and a few reader connections, so queries are never queued behind a sync's
//! write transaction (WAL lets readers see the last committed state
//! meanwhile). PostgreSQL: a pool of connections, each call on one of them.
//! Every method blocks: call them from `spawn_blocking`.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use gpuplan_providers::secret::Secret;

use super::postgres::{self, PgPool};
use super::{Fence, SqliteStore, Store, StoreError};

/// The SQLite writer's page cache: a bill period's write fits in it. Only
/// the writer gets it; readers keep SQLite's default.
const WRITER_CACHE_MIB: u32 = 32;

/// Where the catalog lives.
#[derive(Debug, Clone)]
pub enum Location {
    /// A SQLite file (the default).
    Sqlite(PathBuf),
    /// A `postgres://` URL; it may hold a password, so it is kept secret and
    /// shown without it.
    Postgres(Secret),
}

impl Location {
    /// Checks what can be checked without connecting (a URL's syntax).
    ///
    /// # Errors
    /// `Postgres` saying what is wrong, without the URL.
    pub fn check(&self) -> Result<(), StoreError> {
        match self {
            Self::Sqlite(_) => Ok(()),
            Self::Postgres(url) => postgres::parse_url(url.expose()).map(|_| ()),
        }
    }

    /// Whether several replicas can share this catalog (and must take duties).
    #[must_use]
    pub fn is_shared(&self) -> bool {
        matches!(self, Self::Postgres(_))
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => match postgres::parse_url(url.expose()) {
                Ok(config) => f.write_str(&postgres::shown(&config)),
                Err(_) => f.write_str("an invalid PostgreSQL URL"),
            },
        }
    }
}

pub struct Pool {
    backend: Backend,
    replica: String,
}

enum Backend {
    Sqlite {
        writer: Mutex<SqliteStore>,
        readers: Vec<Mutex<SqliteStore>>,
        next: AtomicUsize,
    },
    Postgres(Box<PgPool>),
}

/// An id for this process among replicas: host, process id and a random
/// part (a restarted process may reuse a pid).
fn replica_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    format!("{host}-{}-{:04x}", std::process::id(), fastrand::u16(..))
}

impl Pool {
    /// Opens (and migrates) the catalog. SQLite gets `readers` more
    /// connections for queries; PostgreSQL a pool of `readers + 2`.
    ///
    /// # Errors
    /// As [`SqliteStore::open`]; for PostgreSQL, `Postgres` when the server
    /// cannot be reached, or a migration error.
    pub fn open(location: &Location, readers: usize) -> Result<Self, StoreError> {
        let replica = replica_id();
        let backend = match location {
            Location::Sqlite(path) => Backend::Sqlite {
                writer: Mutex::new({
                    let writer = SqliteStore::open(path)?;
                    writer.set_cache_mib(WRITER_CACHE_MIB)?;
                    writer
                }),
                readers: (0..readers)
                    .map(|_| SqliteStore::open(path).map(Mutex::new))
                    .collect::<Result<_, _>>()?,
                next: AtomicUsize::new(0),
            },
            Location::Postgres(url) => {
                Backend::Postgres(Box::new(PgPool::open(url.expose(), readers + 2, &replica)?))
            }
        };
        Ok(Self { backend, replica })
    }

    pub(super) fn postgres(&self) -> Option<&PgPool> {
        match &self.backend {
            Backend::Postgres(pg) => Some(pg),
            Backend::Sqlite { .. } => None,
        }
    }

    /// Whether several replicas may share this catalog.
    #[must_use]
    pub fn is_shared(&self) -> bool {
        self.postgres().is_some()
    }

    /// This process's id among replicas.
    #[must_use]
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Runs `f` with a store to write with.
    pub fn write<T>(&self, f: impl FnOnce(&mut dyn Store) -> T) -> T {
        self.write_fenced(None, f)
    }

    /// As [`Pool::write`], for a duty's writes: on a shared backend they are
    /// refused once `fence` (when given) is no longer the duty's lease.
    pub fn write_fenced<T>(&self, fence: Option<&Fence>, f: impl FnOnce(&mut dyn Store) -> T) -> T {
        match &self.backend {
            Backend::Sqlite { writer, .. } => f(&mut *lock(writer)),
            Backend::Postgres(pg) => f(&mut pg.store(fence.cloned())),
        }
    }

    /// Runs `f` with a store to read with. On SQLite, a reader connection
    /// (the writer when there are none): the first idle one, so a slow read
    /// never makes a quick one queue while another reader is free; when all
    /// are busy, the next in turn.
    pub fn read<T>(&self, f: impl FnOnce(&dyn Store) -> T) -> T {
        let (writer, readers, next) = match &self.backend {
            Backend::Postgres(pg) => return f(&pg.store(None)),
            Backend::Sqlite {
                writer,
                readers,
                next,
            } => (writer, readers, next),
        };
        if readers.is_empty() {
            return f(&*lock(writer));
        }
        let n = readers.len();
        let start = next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            if let Ok(idle) = readers[(start + i) % n].try_lock() {
                return f(&*idle);
            }
        }
        f(&*lock(&readers[start % n]))
    }
}

/// A connection stays usable after a panic in another task's closure: SQLite
/// rolled back whatever transaction that closure had open.
fn lock(m: &Mutex<SqliteStore>) -> MutexGuard<'_, SqliteStore> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Raw SQL for tests that look under the interface (row counts, rows an
/// older gpuplan left). `$1`-style parameters are not supported: the SQL is
/// run as written, on either backend.
#[cfg(test)]
impl Pool {
    pub(crate) fn raw_execute(&self, sql: &str) {
        match &self.backend {
            Backend::Sqlite { writer, .. } => lock(writer).conn.execute_batch(sql).unwrap(),
            Backend::Postgres(pg) => {
                let conn = pg.connection().unwrap();
                pg.block(conn.batch_execute(sql)).unwrap();
            }
        }
    }

    /// The first column of the first row, as an integer (NULL is `None`).
    pub(crate) fn raw_i64(&self, sql: &str) -> Option<i64> {
        match &self.backend {
            Backend::Sqlite { writer, .. } => {
                lock(writer).conn.query_row(sql, [], |r| r.get(0)).unwrap()
            }
            Backend::Postgres(pg) => {
                let conn = pg.connection().unwrap();
                pg.block(conn.query_one(sql, &[])).unwrap().get(0)
            }
        }
    }
}
