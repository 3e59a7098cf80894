//! The daemon: wires the store, one scheduler task per source and the HTTP API
//! together, and shuts them down in order. Glue only; the work is elsewhere.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use gpuplan_providers::secret::Secret;
use gpuplan_providers::{Provider, Scope};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub mod duties;
pub mod http;
pub mod metrics;
pub mod tasks;

use crate::alerts::deliver;
use crate::bills::budgets::BillsSetup;
use crate::config::Config;
use crate::daemon::duties::Cluster;
use crate::daemon::http::state::AppState;
use crate::daemon::metrics::Metrics;
use crate::plan::PlanService;
use crate::store::{Location, Pool};
use tasks::{AlertHook, Backoff, Clock, Source};

/// The environment variable holding the API's bearer token.
pub const TOKEN_ENV: &str = "GPUPLAN_API_TOKEN";

/// Process behaviour that is not configuration.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long running syncs and requests get to finish after a stop signal.
    pub grace: Duration,
    /// Required when listening beyond loopback.
    pub token: Option<Secret>,
}

/// Runs the daemon on `listener` with the providers `config` enables until
/// `shutdown` completes.
///
/// # Errors
/// When it cannot start: a token is missing for a non-loopback address, another
/// daemon holds the database, or the store cannot be opened.
pub async fn run(
    config: Config,
    listener: TcpListener,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let providers = config
        .providers
        .build_enabled()
        .context("Failed to set up the providers.")?;
    run_with_providers(config, providers, listener, options, shutdown).await
}

/// [`run`] with the providers given (tests use fakes).
///
/// # Errors
/// As [`run`].
pub async fn run_with_providers(
    config: Config,
    providers: Vec<Box<dyn Provider>>,
    listener: TcpListener,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let addr = listener
        .local_addr()
        .context("Failed to read the listening address.")?;
    check_exposure(addr, options.token.as_ref())?;
    // A SQLite catalog has one daemon; a shared one has replicas, which take
    // each once-per-cluster duty under a lease instead.
    let _lock = match &config.store.location {
        Location::Sqlite(path) => Some(lock_database(path)?),
        Location::Postgres(_) => None,
    };
    let pool = open_catalog(&config)?;

    let cancel = CancellationToken::new();
    let tracker = TaskTracker::new();
    let cluster = Cluster::new(pool.clone());
    let intervals = config.source_intervals(chrono::Utc::now());
    let bills = config.bills_setup();
    let alerts = start_alerts(
        &config, &bills, &pool, &cluster, &intervals, &tracker, &cancel,
    )?;
    let ctx = tasks::Context {
        pool: pool.clone(),
        policy: config.sync.clone(),
        backoff: Backoff {
            initial: config.sync.retry_initial,
            max: config.sync.retry_max,
        },
        metrics: Arc::new(Metrics::default()),
        cancel: cancel.clone(),
        clock: Clock::new(),
        alerts,
        cluster: cluster.clone(),
    };
    let triggers = start_sources(&config, providers, &ctx, &tracker)?;
    let planning = Arc::new(PlanService::new(
        Some(pool.clone()),
        &config.planner,
        intervals.clone(),
    ));
    start_duties(&config, &ctx, &planning, &tracker);

    let state = Arc::new(AppState {
        pool,
        metrics: ctx.metrics.clone(),
        triggers,
        intervals,
        token: options.token,
        loopback: addr.ip().is_loopback(),
        cache: Arc::default(),
        planning,
        fx: config.fx.clone(),
        rules: config.alerts.rules.clone(),
        cluster,
        bill_grace: config.bill_grace(),
        bills,
    });
    tracker.spawn(crate::daemon::http::state::keep_the_past(
        state.clone(),
        cancel.clone(),
    ));
    let server = axum::serve(listener, crate::daemon::http::router(state))
        .with_graceful_shutdown(cancel.clone().cancelled_owned());
    tracker.spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "The HTTP server failed.");
        }
    });
    tracing::info!(listen = %addr, "gpuplan is serving.");

    shutdown.await;
    stop(&cancel, &tracker, options.grace).await;
    Ok(())
}

/// Opens the catalog and closes the runs the last stop of this daemon left
/// `running`. On a shared catalog they may be another replica's live runs:
/// each is closed instead by the replica that next takes its source's duty.
fn open_catalog(config: &Config) -> anyhow::Result<Arc<Pool>> {
    let pool =
        Arc::new(Pool::open(&config.store.location, 2).context("Failed to open the catalog.")?);
    let interrupted = if pool.is_shared() {
        0
    } else {
        pool.write(|s| s.fail_interrupted_runs(None, chrono::Utc::now()))
            .context("Failed to mark interrupted sync runs.")?
    };
    if interrupted > 0 {
        tracing::warn!(
            runs = interrupted,
            "Marked sync runs interrupted by the last stop as failed."
        );
    }
    Ok(pool)
}

