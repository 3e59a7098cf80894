//! The command line: argument parsing and the output people and scripts read.
//! stdout carries data (tables or `--json`), stderr carries logs and notes.
//! Exit codes: 0 ok, 1 failure, 2 bad input.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use gpuplan_providers::secret::Secret;
use gpuplan_providers::{PriceKind, PriceScope, Scope};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::alerts::deliver;
use crate::catalog::{self, CatalogRecord, Freshness, PriceFilter, SpotHistory, SpotQuery};
use crate::config::{self, Config};
use crate::daemon;
use crate::forecast;
use crate::optimizer::{self, OptimizeError, PlanResult, Problem};
use crate::planning::{self, Input, Overrides, PlanError, PlanRequest, PlanService};
use crate::store::{Pool, Prunable, Store, StoreError};
use crate::sync;
use crate::telemetry::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "gpuplan",
    version,
    about = "A local catalog of cloud GPU prices, purchase plans and alerts."
)]
pub struct Cli {
    /// Config file (TOML). Without one, built-in defaults apply.
    #[arg(long, global = true, env = "GPUPLAN_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: scheduled syncs and the HTTP API, until SIGTERM/SIGINT.
    Serve {
        /// Seconds that running syncs and requests get to finish after a stop signal.
        #[arg(long, default_value_t = 30)]
        shutdown_grace_secs: u64,
    },
    /// Sync every enabled provider (or the named ones) into the catalog now.
    Sync {
        /// Only this provider (repeatable), e.g. `file:onprem`.
        #[arg(long = "provider")]
        providers: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// List current prices, cheapest per GPU-hour first.
    Prices(PricesArgs),
    /// Spot price history of one instance type, with min/p50/p95/max.
    SpotHistory(SpotHistoryArgs),
    /// Solve a purchase-planning problem (docs/planning-model.md) and print the plan.
    Plan(Box<PlanArgs>),
    /// Alert rules: their state, what was sent, and test messages.
    #[command(subcommand)]
    Alerts(AlertsCommand),
    /// Check or print configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Maintain the catalog file.
    #[command(subcommand)]
    Store(StoreCommand),
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Delete history older than `[store.retention]` allows (the daemon does
    /// this on `store.retention.schedule`). Current prices and the newest spot
    /// observation of every pool always stay.
    Prune {
        /// Only count what would go.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// The configured rules and the state of each of their keys.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Alerts queued and sent, newest first.
    History {
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Send a test message through a rule's channels now.
    Test { rule: String },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["problem", "demand", "usage"])))]
pub struct PlanArgs {
    /// A problem file in the planning-model JSON format.
    #[arg(long)]
    problem: Option<PathBuf>,
    /// Hourly GPU demand (CSV `hour,gpus` or `timestamp,gpus`); offers come from the catalog.
    #[arg(long)]
    demand: Option<PathBuf>,
    /// Past hourly GPU usage (same CSV format): demand is forecast from it
    /// (hour-of-week profile with trend); offers come from the catalog.
    #[arg(long)]
    usage: Option<PathBuf>,
    /// With --usage: hours to forecast and plan.
    #[arg(long, default_value_t = 168)]
    horizon_hours: usize,
    /// Solve the LP relaxation (every count continuous): a lower bound, fast.
    #[arg(long)]
    relax: bool,
    /// Give up (exit 1) when no proven optimum is found within this many
    /// seconds [default: `planner.time_limit_secs`, 300].
    #[arg(long)]
    time_limit_secs: Option<f64>,
    /// MIP solver: `microlp` (default), or `cbc` in builds with the `cbc` feature.
    #[arg(long, default_value = "microlp", value_parser = parse_backend)]
    solver: optimizer::Backend,
    /// Print the result JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Save the plan in the catalog and say whether it changed against the last
    /// saved plan of the same name (docs/planning-model.md §7).
    #[arg(long)]
    save: bool,
    #[command(flatten)]
    catalog: PlanCatalogArgs,
}

/// With `--demand`: which offers to take and the policy (docs/planning-model.md §2).
#[derive(Debug, Args)]
pub struct PlanCatalogArgs {
    /// GPU model or family, e.g. `H100` (repeatable).
    #[arg(long = "gpu")]
    gpus: Vec<String>,
    /// Providers to buy from, e.g. `aws,azure` or `file` (repeatable, comma-separated).
    #[arg(long, value_delimiter = ',')]
    clouds: Vec<String>,
    /// Regions to buy in (repeatable, comma-separated).
    #[arg(long, value_delimiter = ',')]
    regions: Vec<String>,
    /// Least memory per GPU, GiB.
    #[arg(long)]
    min_gpu_memory: Option<f64>,
    /// Most of each hour's demand served by spot, 0..1.
    #[arg(long)]
    max_spot_share: Option<f64>,
    /// Most of each hour's demand served by one spot pool, 0..1.
    #[arg(long)]
    max_pool_share: Option<f64>,
    /// Request this much more spot than the effective GPUs counted (0.1 = 10%).
    #[arg(long, default_value_t = 0.0)]
    spot_overhead: f64,
    /// Most the plan may cost over the horizon, USD.
    #[arg(long)]
    budget: Option<f64>,
    /// Whole spot and on-demand instances per hour (slow at scale).
    #[arg(long)]
    integer_hourly: bool,
    /// History window for the expected spot price (`7d`, `36h`) [default:
    /// `planner.spot_window`, 7d].
    #[arg(long)]
    spot_window: Option<String>,
    /// Restart plus warm-up hours lost per spot interruption [default:
    /// `planner.restart_hours`, 0.5].
    #[arg(long)]
    restart_hours: Option<f64>,
    /// Checkpoint interval in hours, half of it lost per interruption
    /// [default: `planner.checkpoint_hours`, 1].
    #[arg(long)]
    checkpoint_hours: Option<f64>,
    /// Also write the problem built from the catalog to this file.
    #[arg(long)]
    write_problem: Option<PathBuf>,
    /// Name of the plan: `--save` compares with the last saved plan of this name.
    #[arg(long, default_value = "catalog plan")]
    name: String,
}

#[derive(Debug, Args)]
pub struct PricesArgs {
    /// GPU model or family, e.g. `H100-80GB` or `H100` (repeatable).
    #[arg(long = "gpu")]
    gpus: Vec<String>,
    /// Provider, e.g. `aws` or `file:onprem`; `file` matches every sheet (repeatable).
    #[arg(long = "provider")]
    providers: Vec<String>,
    /// Region (repeatable); also matches global offers available there.
    #[arg(long = "region")]
    regions: Vec<String>,
    /// Price kind, e.g. `on_demand`, `spot`, `reserved_1y_no_upfront` (repeatable).
    #[arg(long = "kind", value_parser = parse_kind)]
    kinds: Vec<PriceKind>,
    /// What the price buys: `instance`, or `gpu_only` for GPUs without the
    /// machine they attach to (repeatable; default both).
    #[arg(long = "scope", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<PriceScope>()))]
    scopes: Vec<PriceScope>,
    /// Only prices at or below this many USD per GPU-hour.
    #[arg(long, value_parser = parse_price)]
    max_usd_per_gpu_hour: Option<f64>,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct SpotHistoryArgs {
    /// Instance type, e.g. `p5.48xlarge`.
    #[arg(long)]
    instance: String,
    #[arg(long)]
    provider: Option<String>,
    #[arg(long)]
    region: Option<String>,
    #[arg(long)]
    zone: Option<String>,
    /// Window start: a duration back from now (`7d`, `36h`, `90m`), a date
    /// (`2026-11-01`) or an RFC 3339 time.
    #[arg(long, default_value = "7d")]
    since: String,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file (default: --config), reporting every problem.
    Validate { file: Option<PathBuf> },
    /// Print the example config, which documents every key.
    Example,
}

/// A command's failure, split by whose fault it is (for the exit code).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0:#}")]
    BadInput(anyhow::Error),
    #[error("{0:#}")]
    Failed(anyhow::Error),
}

impl CliError {
    #[must_use]
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::BadInput(_) => ExitCode::from(2),
            Self::Failed(_) => ExitCode::from(1),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        Self::Failed(e)
    }
}

