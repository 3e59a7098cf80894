//! `gpuplan plan`: a problem file, or demand or usage against the catalog,
//! through the one plan pipeline ([`crate::plan`]).

use super::*;
use crate::plan::Planned;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["problem", "demand", "usage", "usage_from_bills"])))]
pub struct PlanArgs {
    /// A problem file in the planning-model JSON format.
    #[arg(long)]
    problem: Option<PathBuf>,
    /// Hourly GPU demand (CSV `hour,gpus` or `timestamp,gpus`), or one column
    /// per class with --classes (`hour,train,infer`); offers come from the catalog.
    #[arg(long)]
    demand: Option<PathBuf>,
    /// With --demand: the classes of its columns (TOML `[classes.<id>]`, or
    /// JSON): per class its filters, perf map and share overrides.
    #[arg(long, requires = "demand")]
    classes: Option<PathBuf>,
    /// Reservations already held (CSV `offer,option,count,remaining_hours`);
    /// replaces `[planner.owned]` for this plan.
    #[arg(long, conflicts_with = "problem")]
    owned: Option<PathBuf>,
    /// Past hourly GPU usage (same CSV format): demand is forecast from it
    /// (hour-of-week profile with trend); offers come from the catalog.
    #[arg(long)]
    usage: Option<PathBuf>,
    /// Forecast demand from the bills' hourly GPU-hours (every price kind:
    /// what ran, however it was bought) instead of a usage CSV.
    #[arg(long)]
    usage_from_bills: bool,
    /// With --usage-from-bills: only this team's usage (repeatable).
    #[arg(long = "team", requires = "usage_from_bills")]
    teams: Vec<String>,
    /// Count the reservations the bills show as owned (those of a known
    /// instance type and region); savings plans and other spend-based
    /// commitments are listed as held but not modelled.
    #[arg(long, conflicts_with = "problem")]
    owned_from_bills: bool,
    /// With --usage-from-bills: days of complete bills to forecast from.
    #[arg(long, default_value_t = crate::plan::from_bills::DEFAULT_DAYS, requires = "usage_from_bills")]
    usage_days: u32,
    /// With --usage or --usage-from-bills: hours to forecast and plan.
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
    /// With --usage or --usage-from-bills: plan against this many demand
    /// scenarios bootstrapped from the forecast's out-of-sample errors
    /// (planning model version 3), with a risk frontier.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
    scenarios: Option<u64>,
    /// Seed of the scenario generator: the same seed gives the same scenarios.
    #[arg(long, default_value_t = 1, requires = "scenarios")]
    scenario_seed: u64,
    /// With --usage or --usage-from-bills: folds of the rolling-origin backtest
    /// the ranges and scenarios are calibrated on.
    #[arg(long, default_value_t = crate::plan::forecast::DEFAULT_FOLDS as u64,
          value_parser = clap::value_parser!(u64).range(1..=100))]
    folds: u64,
    /// Levels of the demand ranges to report, e.g. `0.8,0.9` [default: 0.8].
    #[arg(long, value_delimiter = ',')]
    range_levels: Vec<f64>,
    /// Weight of the tail in the objective `(1−λ)·mean + λ·CVaR`, 0..1 (the
    /// primary plan's λ) [default: 0].
    #[arg(long)]
    risk_lambda: Option<f64>,
    /// Level of the CVaR tail, 0..1 (0.95: the worst 5% of scenarios).
    #[arg(long)]
    risk_beta: Option<f64>,
    /// The λ values of the risk frontier, comma-separated [default: 0,0.25,0.5,0.75,1].
    #[arg(long, value_delimiter = ',')]
    frontier: Vec<f64>,
    /// What the risk is measured on: `cost` or `savings_shortfall`.
    #[arg(long)]
    risk_measure: Option<String>,
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
    /// Countries to buy in, ISO codes (`DE,FR`; repeatable, comma-separated):
    /// a region's country as `gpuplan regions` lists it.
    #[arg(long, value_delimiter = ',')]
    countries: Vec<String>,
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
    /// Whole spot and on-demand instances per hour (exact and fast for one
    /// class; with several classes slow at scale).
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

/// Why a plan stopped before it was solved: an input refused (printed as
/// JSON, exit 2) or a failure.
enum Stop {
    Refused(String),
    Failed(CliError),
}

