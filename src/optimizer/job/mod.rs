//! Version 4 problems: jobs (docs/planning-model.md §12). A fixed amount of
//! work by a deadline, perhaps within a budget and a carbon cap, done by a
//! bag of independent tasks on any mix of offers and hours ([`bag`]), or by
//! one homogeneous cluster ([`gang`]).

mod bag;
mod check;
mod frontier;
mod gang;
mod model;

pub use check::verify;
pub use frontier::FrontierPoint;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

pub use model::{
    Carbon, Job, JobOffer, JobProblem, MAX_HOURS, MAX_NODES, Objective, Purchase, Shape,
};

use super::lp::{Backend, LpError};

/// Whether a problem document is a job: `"schema_version": 4`.
#[must_use]
pub fn is_job(doc: &Value) -> bool {
    doc.get("schema_version").and_then(Value::as_u64) == Some(4)
}

/// Work is done at `W·(1 − 1e-9)`.
const WORK_TOLERANCE: f64 = 1e-9;

/// Whether `x` meets cap `cap` within the model's tolerance (§12.8).
fn within(x: f64, cap: f64) -> bool {
    x <= cap * (1.0 + 1e-9) + 1e-9
}

/// An offer that may do the job, with its rate (§12.3).
#[derive(Debug, Clone)]
struct Eligible<'a> {
    offer: &'a JobOffer,
    perf_key: &'a str,
    perf: f64,
    /// `y_k(1)`: the share of paid time that does useful work.
    yield_one: f64,
    /// `w_k = g_k · φ_k · y_k(1)`: reference GPU-hours per instance-hour.
    rate: f64,
}

/// An offer left out, and the first check it failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Excluded {
    pub offer: String,
    pub reason: &'static str,
}

/// `y_k(n) = 1 − n·ρ_k·(c/2 + r)` for spot; 1 otherwise.
fn yield_of(job: &Job, offer: &JobOffer, nodes: f64) -> f64 {
    match offer.purchase {
        Purchase::Spot {
            interruptions_per_hour,
            ..
        } => {
            1.0 - nodes * interruptions_per_hour * (job.checkpoint_hours / 2.0 + job.restart_hours)
        }
        _ => 1.0,
    }
}

/// §12.3: the eligible offers, and each other offer with the first check
/// it fails, in input order.
fn eligibility(p: &JobProblem) -> (Vec<Eligible<'_>>, Vec<Excluded>) {
    let mut eligible = Vec::new();
    let mut excluded = Vec::new();
    for o in &p.offers {
        let perf = o.perf_in(&p.perf);
        let yield_one = yield_of(&p.job, o, 1.0);
        let reason = if p
            .job
            .min_gpu_memory_gib
            .is_some_and(|m| o.gpu_memory_gib < m)
        {
            Some("gpu_memory")
        } else if p.job.needs.iter().any(|n| !o.capabilities.contains(n)) {
            Some("capability")
        } else if perf.is_none() {
            Some("perf")
        } else if p.carbon.is_some() && o.kgco2e_per_hour.is_none() {
            Some("carbon_factor")
        } else if yield_one <= 0.0 {
            Some("yield")
        } else if matches!(o.purchase, Purchase::Window { start_hour, .. } if start_hour >= p.hours)
        {
            Some("window")
        } else {
            None
        };
        match (reason, perf) {
            (None, Some((perf_key, factor))) => eligible.push(Eligible {
                offer: o,
                perf_key,
                perf: factor,
                yield_one,
                rate: o.gpu_count * factor * yield_one,
            }),
            (reason, _) => excluded.push(Excluded {
                offer: o.id.clone(),
                reason: reason.unwrap_or("perf"),
            }),
        }
    }
    (eligible, excluded)
}

/// The informational rate of one eligible offer: its price per reference
/// GPU-hour, a window's when used in full.
fn offer_rate(e: &Eligible<'_>, p: &JobProblem) -> OfferRate {
    let usd_per_work = match &e.offer.purchase {
        Purchase::OnDemand(h) | Purchase::Spot { hourly: h, .. } => h.usd_per_hour / e.rate,
        Purchase::Window {
            start_hour,
            hours,
            instances,
            upfront_usd,
        } => {
            let span = start_hour.saturating_add(*hours).min(p.hours) - start_hour;
            upfront_usd / (e.rate * *instances as f64 * span as f64)
        }
    };
    OfferRate {
        offer: e.offer.id.clone(),
        kind: e.offer.kind(),
        perf_key: e.perf_key.to_owned(),
        perf: e.perf,
        yield_one: e.yield_one,
        work_per_instance_hour: e.rate,
        usd_per_work,
    }
}

/// `start` + `hours`, when the problem has a start.
fn at(p: &JobProblem, hours: f64) -> Option<DateTime<Utc>> {
    let ms = (hours * 3_600_000.0).round();
    p.start
        .and_then(|s| s.checked_add_signed(chrono::Duration::milliseconds(ms as i64)))
}

/// What an eligible offer does per unit of money (informational).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfferRate {
    pub offer: String,
    pub kind: &'static str,
    pub perf_key: String,
    pub perf: f64,
    #[serde(rename = "yield")]
    pub yield_one: f64,
    pub work_per_instance_hour: f64,
    /// The price of one reference GPU-hour on it; a window's when used in full.
    pub usd_per_work: f64,
}

