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
use crate::catalog::Freshness;
use crate::catalog::sync::SyncConfig;
use crate::catalog::sync::{self, SyncError};
use crate::config::{PlanInput, RuleConfig, Schedule, ScheduledPlan};
use crate::daemon::duties::Cluster;
use crate::daemon::metrics::Metrics;
use crate::optimizer::DemandClass;
use crate::plan::settings::Overrides;
use crate::plan::{Input, PlanRequest, PlanService};
use crate::plan::{forecast, inputs};
use crate::store::Pool;

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

/// One source as the scheduler runs it.
pub struct Source {
    pub provider: Box<dyn Provider>,
    /// Full syncs, or only new spot history (AWS's `spot_schedule`).
    pub scope: Scope,
    pub schedule: Schedule,
    /// Notified to sync now (`POST /v1/sync`).
    pub trigger: Arc<Notify>,
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
    pub rules: Vec<RuleConfig>,
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

/// Runs one source until `ctx.cancel` fires.
pub async fn run_source(source: Source, ctx: Context) {
    let id = source.provider.id().to_owned();
    let last_good = {
        let (pool, id) = (ctx.pool.clone(), id.clone());
        tokio::task::spawn_blocking(move || pool.read(|s| s.last_good_syncs()))
            .await
            .ok()
            .and_then(Result::ok)
            .and_then(|m| m.get(&id).copied())
    };
    // A spot-only job waits for its schedule: the full sync at start reads
    // spot history too.
    let mut next = match source.scope {
        Scope::Full => first_run(&source.schedule, last_good, ctx.clock.now()),
        Scope::SpotHistory => source.schedule.next_after(ctx.clock.now()),
    };
    let mut failures = 0u32;
    loop {
        tracing::debug!(provider = %id, next = %next, "Next sync scheduled.");
        // A sync that started since then does this wake-up's work: for a
        // scheduled slot, one from about the slot on; for a trigger, one from
        // the trigger on.
        let done_since = tokio::select! {
            () = ctx.cancel.cancelled() => break,
            () = tokio::time::sleep(ctx.clock.until(next)) => slot_window(&source.schedule, next),
            () = source.trigger.notified() => ctx.clock.now(),
        };
        let Some(held) = take_sync_duty(&source, &ctx, done_since).await else {
            if ctx.cancel.is_cancelled() {
                break;
            }
            next = source.schedule.next_after(ctx.clock.now());
            continue;
        };
        let outcome = sync::sync_provider(
            &ctx.pool,
            source.provider.as_ref(),
            source.scope,
            &ctx.policy,
            &held.cancel,
            Some(&held.fence),
        )
        .await;
        held.release().await;
        ctx.metrics.record_sync(&outcome);
        if ctx.cancel.is_cancelled() {
            break;
        }
        if let Some(hook) = &ctx.alerts {
            hook.evaluate(&ctx.pool, &ctx.cancel).await;
            ctx.metrics.record_alert_evaluation();
        }
        let retry_after = match &outcome.result {
            Ok(_) => {
                failures = 0;
                None
            }
            Err(err) => {
                failures += 1;
                let wait = match err {
                    SyncError::Provider(e) => e.retry_after(),
                    _ => None,
                };
                if let Some(w) = wait.filter(|w| *w > MAX_RETRY_AFTER) {
                    tracing::warn!(provider = %id, requested_secs = w.as_secs(), capped_secs = MAX_RETRY_AFTER.as_secs(), "The server asked for a longer wait than gpuplan honours; capped.");
                }
                wait
            }
        };
        next = after_run(
            &source.schedule,
            ctx.backoff,
            failures,
            retry_after,
            ctx.clock.now(),
            fastrand::f64(),
        );
        if failures > 0 {
            tracing::warn!(provider = %id, failures, retry_at = %next, "Sync failed; retrying with backoff.");
        }
    }
    tracing::info!(provider = %id, "Source stopped.");
}

/// Takes the source's sync duty: `None` when the daemon stops, or when on a
/// shared catalog another replica synced since `done_since` (or still held
/// the duty when the next slot came).
async fn take_sync_duty(
    source: &Source,
    ctx: &Context,
    done_since: DateTime<Utc>,
) -> Option<crate::daemon::duties::Held> {
    let id = source.provider.id().to_owned();
    let duty = crate::daemon::duties::sync_duty(&id, source.scope);
    let until = source.schedule.next_after(ctx.clock.now());
    let held = ctx.cluster.take(&duty, until, &ctx.cancel).await?;
    if !ctx.pool.is_shared() {
        return Some(held);
    }
    // Holding the duty, no other replica syncs this source: a run still
    // running was left by a replica that died, and the slot may be done.
    let (pool, scope, name) = (ctx.pool.clone(), source.scope, id.clone());
    let done = tokio::task::spawn_blocking(move || {
        let closed = pool.write(|s| s.fail_interrupted_runs(Some((&name, scope)), Utc::now()))?;
        if closed > 0 {
            tracing::warn!(provider = %name, runs = closed, "Marked runs of a replica that stopped mid-sync as failed.");
        }
        pool.read(|s| s.sync_done_since(&name, scope, done_since))
    })
    .await;
    match done {
        Ok(Ok(false)) => return Some(held),
        Ok(Ok(true)) => tracing::debug!(provider = %id, "Another replica did this sync."),
        Ok(Err(e)) => {
            tracing::warn!(provider = %id, error = %e, "Could not read the sync runs; skipping this slot.")
        }
        Err(e) => {
            tracing::error!(provider = %id, error = %e, "Reading the sync runs panicked; skipping this slot.")
        }
    }
    held.release().await;
    None
}

/// Runs one scheduled plan until `cancel` fires: at each scheduled time it
/// builds the problem from the catalog, solves it, saves it, and alerts the
/// `plan_changed` rules when the result changed (docs/planning-model.md §7).
#[allow(clippy::too_many_arguments)]
pub async fn run_plan(
    name: String,
    plan: ScheduledPlan,
    planning: Arc<PlanService>,
    pool: Arc<Pool>,
    hook: Option<Arc<AlertHook>>,
    cluster: Arc<Cluster>,
    cancel: CancellationToken,
    clock: Clock,
) {
    loop {
        let next = plan.schedule.next_after(clock.now());
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(clock.until(next)) => {}
        }
        let until = plan.schedule.next_after(clock.now());
        let Some(held) = cluster.take(&format!("plan:{name}"), until, &cancel).await else {
            continue;
        };
        if !plan_due(&pool, &name, slot_window(&plan.schedule, next)).await {
            held.release().await;
            continue;
        }
        let span = tracing::info_span!("scheduled_plan", plan = %name);
        let outcome = tracing::Instrument::instrument(
            plan_once(&name, &plan, &planning, &pool, hook.clone(), &held.fence),
            span,
        )
        .await;
        match outcome {
            Ok(queued) if queued > 0 => {
                tracing::info!(plan = %name, queued, "Plan changed; alerts queued.");
                if let Some(h) = &hook {
                    h.wake.notify_one();
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(plan = %name, error = %e, "Scheduled plan failed."),
        }
        held.release().await;
    }
}

/// Whether the slot's plan of `name` is to be made: not before the catalog's
/// first good sync (a plan of an empty catalog has no offers, and the first
/// real one would then read as a change), and not when another replica
/// already saved it since `since`.
async fn plan_due(pool: &Arc<Pool>, name: &str, since: DateTime<Utc>) -> bool {
    let (pool, name) = (pool.clone(), name.to_owned());
    let due = tokio::task::spawn_blocking(move || {
        pool.read(|s| {
            if s.last_good_syncs()?.is_empty() {
                tracing::info!(plan = %name, "Scheduled plan skipped: no source has synced yet.");
                return Ok(false);
            }
            let done = pool.is_shared()
                && s.saved_plan(None, Some(&name))?
                    .is_some_and(|p| p.created_at >= since);
            Ok::<_, crate::store::StoreError>(!done)
        })
    })
    .await;
    match due {
        Ok(Ok(due)) => due,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "Could not read the catalog; skipping this plan slot.");
            false
        }
        Err(_) => false,
    }
}

