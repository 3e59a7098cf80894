//! The daemon's recurring tasks, a loop each: a source's syncs (`sources`),
//! a scheduled plan (`plans`), retention (`prune`) and the bills (`bills`).
//!
//! When each source syncs: its cron schedule, a sync at start when its data is
//! older than one interval, and capped exponential backoff with jitter after a
//! failure (a server's `Retry-After` wins), never later than the next scheduled
//! run. One task per source, so a slow source never delays another and runs of
//! one source never pile up; a trigger while a run is going coalesces into one
//! more run right after it.
//!
//! The decisions are plain functions of state and time ([`first_run`],
//! [`after_run`]); the loop only sleeps and syncs.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use gpuplan_providers::http::{RetryPolicy, backoff_delay};
use gpuplan_providers::{Provider, Scope};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use std::collections::BTreeMap;

use crate::alerts;
use crate::alerts::rules::Rule;
use crate::catalog::Freshness;
use crate::catalog::sync::SyncConfig;
use crate::catalog::sync::{self, SyncError};
use crate::config::{PlanInput, Schedule, ScheduledPlan};
use crate::daemon::duties::Cluster;
use crate::daemon::metrics::Metrics;
use crate::optimizer::DemandClass;
use crate::plan::settings::Overrides;
use crate::plan::{Input, PlanRequest, PlanService};
use crate::plan::{forecast, inputs};
use crate::store::Pool;

mod bills;
mod plans;
mod prune;
mod sources;

pub use bills::run_bills;
pub use plans::run_plan;
pub use prune::run_pruning;
pub use sources::{Source, run_source};

/// Backoff after failed syncs.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

/// When a source first syncs after start: now if it never synced well or its
/// data is older than one interval, else at its next scheduled time.
#[must_use]
pub fn first_run(
    schedule: &Schedule,
    last_good: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    match last_good {
        Some(at) if (now - at).to_std().unwrap_or(Duration::ZERO) <= schedule.interval(now) => {
            schedule.next_after(now)
        }
        _ => now,
    }
}

/// The longest server-requested wait honoured. A provider's `Retry-After` is
/// outside input: a huge one must neither overflow the clock nor park the
/// source for years (the next scheduled run comes first anyway).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(6 * 3600);

/// When a source syncs next after a run. `failures` counts consecutive failed
/// runs (0 after a success); `retry_after` is the server's requested wait,
/// capped at [`MAX_RETRY_AFTER`].
#[must_use]
pub fn after_run(
    schedule: &Schedule,
    backoff: Backoff,
    failures: u32,
    retry_after: Option<Duration>,
    now: DateTime<Utc>,
    random: f64,
) -> DateTime<Utc> {
    let scheduled = schedule.next_after(now);
    if failures == 0 {
        return scheduled;
    }
    let policy = RetryPolicy {
        base_delay: backoff.initial,
        max_delay: backoff.max,
        ..RetryPolicy::default()
    };
    let delay = retry_after.map_or_else(
        || backoff_delay(&policy, failures, random),
        |wait| wait.min(MAX_RETRY_AFTER),
    );
    chrono::Duration::from_std(delay)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .map_or(scheduled, |retry| retry.min(scheduled))
}

/// Wall-clock time derived from tokio's clock, so paused-time tests move both.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start_utc: DateTime<Utc>,
    start: tokio::time::Instant,
}

impl Clock {
    #[must_use]
    pub fn new() -> Self {
        Self {
            start_utc: Utc::now(),
            start: tokio::time::Instant::now(),
        }
    }

    /// A clock that reads `start` now (tests pin the time of day).
    #[must_use]
    pub fn starting_at(start: DateTime<Utc>) -> Self {
        Self {
            start_utc: start,
            start: tokio::time::Instant::now(),
        }
    }

    #[must_use]
    pub fn now(&self) -> DateTime<Utc> {
        self.start_utc + chrono::Duration::from_std(self.start.elapsed()).unwrap_or_default()
    }