impl From<CliError> for Stop {
    fn from(e: CliError) -> Self {
        Self::Failed(e)
    }
}

impl From<String> for Stop {
    fn from(message: String) -> Self {
        Self::Refused(message)
    }
}

/// What a plan was made from, beside its problem: shown with its result.
#[derive(Default)]
struct Sources {
    forecast: Option<forecast::Forecast>,
    bills_usage: Option<crate::plan::from_bills::BillsUsage>,
    ranges: Option<RangesInfo>,
    owned_from_bills: Option<crate::plan::owned_from_bills::FromBills>,
}

pub(super) async fn run_plan(
    config: &Config,
    args: &PlanArgs,
    progress: &Progress,
) -> Result<ExitCode, CliError> {
    match plan(config, args, progress).await {
        Ok(code) => Ok(code),
        Err(Stop::Refused(message)) => {
            println!("{}", json!({"status": "error", "error": message}));
            Ok(ExitCode::from(2))
        }
        Err(Stop::Failed(e)) => Err(e),
    }
}

async fn plan(config: &Config, args: &PlanArgs, progress: &Progress) -> Result<ExitCode, Stop> {
    let mut scenario_keys = check_flags(args)?;
    let file = match &args.problem {
        Some(path) => Some(read_problem(path)?),
        None => None,
    };
    if let Some((shown, doc)) = &file
        && optimizer::job::is_job(doc)
    {
        if let Some(flag) = [(args.save, "--save"), (args.relax, "--relax")]
            .iter()
            .find_map(|(set, flag)| set.then_some(*flag))
        {
            return Err(Stop::Refused(format!(
                "{flag}: applies to demand plans (schema versions 1 to 3), not to the job in {shown}"
            )));
        }
        let overrides = plan_overrides(args)?;
        return Ok(super::job::plan_file(
            config,
            shown,
            doc,
            overrides,
            args.solver,
            args.json,
            progress,
        )
        .await?);
    }
    let mut sources = Sources::default();
    if args.owned_from_bills {
        let pool = open_store(config)?;
        sources.owned_from_bills = Some(
            pool.read(crate::plan::owned_from_bills::owned_from_bills)
                .map_err(|e| CliError::Failed(e.into()))?,
        );
    }
    let found = sources
        .owned_from_bills
        .as_ref()
        .map(|f| f.owned.clone())
        .unwrap_or_default();
    // The progress line is named as the plan will be.
    let mut label = args.catalog.name.clone();
    let (name, input) = match (file, &args.demand) {
        (Some((shown, mut doc)), _) => {
            label = doc["name"].as_str().unwrap_or("plan").to_owned();
            (None, problem_input(&shown, &mut doc)?)
        }
        (None, Some(path)) => {
            let classes = inputs::read_catalog_classes(path, args.classes.as_deref())
                .map_err(|e| e.to_string())?;
            (
                Some(args.catalog.name.clone()),
                catalog_input(classes, found, args)?,
            )
        }
        (None, None) => {
            let demand = forecast_demand(config, args, &mut scenario_keys, &mut sources)?;
            let classes = vec![optimizer::DemandClass::default_class(demand)];
            (
                Some(args.catalog.name.clone()),
                catalog_input(classes, found, args)?,
            )
        }
    };
    let overrides = plan_overrides(args)?;
    // A problem file solved without saving needs no catalog.
    let needs_store = args.save || matches!(input, Input::Catalog { .. });
    let pool = if needs_store {
        Some(Arc::new(
            Pool::open(&config.store.location, 1).map_err(|e| CliError::Failed(e.into()))?,
        ))
    } else {
        None
    };
    let service = PlanService::new(pool, &config.planner, config.source_intervals(Utc::now()));
    let (_line, sink, search) = solve_line(progress, &label);
    let request = PlanRequest {
        name,
        input,
        overrides,
        relax: args.relax,
        backend: args.solver,
        save: args.save,
        wait: true,
        fence: None,
        scenario_keys,
        progress: Some(sink),
        search: Some(search),
    };
    let prepared = match service.prepare(&request).await {
        Ok(p) => p,
        Err(PlanError::Invalid(e)) => return Err(Stop::Refused(e.to_string())),
        Err(e) => return Err(CliError::Failed(e.into()).into()),
    };
    if let Some(path) = &args.catalog.write_problem {
        let doc = prepared.problem.to_json();
        std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap_or_default())
            .with_context(|| format!("Failed to write {}.", path.display()))
            .map_err(CliError::from)?;
    }
    let planned = match service.finish(prepared, &request).await {
        Ok(p) => p,
        Err(PlanError::Solve(e)) => {
            let kind = match e {
                OptimizeError::TimeLimit(_) => "time_limit",
                OptimizeError::MemoryLimit(_) => "memory_limit",
                OptimizeError::Solver(_) => "solver",
            };
            println!(
                "{}",
                json!({"status": "error", "kind": kind, "error": e.to_string()})
            );
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(CliError::Failed(e.into()).into()),
    };
    if args.json {
        print_plan_json(&planned, &sources)?;
    } else {
        print_plan_text(&planned, &sources);
    }
    Ok(plan_exit(&planned.result))
}