/// Prunes the catalog on `schedule` until `cancel` fires (see
/// [`crate::store::prune`] for what is kept whatever the settings).
pub async fn run_pruning(
    schedule: Schedule,
    retention: crate::store::Retention,
    pool: Arc<Pool>,
    cluster: Arc<Cluster>,
    cancel: CancellationToken,
    clock: Clock,
) {
    loop {
        let next = schedule.next_after(clock.now());
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(clock.until(next)) => {}
        }
        // One replica prunes; the others find the duty taken and skip.
        let Some(held) = cluster.take("prune", Utc::now(), &cancel).await else {
            continue;
        };
        let (pool, retention) = (pool.clone(), retention.clone());
        let span = tracing::info_span!("prune");
        let outcome = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            crate::store::prune(&pool, &retention, Utc::now(), false)
        })
        .await;
        match outcome {
            Ok(Ok(counts)) if counts.total() > 0 => {
                tracing::info!(?counts, "Pruned old history.");
            }
            Ok(Ok(_)) => tracing::debug!("Nothing to prune."),
            Ok(Err(e)) => tracing::warn!(error = %e, "Pruning failed; will try at the next slot."),
            Err(e) => tracing::error!(error = %e, "Pruning panicked."),
        }
        held.release().await;
    }
}

/// Loads a bill source at start and then on `schedule`, until `cancel`
/// fires. Loading is a duty: on a shared catalog one replica loads each
/// source per slot, and what it stored (files and periods) is everyone's.
pub async fn run_bills(
    source: crate::bills::BillSource,
    schedule: Schedule,
    pool: Arc<Pool>,
    cluster: Arc<Cluster>,
    alerts: Option<Arc<AlertHook>>,
    cancel: CancellationToken,
    clock: Clock,
) {
    let duty = crate::bills::load::duty(&source.name);
    let mut first = true;
    loop {
        if !first {
            let next = schedule.next_after(clock.now());
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(clock.until(next)) => {}
            }
        }
        first = false;
        let Some(held) = cluster.take(&duty, Utc::now(), &cancel).await else {
            if cancel.is_cancelled() {
                break;
            }
            continue;
        };
        let (p, s, fence) = (pool.clone(), source.clone(), held.fence.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            crate::bills::load::load_source(&p, &s, Some(&fence), Utc::now())
        })
        .await;
        if let Err(e) = outcome {
            tracing::error!(source = %source.name, error = %e, "Bill load panicked.");
        }
        held.release().await;
        // Budgets and the rules over the bills follow every load.
        if let Some(hook) = &alerts {
            hook.evaluate(&pool, &cancel).await;
        }
    }
}

