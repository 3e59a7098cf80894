//! Jobs (planning-model version 4) on the command line: `gpuplan job`, a
//! question answered from the catalog, and a version 4 problem file through
//! `gpuplan plan --problem`, with the summary people read.

use std::fmt::Write as _;

use super::*;
use crate::optimizer::job::{FrontierPoint, GangRun, JobProblem, JobResult, Plan, Ranked};
use crate::plan::JobAnswer;
use crate::plan::job_catalog::{DEFAULT_PERF, JobAsk};

/// `gpuplan job`: where and how to do this much work by the deadline.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// The work, in reference GPU-hours (an hour of one reference GPU).
    #[arg(long)]
    work: f64,
    /// The reference GPU, MODEL[/FORM] [default: H100-80GB/sxm].
    #[arg(long)]
    reference: Option<String>,
    /// The deadline: a duration from now (`48h`, `3d`) or an RFC 3339 time.
    #[arg(long)]
    deadline: String,
    /// The most the job may cost, USD.
    #[arg(long)]
    budget: Option<f64>,
    /// `bag` (independent tasks on any mix of offers) or `gang` (one cluster
    /// of one offer, running together).
    #[arg(long, default_value = "bag", value_parser = ["bag", "gang"])]
    shape: String,
    /// Gang: the exact total of GPUs.
    #[arg(long = "gpus", id = "total_gpus")]
    total_gpus: Option<f64>,
    /// Gang: the most nodes [default: enough for --gpus on the smallest
    /// instance, else 64].
    #[arg(long)]
    nodes_max: Option<u32>,
    /// Gang: throughput kept per doubling of nodes, in (0, 1] [default: 1].
    #[arg(long)]
    scaling: Option<f64>,
    /// Capabilities every GPU must have (`fp8,nvlink`), as `gpuplan gpus` lists them.
    #[arg(long, value_delimiter = ',')]
    needs: Vec<String>,
    /// Least memory per GPU, GiB.
    #[arg(long)]
    min_gpu_memory: Option<f64>,
    #[command(flatten)]
    offers: super::prices::OfferArgs,
    /// Countries to run in, ISO codes (`DE,FR,NL`).
    #[arg(long, value_delimiter = ',')]
    countries: Vec<String>,
    /// How to buy: `on_demand`, `spot`, `window` (comma-separated) [default: all].
    #[arg(long, value_delimiter = ',')]
    kinds: Vec<String>,
    /// What a GPU-hour is worth: a workload of `gpuplan perf`, or
    /// `spec:<format>` for a datasheet ratio [default: spec:bf16].
    #[arg(long)]
    perf: Option<String>,
    /// `cost`: the cheapest plan by the deadline; `time`: the earliest
    /// finish within the budget.
    #[arg(long, default_value = "cost", value_parser = ["cost", "time"])]
    objective: String,
    /// Price emissions at this many USD per tonne of CO2e.
    #[arg(long)]
    carbon_price: Option<f64>,
    /// Emit at most this many kg CO2e.
    #[arg(long)]
    max_kgco2e: Option<f64>,
    /// Hours between checkpoints [default: `planner.checkpoint_hours`].
    #[arg(long)]
    checkpoint_hours: Option<f64>,
    /// Restart and warm-up hours after an interruption [default: `planner.restart_hours`].
    #[arg(long)]
    restart_hours: Option<f64>,
    /// Give up (exit 3) when a solve is not proven within this many seconds.
    #[arg(long)]
    time_limit_secs: Option<f64>,
    /// Also write the problem built from the catalog to this file (a
    /// version 4 problem `gpuplan plan --problem` takes).
    #[arg(long)]
    write_problem: Option<PathBuf>,
    /// A name for the job.
    #[arg(long)]
    name: Option<String>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
}

/// Hours from `now` to `deadline`: a duration, or a time (whole hours
/// before it).
fn deadline_hours(deadline: &str, now: DateTime<Utc>) -> Result<u64, String> {
    let hours = match DateTime::parse_from_rfc3339(deadline.trim()) {
        Ok(at) => (at.with_timezone(&Utc) - now).num_seconds() as f64 / 3600.0,
        Err(_) => {
            catalog::parse_window(deadline)
                .map_err(|e| format!("--deadline: {e}, or an RFC 3339 time"))?
                .as_secs_f64()
                / 3600.0
        }
    };
    if hours < 1.0 {
        return Err(format!(
            "--deadline: {deadline} is less than an hour from now"
        ));
    }
    Ok(hours.floor() as u64)
}

