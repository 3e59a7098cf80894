//! A version 3 plan's figures and report: the risk figures of a plan
//! (§11.12), the result filled from the primary λ's plans, and the
//! frontier.

use std::collections::BTreeMap;

use super::super::measure::{cvar, quantile};
use super::super::model::{Measure, Problem, Stochastic};
use super::super::report::Plan;
use serde::Serialize;

use super::super::model::Ranges;
use super::super::{
    CostBreakdown, GpuHours, Hourly, OptimizeError, PlanResult, Served, SolveOptions, checks,
};
use super::extensive::{Group, Part};

/// The version 3 additions to a result (§11.12).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct V3Result {
    pub risk: RiskReport,
    pub expected_cost: Option<f64>,
    pub p95_cost: Option<f64>,
    pub cvar_cost: Option<f64>,
    pub var_cost: Option<f64>,
    /// With the `savings_shortfall` measure.
    #[serde(flatten)]
    pub shortfall: Option<Shortfall>,
    pub scenarios: Vec<ScenarioReport>,
    pub frontier: Vec<FrontierPoint>,
    pub frontier_flat: Option<bool>,
    pub frontier_tail_gain: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranges: Option<Ranges>,
}

/// The figures of the loss `L = C − B` under the `savings_shortfall` measure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Shortfall {
    pub expected_shortfall: f64,
    pub p95_shortfall: f64,
    pub cvar_shortfall: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RiskReport {
    pub lambda: f64,
    pub beta: f64,
    pub measure: &'static str,
    pub flat_tolerance: f64,
    /// The λ values solved, ascending.
    pub frontier: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioReport {
    pub id: String,
    pub probability: f64,
    pub cost: Option<f64>,
    pub cost_breakdown: Option<CostBreakdown>,
    pub baseline_on_demand_cost: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shortfall: Option<f64>,
}

/// A new purchase on the frontier: offer, option, count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Holding {
    pub offer: String,
    pub option: String,
    pub count: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrontierPoint {
    pub lambda: f64,
    pub objective: f64,
    pub expected_cost: f64,
    pub p95_cost: f64,
    pub cvar_cost: f64,
    pub var_cost: f64,
    /// With the `savings_shortfall` measure.
    #[serde(flatten)]
    pub shortfall: Option<Shortfall>,
    pub reserved: Vec<Holding>,
    pub reserved_gpus: f64,
    pub primary: bool,
}

/// One frontier point: λ, its figures, and its plan per scenario group.
pub(super) type Point = (f64, Figures, Vec<Plan>);

/// What the totals of a plan are weighed with: the scenario groups, each
/// input scenario's group, the groups' models and the owned hours.
pub(super) struct Totals<'a, 'p> {
    pub(super) st: &'a Stochastic,
    pub(super) opts: &'a SolveOptions,
    pub(super) groups: &'a [Group],
    pub(super) group_of: &'a [usize],
    pub(super) parts: &'a [Part<'p>],
    pub(super) owned_hours: Option<f64>,
}

/// The risk figures of one plan, from its rounded scenario costs.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Figures {
    pub(super) objective: f64,
    pub(super) expected_cost: f64,
    pub(super) p95_cost: f64,
    pub(super) var_cost: f64,
    pub(super) cvar_cost: f64,
    /// With `savings_shortfall`: the figures of L.
    pub(super) shortfall: Option<Shortfall>,
    /// P95 and CVaR of the loss L, for the flat test.
    pub(super) p95_loss: f64,
    pub(super) cvar_loss: f64,
}