/// Starts delivering queued alerts when channels are configured, and
/// returns the hook that evaluates rules and budgets after each sync, when
/// there is something to evaluate.
fn start_alerts(
    config: &Config,
    bills: &BillsSetup,
    pool: &Arc<Pool>,
    cluster: &Arc<Cluster>,
    intervals: &BTreeMap<String, Duration>,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<Arc<AlertHook>>> {
    let channels = deliver::channels(&config.alerts.channels).map_err(anyhow::Error::msg)?;
    let wake = Arc::new(Notify::new());
    let budgets_alert = bills.budgets.iter().any(|b| !b.thresholds.is_empty());
    let hook = (!config.alerts.rules.is_empty() || budgets_alert).then(|| {
        Arc::new(AlertHook {
            rules: config.alerts.rules.clone(),
            intervals: intervals.clone(),
            wake: wake.clone(),
            cluster: cluster.clone(),
            bills: bills.clone(),
        })
    });
    if !channels.is_empty() {
        tracker.spawn(deliver::run(deliver::Delivery {
            pool: pool.clone(),
            channels,
            retry_initial: config.alerts.retry_initial,
            retry_max: config.alerts.retry_max,
            timeout: config.alerts.timeout,
            wake,
            cancel: cancel.clone(),
        }));
    }
    Ok(hook)
}

/// Starts one scheduled task per source (and AWS's spot-history task);
/// returns each source's trigger for `POST /v1/sync`.
fn start_sources(
    config: &Config,
    providers: Vec<Box<dyn Provider>>,
    ctx: &tasks::Context,
    tracker: &TaskTracker,
) -> anyhow::Result<BTreeMap<String, Arc<Notify>>> {
    let schedules: BTreeMap<String, _> = config
        .enabled_sources()
        .into_iter()
        .map(|(id, schedule)| (id, schedule.clone()))
        .collect();
    let mut triggers = BTreeMap::new();
    for provider in providers {
        let id = provider.id().to_owned();
        let schedule = schedules
            .get(&id)
            .cloned()
            .with_context(|| format!("No schedule configured for provider {id}."))?;
        let trigger = Arc::new(Notify::new());
        triggers.insert(id.clone(), trigger.clone());
        let span = tracing::info_span!("source", provider = %id);
        tracker.spawn(tracing::Instrument::instrument(
            tasks::run_source(
                Source {
                    provider,
                    scope: Scope::Full,
                    schedule,
                    trigger,
                },
                ctx.clone(),
            ),
            span,
        ));
    }

    #[cfg(feature = "aws")]
    if let Some((provider, schedule)) = config.providers.aws.spot_job()? {
        let span = tracing::info_span!("source", provider = "aws", scope = "spot_history");
        tracker.spawn(tracing::Instrument::instrument(
            tasks::run_source(
                Source {
                    provider: Box::new(provider),
                    scope: Scope::SpotHistory,
                    schedule,
                    // Not triggered by `POST /v1/sync`: a full sync reads spot history too.
                    trigger: Arc::new(Notify::new()),
                },
                ctx.clone(),
            ),
            span,
        ));
    }
    Ok(triggers)
}

/// Starts the other scheduled tasks: bill loads, pruning and the plans
/// that alert when they change.
fn start_duties(
    config: &Config,
    ctx: &tasks::Context,
    planning: &Arc<PlanService>,
    tracker: &TaskTracker,
) {
    for bills in config.bills.values().filter(|b| b.enabled) {
        tracker.spawn(tasks::run_bills(
            bills.source.clone(),
            bills.schedule.clone(),
            ctx.pool.clone(),
            ctx.cluster.clone(),
            ctx.alerts.clone(),
            ctx.cancel.clone(),
            ctx.clock,
        ));
    }
    tracker.spawn(tasks::run_pruning(
        config.store.prune_schedule.clone(),
        config.store.retention.clone(),
        ctx.pool.clone(),
        ctx.cluster.clone(),
        ctx.cancel.clone(),
        ctx.clock,
    ));
    for (name, plan) in &config.alerts.plans {
        tracker.spawn(tasks::run_plan(
            name.clone(),
            plan.clone(),
            planning.clone(),
            ctx.pool.clone(),
            ctx.alerts.clone(),
            ctx.cluster.clone(),
            ctx.cancel.clone(),
            ctx.clock,
        ));
    }
}

/// Cancels every task and waits for them, at most `grace`.
async fn stop(cancel: &CancellationToken, tracker: &TaskTracker, grace: Duration) {
    tracing::info!("Stopping: cancelling syncs and draining requests.");
    cancel.cancel();
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!(
            grace_secs = grace.as_secs(),
            "Tasks still running after the grace period; exiting anyway."
        );
    }
    tracing::info!("Stopped.");
}

/// Refuses to expose the API beyond loopback without a token.
fn check_exposure(addr: SocketAddr, token: Option<&Secret>) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() && token.is_none() {
        bail!(
            "api.listen is {addr}, which is reachable from other machines: set {TOKEN_ENV} to the bearer token clients must send, or listen on 127.0.0.1"
        );
    }
    Ok(())
}

/// Holds an exclusive lock on `<db>.lock` for the daemon's life, so a second
/// daemon on the same catalog refuses to start instead of syncing twice.
fn lock_database(db: &Path) -> anyhow::Result<File> {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    let path = PathBuf::from(name);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("Failed to open the lock file {}.", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "another gpuplan daemon is already using {} (it holds {}); stop it or point store.path elsewhere",
            db.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("Failed to lock {}.", path.display()))
        }
    }
}