/// One run of a scheduled plan; returns how many alert messages it queued.
async fn plan_once(
    name: &str,
    plan: &ScheduledPlan,
    planning: &PlanService,
    pool: &Arc<Pool>,
    hook: Option<Arc<AlertHook>>,
    fence: &crate::store::Fence,
) -> Result<usize, String> {
    let classes = match &plan.input {
        PlanInput::Demand(path) => inputs::read_catalog_classes(path, plan.classes.as_deref())
            .map_err(|e| e.to_string())?,
        PlanInput::Usage {
            path,
            horizon_hours,
        } => {
            let usage = inputs::read_demand(path).map_err(|e| e.to_string())?;
            vec![DemandClass::default_class(
                forecast::forecast(&usage, *horizon_hours)?.gpus,
            )]
        }
        PlanInput::Bills {
            teams,
            days,
            horizon_hours,
        } => {
            let (pool, teams, gpus, days) = (pool.clone(), teams.clone(), plan.gpus.clone(), *days);
            let usage = tokio::task::spawn_blocking(move || {
                pool.read(|s| crate::plan::from_bills::usage_from_bills(s, &teams, &gpus, days))
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("usage from the bills: {e}"))?;
            vec![DemandClass::default_class(
                forecast::forecast(&usage.demand, *horizon_hours)?.gpus,
            )]
        }
    };
    let owned = match &plan.owned {
        Some(path) => Some(inputs::read_owned(path).map_err(|e| e.to_string())?),
        None => None,
    };
    let request = PlanRequest {
        name: Some(name.to_owned()),
        input: Input::Catalog {
            classes,
            owned,
            found: Vec::new(),
            policy: plan.policy.clone(),
            gpus: plan.gpus.clone(),
            clouds: plan.clouds.clone(),
            regions: plan.regions.clone(),
        },
        overrides: Overrides::default(),
        relax: false,
        backend: crate::optimizer::Backend::default(),
        save: true,
        wait: true,
        fence: Some(fence.clone()),
        scenario_keys: serde_json::Map::new(),
    };
    let planned = planning.plan(request).await.map_err(|e| e.to_string())?;
    let (Some(change), Some(hook)) = (planned.saved.and_then(|s| s.change), hook) else {
        return Ok(0);
    };
    let result_json = serde_json::to_value(&planned.result).unwrap_or_default();
    let (pool, name, fence) = (pool.clone(), name.to_owned(), fence.clone());
    tokio::task::spawn_blocking(move || {
        pool.write_fenced(Some(&fence), |store| {
            let previous = store.alert_states(None)?;
            let d = alerts::plan_changed(
                &hook.rules,
                &previous,
                &name,
                &change,
                &result_json,
                Utc::now(),
            );
            if !d.states.is_empty() {
                store.apply_alerts(&d.states, &d.messages, Utc::now())?;
            }
            Ok(d.messages.len())
        })
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e: crate::store::StoreError| e.to_string())
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