pub(super) async fn run_job(
    config: &Config,
    args: JobArgs,
    progress: &Progress,
) -> Result<ExitCode, CliError> {
    let refused = |m: String| CliError::BadInput(anyhow::anyhow!(m));
    let deadline_hours = deadline_hours(&args.deadline, Utc::now()).map_err(refused)?;
    let ask = JobAsk {
        name: args.name,
        work: args.work,
        reference: args.reference,
        deadline_hours,
        shape: Some(args.shape),
        nodes_max: args.nodes_max,
        scaling: args.scaling,
        gpus: args.total_gpus,
        budget_usd: args.budget,
        needs: args.needs,
        min_gpu_memory_gib: args.min_gpu_memory,
        gpu: args.offers.gpus,
        clouds: args.offers.providers,
        regions: args.offers.regions,
        countries: args.countries,
        kinds: args.kinds,
        perf: args.perf,
        objective: Some(args.objective),
        carbon_usd_per_tonne: args.carbon_price,
        max_kgco2e: args.max_kgco2e,
        checkpoint_hours: args.checkpoint_hours,
        restart_hours: args.restart_hours,
    };
    let overrides = Overrides {
        time_limit: args.time_limit_secs,
        ..Overrides::default()
    };
    let pool =
        Arc::new(Pool::open(&config.store.location, 1).map_err(|e| CliError::Failed(e.into()))?);
    let service = PlanService::new(
        Some(pool),
        &config.planner,
        config.source_intervals(Utc::now()),
    );
    let line = progress.line(ask.name.as_deref().unwrap_or("job"), || SOLVING.to_owned());
    let answer = service.catalog_job(ask, &overrides, true).await;
    drop(line);
    let answer = match answer {
        Ok(a) => a,
        Err(PlanError::Invalid(e)) => {
            return Err(refused(format!("{}: {}", flag_of(&e.path), e.message)));
        }
        Err(e @ PlanError::Job(_)) => {
            println!("{}", json!({"status": "error", "error": e.to_string()}));
            return Ok(ExitCode::from(3));
        }
        Err(e) => return Err(CliError::Failed(e.into())),
    };
    if let Some(path) = &args.write_problem {
        let text = serde_json::to_string_pretty(&answer.built.doc).unwrap_or_default();
        std::fs::write(path, text)
            .with_context(|| format!("Failed to write {}.", path.display()))
            .map_err(CliError::Failed)?;
    }
    if args.json {
        let doc = answer.to_json().map_err(|e| CliError::Failed(e.into()))?;
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        print!("{}", answer_report(&answer));
    }
    Ok(ExitCode::SUCCESS)
}

/// A job's progress line: its solves report no bound as they go, so the
/// line says only that it is solving, and for how long.
const SOLVING: &str = "solving";

/// The flag that sets a field of the question or of the problem built
/// from it.
fn flag_of(path: &str) -> String {
    let field = path.strip_prefix("job.").unwrap_or(path);
    let flag = match field {
        "deadline_hours" | "hours" => "deadline",
        "budget_usd" => "budget",
        "min_gpu_memory_gib" => "min-gpu-memory",
        "carbon_usd_per_tonne" | "carbon.usd_per_tonne" => "carbon-price",
        "max_kgco2e" | "carbon.max_kg" => "max-kgco2e",
        "gpu" => "gpu",
        other => return format!("--{}", other.replace('_', "-")),
    };
    format!("--{flag}")
}

/// The answer, then its cost against finish time and what it rests on.
fn answer_report(a: &JobAnswer) -> String {
    let mut out = String::new();
    let stale = &a.built.stale_sources;
    if !stale.is_empty() {
        let _ = writeln!(
            out,
            "warning: prices from {} are stale (older than twice their sync interval)",
            stale.join(", ")
        );
    }
    out.push_str(&job_report(&a.result));
    if a.frontier.len() > 1 {
        let _ = write!(
            out,
            "\nCost against finish time:\n{}",
            frontier_table(&a.frontier)
        );
    }
    let basis = &a.built.perf_basis;
    let workload = basis["workload"].as_str().unwrap_or(DEFAULT_PERF);
    let how = if basis["estimate"] == true {
        "a datasheet ratio, an estimate"
    } else {
        "measured rows (see gpuplan perf)"
    };
    let _ = writeln!(
        out,
        "\nWork is rated by {workload} against {}: {how}.",
        basis["reference"].as_str().unwrap_or_default()
    );
    for (offer, why) in a.offer_basis() {
        let _ = writeln!(out, "{offer}: {}", why.as_str().unwrap_or_default());
    }
    out
}