/// Checks the flags no other step reads; returns the risk keys they set.
fn check_flags(args: &PlanArgs) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let keys = risk_keys(args)?;
    if let Some(l) = args.range_levels.iter().find(|l| !(**l > 0.0 && **l < 1.0)) {
        return Err(format!(
            "--range-levels: {l} is out of range; levels are strictly between 0 and 1"
        ));
    }
    if args.scenarios.is_some() && args.usage.is_none() && !args.usage_from_bills {
        return Err(
            "--scenarios: needs --usage or --usage-from-bills, whose out-of-sample errors the scenarios are made from"
                .to_owned(),
        );
    }
    Ok(keys)
}

/// A problem file's name as shown in errors, and its JSON.
fn read_problem(path: &Path) -> Result<(String, serde_json::Value), String> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let doc = serde_json::from_str(&text).map_err(|e| format!("{shown}: not JSON: {e}"))?;
    Ok((shown, doc))
}

/// A demand problem file (schema versions 1 to 3), validated.
fn problem_input(shown: &str, doc: &mut serde_json::Value) -> Result<Input, String> {
    crate::plan::work::resolve_problem(doc).map_err(|e| format!("{shown}: {e}"))?;
    Problem::from_json(doc)
        .map(Input::Problem)
        .map_err(|e| format!("{shown}: {e}"))
}

/// The demand to plan, forecast from past usage (the usage CSV or the
/// bills), and with `--scenarios` the generator of its scenarios from the
/// forecast's out-of-sample errors. What it rests on goes to `sources`.
fn forecast_demand(
    config: &Config,
    args: &PlanArgs,
    scenario_keys: &mut serde_json::Map<String, serde_json::Value>,
    sources: &mut Sources,
) -> Result<Vec<f64>, Stop> {
    if !(1..=optimizer::MAX_HORIZON_HOURS).contains(&args.horizon_hours) {
        return Err(Stop::Refused(format!(
            "--horizon-hours: {} is out of range; allowed: 1 to {}",
            args.horizon_hours,
            optimizer::MAX_HORIZON_HOURS
        )));
    }
    let (usage, label) = match &args.usage {
        Some(path) => (
            inputs::read_demand(path).map_err(|e| e.to_string())?,
            path.display().to_string(),
        ),
        None => {
            let u = usage_from_bills(config, args)?;
            let demand = u.demand.clone();
            sources.bills_usage = Some(u);
            (demand, "the bills".to_owned())
        }
    };
    let f = forecast::forecast(&usage, args.horizon_hours).map_err(|e| format!("{label}: {e}"))?;
    let rolling = forecast::rolling(&usage, args.horizon_hours, args.folds as usize);
    let demand = match (&rolling, args.scenarios) {
        (Ok(r), Some(count)) => {
            let mut demand = json!({"residuals": {"default": r.errors}});
            if !args.range_levels.is_empty() {
                demand["range_levels"] = json!(args.range_levels);
            }
            scenario_keys.insert(
                "scenario_generator".to_owned(),
                json!({"seed": args.scenario_seed, "count": count, "demand": demand}),
            );
            r.point.clone()
        }
        (Err(e), Some(_)) => return Err(Stop::Refused(format!("--scenarios: {label}: {e}"))),
        _ => f.gpus.clone(),
    };
    sources.ranges = rolling
        .ok()
        .map(|r| RangesInfo::new(&r, &demand, &args.range_levels));
    sources.forecast = Some(f);
    Ok(demand)
}

