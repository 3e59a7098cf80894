//! Shared access to one catalog file from many tasks: one writer connection
//! (SQLite allows one writer at a time anyway) and a few reader connections, so
//! queries are never queued behind a sync's write transaction (WAL lets readers
//! see the last committed state meanwhile). Every method blocks: call them from
//! `spawn_blocking`.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::{Store, StoreError};

pub struct Pool {
    writer: Mutex<Store>,
    readers: Vec<Mutex<Store>>,
    next: AtomicUsize,
}

impl Pool {
    /// Opens (and migrates) the catalog, then `readers` more connections for queries.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open(path: &Path, readers: usize) -> Result<Self, StoreError> {
        let writer = Store::open(path)?;
        let readers = (0..readers)
            .map(|_| Store::open(path).map(Mutex::new))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            writer: Mutex::new(writer),
            readers,
            next: AtomicUsize::new(0),
        })
    }

    /// Runs `f` with the writer connection.
    pub fn write<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        f(&mut lock(&self.writer))
    }

    /// Runs `f` with a reader connection (the writer when there are none): the
    /// first idle one, so a slow read never makes a quick one queue while
    /// another reader is free; when all are busy, the next in turn.
    pub fn read<T>(&self, f: impl FnOnce(&Store) -> T) -> T {
        if self.readers.is_empty() {
            return f(&lock(&self.writer));
        }
        let n = self.readers.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            if let Ok(idle) = self.readers[(start + i) % n].try_lock() {
                return f(&idle);
            }
        }
        f(&lock(&self.readers[start % n]))
    }
}

/// A connection stays usable after a panic in another task's closure: SQLite
/// rolled back whatever transaction that closure had open.
fn lock(m: &Mutex<Store>) -> MutexGuard<'_, Store> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
