//! Retention, on PostgreSQL (the statements are shared with SQLite).

use chrono::{DateTime, Utc};

use super::{PgStore, get};
use crate::store::{Prunable, Prune, StoreError, ts};

impl Prune for PgStore<'_> {
    fn count_prunable(&self, kind: Prunable, cutoff: DateTime<Utc>) -> Result<u64, StoreError> {
        let n: i64 = self
            .query_opt(&kind.count_sql(), &[&ts(cutoff)])?
            .map_or(Ok(0), |r| get(&r, 0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn prune_batch(
        &mut self,
        kind: Prunable,
        cutoff: DateTime<Utc>,
        batch: usize,
    ) -> Result<usize, StoreError> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        let n = self.execute(&kind.delete_sql(), &[&ts(cutoff), &batch])?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