fn parse_kind(s: &str) -> Result<PriceKind, String> {
    s.parse()
        .map_err(|e: gpuplan_providers::snapshot::UnknownName| e.to_string())
}

fn parse_backend(s: &str) -> Result<optimizer::Backend, String> {
    let available = optimizer::Backend::available();
    available
        .iter()
        .find(|(name, _)| *name == s)
        .map(|(_, b)| *b)
        .ok_or_else(|| {
            let names: Vec<&str> = available.iter().map(|(n, _)| *n).collect();
            format!(
                "`{s}` is not a solver in this build; available: {}",
                names.join(", ")
            )
        })
}

fn parse_price(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a price in USD (a number >= 0)")),
    }
}

/// Runs one command.
///
/// # Errors
/// `BadInput` for a bad config or argument, `Failed` for everything else.
pub async fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Config(ConfigCommand::Example) => {
            print!("{}", config::EXAMPLE);
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(ConfigCommand::Validate { file }) => {
            validate_config(file.as_deref().or(cli.config.as_deref()))
        }
        Command::Serve {
            shutdown_grace_secs,
        } => {
            let config = load_config(cli.config.as_deref())?;
            serve(config, Duration::from_secs(shutdown_grace_secs)).await
        }
        Command::Sync { providers, json } => {
            let config = load_config(cli.config.as_deref())?;
            run_sync(&config, &providers, json).await
        }
        Command::Alerts(command) => {
            let config = load_config(cli.config.as_deref())?;
            run_alerts(&config, command).await
        }
        Command::Plan(args) => {
            let config = load_config(cli.config.as_deref())?;
            run_plan(&config, &args).await
        }
        Command::Prices(args) => {
            let config = load_config(cli.config.as_deref())?;
            run_prices(&config, args)
        }
        Command::SpotHistory(args) => {
            let config = load_config(cli.config.as_deref())?;
            run_spot_history(&config, &args)
        }
        Command::Store(StoreCommand::Prune { dry_run, json }) => {
            let config = load_config(cli.config.as_deref())?;
            run_prune(&config, dry_run, json)
        }
    }
}