pub(super) fn figures(
    costs: &[(f64, f64)],
    baselines: &[Option<f64>],
    st: &Stochastic,
    lambda: f64,
) -> Figures {
    let beta = st.risk.beta;
    let expected = |xs: &[(f64, f64)]| xs.iter().map(|(x, p)| x * p).sum::<f64>();
    let expected_cost = expected(costs);
    let cvar_cost = cvar(costs, beta);
    let shortfall = (st.risk.measure == Measure::SavingsShortfall).then(|| {
        let losses: Vec<(f64, f64)> = costs
            .iter()
            .zip(baselines)
            .map(|((c, p), b)| (c - b.unwrap_or(0.0), *p))
            .collect();
        Shortfall {
            expected_shortfall: expected(&losses),
            p95_shortfall: quantile(&losses, 0.95),
            cvar_shortfall: cvar(&losses, beta),
        }
    });
    let (mean_loss, p95_loss, cvar_loss) = shortfall
        .map_or((expected_cost, quantile(costs, 0.95), cvar_cost), |s| {
            (s.expected_shortfall, s.p95_shortfall, s.cvar_shortfall)
        });
    Figures {
        objective: (1.0 - lambda) * mean_loss + lambda * cvar_loss,
        expected_cost,
        p95_cost: quantile(costs, 0.95),
        var_cost: quantile(costs, beta),
        cvar_cost,
        shortfall,
        p95_loss,
        cvar_loss,
    }
}

/// The version 3 report before anything is solved.
pub(super) fn unsolved(st: &Stochastic) -> V3Result {
    V3Result {
        risk: RiskReport {
            lambda: st.risk.lambda,
            beta: st.risk.beta,
            measure: st.risk.measure.name(),
            flat_tolerance: st.risk.flat_tolerance,
            frontier: st.risk.frontier.clone(),
        },
        expected_cost: None,
        p95_cost: None,
        cvar_cost: None,
        var_cost: None,
        shortfall: None,
        scenarios: st
            .scenarios
            .iter()
            .map(|s| ScenarioReport {
                id: s.id.clone(),
                probability: s.probability,
                cost: None,
                cost_breakdown: None,
                baseline_on_demand_cost: None,
                shortfall: None,
            })
            .collect(),
        frontier: Vec::new(),
        frontier_flat: None,
        frontier_tail_gain: None,
        ranges: st.ranges.clone(),
    }
}

/// Expected demand of class `c` over the scenarios.
pub(super) fn demand_of(st: &Stochastic, c: usize) -> f64 {
    st.scenarios
        .iter()
        .map(|s| s.probability * s.demand[c].iter().sum::<f64>())
        .sum()
}

