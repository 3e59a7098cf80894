//! `gpuplan bills sync|status`, `usage`, `spend`, `commitments` and
//! `coverage`: the buyer's own fleet, from the billing exports.

use super::*;
use crate::bills::allocation;
use crate::bills::load::{self, LoadReport, SourceReport, StatusRow};
use crate::bills::query::{self, Params, QueryError};
use crate::store::bills::{CommitmentRecord, CoverageRow, SpendRow, UsageRow};

#[derive(Debug, Subcommand)]
pub enum BillsCommand {
    /// Load every enabled bill source (or the named one) now.
    Sync {
        /// Only this source (a `[bills.NAME]` of the config).
        #[arg(long)]
        source: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// What is loaded: one row per source, billing account and period.
    Status {
        #[command(flatten)]
        format: Format,
    },
}

/// The window flags every bill question takes.
#[derive(Debug, Args)]
pub struct WindowArgs {
    /// Start (inclusive): a date (2026-10-01) or an RFC 3339 time; default 30 days before --until.
    #[arg(long)]
    since: Option<String>,
    /// End (exclusive); default now.
    #[arg(long)]
    until: Option<String>,
    /// Only this provider: aws, azure, gcp, oci (repeatable).
    #[arg(long = "provider")]
    providers: Vec<String>,
    /// Most rows to print; more is refused (narrow the question).
    #[arg(long)]
    limit: Option<usize>,
    #[command(flatten)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    #[command(flatten)]
    window: WindowArgs,
    /// Grain: hour, day or month (UTC).
    #[arg(long)]
    by: Option<String>,
    /// Fields to group by, comma-separated: team, provider, region,
    /// instance_type, gpu_model, price_kind, account.
    #[arg(long)]
    group: Vec<String>,
    #[arg(long = "team")]
    teams: Vec<String>,
    #[arg(long = "gpu")]
    gpus: Vec<String>,
    /// on_demand, spot, reserved, savings_plan or commit (repeatable).
    #[arg(long = "price-kind")]
    price_kinds: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SpendArgs {
    #[command(flatten)]
    window: WindowArgs,
    /// Grain: day or month (UTC).
    #[arg(long)]
    by: Option<String>,
    /// Fields to group by, comma-separated: team, provider, account,
    /// service_category, charge_category.
    #[arg(long)]
    group: Vec<String>,
    #[arg(long = "team")]
    teams: Vec<String>,
    /// Only rows that name a GPU instance type or GPU SKU.
    #[arg(long)]
    gpu_only: bool,
}

#[derive(Debug, Args)]
pub struct CommitmentsArgs {
    #[command(flatten)]
    window: WindowArgs,
}

fn params(w: &WindowArgs) -> Params {
    Params {
        since: w.since.clone(),
        until: w.until.clone(),
        providers: w.providers.clone(),
        limit: w.limit,
        ..Params::default()
    }
}

fn bad_flag(e: QueryError) -> CliError {
    CliError::BadInput(anyhow::anyhow!(
        "--{}: {}",
        e.parameter.replace('_', "-"),
        e.message
    ))
}

fn store_failed(e: StoreError) -> CliError {
    match e {
        StoreError::TooLarge { .. } => CliError::BadInput(anyhow::anyhow!(
            "{e}: use a shorter window, a coarser --by, fewer --group fields or a larger --limit"
        )),
        e => CliError::Failed(e.into()),
    }
}

pub(super) async fn run_bills(
    config: &Config,
    command: BillsCommand,
    progress: &Progress,
) -> Result<ExitCode, CliError> {
    match command {
        BillsCommand::Sync { source, json } => {
            bills_sync(config, source.as_deref(), json, progress).await
        }
        BillsCommand::Status { format } => {
            let pool = open_store(config)?;
            let loads = pool
                .read(|s| s.bill_loads(None))
                .map_err(|e| CliError::Failed(e.into()))?;
            let rows = load::status_rows(loads, &config.bill_grace(), Utc::now());
            if format.print(&rows)? {
                return Ok(ExitCode::SUCCESS);
            }
            if rows.is_empty() {
                eprintln!("No bills are loaded yet; run `gpuplan bills sync`.");
            } else {
                print!("{}", status_table(&rows));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn bills_sync(
    config: &Config,
    only: Option<&str>,
    json: bool,
    progress: &Progress,
) -> Result<ExitCode, CliError> {
    let mut sources: Vec<_> = config.bills.values().filter(|s| s.enabled).collect();
    if let Some(name) = only {
        if !sources.iter().any(|s| s.source.name == name) {
            let known: Vec<&str> = sources.iter().map(|s| s.source.name.as_str()).collect();
            return Err(CliError::BadInput(anyhow::anyhow!(
                "--source {name}: no enabled bill source has that name; enabled: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        sources.retain(|s| s.source.name == name);
    }
    if sources.is_empty() {
        eprintln!("No bill sources are configured ([bills.NAME] in the config); nothing to load.");
    }
    let pool = Arc::new(open_store(config)?);
    let cluster = crate::daemon::duties::Cluster::new(pool.clone());
    let cancel = CancellationToken::new();
    let mut report = LoadReport::default();
    for s in sources {
        let duty = load::duty(&s.source.name);
        let Some(held) = cluster.take(&duty, Utc::now(), &cancel).await else {
            report.sources.push(SourceReport {
                source: s.source.name.clone(),
                errors: vec![format!(
                    "{duty}: another replica is loading this source now"
                )],
                ..SourceReport::default()
            });
            continue;
        };
        let tally = Arc::new(load::Tally::default());
        let line = progress.line(&s.source.name, {
            let tally = tally.clone();
            move || load_status(&tally)
        });
        let (pool, source, fence) = (pool.clone(), s.source.clone(), held.fence.clone());
        let done = tokio::task::spawn_blocking(move || {
            load::load_source(&pool, &source, Some(&fence), Utc::now(), &tally)
        })
        .await;
        drop(line);
        let done = done.map_err(|e| CliError::Failed(anyhow::anyhow!("the load stopped: {e}")))?;
        held.release().await;
        report.sources.push(done);
    }
    if json {
        print_json(&report)?;
    } else {
        print!("{}", sync_text(&report));
    }
    if report.failed() {
        eprintln!("Some bills failed to load; the periods they hold keep what was stored before.");
        Ok(ExitCode::from(1))
    } else {
        Ok(ExitCode::SUCCESS)
    }
}

/// A bill load's progress line.
fn load_status(t: &load::Tally) -> String {
    let get = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
    format!(
        "{} of {} files read ({}), {} rows, {} periods written",
        get(&t.files_read),
        get(&t.files),
        super::progress::bytes(get(&t.bytes)),
        get(&t.rows),
        get(&t.periods)
    )
}

fn sync_text(report: &LoadReport) -> String {
    let mut out = String::new();
    for s in &report.sources {
        let _ = writeln!(
            out,
            "{}: {} file(s) read, {} unchanged and skipped, {} left out by manifests ({:.2}s)",
            s.source, s.files_read, s.files_skipped, s.files_excluded, s.seconds
        );
        for p in &s.periods {
            let detail = match (&p.error, &p.deltas) {
                (Some(e), _) => format!("  {e}"),
                (None, Some(d)) => format!(
                    "  rows {:+}, billed {:+.2}, effective {:+.2} {}, GPU-hours {:+.2}",
                    d.rows, d.billed_cost, d.effective_cost, d.currency, d.gpu_hours
                ),
                (None, None) => String::new(),
            };
            let _ = writeln!(
                out,
                "  {} {}  {:<9} generation {}  rows {}  GPU rows {}{detail}",
                p.billing_account,
                p.billing_period,
                p.result,
                p.generation.map_or("-".to_owned(), |g| g.to_string()),
                p.rows,
                p.gpu_rows
            );
        }
        if !s.unmapped.is_empty() {
            let list: Vec<String> = s
                .unmapped
                .iter()
                .map(|(t, n)| format!("{t} ({n} rows)"))
                .collect();
            let _ = writeln!(
                out,
                "  unmapped GPU instance types (not counted as usage): {}",
                list.join(", ")
            );
        }
        for e in &s.errors {
            let _ = writeln!(out, "  error: {e}");
        }
    }
    out
}

fn money(v: f64) -> String {
    format!("{v:.2}")
}

fn status_table(rows: &[StatusRow]) -> String {
    let header = [
        "SOURCE",
        "ACCOUNT",
        "PERIOD",
        "STATE",
        "GEN",
        "ROWS",
        "BILLED",
        "EFFECTIVE",
        "CUR",
        "GPU-HOURS",
        "RESTATED",
        "CORRECTIONS",
        "LOADED",
    ];
    let body: Vec<[String; 13]> = rows
        .iter()
        .map(|r| {
            [
                r.source.clone(),
                r.billing_account.clone(),
                r.billing_period.clone(),
                r.state.clone(),
                r.generation.to_string(),
                r.rows.to_string(),
                money(r.billed_cost),
                money(r.effective_cost),
                r.currency.clone(),
                format!("{:.1}", r.gpu_hours),
                r.restatements.len().to_string(),
                r.corrections.len().to_string(),
                r.loaded_at
                    .get(..16)
                    .unwrap_or(&r.loaded_at)
                    .replace('T', " "),
            ]
        })
        .collect();
    render_table(&header, &body, &[4, 5, 6, 7, 9, 10, 11])
}

fn read_with<T>(
    config: &Config,
    f: impl FnOnce(&dyn Store) -> Result<T, StoreError>,
) -> Result<T, CliError> {
    let pool = open_store(config)?;
    pool.read(f).map_err(store_failed)
}

/// The grouped fields of a row, in the order the columns are printed.
fn field_cells(fields: &BTreeMap<String, String>, group: &[String]) -> Vec<String> {
    group
        .iter()
        .map(|g| fields.get(g).cloned().unwrap_or_default())
        .collect()
}

pub(super) fn run_usage(config: &Config, args: &UsageArgs) -> Result<ExitCode, CliError> {
    let p = Params {
        by: args.by.clone(),
        group: args.group.clone(),
        teams: args.teams.clone(),
        gpus: args.gpus.clone(),
        price_kinds: args.price_kinds.clone(),
        ..params(&args.window)
    };
    let q = query::usage(&p, Utc::now()).map_err(bad_flag)?;
    let rows: Vec<UsageRow> = read_with(config, |s| s.bill_usage(&q))?;
    if args.window.format.print(&rows)? {
        return Ok(ExitCode::SUCCESS);
    }
    let mut header: Vec<String> = vec!["START".into()];
    header.extend(q.group.iter().map(|g| g.to_ascii_uppercase()));
    let numbers = header.len();
    header.extend(["INSTANCE-HOURS", "GPU-HOURS", "BILLED", "EFFECTIVE", "CUR"].map(String::from));
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![bucket_label(r.start, q.by)];
            row.extend(field_cells(&r.fields, &q.group));
            row.extend([
                r.instance_hours
                    .map_or("-".to_owned(), |h| format!("{h:.2}")),
                format!("{:.2}", r.gpu_hours),
                money(r.billed_cost),
                money(r.effective_cost),
                r.currency.clone(),
            ]);
            row
        })
        .collect();
    print_rows(&header, &body, &(numbers..numbers + 4).collect::<Vec<_>>());
    Ok(ExitCode::SUCCESS)
}

pub(super) fn run_spend(config: &Config, args: &SpendArgs) -> Result<ExitCode, CliError> {
    let p = Params {
        by: args.by.clone(),
        group: args.group.clone(),
        teams: args.teams.clone(),
        gpu_only: args.gpu_only,
        ..params(&args.window)
    };
    let q = query::spend(&p, Utc::now()).map_err(bad_flag)?;
    let proportional = config.allocation.proportional;
    let rows: Vec<SpendRow> = read_with(config, |s| allocation::spend(s, &q, proportional))?;
    if args.window.format.print(&rows)? {
        return Ok(ExitCode::SUCCESS);
    }
    let by_team = q.group.iter().any(|g| g == "team");
    let mut header: Vec<String> = vec!["START".into()];
    header.extend(q.group.iter().map(|g| g.to_ascii_uppercase()));
    let numbers = header.len();
    header.extend(["BILLED", "EFFECTIVE"].map(String::from));
    if by_team {
        header.extend(["ALLOC-BILLED", "ALLOC-EFFECTIVE"].map(String::from));
    }
    header.push("CUR".into());
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![bucket_label(r.start, q.by)];
            row.extend(field_cells(&r.fields, &q.group));
            row.extend([money(r.billed_cost), money(r.effective_cost)]);
            if by_team {
                row.extend([
                    money(r.allocated_billed_cost.unwrap_or(r.billed_cost)),
                    money(r.allocated_effective_cost.unwrap_or(r.effective_cost)),
                ]);
            }
            row.push(r.currency.clone());
            row
        })
        .collect();
    let right: Vec<usize> = (numbers..numbers + if by_team { 4 } else { 2 }).collect();
    print_rows(&header, &body, &right);
    if by_team {
        for (currency, (un, total)) in allocation::unallocated_share(&rows) {
            if total != 0.0 {
                println!(
                    "unallocated: {} of {} {currency} effective ({:.1}%){}",
                    money(un),
                    money(total),
                    100.0 * un / total,
                    if proportional {
                        ", split across teams in the ALLOC columns"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `gpuplan budgets`: each budget's figures and thresholds.
pub(super) fn run_budgets(config: &Config, format: Format) -> Result<ExitCode, CliError> {
    let over_bills = config.bills_setup();
    let statuses = read_with(config, |s| {
        crate::bills::budgets::budget_statuses(s, &over_bills)
    })?;
    if format.print(&statuses)? {
        return Ok(ExitCode::SUCCESS);
    }
    if statuses.is_empty() {
        eprintln!("No budgets are configured; add [[budgets]] to the config.");
        return Ok(ExitCode::SUCCESS);
    }
    let header: Vec<String> = [
        "BUDGET",
        "PERIOD",
        "COMPLETE-TO",
        "BASIS",
        "AMOUNT",
        "ACTUAL",
        "%",
        "FORECAST",
        "%",
        "CUR",
        "THRESHOLDS",
    ]
    .map(String::from)
    .to_vec();
    let pct = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
    let figure = |v: Option<f64>| v.map_or("-".to_owned(), money);
    let body: Vec<Vec<String>> = statuses
        .iter()
        .map(|b| {
            let thresholds: Vec<String> = b
                .thresholds
                .iter()
                .map(|t| format!("{}% {}: {}", t.percent, t.on.as_str(), t.state))
                .collect();
            vec![
                b.name.clone(),
                b.period.clone().unwrap_or_else(|| "-".into()),
                b.complete_to.map_or_else(|| "-".into(), |d| d.to_string()),
                b.basis.as_str().to_owned(),
                money(b.amount),
                figure(b.actual),
                pct(b.actual_percent),
                figure(b.forecast),
                pct(b.forecast_percent),
                b.currency.clone(),
                thresholds.join(", "),
            ]
        })
        .collect();
    print!("{}", render_rows(&header, &body, &[4, 5, 6, 7, 8]));
    for b in &statuses {
        if let Some(why) = &b.waiting {
            println!("{}: no figures yet: {why}", b.name);
        }
        for o in &b.other_currencies {
            println!(
                "{}: {} {} of spend in scope is left out (not in {}, never converted)",
                b.name,
                money(match b.basis {
                    crate::bills::budgets::CostBasis::Effective => o.effective_cost,
                    crate::bills::budgets::CostBasis::Billed => o.billed_cost,
                }),
                o.currency,
                b.currency
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn run_commitments(
    config: &Config,
    args: &CommitmentsArgs,
) -> Result<ExitCode, CliError> {
    let (providers, since, until) =
        query::window_of(&params(&args.window), Utc::now()).map_err(bad_flag)?;
    let rows: Vec<CommitmentRecord> =
        read_with(config, |s| s.bill_commitments(&providers, since, until))?;
    if args.window.format.print(&rows)? {
        return Ok(ExitCode::SUCCESS);
    }
    let header = [
        "ID",
        "PROVIDER",
        "TYPE",
        "REGION",
        "INSTANCE-TYPE",
        "USED",
        "UNUSED",
        "UNIT",
        "UTILIZATION",
        "COVERED-GPU-HOURS",
    ];
    let q = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
    let body: Vec<[String; 10]> = rows
        .iter()
        .map(|c| {
            [
                c.id.clone(),
                c.provider.clone(),
                c.kind.clone().unwrap_or_else(|| "-".into()),
                c.region.clone().unwrap_or_else(|| "-".into()),
                c.instance_type.clone().unwrap_or_else(|| "-".into()),
                q(c.used_quantity),
                q(c.unused_quantity),
                c.unit.clone().unwrap_or_else(|| "-".into()),
                c.utilization
                    .map_or("-".to_owned(), |u| format!("{:.1}%", u * 100.0)),
                format!("{:.1}", c.covered_gpu_hours),
            ]
        })
        .collect();
    if body.is_empty() {
        eprintln!("No commitments in the bills of this window.");
    } else {
        print!("{}", render_table(&header, &body, &[5, 6, 8, 9]));
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn run_coverage(config: &Config, args: &CommitmentsArgs) -> Result<ExitCode, CliError> {
    let (providers, since, until) =
        query::window_of(&params(&args.window), Utc::now()).map_err(bad_flag)?;
    let rows: Vec<CoverageRow> = read_with(config, |s| s.bill_coverage(&providers, since, until))?;
    if args.window.format.print(&rows)? {
        return Ok(ExitCode::SUCCESS);
    }
    let header = [
        "PROVIDER",
        "REGION",
        "INSTANCE-TYPE",
        "ON-DEMAND-HOURS",
        "COVERED-HOURS",
        "COVERAGE",
    ];
    let body: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.provider.clone(),
                r.region.clone(),
                r.instance_type.clone(),
                format!("{:.1}", r.on_demand_hours),
                format!("{:.1}", r.covered_hours),
                r.coverage
                    .map_or("-".to_owned(), |c| format!("{:.1}%", c * 100.0)),
            ]
        })
        .collect();
    print!("{}", render_table(&header, &body, &[3, 4, 5]));
    Ok(ExitCode::SUCCESS)
}

fn bucket_label(t: DateTime<Utc>, by: Option<crate::store::bills::Bucket>) -> String {
    use crate::store::bills::Bucket;
    match by {
        Some(Bucket::Hour) => t.format("%Y-%m-%d %H:00").to_string(),
        Some(Bucket::Month) => t.format("%Y-%m").to_string(),
        _ => t.format("%Y-%m-%d").to_string(),
    }
}

fn print_rows(header: &[String], body: &[Vec<String>], right: &[usize]) {
    if body.is_empty() {
        eprintln!("No bill rows match.");
    } else {
        print!("{}", render_rows(header, body, right));
    }
}