    fn until(&self, at: DateTime<Utc>) -> Duration {
        (at - self.now()).to_std().unwrap_or(Duration::ZERO)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Everything a source's loop shares with the rest of the daemon.
#[derive(Clone)]
pub struct Context {
    pub pool: Arc<Pool>,
    pub policy: SyncConfig,
    pub backoff: Backoff,
    pub metrics: Arc<Metrics>,
    pub cancel: CancellationToken,
    pub clock: Clock,
    /// Alert rules to evaluate after every sync, when any are configured.
    pub alerts: Option<Arc<AlertHook>>,
    /// This replica's once-per-cluster duties.
    pub cluster: Arc<Cluster>,
}

/// What evaluating alerts after a sync needs.
pub struct AlertHook {
    pub rules: Vec<Rule>,
    /// Enabled sources and their sync intervals (for staleness).
    pub intervals: BTreeMap<String, Duration>,
    /// Wakes the delivery task when messages were queued.
    pub wake: Arc<Notify>,
    /// Evaluation is a duty: one replica at a time.
    pub cluster: Arc<Cluster>,
    /// Budgets and the bill sources the rules over the bills read.
    pub bills: crate::bills::budgets::BillsSetup,
}

/// How long alert evaluation waits for another replica's evaluation to end.
const ALERT_DUTY_WAIT: Duration = Duration::from_secs(60);

/// The start of the window in which a run of the slot due at `slot` counts as
/// done: half an interval back, so that replicas which woke for the same slot
/// a little apart (or started at different moments) agree, and the previous
/// slot's run never counts.
fn slot_window(schedule: &Schedule, slot: DateTime<Utc>) -> DateTime<Utc> {
    let half = chrono::Duration::from_std(schedule.interval(slot) / 2).unwrap_or_default();
    slot - half
}

impl AlertHook {
    /// Evaluates every rule against the catalog as it stands now.
    pub async fn evaluate(self: &Arc<Self>, pool: &Arc<Pool>, cancel: &CancellationToken) {
        let until = Utc::now() + chrono::Duration::from_std(ALERT_DUTY_WAIT).unwrap_or_default();
        let Some(held) = self.cluster.take("alerts", until, cancel).await else {
            tracing::warn!("Alert evaluation skipped: another replica held it throughout.");
            return;
        };
        let (hook, pool, fence) = (self.clone(), pool.clone(), held.fence.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            pool.write_fenced(Some(&fence), |store| {
                let fresh = Freshness::read(store, hook.intervals.clone(), Utc::now())?;
                let sources: Vec<String> = hook.intervals.keys().cloned().collect();
                alerts::evaluate(store, &fresh, &hook.rules, &sources, &hook.bills)
            })
        })
        .await;
        match outcome {
            Ok(Ok(0)) => {}
            Ok(Ok(queued)) => {
                tracing::info!(queued, "Alerts fired.");
                self.wake.notify_one();
            }
            Ok(Err(e)) => tracing::error!(error = %e, "Could not evaluate alerts."),
            Err(e) => tracing::error!(error = %e, "Alert evaluation panicked."),
        }
        held.release().await;
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use gpuplan_providers::{FetchContext, ProviderError, Snapshot, async_trait};

    use super::*;
    use crate::store::test_support::snapshot;

    fn hourly() -> Schedule {
        Schedule::from_str("0 0 * * * *").unwrap()
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    const BACKOFF: Backoff = Backoff {
        initial: Duration::from_secs(30),
        max: Duration::from_secs(600),
    };

    #[test]
    fn a_source_syncs_at_start_only_when_its_data_is_older_than_one_interval() {
        let now = at("2026-11-29T10:20:00Z");
        assert_eq!(first_run(&hourly(), None, now), now);
        assert_eq!(
            first_run(&hourly(), Some(at("2026-11-29T09:00:00Z")), now),
            now
        );
        assert_eq!(
            first_run(&hourly(), Some(at("2026-11-29T10:00:00Z")), now),
            at("2026-11-29T11:00:00Z")
        );
    }

    #[test]
    fn failures_back_off_exponentially_but_never_past_the_next_scheduled_run() {
        let now = at("2026-11-29T10:20:00Z");
        assert_eq!(
            after_run(&hourly(), BACKOFF, 0, None, now, 0.5),
            at("2026-11-29T11:00:00Z")
        );
        // Equal jitter: between half and all of 30 s, 60 s, 120 s ...
        assert_eq!(
            after_run(&hourly(), BACKOFF, 1, None, now, 0.0),
            now + chrono::Duration::seconds(15)
        );
        assert_eq!(
            after_run(&hourly(), BACKOFF, 3, None, now, 1.0),
            now + chrono::Duration::seconds(120)
        );
        // Capped at 10 minutes.
        assert_eq!(
            after_run(&hourly(), BACKOFF, 20, None, now, 1.0),
            now + chrono::Duration::seconds(600)
        );
        // A server's Retry-After wins over the backoff ...
        assert_eq!(
            after_run(
                &hourly(),
                BACKOFF,
                1,
                Some(Duration::from_secs(90)),
                now,
                0.0
            ),
            now + chrono::Duration::seconds(90)
        );
        // ... but a retry never lands after the next scheduled run.
        let late = at("2026-11-29T10:55:00Z");
        assert_eq!(
            after_run(&hourly(), BACKOFF, 20, None, late, 1.0),
            at("2026-11-29T11:00:00Z")
        );
    }

    #[test]
    fn a_huge_retry_after_is_capped_instead_of_overflowing_the_clock() {
        let yearly = Schedule::from_str("0 0 0 1 1 *").unwrap();
        let now = at("2026-11-29T10:20:00Z");
        for requested in [
            Duration::MAX,
            Duration::from_secs(u64::MAX),
            Duration::from_secs(400 * 86400),
        ] {
            assert_eq!(
                after_run(&yearly, BACKOFF, 1, Some(requested), now, 0.5),
                now + chrono::Duration::from_std(MAX_RETRY_AFTER).unwrap()
            );
        }
    }

    /// Fails its first `fail` fetches with a 503, then succeeds; counts calls.
    struct Flaky {
        calls: AtomicUsize,
        fail: usize,
    }

    #[async_trait]
    impl Provider for Flaky {
        fn id(&self) -> &str {
            "aws"
        }

        async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if n < self.fail {
                return Err(ProviderError::Http {
                    provider: "aws".into(),
                    url: "http://127.0.0.1:1/".into(),
                    status: 503,
                    body: String::new(),
                });
            }
            Ok(snapshot(2, 1.0 + n as f64))
        }
    }

    /// A source loop's context on `pool`, with one try per request and a
    /// paused clock 30 s past a 10-minute slot, so the slots fall at known times.
    fn loop_context(pool: &Arc<Pool>) -> Context {
        Context {
            pool: pool.clone(),
            policy: SyncConfig {
                max_shrink: 1.0,
                retry_initial: BACKOFF.initial,
                retry_max: BACKOFF.max,
                http_attempts: 1,
                http_timeout: Duration::from_secs(5),
            },
            backoff: BACKOFF,
            metrics: Arc::new(Metrics::default()),
            cancel: CancellationToken::new(),
            clock: Clock::starting_at(at("2026-11-29T10:00:30Z")),
            alerts: None,
            cluster: Cluster::new(pool.clone()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_syncs_at_start_retries_after_failures_then_follows_the_schedule() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap(),
        );
        let flaky = Arc::new(Flaky {
            calls: AtomicUsize::new(0),
            fail: 2,
        });
        let ctx = loop_context(&pool);
        let trigger = Arc::new(Notify::new());
        let source = Source {
            provider: Box::new(SharedProvider(flaky.clone())),
            scope: Scope::Full,
            schedule: Schedule::from_str("0 */10 * * * *").unwrap(),
            trigger: trigger.clone(),
        };
        let task = tokio::spawn(run_source(source, ctx.clone()));

        // Two failures and the recovering run all happen before the next slot
        // (10:10): 15-30 s, then 30-60 s of backoff.
        tokio::time::sleep(Duration::from_secs(95)).await;
        assert_eq!(flaky.calls.load(Ordering::SeqCst), 3);
        let runs = pool.read(|s| s.sync_runs(10)).unwrap();
        let statuses: Vec<&str> = runs.iter().map(|r| r.status.as_str()).collect();
        assert_eq!(statuses, vec!["ok", "failed", "failed"]);

        // Then one run per scheduled slot (10:10, 10:20, 10:30), none in between.
        tokio::time::sleep(Duration::from_secs(3 * 600)).await;
        assert_eq!(flaky.calls.load(Ordering::SeqCst), 6);

        // A trigger runs it now.
        trigger.notify_one();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(flaky.calls.load(Ordering::SeqCst), 7);

        ctx.cancel.cancel();
        task.await.unwrap();
    }

    /// Records the scope each fetch asked for; finds no new spot history.
    #[derive(Default)]
    struct SpotOnly {
        asked: std::sync::Mutex<Vec<Scope>>,
    }

    #[async_trait]
    impl Provider for SpotOnly {
        fn id(&self) -> &str {
            "aws"
        }

        async fn fetch(&self, ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
            self.asked.lock().unwrap().push(ctx.scope);
            Ok(Snapshot {
                scope: Scope::SpotHistory,
                ..Snapshot::default()
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_spot_only_source_waits_for_its_slot_and_asks_for_spot_history() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap(),
        );
        let ctx = loop_context(&pool);
        let spot = Arc::new(SpotOnly::default());
        let source = Source {
            provider: Box::new(SharedProvider(spot.clone())),
            scope: Scope::SpotHistory,
            schedule: Schedule::from_str("0 5-55/10 * * * *").unwrap(),
            trigger: Arc::new(Notify::new()),
        };
        let task = tokio::spawn(run_source(source, ctx.clone()));

        // Never synced, yet no run at start: the first slot is 10:05.
        tokio::time::sleep(Duration::from_secs(200)).await;
        assert!(spot.asked.lock().unwrap().is_empty());
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(*spot.asked.lock().unwrap(), [Scope::SpotHistory]);
        let runs = pool.read(|s| s.sync_runs(10)).unwrap();
        assert_eq!(
            (runs[0].status.as_str(), runs[0].scope.as_str()),
            ("ok", "spot_history")
        );

        ctx.cancel.cancel();
        task.await.unwrap();
    }

    /// A provider the test keeps a handle on while the loop owns the box.
    struct SharedProvider<P>(Arc<P>);

    #[async_trait]
    impl<P: Provider> Provider for SharedProvider<P> {
        fn id(&self) -> &str {
            self.0.id()
        }

        async fn fetch(&self, ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
            self.0.fetch(ctx).await
        }
    }
}