/// Fills `result` and `v3` from the primary point's plans (one per group)
/// and the frontier. `baselines` are per group, `input_baselines` per input
/// scenario.
pub(super) fn fill(
    result: &mut PlanResult,
    v3: &mut V3Result,
    totals: &Totals<'_, '_>,
    problem: &Problem,
    (points, primary): (&[Point], usize),
    (baselines, input_baselines): (&[Option<f64>], &[Option<f64>]),
) -> Result<(), OptimizeError> {
    let st = totals.st;
    let (_, f, plans) = &points[primary];
    let expected = |x: &dyn Fn(&Plan) -> f64| -> f64 {
        totals
            .groups
            .iter()
            .zip(plans)
            .map(|(g, p)| g.probability * x(p))
            .sum()
    };
    result.status = "optimal";
    result.objective = Some(f.objective);
    result.cost_breakdown = Some(CostBreakdown {
        reserved: expected(&|p| p.breakdown.reserved),
        spot: expected(&|p| p.breakdown.spot),
        on_demand: expected(&|p| p.breakdown.on_demand),
    });
    result.reserved = plans[0].reserved.clone();
    result.reserved_gpus = plans[0].reserved_gpus;
    result.gpu_hours = GpuHours {
        demand: result.gpu_hours.demand,
        reserved: plans[0].gpu_hours.reserved,
        owned: totals.owned_hours,
        spot_effective: expected(&|p| p.gpu_hours.spot_effective),
        spot_paid: expected(&|p| p.gpu_hours.spot_paid),
        on_demand: expected(&|p| p.gpu_hours.on_demand),
    };
    let baseline = baselines
        .iter()
        .zip(totals.groups)
        .map(|(b, g)| b.map(|b| b * g.probability))
        .sum::<Option<f64>>();
    result.baseline_on_demand_cost = baseline;
    result.savings = baseline.map(|b| b - f.expected_cost);
    result.savings_pct = baseline
        .filter(|b| *b > 0.0)
        .map(|b| 100.0 * (b - f.expected_cost) / b);
    let shortfall = st.risk.measure == Measure::SavingsShortfall;
    let mut scenario_hourly = BTreeMap::new();
    for (i, s) in st.scenarios.iter().enumerate() {
        let plan = &plans[totals.group_of[i]];
        let report = &mut v3.scenarios[i];
        report.cost = Some(plan.objective());
        report.cost_breakdown = Some(plan.breakdown.clone());
        report.baseline_on_demand_cost = input_baselines[i];
        report.shortfall = shortfall.then(|| plan.objective() - input_baselines[i].unwrap_or(0.0));
        scenario_hourly.insert(s.id.clone(), plan.hourly.clone());
    }
    result.hourly = Hourly {
        scenarios: Some(scenario_hourly),
        ..Hourly::default()
    };
    let served: Vec<Served> = (0..problem.classes.len())
        .map(|c| Served {
            reserved: expected(&|p| p.served[c].reserved),
            spot: expected(&|p| p.served[c].spot),
            on_demand: expected(&|p| p.served[c].on_demand),
        })
        .collect();
    let spot_units: f64 = served.iter().map(|s| s.spot).sum();
    let demand_units: f64 = (0..problem.classes.len()).map(|c| demand_of(st, c)).sum();
    result.spot_share_of_demand = if demand_units > 0.0 {
        spot_units / demand_units
    } else {
        0.0
    };
    let owned_total = totals.owned_hours.unwrap_or(0.0);
    let owned_used = if owned_total > 0.0 {
        let mut used = 0.0;
        for (p, g) in totals.parts.iter().zip(totals.groups) {
            let none = vec![0.0; p.setup.offers.len()];
            used += g.probability * checks::usable_gpu_hours(&p.setup, &none, totals.opts)?;
        }
        Some(used / owned_total)
    } else {
        None
    };
    if let Some(v2) = result.v2.as_mut() {
        v2.total_cost = Some(f.expected_cost + v2.sunk_cost);
        v2.owned_utilization = owned_used;
        for (class, s) in v2.classes.iter_mut().zip(served) {
            class.spot_share_of_demand = if class.demand_units > 0.0 {
                s.spot / class.demand_units
            } else {
                0.0
            };
            class.served_units = s;
        }
    }
    v3.expected_cost = Some(f.expected_cost);
    v3.p95_cost = Some(f.p95_cost);
    v3.cvar_cost = Some(f.cvar_cost);
    v3.var_cost = Some(f.var_cost);
    v3.shortfall = f.shortfall;
    frontier(v3, points, primary, st.risk.flat_tolerance);
    Ok(())
}

/// The frontier's points, and whether it is flat: no λ cuts the tail (P95
/// or CVaR of the loss) by more than `tau` of the λ = 0 plan's.
fn frontier(v3: &mut V3Result, points: &[Point], primary: usize, tau: f64) {
    let (_, f0, _) = &points[0];
    let mut flat = true;
    let mut gain: f64 = 0.0;
    for (_, fp, _) in points {
        let p95_gain = f0.p95_loss - fp.p95_loss;
        let cvar_gain = f0.cvar_loss - fp.cvar_loss;
        flat &= p95_gain <= tau * f0.p95_cost && cvar_gain <= tau * f0.cvar_cost;
        if f0.p95_cost > 0.0 {
            gain = gain.max(p95_gain / f0.p95_cost);
        }
        if f0.cvar_cost > 0.0 {
            gain = gain.max(cvar_gain / f0.cvar_cost);
        }
    }
    v3.frontier_flat = Some(flat);
    v3.frontier_tail_gain = Some(gain);
    v3.frontier = points
        .iter()
        .enumerate()
        .map(|(i, (lambda, fp, plans))| FrontierPoint {
            lambda: *lambda,
            objective: fp.objective,
            expected_cost: fp.expected_cost,
            p95_cost: fp.p95_cost,
            cvar_cost: fp.cvar_cost,
            var_cost: fp.var_cost,
            shortfall: fp.shortfall,
            reserved: plans[0]
                .reserved
                .iter()
                .map(|r| Holding {
                    offer: r.offer.clone(),
                    option: r.option.clone(),
                    count: r.count,
                })
                .collect(),
            reserved_gpus: plans[0].reserved_gpus,
            primary: i == primary,
        })
        .collect();
}
