//! Retention, on SQLite.

use chrono::{DateTime, Utc};
use rusqlite::params;

use super::SqliteStore;
use crate::store::{Prunable, Prune, StoreError, ts};

impl Prune for SqliteStore {
    fn count_prunable(&self, kind: Prunable, cutoff: DateTime<Utc>) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .query_row(&kind.count_sql(), [ts(cutoff)], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn prune_batch(
        &mut self,
        kind: Prunable,
        cutoff: DateTime<Utc>,
        batch: usize,
    ) -> Result<usize, StoreError> {
        let tx = self.conn.transaction()?;
        let n = tx.execute(
            &kind.delete_sql(),
            params![ts(cutoff), i64::try_from(batch).unwrap_or(i64::MAX)],
        )?;
        tx.commit()?;
        Ok(n)
    }
}
