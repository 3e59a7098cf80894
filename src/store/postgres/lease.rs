//! Duties on PostgreSQL: a session advisory lock held on a connection of its
//! own for as long as the duty runs, and the duty's `leases` row, whose epoch
//! is bumped on each take so that writes can be fenced.

use chrono::{DateTime, Utc};
use tokio_postgres::{Client, NoTls};

use super::{PgPool, block_on, get};
use crate::store::{Fence, StoreError, ts};

/// The advisory lock namespace of duties (the first key of the two-key form).
const DUTY_LOCKS: i32 = 0x6770;

pub(in crate::store) struct PgLease {
    client: Client,
    rt: tokio::runtime::Handle,
    shown: String,
}

impl PgPool {
    /// Takes `duty` when no other session holds it; `None` when one does.
    pub(in crate::store) fn try_take(
        &self,
        duty: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(PgLease, i64)>, StoreError> {
        let rt = self.handle().clone();
        let fail = |e: &tokio_postgres::Error| self.error(e);
        let (client, connection) =
            block_on(&rt, self.config().connect(NoTls)).map_err(|e| fail(&e))?;
        rt.spawn(async move {
            // Ends when the lease's client is dropped or the server goes away;
            // either way the server releases the lock with the session.
            let _ = connection.await;
        });
        let locked: bool = block_on(
            &rt,
            client.query_one(
                "SELECT pg_try_advisory_lock($1, hashtext($2))",
                &[&DUTY_LOCKS, &duty],
            ),
        )
        .map_err(|e| fail(&e))?
        .get(0);
        if !locked {
            return Ok(None);
        }
        let row = block_on(
            &rt,
            client.query_one(
                "INSERT INTO leases (duty, epoch, holder, taken_at, heartbeat_at) VALUES ($1, 1, $2, $3, $3)
                 ON CONFLICT (duty) DO UPDATE SET epoch = leases.epoch + 1, holder = excluded.holder,
                     taken_at = excluded.taken_at, heartbeat_at = excluded.heartbeat_at
                 RETURNING epoch",
                &[&duty, &self.replica, &ts(now)],
            ),
        )
        .map_err(|e| fail(&e))?;
        let epoch: i64 = get(&row, 0)?;
        Ok(Some((
            PgLease {
                client,
                rt,
                shown: self.shown.clone(),
            },
            epoch,
        )))
    }
}

impl PgLease {
    /// Proves the lock's session is alive and the lease still ours.
    pub(in crate::store) fn heartbeat(
        &self,
        fence: &Fence,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let lost = |message: String| StoreError::Postgres {
            at: self.shown.clone(),
            message,
        };
        if self.client.is_closed() {
            return Err(lost(format!(
                "the connection holding {} closed",
                fence.duty
            )));
        }
        let n = block_on(
            &self.rt,
            self.client.execute(
                "UPDATE leases SET heartbeat_at = $3 WHERE duty = $1 AND epoch = $2",
                &[&fence.duty, &fence.epoch, &ts(now)],
            ),
        )
        .map_err(|e| lost(e.to_string()))?;
        if n == 1 {
            Ok(())
        } else {
            Err(lost(format!(
                "{} was taken over by another replica",
                fence.duty
            )))
        }
    }

    /// Unlocks at once (dropping the connection would too, a little later).
    pub(in crate::store) fn release(self, fence: &Fence) {
        let _ = block_on(
            &self.rt,
            self.client.execute(
                "SELECT pg_advisory_unlock($1, hashtext($2))",
                &[&DUTY_LOCKS, &fence.duty],
            ),
        );
    }
}
