//! Once-per-cluster duties for replicas sharing one PostgreSQL catalog: each
//! source's sync (`sync:<provider>`, `spot:<provider>`), alert evaluation
//! (`alerts`), each scheduled plan (`plan:<name>`) and pruning (`prune`).
//!
//! A duty is held for as long as its work runs. A heartbeat checks the lease
//! every [`HEARTBEAT`]; when it fails the replica steps down at once: the
//! work's cancellation token fires, and any write it still attempts is fenced
//! by the store. On SQLite there is one daemon and every duty is its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::store::{DutyLease, Fence, Pool};

/// How often a held duty proves its lease, and how often a replica waiting
/// for a duty tries it again: a replica that died mid-duty is replaced within
/// about this long after its server session ends.
pub const HEARTBEAT: Duration = Duration::from_secs(2);

/// The duty of syncing `provider` (`sync:`), or of its spot-only job (`spot:`).
#[must_use]
pub fn sync_duty(provider: &str, scope: gpuplan_providers::Scope) -> String {
    match scope {
        gpuplan_providers::Scope::Full => format!("sync:{provider}"),
        gpuplan_providers::Scope::SpotHistory => format!("spot:{provider}"),
    }
}

/// What this replica holds, for `GET /v1/cluster`.
#[derive(Debug, Clone, Serialize)]
pub struct HeldDuty {
    pub epoch: i64,
    pub taken_at: DateTime<Utc>,
    pub last_heartbeat: DateTime<Utc>,
}

/// This replica's duties.
pub struct Cluster {
    pool: Arc<Pool>,
    held: Mutex<BTreeMap<String, HeldDuty>>,
}

/// A duty being held: its fence for the duty's writes, and a token that
/// fires when the lease is lost (or the daemon stops).
pub struct Held {
    pub fence: Fence,
    pub cancel: CancellationToken,
    stop: CancellationToken,
    /// The heartbeat, on a shared catalog; it hands the lease back when stopped.
    beat: Option<tokio::task::JoinHandle<Option<DutyLease>>>,
    cluster: Arc<Cluster>,
}

impl Cluster {
    #[must_use]
    pub fn new(pool: Arc<Pool>) -> Arc<Self> {
        Arc::new(Self {
            pool,
            held: Mutex::new(BTreeMap::new()),
        })
    }

    /// The duties this replica holds now.
    #[must_use]
    pub fn held(&self) -> BTreeMap<String, HeldDuty> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn duties(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, HeldDuty>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `duty`, trying again every [`HEARTBEAT`] while another replica
    /// holds it, until `until` (a time already past: one try) or `cancel`;
    /// `None` then. A store error counts as "not now".
    pub async fn take(
        self: &Arc<Self>,
        duty: &str,
        until: DateTime<Utc>,
        cancel: &CancellationToken,
    ) -> Option<Held> {
        loop {
            let (pool, name) = (self.pool.clone(), duty.to_owned());
            let taken = tokio::task::spawn_blocking(move || pool.try_take_duty(&name, Utc::now()))
                .await
                .ok();
            match taken {
                Some(Ok(Some(lease))) => return Some(self.hold(duty, lease, cancel)),
                Some(Ok(None)) => tracing::debug!(duty, "Duty held by another replica; waiting."),
                Some(Err(e)) => tracing::warn!(duty, error = %e, "Could not try the duty."),
                None => return None,
            }
            if Utc::now() + HEARTBEAT > until {
                return None;
            }
            tokio::select! {
                () = cancel.cancelled() => return None,
                () = tokio::time::sleep(HEARTBEAT) => {}
            }
        }
    }

    fn hold(self: &Arc<Self>, duty: &str, lease: DutyLease, parent: &CancellationToken) -> Held {
        let fence = lease.fence().clone();
        let now = Utc::now();
        self.duties().insert(
            duty.to_owned(),
            HeldDuty {
                epoch: fence.epoch,
                taken_at: now,
                last_heartbeat: now,
            },
        );
        let cancel = parent.child_token();
        let stop = CancellationToken::new();
        // On SQLite the one daemon's lease cannot be lost: nothing to beat
        // and nothing to release.
        let beat = self.pool.is_shared().then(|| {
            tracing::info!(duty, epoch = fence.epoch, "Duty taken.");
            tokio::spawn(heartbeat(
                self.clone(),
                duty.to_owned(),
                lease,
                cancel.clone(),
                stop.clone(),
            ))
        });
        Held {
            fence,
            cancel,
            stop,
            beat,
            cluster: self.clone(),
        }
    }
}

/// Beats until stopped (returning the lease to release) or the lease is
/// lost (stepping down: the duty's token fires; nothing to release).
async fn heartbeat(
    cluster: Arc<Cluster>,
    duty: String,
    lease: DutyLease,
    cancel: CancellationToken,
    stop: CancellationToken,
) -> Option<DutyLease> {
    let lease = Arc::new(lease);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(HEARTBEAT) => {}
        }
        let l = lease.clone();
        let lost = match tokio::task::spawn_blocking(move || l.heartbeat(Utc::now())).await {
            Ok(Ok(())) => {
                if let Some(held) = cluster.duties().get_mut(&duty) {
                    held.last_heartbeat = Utc::now();
                }
                continue;
            }
            Ok(Err(e)) => e.to_string(),
            Err(e) => format!("the heartbeat panicked: {e}"),
        };
        tracing::error!(duty, error = %lost, "Duty lost; stepping down and cancelling its work.");
        cancel.cancel();
        cluster.duties().remove(&duty);
        return None;
    }
    Arc::into_inner(lease)
}

impl Held {
    /// Ends the duty and lets another replica take it.
    pub async fn release(self) {
        self.stop.cancel();
        if let Some(beat) = self.beat
            && let Ok(Some(lease)) = beat.await
        {
            let _ = tokio::task::spawn_blocking(move || lease.release()).await;
        }
        self.cluster.duties().remove(&self.fence.duty);
        tracing::debug!(duty = %self.fence.duty, "Duty released.");
    }
}