/// `--usage-from-bills`: the hourly usage of the last complete days.
fn usage_from_bills(
    config: &Config,
    args: &PlanArgs,
) -> Result<crate::plan::from_bills::BillsUsage, Stop> {
    if !(1..=3660).contains(&args.usage_days) {
        return Err(Stop::Refused(format!(
            "--usage-days: {} is out of range; allowed: 1 to 3660",
            args.usage_days
        )));
    }
    let pool = open_store(config)?;
    let read = pool.read(|s| {
        crate::plan::from_bills::usage_from_bills(
            s,
            &args.teams,
            &args.catalog.gpus,
            args.usage_days,
        )
    });
    match read {
        Ok(u) => Ok(u),
        Err(crate::plan::from_bills::DemandError::Store(e)) => {
            Err(CliError::Failed(e.into()).into())
        }
        Err(e) => Err(Stop::Refused(format!("--usage-from-bills: {e}"))),
    }
}

fn print_plan_json(planned: &Planned, sources: &Sources) -> Result<(), CliError> {
    let mut doc = planned.to_json().context("Failed to encode the result.")?;
    if let Some(f) = &sources.forecast {
        doc["forecast"] = json!(f);
    }
    if let Some(u) = &sources.bills_usage {
        doc["forecast"]["usage"] = json!(u);
    }
    if let Some(r) = &sources.ranges {
        doc["forecast"]["ranges"] = json!(r.ranges);
        doc["forecast"]["range_coverage"] = json!(r.coverage);
    }
    if let Some(f) = &sources.owned_from_bills {
        doc["owned_from_bills"] = json!(f);
    }
    print_json(&doc)
}

fn print_plan_text(planned: &Planned, sources: &Sources) {
    let stale = planned.prepared.stale_sources.as_ref();
    if let Some(stale) = stale.filter(|s| !s.is_empty()) {
        println!(
            "warning: prices from {} are stale (older than twice their sync interval)",
            stale.join(", ")
        );
    }
    if let Some(f) = &sources.forecast {
        print_forecast(f, sources);
    }
    if let Some(f) = &sources.owned_from_bills {
        print!("{}", held_report(f));
    }
    for skipped in &planned.prepared.owned_skipped {
        println!("Owned, not in this plan: {skipped}");
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
}

/// The forecast a plan was made from: where its usage came from, its
/// method and backtest, and its calibrated ranges.
fn print_forecast(f: &forecast::Forecast, sources: &Sources) {
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
    if let Some(u) = &sources.bills_usage {
        println!(
            "Usage from the bills: {} h from {} to {} (the last complete hour){}{}",
            u.hours,
            u.from.format("%Y-%m-%d %H:%M"),
            u.until.format("%Y-%m-%d %H:%M"),
            if u.teams.is_empty() {
                String::new()
            } else {
                format!(", teams {}", u.teams.join(", "))
            },
            if u.gpus.is_empty() {
                String::new()
            } else {
                format!(", GPUs {}", u.gpus.join(", "))
            },
        );
    }
    println!(
        "Forecast: {} h by {}, trend {:+.4} GPUs/h; {backtest}",
        f.gpus.len(),
        f.method,
        f.trend_per_hour
    );
    if let Some(r) = &sources.ranges {
        print!("{}", r.report());
    }
}

/// The forecast's calibrated ranges (docs/planning-model.md §11.7) around
/// the demand planned, with how often they held out of sample.
struct RangesInfo {
    ranges: optimizer::Ranges,
    /// `(level, leave-one-fold-out coverage)`.
    coverage: Vec<(f64, Option<f64>)>,
    folds: usize,
}

impl RangesInfo {
    fn new(r: &forecast::Rolling, demand: &[f64], levels: &[f64]) -> Self {
        let levels = if levels.is_empty() {
            vec![0.8]
        } else {
            levels.to_vec()
        };
        let paths = optimizer::DemandPaths {
            residuals: vec![optimizer::Residuals {
                class: 0,
                errors: r.errors.clone(),
            }],
            block_hours: 24,
            bucket_hours: None,
            level: levels[0],
            range_levels: levels.clone(),
        };
        let ranges = paths.ranges(&["default".to_owned()], &[demand.to_vec()]);
        Self {
            coverage: levels.iter().map(|l| (*l, r.coverage(*l))).collect(),
            ranges,
            folds: r.errors.len(),
        }
    }

    fn report(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let Some(class) = self.ranges.classes.get("default") else {
            return out;
        };
        for (band, (_, coverage)) in class.bands.iter().zip(&self.coverage) {
            let width = match band.half_width.first().copied().flatten() {
                Some(q) => format!("±{q:.2} GPUs"),
                None => "unbounded (too few backtest errors for this level)".to_owned(),
            };
            let held = coverage.map_or_else(
                || "coverage not measurable".to_owned(),
                |c| format!("held {:.1}% of backtest hours out of fold", c * 100.0),
            );
            let _ = writeln!(
                out,
                "Range at {:.0}%: {width}, from {} out-of-sample errors ({} folds); {held}",
                band.level * 100.0,
                class.scores.iter().sum::<usize>(),
                self.folds
            );
        }
        out
    }
}

/// The `risk` object the risk flags make, as planning-model keys.
fn risk_keys(args: &PlanArgs) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut risk = serde_json::Map::new();
    if let Some(l) = args.risk_lambda {
        risk.insert("lambda".to_owned(), json!(l));
    }
    if let Some(b) = args.risk_beta {
        risk.insert("beta".to_owned(), json!(b));
    }
    if !args.frontier.is_empty() {
        risk.insert("frontier".to_owned(), json!(args.frontier));
    }
    if let Some(m) = &args.risk_measure {
        if m != "cost" && m != "savings_shortfall" {
            return Err(format!(
                "--risk-measure: `{m}` is not a measure; use cost or savings_shortfall"
            ));
        }
        risk.insert("measure".to_owned(), json!(m));
    }
    let mut keys = serde_json::Map::new();
    if !risk.is_empty() {
        keys.insert("risk".to_owned(), serde_json::Value::Object(risk));
    }
    Ok(keys)
}

