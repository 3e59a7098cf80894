//! Jobs (planning-model version 4) on the command line: a v4 problem file
//! through `gpuplan plan --problem`, and the summary people read.

use std::fmt::Write as _;

use super::*;
use crate::optimizer::job::{GangRun, JobProblem, JobResult, Plan, Ranked};

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
) -> Result<ExitCode, String> {
    let problem = JobProblem::from_json(doc).map_err(|e| format!("{shown}: {e}"))?;
    let service = PlanService::new(None, &config.planner, config.source_intervals(Utc::now()));
    match service.job(problem, &overrides, backend, true).await {
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
