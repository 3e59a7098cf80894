//! A bag of independent tasks (§12.4–12.5): exact, through one small MIP
//! over each offer's total instance-hours (a bag's figures depend on
//! nothing else), a search over the finish, and the earliest layout.

use std::time::Duration;

use serde_json::json;

use super::{
    Eligible, JobError, JobProblem, JobResult, Objective, Plan, Purchase, ScheduleEntry,
    WORK_TOLERANCE, WindowBought, eligibility, offer_rate, within,
};
use crate::optimizer::lp::{Backend, LpError, Milp, Row, Sense};

/// Each threshold row is scaled so that its right-hand side is about this:
/// the solver's feasibility tolerance is absolute, the model's relative.
const ROW_SCALE: f64 = 1e6;

/// An eligible offer with its caps per hour (`None`: no cap).
struct Capped<'a> {
    e: Eligible<'a>,
    caps: Vec<Option<u64>>,
}

impl Capped<'_> {
    /// `Cap_k(F)`: instance-hours in hours `< F`; `None` when unbounded.
    fn total(&self, finish: usize) -> Option<f64> {
        self.caps[..finish]
            .iter()
            .try_fold(0.0, |sum, c| c.map(|c| sum + c as f64))
    }

    fn window(&self) -> Option<(u64, f64)> {
        match self.e.offer.purchase {
            Purchase::Window {
                instances,
                upfront_usd,
                ..
            } => Some((instances, upfront_usd)),
            _ => None,
        }
    }

    fn price(&self) -> f64 {
        match &self.e.offer.purchase {
            Purchase::OnDemand(h) | Purchase::Spot { hourly: h, .. } => h.usd_per_hour,
            Purchase::Window { .. } => 0.0,
        }
    }
}

fn caps(p: &JobProblem, e: &Eligible<'_>) -> Vec<Option<u64>> {
    match &e.offer.purchase {
        Purchase::OnDemand(h) | Purchase::Spot { hourly: h, .. } => (0..p.hours)
            .map(|t| {
                let hour = h.available.as_ref().and_then(|a| a[t]);
                match (h.max_instances, hour) {
                    (Some(m), Some(a)) => Some(m.min(a)),
                    (m, a) => m.or(a),
                }
            })
            .collect(),
        Purchase::Window {
            start_hour,
            hours,
            instances,
            ..
        } => {
            let end = start_hour.saturating_add(*hours).min(p.hours);
            (0..p.hours)
                .map(|t| {
                    Some(if (*start_hour..end).contains(&t) {
                        *instances
                    } else {
                        0
                    })
                })
                .collect()
        }
    }
}

/// What a MIP minimises.
#[derive(Clone, Copy)]
enum Goal {
    /// `total_usd`: money and the carbon charge.
    Total,
    /// `cost_usd`: money alone.
    Cost,
    CarbonKg,
}

/// Which of B4 and B5 hold, and an extra cap on `total_usd`.
#[derive(Clone, Copy, Default)]
struct Rows {
    budget: bool,
    carbon: bool,
    max_total: Option<f64>,
}

/// A plan: each offer's total instance-hours, and which windows it buys.
#[derive(Debug, Clone)]
struct Totals {
    n: Vec<u64>,
    bought: Vec<bool>,
}

struct Bag<'a> {
    p: &'a JobProblem,
    offers: Vec<Capped<'a>>,
    backend: Backend,
    time_limit: Option<Duration>,
}

fn scaled(terms: Vec<(usize, f64)>, sense: Sense, rhs: f64) -> Row {
    let s = if rhs.abs() > 0.0 {
        ROW_SCALE / rhs.abs()
    } else {
        1.0
    };
    Row {
        terms: terms.into_iter().map(|(i, c)| (i, c * s)).collect(),
        sense,
        rhs: rhs * s,
    }
}