/// `text` cut to `max` characters, with a marker when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(max - 1).collect();
        format!("{kept}…")
    }
}

fn frontier_table(points: &[FrontierPoint]) -> String {
    let rows: Vec<[String; 4]> = points
        .iter()
        .map(|p| {
            [
                p.deadline_hours.to_string(),
                format!("{:.2}", p.finish_hours),
                format!("{:.2}", p.total_usd),
                shorten(&p.plan, 72),
            ]
        })
        .collect();
    render_table(
        &["DEADLINE H", "FINISH H", "TOTAL USD", "PLAN"],
        &rows,
        &[0, 1, 2],
    )
}

/// `plan --problem FILE` with a job file: exit 0 with a result (optimal or
/// infeasible), 2 for bad input, 3 when the solver failed or ran out of
/// time (docs/planning-model.md, jobs).
pub(super) async fn plan_file(
    config: &Config,
    shown: &str,
    doc: &serde_json::Value,
    overrides: Overrides,
    backend: optimizer::Backend,
    json_out: bool,
    progress: &Progress,
) -> Result<ExitCode, String> {
    let problem = JobProblem::from_json(doc).map_err(|e| format!("{shown}: {e}"))?;
    let service = PlanService::new(None, &config.planner, config.source_intervals(Utc::now()));
    let line = progress.line(shown, || SOLVING.to_owned());
    let solved = service.job(problem, &overrides, backend, true).await;
    drop(line);
    match solved {
        Ok(result) => {
            if json_out {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?
                );
            } else {
                print!("{}", job_report(&result));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(PlanError::Invalid(e)) => Err(e.to_string()),
        Err(e) => {
            let kind = match &e {
                PlanError::Job(optimizer::job::JobError::Solver(optimizer::LpError::TimeLimit)) => {
                    "time_limit"
                }
                PlanError::Job(optimizer::job::JobError::Solver(
                    optimizer::LpError::MemoryLimit,
                )) => "memory_limit",
                _ => "solver",
            };
            println!(
                "{}",
                json!({"status": "error", "kind": kind, "error": e.to_string()})
            );
            Ok(ExitCode::from(3))
        }
    }
}

fn usd(x: f64) -> String {
    format!("${x:.2}")
}

fn hours_at(hours: f64, at: Option<DateTime<Utc>>) -> String {
    let h = if hours.fract() == 0.0 {
        format!("hour {hours:.0}")
    } else {
        format!("{hours:.2} h")
    };
    match at {
        Some(at) => format!("{h} ({})", at.format("%Y-%m-%d %H:%M UTC")),
        None => h,
    }
}

/// The human summary of a job's result: the choice or schedule, the finish
/// as a time, the cost and its price per reference GPU-hour; for a job that
/// cannot be done, what binds and by how much.
pub(super) fn job_report(r: &JobResult) -> String {
    let mut out = String::new();
    let name = r.name.as_deref().unwrap_or("job");
    let budget = r
        .budget_usd
        .map_or_else(String::new, |b| format!(", budget {}", usd(b)));
    let _ = writeln!(
        out,
        "{name}: a {} of {} reference GPU-hours by hour {}{budget}, objective {}",
        r.shape, r.work, r.horizon_hours, r.objective_kind
    );
    if let Some(inf) = &r.infeasibility {
        let _ = writeln!(out, "infeasible: {}", infeasibility(r, inf));
    } else if let (Some(total), Some(finish)) = (r.total_usd, r.finish_hours) {
        let carbon = r
            .carbon_kg
            .map_or_else(String::new, |kg| format!(", {kg:.2} kg CO2e"));
        let charge = match r.carbon_charge_usd {
            Some(c) if c > 0.0 => format!(" (with a carbon charge of {})", usd(c)),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "optimal: {}{charge}, finished at {}{carbon}; {} per reference GPU-hour",
            usd(total),
            hours_at(finish, r.finish_at),
            usd(r.cost_usd.unwrap_or(total) / r.work)
        );
    }
    match &r.plan {
        Plan::Bag {
            schedule,
            windows_bought,
        } => {
            if !schedule.is_empty() {
                let rows: Vec<[String; 7]> = schedule
                    .iter()
                    .map(|s| {
                        let first = s.hours.iter().position(|&y| y > 0).unwrap_or(0);
                        let last = s.hours.iter().rposition(|&y| y > 0).unwrap_or(0);
                        [
                            s.offer.clone(),
                            s.kind.to_owned(),
                            s.instance_hours.to_string(),
                            if first == last {
                                first.to_string()
                            } else {
                                format!("{first}-{last}")
                            },
                            format!("{:.3}", s.work),
                            format!("{:.2}", s.cost_usd),
                            s.carbon_kg
                                .map_or_else(|| "-".to_owned(), |kg| format!("{kg:.2}")),
                        ]
                    })
                    .collect();
                let header = [
                    "OFFER",
                    "KIND",
                    "INSTANCE-HOURS",
                    "HOURS",
                    "WORK",
                    "USD",
                    "KG CO2E",
                ];
                let _ = write!(out, "\n{}", render_table(&header, &rows, &[2, 4, 5, 6]));
            }
            for w in windows_bought {
                let _ = writeln!(
                    out,
                    "window {} bought: {} instances for {} h from hour {}, {} upfront, {} instance-hours used",
                    w.offer,
                    w.instances,
                    w.hours,
                    w.start_hour,
                    usd(w.upfront_usd),
                    w.instance_hours_used
                );
            }
        }
        Plan::Gang { gang, ranking } => {
            if let Some(g) = gang {
                let _ = writeln!(out, "\n{}", gang_line(g));
            }
            if !ranking.is_empty() {
                let rows: Vec<[String; 6]> = ranking
                    .iter()
                    .map(|e| match e {
                        Ranked::Feasible { run, .. } => [
                            run.offer.clone(),
                            run.nodes.to_string(),
                            format!("{:.2}", run.start_hours),
                            format!("{:.2}", run.finish_hours),
                            format!("{:.2}", run.total_usd),
                            String::new(),
                        ],
                        Ranked::Infeasible { offer, reason, .. } => [
                            offer.clone(),
                            "-".to_owned(),
                            "-".to_owned(),
                            "-".to_owned(),
                            "-".to_owned(),
                            format!("no option: {reason}"),
                        ],
                    })
                    .collect();
                let header = [
                    "OFFER",
                    "NODES",
                    "START H",
                    "FINISH H",
                    "TOTAL USD",
                    "WHY NOT",
                ];
                let _ = write!(
                    out,
                    "\nRanking:\n{}",
                    render_table(&header, &rows, &[1, 2, 3, 4])
                );
            }
        }
    }
    for e in &r.excluded_offers {
        let _ = writeln!(out, "excluded: {} ({})", e.offer, e.reason);
    }
    out
}

fn gang_line(g: &GangRun) -> String {
    format!(
        "{} nodes of {} ({} GPUs, {}), efficiency {:.3}, yield {:.3}: {:.3} reference GPU-hours per hour, \
         from {} for {:.2} h, {}",
        g.nodes,
        g.offer,
        g.gpus,
        g.kind,
        g.efficiency,
        g.yield_n,
        g.rate,
        hours_at(g.start_hours, g.start_at),
        g.run_hours,
        usd(g.total_usd)
    )
}

/// What binds, in words, with its figure.
fn infeasibility(r: &JobResult, inf: &serde_json::Value) -> String {
    let num = |k: &str| inf[k].as_f64().unwrap_or(f64::NAN);
    match inf["kind"].as_str().unwrap_or("") {
        "no_eligible_offers" => "no offer may do this job (see the exclusions below)".to_owned(),
        "cluster" => "no offer can form the cluster asked for (gpus, capacity or yield)".to_owned(),
        "deadline" => {
            let mut s = format!(
                "the most that can be done by the deadline is {:.3} of {} reference GPU-hours",
                num("max_work"),
                r.work
            );
            if let Some(run) = inf["min_run_hours"].as_f64() {
                let _ = write!(s, "; the fastest cluster needs {run:.2} h");
            }
            s
        }
        "budget" => format!(
            "the cheapest way to finish by the deadline costs {}, over the budget of {}",
            usd(num("min_cost")),
            usd(num("budget_usd"))
        ),
        "carbon" => format!(
            "every plan within the deadline and budget emits at least {:.3} kg CO2e, over the cap of {} kg",
            num("min_carbon_kg"),
            num("max_kg")
        ),
        other => other.to_owned(),
    }
}