/// What `--owned-from-bills` found: the reservations counted as owned, and
/// every commitment held but not modelled, with its hourly amount.
fn held_report(f: &crate::plan::owned_from_bills::FromBills) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if f.modelled.is_empty() && f.not_modelled.is_empty() {
        out.push_str("Owned from the bills: the bills show no commitment still held.\n");
    }
    for m in &f.modelled {
        let _ = writeln!(
            out,
            "Owned from the bills: {} x {} ({}), remaining term: {}",
            m.count, m.offer, m.commitment, m.remaining
        );
    }
    for h in &f.not_modelled {
        let _ = writeln!(
            out,
            "Held, not modelled: {} ({}, {}): {:.2} {}/hour; {}",
            h.commitment,
            h.kind.as_deref().unwrap_or("commitment"),
            h.provider,
            h.hourly_amount,
            h.currency,
            h.why
        );
    }
    out
}

/// 0 for a plan or a proven infeasibility; 1 for a plan the time limit cut
/// short, which is printed but not proven optimal.
fn plan_exit(result: &PlanResult) -> ExitCode {
    if result.status == "time_limit" {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The flags that override `[planner]` defaults, each checked.
fn plan_overrides(args: &PlanArgs) -> Result<Overrides, String> {
    let a = &args.catalog;
    // The pipeline checks these too; here they are named by their flags.
    for (flag, value) in [
        ("--restart-hours", a.restart_hours),
        ("--checkpoint-hours", a.checkpoint_hours),
    ] {
        if let Some(v) = value {
            settings::check_hours(flag, v).map_err(|e| e.to_string())?;
        }
    }
    if let Some(t) = args.time_limit_secs {
        settings::check_time_limit("--time-limit-secs", t).map_err(|e| e.to_string())?;
    }
    let spot_window = a
        .spot_window
        .as_deref()
        .map(|w| catalog::window_since(w).map_err(|e| format!("--spot-window: {e}")))
        .transpose()?;
    Ok(Overrides {
        time_limit: args.time_limit_secs,
        spot_window,
        restart_hours: a.restart_hours,
        checkpoint_hours: a.checkpoint_hours,
    })
}

/// The catalog input of `--demand` / `--usage`: the policy and offer filters
/// of the flags, each checked, and `--owned`.
fn catalog_input(
    classes: Vec<optimizer::DemandClass>,
    found: Vec<optimizer::Owned>,
    args: &PlanArgs,
) -> Result<Input, String> {
    let a = &args.catalog;
    let owned = match &args.owned {
        Some(path) => Some(inputs::read_owned(path).map_err(|e| e.to_string())?),
        None => None,
    };
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
        classes,
        owned,
        found,
        policy,
        gpus: a.gpus.clone(),
        clouds: a.clouds.clone(),
        regions: a.regions.clone(),
        countries: a.countries.clone(),
    })
}