/// One offer's hours in a bag's plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleEntry {
    pub offer: String,
    pub kind: &'static str,
    /// Instances in each hour, `H` of them.
    pub hours: Vec<u64>,
    pub instance_hours: u64,
    pub work: f64,
    pub cost_usd: f64,
    pub carbon_kg: Option<f64>,
}

/// A window the plan buys.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowBought {
    pub offer: String,
    pub start_hour: usize,
    pub hours: usize,
    pub instances: u64,
    pub upfront_usd: f64,
    pub instance_hours_used: u64,
}

/// A gang's run: one option (offer, nodes) and its figures (§12.6).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GangRun {
    pub offer: String,
    pub kind: &'static str,
    pub nodes: u32,
    pub gpus: f64,
    /// `e(n)`: the per-node efficiency kept at this size.
    pub efficiency: f64,
    /// `y(n)`: the share of paid time that does useful work.
    #[serde(rename = "yield")]
    pub yield_n: f64,
    /// Reference GPU-hours per hour.
    pub rate: f64,
    pub start_hours: f64,
    pub run_hours: f64,
    pub finish_hours: f64,
    pub cost_usd: f64,
    pub carbon_kg: Option<f64>,
    pub carbon_charge_usd: f64,
    pub total_usd: f64,
    pub start_at: Option<DateTime<Utc>>,
}

/// One entry of a gang's ranking: an offer's best option, or why it has
/// none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Ranked {
    Feasible {
        #[serde(flatten)]
        run: GangRun,
        feasible: bool,
        /// `total_usd` under `cost`, the finish under `time`.
        objective: f64,
    },
    Infeasible {
        offer: String,
        feasible: bool,
        reason: &'static str,
    },
}

/// The plan itself, by shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Plan {
    Bag {
        /// Offers with instance-hours, in input order.
        schedule: Vec<ScheduleEntry>,
        windows_bought: Vec<WindowBought>,
    },
    Gang {
        /// The chosen option; `None` when the job is infeasible.
        gang: Option<GangRun>,
        ranking: Vec<Ranked>,
    },
}

/// The answer to a v4 problem (§12.10).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobResult {
    pub schema_version: u32,
    pub kind: &'static str,
    pub name: Option<String>,
    pub shape: &'static str,
    pub objective_kind: &'static str,
    pub horizon_hours: usize,
    pub work: f64,
    pub budget_usd: Option<f64>,
    pub carbon: Option<Value>,
    /// `optimal` or `infeasible`.
    pub status: &'static str,
    /// Under `cost` the plan's `total_usd`, under `time` its finish.
    pub objective: Option<f64>,
    pub cost_usd: Option<f64>,
    pub carbon_kg: Option<f64>,
    pub carbon_charge_usd: Option<f64>,
    pub total_usd: Option<f64>,
    pub finish_hours: Option<f64>,
    pub finish_at: Option<DateTime<Utc>>,
    pub work_done: Option<f64>,
    #[serde(flatten)]
    pub plan: Plan,
    pub offers: Vec<OfferRate>,
    pub excluded_offers: Vec<Excluded>,
    pub infeasibility: Option<Value>,
}

/// Why a job could not be planned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Solver(#[from] LpError),
}

impl JobProblem {
    fn objective_name(&self) -> &'static str {
        match self.objective {
            Objective::Cost => "cost",
            Objective::Time => "time",
        }
    }

    /// The result's frame: everything but the plan's figures.
    fn frame(&self, excluded: Vec<Excluded>) -> JobResult {
        let gang = matches!(self.job.shape, Shape::Gang { .. });
        JobResult {
            schema_version: 4,
            kind: "job",
            name: self.name.clone(),
            shape: if gang { "gang" } else { "bag" },
            objective_kind: self.objective_name(),
            horizon_hours: self.hours,
            work: self.job.work,
            budget_usd: self.job.budget_usd,
            carbon: self
                .carbon
                .map(|c| serde_json::json!({"max_kg": c.max_kg, "usd_per_tonne": c.usd_per_tonne})),
            status: "infeasible",
            objective: None,
            cost_usd: None,
            carbon_kg: None,
            carbon_charge_usd: None,
            total_usd: None,
            finish_hours: None,
            finish_at: None,
            work_done: None,
            plan: if gang {
                Plan::Gang {
                    gang: None,
                    ranking: Vec::new(),
                }
            } else {
                Plan::Bag {
                    schedule: Vec::new(),
                    windows_bought: Vec::new(),
                }
            },
            offers: Vec::new(),
            excluded_offers: excluded,
            infeasibility: None,
        }
    }

    /// Plans the job: its cheapest plan by the deadline (or its earliest
    /// finish), or why there is none.
    ///
    /// # Errors
    /// A solver failure or time limit.
    pub fn solve(
        &self,
        backend: Backend,
        time_limit: Option<Duration>,
    ) -> Result<JobResult, JobError> {
        match self.job.shape {
            Shape::Bag => bag::solve(self, backend, time_limit),
            Shape::Gang { .. } => Ok(gang::solve(self)),
        }
    }
}

#[cfg(test)]
mod random_tests;
#[cfg(test)]
mod tests;