fn load_config(path: Option<&Path>) -> Result<Config, CliError> {
    match path {
        Some(path) => Config::load(path).map_err(|e| CliError::BadInput(e.into())),
        None => Ok(Config::default()),
    }
}

async fn serve(config: Config, grace: Duration) -> Result<ExitCode, CliError> {
    let listen = config.api.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("Failed to listen on {listen} (api.listen)."))?;
    let options = daemon::Options {
        grace,
        token: Secret::from_env(daemon::TOKEN_ENV),
    };
    daemon::run(config, listener, options, stop_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Completes on SIGTERM or SIGINT.
async fn stop_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

fn validate_config(path: Option<&Path>) -> Result<ExitCode, CliError> {
    let Some(path) = path else {
        println!(
            "no config file given: the built-in defaults apply (see `gpuplan config example`)"
        );
        return Ok(ExitCode::SUCCESS);
    };
    let config = load_config(Some(path))?;
    let sources: Vec<String> = config
        .enabled_sources()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    println!(
        "{}: ok; store {}; {} provider{} enabled{}{}",
        path.display(),
        config.store.path.display(),
        sources.len(),
        if sources.len() == 1 { "" } else { "s" },
        if sources.is_empty() { "" } else { ": " },
        sources.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

fn open_store(config: &Config) -> Result<Store, CliError> {
    Store::open(&config.store.path).map_err(|e| CliError::Failed(e.into()))
}

async fn run_sync(config: &Config, wanted: &[String], json: bool) -> Result<ExitCode, CliError> {
    let mut providers = sync::enabled_providers(config).map_err(|e| CliError::Failed(e.into()))?;
    if !wanted.is_empty() {
        let known: Vec<String> = providers.iter().map(|p| p.id().to_owned()).collect();
        if let Some(missing) = wanted.iter().find(|w| !known.contains(w)) {
            return Err(CliError::BadInput(anyhow::anyhow!(
                "--provider {missing}: no enabled provider has that name; enabled: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        providers.retain(|p| wanted.iter().any(|w| w == p.id()));
    }
    if providers.is_empty() {
        eprintln!("No providers are enabled in the configuration; nothing to sync.");
    }
    let pool = Arc::new(Pool::open(&config.store.path, 0).map_err(|e| CliError::Failed(e.into()))?);
    let cancel = CancellationToken::new();
    let mut outcomes = Vec::new();
    for provider in &providers {
        outcomes.push(
            sync::sync_provider(&pool, provider.as_ref(), Scope::Full, &config.sync, &cancel).await,
        );
    }
    let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
    if json {
        let rows: Vec<_> = outcomes
            .iter()
            .map(|o| match &o.result {
                Ok(stats) => json!({"provider": o.provider, "run_id": o.run_id, "status": "ok",
                                    "seconds": o.seconds, "stats": stats}),
                Err(e) => json!({"provider": o.provider, "run_id": o.run_id, "status": "failed",
                                 "seconds": o.seconds, "error": e.to_string()}),
            })
            .collect();
        print_json(&rows)?;
    } else {
        for o in &outcomes {
            match &o.result {
                Ok(s) => {
                    let skipped = if s.skipped.is_empty() {
                        "none".to_owned()
                    } else {
                        s.skipped
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    let unchanged = if s.regions_unchanged > 0 {
                        format!(
                            "  unchanged regions {} (not downloaded)",
                            s.regions_unchanged
                        )
                    } else {
                        String::new()
                    };
                    println!(
                        "{:<16} ok      {:>7.2}s  types {}  prices {} (changed {}, withdrawn {})  spot {} (new {})  availability {}  skipped: {skipped}{unchanged}",
                        o.provider,
                        o.seconds,
                        s.instance_types,
                        s.prices_seen,
                        s.prices_changed,
                        s.prices_withdrawn,
                        s.spot_seen,
                        s.spot_added,
                        s.availability
                    );
                }
                Err(e) => println!("{:<16} FAILED  {:>7.2}s  {e}", o.provider, o.seconds),
            }
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn freshness(config: &Config, store: &Store) -> Result<Freshness, CliError> {
    let now = Utc::now();
    Freshness::read(store, config.source_intervals(now), now)
        .map_err(|e| CliError::Failed(e.into()))
}

fn run_prices(config: &Config, args: PricesArgs) -> Result<ExitCode, CliError> {
    let store = open_store(config)?;
    let fresh = freshness(config, &store)?;
    let filter = PriceFilter {
        gpus: args.gpus,
        providers: args.providers,
        regions: args.regions,
        kinds: args.kinds,
        scopes: args.scopes,
        max_usd_per_gpu_hour: args.max_usd_per_gpu_hour,
    };
    let records =
        catalog::prices(&store, &fresh, &filter).map_err(|e| CliError::Failed(e.into()))?;
    if args.json {
        print_json(&records)?;
    } else if records.is_empty() {
        eprintln!(
            "No prices match. Sources synced: {}.",
            synced_sources(&fresh)
        );
    } else {
        print!("{}", prices_table(&records, fresh.now));
    }
    Ok(ExitCode::SUCCESS)
}

fn synced_sources(fresh: &Freshness) -> String {
    if fresh.last_good.is_empty() {
        return "none yet (run `gpuplan sync`)".to_owned();
    }
    fresh
        .last_good
        .iter()
        .map(|(s, at)| format!("{s} {} ago", age(fresh.now, *at)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A short human age: `45s`, `12m`, `3h`, `2d`.
fn age(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let secs = (now - then).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn prices_table(records: &[CatalogRecord], now: DateTime<Utc>) -> String {
    let header = [
        "PROVIDER",
        "REGION",
        "ZONE",
        "INSTANCE",
        "GPU",
        "N",
        "KIND",
        "USD/H",
        "USD/GPU-H",
        "AGE",
    ];
    let rows: Vec<[String; 10]> = records
        .iter()
        .map(|r| {
            let data_time = r.observed_at.or(r.fetched_at);
            let mut age = data_time.map_or_else(|| "-".to_owned(), |t| age(now, t));
            if r.stale {
                age.push_str(" stale");
            }
            let kind = match &r.offering_class {
                Some(class) => format!("{} ({class})", r.price_kind),
                None => r.price_kind.clone(),
            };
            [
                r.provider.clone(),
                r.region.clone(),
                r.zone.clone().unwrap_or_else(|| "-".to_owned()),
                if r.price_scope == PriceScope::GpuOnly.as_str() {
                    format!("{} *", r.instance_type)
                } else {
                    r.instance_type.clone()
                },
                r.gpu_model.clone(),
                r.gpu_count.to_string(),
                kind,
                format!("{:.4}", r.usd_per_hour),
                format!("{:.4}", r.usd_per_gpu_hour),
                age,
            ]
        })
        .collect();
    let mut out = render_table(&header, &rows, &[5, 7, 8]);
    if records
        .iter()
        .any(|r| r.price_scope == PriceScope::GpuOnly.as_str())
    {
        out.push_str(
            "* GPU only: the accelerator without the machine it attaches to, which is billed separately; never planned.\n",
        );
    }
    out
}

/// Left-aligned columns, except the right-aligned (numeric) ones listed.
fn render_table<const N: usize>(
    header: &[&str; N],
    rows: &[[String; N]],
    right: &[usize],
) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if right.contains(&i) {
                    format!("{c:>w$}", w = widths[i])
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

fn run_prune(config: &Config, dry_run: bool, json: bool) -> Result<ExitCode, CliError> {
    let pool = Pool::open(&config.store.path, 0)
        .with_context(|| format!("Failed to open {}.", config.store.path.display()))?;
    let counts = crate::store::prune(&pool, &config.store.retention, Utc::now(), dry_run)
        .map_err(|e| CliError::Failed(e.into()))?;
    if json {
        print_json(&json!({"dry_run": dry_run, "rows": counts}))?;
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if dry_run { "would delete" } else { "deleted" };
    let rows: Vec<[String; 2]> = Prunable::ALL
        .iter()
        .map(|k| [k.name().to_owned(), counts.get(*k).to_string()])
        .collect();
    println!(
        "{}",
        render_table(&["TABLE", "ROWS"], &rows, &[1]).trim_end()
    );
    println!("{verb} {} rows in all", counts.total());
    Ok(ExitCode::SUCCESS)
}

fn run_spot_history(config: &Config, args: &SpotHistoryArgs) -> Result<ExitCode, CliError> {
    let now = Utc::now();
    let since = catalog::parse_since(&args.since, now)
        .map_err(|e| CliError::BadInput(anyhow::anyhow!("--since: {e}")))?;
    let store = open_store(config)?;
    let fresh = freshness(config, &store)?;
    let query = SpotQuery {
        instance_type: args.instance.clone(),
        provider: args.provider.clone(),
        region: args.region.clone(),
        zone: args.zone.clone(),
        since,
        max_observations: Some(catalog::MAX_SPOT_OBSERVATIONS),
    };
    let history = catalog::spot_history(&store, &query, &fresh).map_err(|e| match e {
        e @ StoreError::TooLarge { .. } => {
            CliError::BadInput(anyhow::anyhow!("--since, --region, --zone: {e}"))
        }
        e => CliError::Failed(e.into()),
    })?;
    if args.json {
        print_json(&history)?;
    } else if history.series.is_empty() {
        eprintln!(
            "No spot history for {} since {}.",
            args.instance,
            since.to_rfc3339()
        );
    } else {
        print!("{}", spot_table(&history));
    }
    Ok(ExitCode::SUCCESS)
}

fn spot_table(h: &SpotHistory) -> String {
    let header = [
        "PROVIDER", "REGION", "ZONE", "OBS", "MIN", "P50", "P95", "MAX",
    ];
    let stat_cells = |s: &catalog::SpotStats| {
        [
            s.observations.to_string(),
            format!("{:.4}", s.min),
            format!("{:.4}", s.p50),
            format!("{:.4}", s.p95),
            format!("{:.4}", s.max),
        ]
    };
    let mut rows: Vec<[String; 8]> = Vec::new();
    for s in &h.series {
        let [o, a, b, c, d] = stat_cells(&s.stats);
        rows.push([
            s.provider.clone(),
            s.region.clone(),
            s.zone.clone(),
            o,
            a,
            b,
            c,
            d,
        ]);
    }
    if let (Some(all), true) = (&h.stats, h.series.len() > 1) {
        let [o, a, b, c, d] = stat_cells(all);
        rows.push(["all".into(), "".into(), "".into(), o, a, b, c, d]);
    }
    format!(
        "{} spot USD/hour since {} (time-weighted)\n{}",
        h.instance_type,
        h.since.format("%Y-%m-%d %H:%M UTC"),
        render_table(&header, &rows, &[3, 4, 5, 6, 7])
    )
}

async fn run_plan(config: &Config, args: &PlanArgs) -> Result<ExitCode, CliError> {
    let refuse = |message: String| {
        println!("{}", json!({"status": "error", "error": message}));
        Ok(ExitCode::from(2))
    };
    let mut forecast_info = None;
    let (name, input) = match (&args.problem, &args.demand, &args.usage) {
        (Some(path), _, _) => {
            let shown = path.display().to_string();
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) => return refuse(format!("{shown}: cannot read: {e}")),
            };
            let doc: serde_json::Value = match serde_json::from_str(&text) {
                Ok(d) => d,
                Err(e) => return refuse(format!("{shown}: not JSON: {e}")),
            };
            match Problem::from_json(&doc) {
                Ok(p) => (None, Input::Problem(p)),
                Err(e) => return refuse(format!("{shown}: {e}")),
            }
        }
        (None, Some(path), _) => {
            let demand = match forecast::read_demand(path) {
                Ok(d) => d.gpus,
                Err(e) => return refuse(e.to_string()),
            };
            match catalog_input(demand, &args.catalog) {
                Ok(input) => (Some(args.catalog.name.clone()), input),
                Err(message) => return refuse(message),
            }
        }
        (None, None, Some(path)) => {
            if !(1..=optimizer::MAX_HORIZON_HOURS).contains(&args.horizon_hours) {
                return refuse(format!(
                    "--horizon-hours: {} is out of range; allowed: 1 to {}",
                    args.horizon_hours,
                    optimizer::MAX_HORIZON_HOURS
                ));
            }
            let usage = match forecast::read_demand(path) {
                Ok(u) => u,
                Err(e) => return refuse(e.to_string()),
            };
            let f = match forecast::forecast(&usage, args.horizon_hours) {
                Ok(f) => f,
                Err(e) => return refuse(format!("{}: {e}", path.display())),
            };
            let demand = f.gpus.clone();
            forecast_info = Some(f);
            match catalog_input(demand, &args.catalog) {
                Ok(input) => (Some(args.catalog.name.clone()), input),
                Err(message) => return refuse(message),
            }
        }
        (None, None, None) => return refuse("give --problem, --demand or --usage".to_owned()),
    };
    let overrides = match plan_overrides(args) {
        Ok(o) => o,
        Err(message) => return refuse(message),
    };
    // A problem file solved without saving needs no catalog.
    let needs_store = args.save || matches!(input, Input::Catalog { .. });
    let pool = if needs_store {
        Some(Arc::new(
            Pool::open(&config.store.path, 1).map_err(|e| CliError::Failed(e.into()))?,
        ))
    } else {
        None
    };
    let intervals = config.source_intervals(Utc::now());
    let service = PlanService::new(pool, &config.planner, intervals);
    let request = PlanRequest {
        name,
        input,
        overrides,
        relax: args.relax,
        backend: args.solver,
        save: args.save,
        wait: true,
    };
    let prepared = match service.prepare(&request).await {
        Ok(p) => p,
        Err(PlanError::Invalid(e)) => return refuse(e.to_string()),
        Err(e) => return Err(CliError::Failed(e.into())),
    };
    if let Some(path) = &args.catalog.write_problem {
        let doc = prepared.problem.to_json();
        std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap_or_default())
            .with_context(|| format!("Failed to write {}.", path.display()))?;
    }
    let planned = match service.finish(prepared, &request).await {
        Ok(p) => p,
        Err(PlanError::Solve(e)) => {
            let kind = match e {
                OptimizeError::TimeLimit(_) => "time_limit",
                OptimizeError::Solver(_) => "solver",
            };
            println!(
                "{}",
                json!({"status": "error", "kind": kind, "error": e.to_string()})
            );
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(CliError::Failed(e.into())),
    };
    if args.json {
        let mut doc = planned.to_json().context("Failed to encode the result.")?;
        if let Some(f) = &forecast_info {
            doc["forecast"] = json!(f);
        }
        print_json(&doc)?;
        return Ok(ExitCode::SUCCESS);
    }
    let stale = planned.prepared.stale_sources.as_ref();
    if let Some(stale) = stale.filter(|s| !s.is_empty()) {
        println!(
            "warning: prices from {} are stale (older than twice their sync interval)",
            stale.join(", ")
        );
    }
    if let Some(f) = &forecast_info {
        let backtest = f.backtest.as_ref().map_or_else(
            || "no backtest (history shorter than two seasons)".to_owned(),
            |b| {
                format!(
                    "backtest on the last {} h: MAE {:.2} GPUs, WAPE {}",
                    b.hours,
                    b.mae_gpus,
                    b.wape
                        .map_or_else(|| "-".to_owned(), |w| format!("{:.1}%", w * 100.0))
                )
            },
        );
        println!(
            "Forecast: {} h by {}, trend {:+.4} GPUs/h; {backtest}",
            f.gpus.len(),
            f.method,
            f.trend_per_hour
        );
    }
    print!("{}", plan_report(&planned.result));
    if let Some(r) = &planned.saved {
        match &r.change {
            None => println!("Saved as plan {} (the first of its name).", r.id),
            Some(c) if c.changed => println!(
                "Saved as plan {}: CHANGED since the last plan: {}.",
                r.id,
                c.reasons.join("; ")
            ),
            Some(_) => println!("Saved as plan {}: unchanged since the last plan.", r.id),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The flags that override `[planner]` defaults, each checked.
fn plan_overrides(args: &PlanArgs) -> Result<Overrides, String> {
    let a = &args.catalog;
    for (flag, value) in [
        ("--restart-hours", a.restart_hours),
        ("--checkpoint-hours", a.checkpoint_hours),
    ] {
        if let Some(v) = value {
            in_range(flag, v, 0.0, planning::MAX_HOURS)?;
        }
    }
    let time_limit = args
        .time_limit_secs
        .map(|t| {
            in_range(
                "--time-limit-secs",
                t,
                0.001,
                planning::MAX_TIME_LIMIT.as_secs_f64(),
            )
            .map(Duration::from_secs_f64)
        })
        .transpose()?;
    let spot_window = a
        .spot_window
        .as_deref()
        .map(|w| {
            let now = Utc::now();
            catalog::parse_since(w, now)
                .map(|since| (now - since).to_std().unwrap_or_default())
                .map_err(|e| format!("--spot-window: {e}"))
        })
        .transpose()?;
    Ok(Overrides {
        time_limit,
        spot_window,
        restart_hours: a.restart_hours,
        checkpoint_hours: a.checkpoint_hours,
    })
}

/// The catalog input of `--demand` / `--usage`: the policy and offer filters
/// of the flags, each checked.
fn catalog_input(demand: Vec<f64>, a: &PlanCatalogArgs) -> Result<Input, String> {
    let checks = [
        ("--max-spot-share", a.max_spot_share, 1.0),
        ("--max-pool-share", a.max_pool_share, 1.0),
        ("--spot-overhead", Some(a.spot_overhead), 10.0),
        ("--budget", a.budget, 1e15),
        ("--min-gpu-memory", a.min_gpu_memory, 1e6),
    ];
    for (flag, value, max) in checks {
        if let Some(v) = value {
            in_range(flag, v, 0.0, max)?;
        }
    }
    let policy = optimizer::Policy {
        max_spot_share: a.max_spot_share,
        max_pool_share: a.max_pool_share,
        spot_overhead_factor: a.spot_overhead,
        integer_hourly: a.integer_hourly,
        budget: a.budget,
        min_gpu_memory_gib: a.min_gpu_memory,
        ..optimizer::Policy::default()
    };
    Ok(Input::Catalog {
        demand,
        policy,
        gpus: a.gpus.clone(),
        clouds: a.clouds.clone(),
        regions: a.regions.clone(),
    })
}

/// Checks a number flag against its allowed range.
///
/// # Errors
/// A refusal naming the flag and the range.
fn in_range(flag: &str, value: f64, min: f64, max: f64) -> Result<f64, String> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "{flag}: {value} is out of range; allowed: {min} to {max}"
        ))
    }
}

/// The plan for people: purchases, the hourly blend, costs and savings.
fn plan_report(r: &PlanResult) -> String {
    let mut out = String::new();
    let name = r.name.as_deref().unwrap_or("plan");
    let _ = writeln!(
        out,
        "{name}: {} ({} mode, {} hours)",
        r.status, r.mode, r.horizon_hours
    );
    if let Some(inf) = &r.infeasibility {
        let _ = writeln!(out, "infeasible: {inf}");
        return out;
    }
    if r.reserved.is_empty() {
        let _ = writeln!(out, "\nNo reserved purchases.");
    } else {
        let header = [
            "OFFER",
            "OPTION",
            "COUNT",
            "GPUS",
            "USD/H EFFECTIVE",
            "BREAK-EVEN UTIL",
            "COMMITMENT USD",
        ];
        let rows: Vec<[String; 7]> = r
            .reserved
            .iter()
            .map(|e| {
                [
                    e.offer.clone(),
                    e.option.clone(),
                    format!("{}", e.count),
                    format!("{}", e.gpus),
                    format!("{:.4}", e.effective_hourly_price),
                    e.break_even_utilization
                        .map_or_else(|| "-".to_owned(), |u| format!("{:.1}%", u * 100.0)),
                    format!("{:.2}", e.commitment_liability),
                ]
            })
            .collect();
        let _ = write!(
            out,
            "\nReserved purchases\n{}",
            render_table(&header, &rows, &[2, 3, 4, 5, 6])
        );
    }
    let blend = |kind: &str, series: &BTreeMap<String, Vec<f64>>| -> Vec<[String; 4]> {
        series
            .iter()
            .map(|(offer, values)| {
                let mut sorted = values.clone();
                sorted.sort_by(f64::total_cmp);
                let median = sorted[sorted.len() / 2];
                let peak = sorted.last().copied().unwrap_or(0.0);
                [
                    offer.clone(),
                    kind.to_owned(),
                    format!("{median:.2}"),
                    format!("{peak:.2}"),
                ]
            })
            .collect()
    };
    let mut rows = blend("spot", &r.hourly.spot_instances);
    rows.extend(blend("on_demand", &r.hourly.on_demand_instances));
    if !rows.is_empty() {
        let _ = write!(
            out,
            "\nHourly instances\n{}",
            render_table(&["OFFER", "KIND", "MEDIAN", "PEAK"], &rows, &[2, 3])
        );
    }
    if let (Some(total), Some(c)) = (r.objective, &r.cost_breakdown) {
        let _ = writeln!(
            out,
            "\nCost over the horizon: {total:.2} USD (reserved {:.2}, spot {:.2}, on-demand {:.2})",
            c.reserved, c.spot, c.on_demand
        );
    }
    match (r.baseline_on_demand_cost, r.savings, r.savings_pct) {
        (Some(b), Some(s), Some(p)) => {
            let _ = writeln!(
                out,
                "All on-demand would cost {b:.2} USD: this plan saves {s:.2} USD ({p:.1}%)."
            );
        }
        (None, _, _) => {
            let _ = writeln!(out, "On-demand alone cannot cover this demand.");
        }
        _ => {}
    }
    out
}

async fn run_alerts(config: &Config, command: AlertsCommand) -> Result<ExitCode, CliError> {
    match command {
        AlertsCommand::List { json } => {
            let store = open_store(config)?;
            let states = store
                .alert_states(None)
                .map_err(|e| CliError::Failed(e.into()))?;
            if json {
                let rules: Vec<serde_json::Value> = config
                    .alerts
                    .rules
                    .iter()
                    .map(|r| {
                        let keys: Vec<_> = states.iter().filter(|s| s.rule == r.name).collect();
                        json!({"name": r.name, "kind": r.kind.as_str(), "channels": r.channels, "state": keys})
                    })
                    .collect();
                print_json(&rules)?;
            } else if config.alerts.rules.is_empty() {
                eprintln!("No alert rules are configured ([[alerts.rules]]).");
            } else {
                let rows: Vec<[String; 5]> = config
                    .alerts
                    .rules
                    .iter()
                    .map(|r| {
                        let keys: Vec<_> = states.iter().filter(|s| s.rule == r.name).collect();
                        let fired = keys.iter().filter(|s| s.fired).count();
                        let last = keys.iter().filter_map(|s| s.last_fired_at).max();
                        [
                            r.name.clone(),
                            r.kind.as_str().to_owned(),
                            r.channels.join(","),
                            format!("{fired}/{}", keys.len()),
                            last.map_or_else(
                                || "-".to_owned(),
                                |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
                            ),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    render_table(
                        &["RULE", "KIND", "CHANNELS", "FIRED/KEYS", "LAST FIRED"],
                        &rows,
                        &[3]
                    )
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        AlertsCommand::History { limit, json } => {
            let store = open_store(config)?;
            let messages = store
                .message_history(limit)
                .map_err(|e| CliError::Failed(e.into()))?;
            if json {
                print_json(&messages)?;
            } else {
                let rows: Vec<[String; 6]> = messages
                    .iter()
                    .map(|m| {
                        [
                            m.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
                            m.rule.clone(),
                            m.channel.clone(),
                            m.delivered_at.map_or_else(
                                || "pending".to_owned(),
                                |t| format!("delivered {}", t.format("%H:%M:%S")),
                            ),
                            m.attempts.to_string(),
                            m.payload["message"].as_str().unwrap_or("").to_owned(),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    render_table(
                        &["QUEUED", "RULE", "CHANNEL", "STATUS", "TRIES", "MESSAGE"],
                        &rows,
                        &[4]
                    )
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        AlertsCommand::Test { rule } => {
            let Some(r) = config.alerts.rules.iter().find(|r| r.name == rule) else {
                let names: Vec<&str> = config
                    .alerts
                    .rules
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect();
                return Err(CliError::BadInput(anyhow::anyhow!(
                    "no alert rule `{rule}`; configured: {}",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                )));
            };
            let channels = deliver::channels(&config.alerts.channels)
                .map_err(|e| CliError::BadInput(anyhow::anyhow!(e)))?;
            let http =
                deliver::client(config.alerts.timeout).map_err(|e| CliError::Failed(e.into()))?;
            let payload = json!({
                "rule": r.name, "kind": r.kind.as_str(), "key": "test", "value": 0,
                "message": format!("test message for rule {} from gpuplan", r.name),
                "fired_at": Utc::now(), "test": true,
                "idempotency_key": format!("gpuplan-test-{}", Utc::now().timestamp_micros()),
            });
            let mut failed = 0;
            for name in &r.channels {
                let outcome = match channels.get(name) {
                    Some(ch) => deliver::send(&http, ch, &payload).await,
                    None => Err("not configured".to_owned()),
                };
                match outcome {
                    Ok(()) => println!("{name}: sent"),
                    Err(e) => {
                        failed += 1;
                        println!("{name}: FAILED: {e}");
                    }
                }
            }
            Ok(if failed > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

fn print_json<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let text =
        serde_json::to_string_pretty(value).context("Failed to encode the output as JSON.")?;
    println!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_short_and_readable() {
        let now = Utc::now();
        assert_eq!(age(now, now - chrono::Duration::seconds(30)), "30s");
        assert_eq!(age(now, now - chrono::Duration::minutes(30)), "30m");
        assert_eq!(age(now, now - chrono::Duration::hours(5)), "5h");
        assert_eq!(age(now, now - chrono::Duration::days(3)), "3d");
    }
}