impl Bag<'_> {
    fn carbon_price(&self) -> f64 {
        self.p.carbon.and_then(|c| c.usd_per_tonne).unwrap_or(0.0) / 1000.0
    }

    fn kg(&self, k: usize) -> f64 {
        self.offers[k].e.offer.kgco2e_per_hour.unwrap_or(0.0)
    }

    /// The per-offer MIP of §12.5 (a) for plans that finish by `finish`:
    /// the best totals, `None` when there is no plan.
    fn solve(&self, finish: usize, goal: Goal, rows: Rows) -> Result<Option<Totals>, LpError> {
        let mut m = Milp::default();
        let mut n_vars = Vec::new();
        let mut z_vars = Vec::new();
        let (mut work, mut money, mut carbon, mut total) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let price = self.carbon_price();
        for (k, o) in self.offers.iter().enumerate() {
            let (kg, hourly) = (self.kg(k), o.price());
            let cost = match goal {
                Goal::Total => hourly + price * kg,
                Goal::Cost => hourly,
                Goal::CarbonKg => kg,
            };
            let cap = o.total(finish);
            let n = m.add_var(cost, cap, true);
            n_vars.push(n);
            work.push((n, o.e.rate));
            money.push((n, hourly));
            carbon.push((n, kg));
            total.push((n, hourly + price * kg));
            if let Some((_, upfront)) = o.window() {
                let fee = match goal {
                    Goal::CarbonKg => 0.0,
                    _ => upfront,
                };
                let z = m.add_var(fee, Some(1.0), true);
                z_vars.push(Some(z));
                money.push((z, upfront));
                total.push((z, upfront));
                // B2: a window's instances run only if it is bought.
                m.rows.push(Row {
                    terms: vec![(n, 1.0), (z, -cap.unwrap_or(0.0))],
                    sense: Sense::AtMost,
                    rhs: 0.0,
                });
            } else {
                z_vars.push(None);
            }
        }
        let w = self.p.job.work * (1.0 - WORK_TOLERANCE);
        m.rows.push(scaled(work, Sense::AtLeast, w));
        if rows.budget
            && let Some(b) = self.p.job.budget_usd
        {
            m.rows
                .push(scaled(money, Sense::AtMost, b * (1.0 + 1e-9) + 1e-9));
        }
        if rows.carbon
            && let Some(x) = self.p.carbon.and_then(|c| c.max_kg)
        {
            m.rows
                .push(scaled(carbon, Sense::AtMost, x * (1.0 + 1e-9) + 1e-9));
        }
        if let Some(t) = rows.max_total {
            m.rows.push(scaled(total, Sense::AtMost, t));
        }
        match m.solve(self.backend, self.time_limit) {
            Ok(values) => Ok(Some(Totals {
                n: n_vars
                    .iter()
                    .map(|&i| values[i].round().max(0.0) as u64)
                    .collect(),
                bought: z_vars
                    .iter()
                    .map(|z| z.is_some_and(|z| values[z] > 0.5))
                    .collect(),
            })),
            Err(LpError::Infeasible) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn work_of(&self, t: &Totals) -> f64 {
        self.offers
            .iter()
            .zip(&t.n)
            .map(|(o, n)| o.e.rate * *n as f64)
            .sum()
    }

    fn cost_of(&self, t: &Totals) -> f64 {
        self.offers
            .iter()
            .zip(&t.n)
            .zip(&t.bought)
            .map(|((o, n), b)| {
                o.price() * *n as f64
                    + if *b {
                        o.window().map_or(0.0, |w| w.1)
                    } else {
                        0.0
                    }
            })
            .sum()
    }

    fn carbon_of(&self, t: &Totals) -> f64 {
        (0..self.offers.len())
            .map(|k| self.kg(k) * t.n[k] as f64)
            .sum()
    }

    fn total_of(&self, t: &Totals) -> f64 {
        self.cost_of(t) + self.carbon_price() * self.carbon_of(t)
    }

    /// The smallest finish in `1..=hours` for which `feasible` holds, given
    /// that it holds at `hours` (it is monotone, §12.5 b).
    fn earliest(
        &self,
        feasible: impl Fn(usize) -> Result<bool, LpError>,
    ) -> Result<usize, LpError> {
        let (mut lo, mut hi) = (1, self.p.hours);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if feasible(mid)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(hi)
    }

    /// §12.5 (c): each offer's instance-hours in its earliest hours.
    fn layout(&self, t: &Totals) -> Vec<Vec<u64>> {
        self.offers
            .iter()
            .zip(&t.n)
            .map(|(o, &n)| {
                let mut left = n;
                o.caps
                    .iter()
                    .map(|cap| {
                        let y = cap.map_or(left, |c| c.min(left));
                        left -= y;
                        y
                    })
                    .collect()
            })
            .collect()
    }
}

pub(super) fn solve(
    p: &JobProblem,
    backend: Backend,
    time_limit: Option<Duration>,
) -> Result<JobResult, JobError> {
    let (eligible, excluded) = eligibility(p);
    let mut out = p.frame(excluded);
    let bag = Bag {
        p,
        offers: eligible
            .into_iter()
            .map(|e| Capped {
                caps: caps(p, &e),
                e,
            })
            .collect(),
        backend,
        time_limit,
    };
    out.offers = bag.offers.iter().map(|o| offer_rate(&o.e, p)).collect();
    let hours = p.hours;
    // §12.7, in order: each check adds one constraint to those before it.
    if bag.offers.is_empty() {
        out.infeasibility = Some(json!({"kind": "no_eligible_offers"}));
        return Ok(out);
    }
    let max_work = bag
        .offers
        .iter()
        .map(|o| o.total(hours).map(|cap| o.e.rate * cap))
        .try_fold(0.0, |sum, w| w.map(|w| sum + w));
    if let Some(max_work) = max_work
        && max_work < p.job.work * (1.0 - WORK_TOLERANCE)
    {
        out.infeasibility = Some(
            json!({"kind": "deadline", "work": p.job.work, "hours": hours, "max_work": max_work}),
        );
        return Ok(out);
    }
    if let Some(budget) = p.job.budget_usd {
        let cheapest = bag
            .solve(hours, Goal::Cost, Rows::default())?
            .ok_or(LpError::Solver(
                "no plan by the deadline although the work fits".into(),
            ))?;
        let min_cost = bag.cost_of(&cheapest);
        if !within(min_cost, budget) {
            out.infeasibility =
                Some(json!({"kind": "budget", "budget_usd": budget, "min_cost": min_cost}));
            return Ok(out);
        }
    }
    if let Some(max_kg) = p.carbon.and_then(|c| c.max_kg) {
        let budget_rows = Rows {
            budget: true,
            ..Rows::default()
        };
        let least = bag
            .solve(hours, Goal::CarbonKg, budget_rows)?
            .ok_or(LpError::Solver(
                "no plan within the budget although one was found".into(),
            ))?;
        let min_carbon_kg = bag.carbon_of(&least);
        if !within(min_carbon_kg, max_kg) {
            out.infeasibility =
                Some(json!({"kind": "carbon", "max_kg": max_kg, "min_carbon_kg": min_carbon_kg}));
            return Ok(out);
        }
    }
    let all = Rows {
        budget: true,
        carbon: true,
        max_total: None,
    };
    let feasible =
        |finish: usize, rows: Rows| bag.solve(finish, Goal::Total, rows).map(|t| t.is_some());
    let (finish, rows) = match p.objective {
        Objective::Cost => {
            let best = bag.solve(hours, Goal::Total, all)?.ok_or(LpError::Solver(
                "no plan although every check passed".into(),
            ))?;
            let c = bag.total_of(&best);
            let rows = Rows {
                max_total: Some(c + 1e-9 * c.abs().max(1.0)),
                ..all
            };
            (bag.earliest(|f| feasible(f, rows))?, rows)
        }
        Objective::Time => (bag.earliest(|f| feasible(f, all))?, all),
    };
    let totals = bag
        .solve(finish, Goal::Total, rows)?
        .ok_or(LpError::Solver(format!(
            "no plan by hour {finish} although the search found one"
        )))?;
    describe(&bag, &totals, &mut out);
    Ok(out)
}

/// Fills the plan's figures, recomputed from its layout (§12.10).
fn describe(bag: &Bag<'_>, totals: &Totals, out: &mut JobResult) {
    let p = bag.p;
    let hours = bag.layout(totals);
    let (mut schedule, mut windows_bought) = (Vec::new(), Vec::new());
    let mut finish = 0;
    let mut all_carbon_known = true;
    for ((o, row), &bought) in bag.offers.iter().zip(&hours).zip(&totals.bought) {
        let instance_hours: u64 = row.iter().sum();
        if let Some(last) = row.iter().rposition(|&y| y > 0) {
            finish = finish.max(last + 1);
        }
        if let Purchase::Window {
            start_hour,
            hours,
            instances,
            upfront_usd,
        } = o.e.offer.purchase
            && bought
        {
            windows_bought.push(WindowBought {
                offer: o.e.offer.id.clone(),
                start_hour,
                hours,
                instances,
                upfront_usd,
                instance_hours_used: instance_hours,
            });
        }
        if instance_hours == 0 {
            continue;
        }
        let kg =
            o.e.offer
                .kgco2e_per_hour
                .map(|kg| kg * instance_hours as f64);
        all_carbon_known &= kg.is_some();
        schedule.push(ScheduleEntry {
            offer: o.e.offer.id.clone(),
            kind: o.e.offer.kind(),
            hours: row.clone(),
            instance_hours,
            work: o.e.rate * instance_hours as f64,
            cost_usd: o.price() * instance_hours as f64
                + if bought {
                    o.window().map_or(0.0, |w| w.1)
                } else {
                    0.0
                },
            carbon_kg: kg,
        });
    }
    let cost = bag.cost_of(totals);
    let carbon = bag.carbon_of(totals);
    let charge = bag.carbon_price() * carbon;
    let total = cost + charge;
    out.status = "optimal";
    out.cost_usd = Some(cost);
    out.carbon_kg = all_carbon_known.then_some(carbon);
    out.carbon_charge_usd = Some(charge);
    out.total_usd = Some(total);
    out.work_done = Some(bag.work_of(totals));
    out.finish_hours = Some(finish as f64);
    out.finish_at = super::at(p, finish as f64);
    out.plan = Plan::Bag {
        schedule,
        windows_bought,
    };
    out.objective = Some(match p.objective {
        Objective::Cost => total,
        Objective::Time => finish as f64,
    });
}
