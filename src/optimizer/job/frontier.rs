//! Cost against finish time: the cheapest plan for each deadline, traced by
//! sweeping the deadline (the model leaves frontiers to a sweep of `hours`).

use std::time::Duration;

use serde::Serialize;

use super::{JobError, JobProblem, JobResult, Objective, Plan, Purchase};
use crate::optimizer::lp::Backend;

/// The most deadlines one sweep solves for.
const MAX_POINTS: usize = 24;

/// The cheapest plan that finishes by one deadline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrontierPoint {
    pub deadline_hours: usize,
    pub finish_hours: f64,
    pub total_usd: f64,
    pub cost_usd: f64,
    pub carbon_kg: Option<f64>,
    /// What the plan buys, in a few words.
    pub plan: String,
}

impl JobProblem {
    /// This problem with its deadline at `hours` (per-hour caps cut to it).
    #[must_use]
    pub fn with_deadline(&self, hours: usize) -> Self {
        let mut p = self.clone();
        p.hours = hours;
        for o in &mut p.offers {
            if let Purchase::OnDemand(h) | Purchase::Spot { hourly: h, .. } = &mut o.purchase
                && let Some(a) = &mut h.available
            {
                a.truncate(hours);
            }
        }
        p
    }

    /// The cheapest plan for each deadline from the earliest possible finish
    /// to this problem's, keeping only the points where waiting longer saves
    /// money: at most 24 deadlines, evenly spread, both ends included.
    ///
    /// # Errors
    /// A solver failure or time limit.
    pub fn frontier(
        &self,
        backend: Backend,
        time_limit: Option<Duration>,
    ) -> Result<Vec<FrontierPoint>, JobError> {
        let mut fastest = self.clone();
        fastest.objective = Objective::Time;
        let Some(earliest) = fastest.solve(backend, time_limit)?.finish_hours else {
            return Ok(Vec::new());
        };
        let first = (earliest.ceil() as usize).clamp(1, self.hours);
        let span = self.hours - first;
        let deadlines: Vec<usize> = if span < MAX_POINTS {
            (first..=self.hours).collect()
        } else {
            let mut d: Vec<usize> = (0..MAX_POINTS)
                .map(|i| first + (i * span).div_ceil(MAX_POINTS - 1))
                .collect();
            d.dedup();
            d
        };
        let mut points: Vec<FrontierPoint> = Vec::new();
        for deadline in deadlines {
            let mut p = self.with_deadline(deadline);
            p.objective = Objective::Cost;
            let r = p.solve(backend, time_limit)?;
            let (Some(finish), Some(total), Some(cost)) = (r.finish_hours, r.total_usd, r.cost_usd)
            else {
                continue;
            };
            // A later deadline is worth showing only if it saves money.
            if points
                .last()
                .is_some_and(|last| total >= last.total_usd - 1e-9 * last.total_usd.abs().max(1.0))
            {
                continue;
            }
            points.push(FrontierPoint {
                deadline_hours: deadline,
                finish_hours: finish,
                total_usd: total,
                cost_usd: cost,
                carbon_kg: r.carbon_kg,
                plan: summary(&r),
            });
        }
        Ok(points)
    }
}

/// The offers a plan uses, in a few words.
fn summary(r: &JobResult) -> String {
    match &r.plan {
        Plan::Bag { schedule, .. } => schedule
            .iter()
            .map(|s| format!("{} x {} instance-hours", s.offer, s.instance_hours))
            .collect::<Vec<_>>()
            .join(", "),
        Plan::Gang { gang, .. } => gang
            .as_ref()
            .map(|g| format!("{} x {} nodes", g.offer, g.nodes))
            .unwrap_or_default(),
    }
}
