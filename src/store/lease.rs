//! Once-per-cluster duties (a source's sync, alert evaluation, a scheduled
//! plan): which replica does each. On PostgreSQL a duty is a session advisory
//! lock plus a `leases` row whose epoch fences the duty's writes; on SQLite
//! there is one daemon, which holds every duty.

use chrono::{DateTime, Utc};

use super::postgres::lease::PgLease;
use super::{Fence, Pool, StoreError};

/// A duty this replica holds until it releases it or the lease is lost.
pub struct DutyLease {
    fence: Fence,
    inner: Option<PgLease>,
}

impl DutyLease {
    /// What the duty's writes carry.
    #[must_use]
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Checks the lease is still this replica's. Blocks: call it from a
    /// blocking thread.
    ///
    /// # Errors
    /// `Postgres` when the lock's connection is gone or another replica took
    /// the duty; the holder must step down at once.
    pub fn heartbeat(&self, now: DateTime<Utc>) -> Result<(), StoreError> {
        match &self.inner {
            Some(lease) => lease.heartbeat(&self.fence, now),
            None => Ok(()),
        }
    }

    /// Lets another replica take the duty.
    pub fn release(self) {
        if let Some(lease) = self.inner {
            lease.release(&self.fence);
        }
    }
}

impl Pool {
    /// Takes `duty` for this replica unless another holds it (`None`). Blocks.
    ///
    /// # Errors
    /// `Postgres` when the server cannot be reached.
    pub fn try_take_duty(
        &self,
        duty: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<DutyLease>, StoreError> {
        let Some(pg) = self.postgres() else {
            return Ok(Some(DutyLease {
                fence: Fence {
                    duty: duty.to_owned(),
                    epoch: 0,
                },
                inner: None,
            }));
        };
        Ok(pg.try_take(duty, now)?.map(|(lease, epoch)| DutyLease {
            fence: Fence {
                duty: duty.to_owned(),
                epoch,
            },
            inner: Some(lease),
        }))
    }
}
