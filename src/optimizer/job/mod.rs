//! Version 4 problems: jobs (docs/planning-model.md §12). A fixed amount of
//! work by a deadline, perhaps within a budget and a carbon cap, done by a
//! bag of independent tasks on any mix of offers and hours ([`bag`]).

mod bag;
mod model;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

pub use model::{Carbon, Job, JobOffer, JobProblem, Objective, Purchase, Shape};

use super::lp::{Backend, LpError};

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
    pub schedule: Vec<ScheduleEntry>,
    pub windows_bought: Vec<WindowBought>,
    pub offers: Vec<OfferRate>,
    pub excluded_offers: Vec<Excluded>,
    pub infeasibility: Option<Value>,
}

/// Why a job could not be planned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    #[error("the {0} shape is not planned by this version")]
    Unsupported(&'static str),
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
    fn frame(&self, shape: &'static str, excluded: Vec<Excluded>) -> JobResult {
        JobResult {
            schema_version: 4,
            kind: "job",
            name: self.name.clone(),
            shape,
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
            schedule: Vec::new(),
            windows_bought: Vec::new(),
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
            Shape::Gang { .. } => Err(JobError::Unsupported("gang")),
        }
    }
}

#[cfg(test)]
mod tests;