/// What a solve reported last.
#[derive(Debug, Clone, Copy)]
enum Heard {
    /// A risk plan's decomposition, after a master solve.
    Risk(crate::optimizer::Progress),
    /// A MIP's branch-and-bound, between slices of its search.
    Search(crate::optimizer::Search),
}

/// The progress line of a solve, and the sinks that feed it what the solver
/// reports as it goes: a MIP its nodes, bound and gap, a risk plan's
/// decomposition its bound, best plan and gap.
fn solve_line(
    progress: &Progress,
    name: &str,
) -> (
    super::progress::Line,
    crate::optimizer::ProgressSink,
    crate::optimizer::SearchSink,
) {
    let latest = Arc::new(std::sync::Mutex::new(None));
    let hear = move |latest: &std::sync::Mutex<Option<Heard>>, heard: Heard| {
        *latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(heard);
    };
    let line = progress.line(name, {
        let latest = latest.clone();
        move || {
            let latest = latest
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            latest.map_or_else(|| "solving".to_owned(), solve_status)
        }
    });
    let risk = crate::optimizer::ProgressSink(Arc::new({
        let latest = latest.clone();
        move |p: &crate::optimizer::Progress| hear(&latest, Heard::Risk(*p))
    }));
    let search = crate::optimizer::SearchSink(Arc::new(move |s: &crate::optimizer::Search| {
        hear(&latest, Heard::Search(*s));
    }));
    (line, risk, search)
}

fn solve_status(heard: Heard) -> String {
    let percent = |g: f64| format!("{:.3}%", 100.0 * g);
    match heard {
        Heard::Risk(p) => {
            let best = p.best.map_or("none yet".to_owned(), |b| format!("{b:.2}"));
            let gap = p
                .gap
                .map_or(String::new(), |g| format!(", gap {}", percent(g)));
            format!(
                "solving λ {}: bound {:.2}, best plan {best}{gap}, {} master solves",
                p.lambda, p.bound, p.iteration,
            )
        }
        Heard::Search(s) => {
            let bound = s.bound.map_or("none yet".to_owned(), |b| format!("{b:.2}"));
            let gap = s.gap.map_or("none yet".to_owned(), percent);
            format!("solving: nodes {}, bound {bound}, gap {gap}", s.nodes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_solve_line_gives_the_bound_the_best_plan_and_the_gap() {
        let mut p = crate::optimizer::Progress {
            lambda: 0.5,
            iteration: 12,
            bound: 27_400.126,
            best: Some(27_517.96),
            gap: Some(0.004_28),
        };
        assert_eq!(
            solve_status(Heard::Risk(p)),
            "solving λ 0.5: bound 27400.13, best plan 27517.96, gap 0.428%, 12 master solves"
        );
        (p.best, p.gap) = (None, None);
        assert_eq!(
            solve_status(Heard::Risk(p)),
            "solving λ 0.5: bound 27400.13, best plan none yet, 12 master solves"
        );
        let mut s = crate::optimizer::Search {
            nodes: 1200,
            bound: Some(98.765),
            gap: Some(0.0123),
        };
        assert_eq!(
            solve_status(Heard::Search(s)),
            "solving: nodes 1200, bound 98.77, gap 1.230%"
        );
        (s.bound, s.gap) = (None, None);
        assert_eq!(
            solve_status(Heard::Search(s)),
            "solving: nodes 1200, bound none yet, gap none yet"
        );
    }
}
