//! Schema version 3 (docs/planning-model.md §11): new reservations shared
//! by every scenario, hourly recourse per scenario, and the mean-CVaR
//! objective in the Rockafellar–Uryasev form, solved once per frontier λ.
//!
//! Each scenario is the version 2 problem it becomes once reservations are
//! fixed (`Problem::scenario`), built by the same model builder with the
//! same exact reductions. Their models share the reserved columns, which the
//! builder always makes first and identically (reductions of reserved
//! options depend on prices alone, never on demand or availability), so the
//! extensive form is their union with those columns merged, plus η and one
//! `u_ω` per scenario. Scenarios with the same demand and availability are
//! merged by adding their probabilities (§11.13); a problem that merges to
//! one scenario has one cost, so every λ gives the version 2 plan and it is
//! solved once, as version 2.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::build::{Scope, Vars, build};
use super::lp::{LpError, Milp, Row, Sense, Solved};
use super::measure::{cvar, quantile};
use super::model::{Measure, Problem, Ranges, Stochastic};
use super::report::{self, Plan};
use super::scan::Scan;
use super::setup::Setup;
use super::{
    CostBreakdown, GpuHours, Hourly, ModelStats, OptimizeError, PlanResult, Served, SolveOptions,
    checks, ms, solve_model,
};

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

/// Pool availability per hour, for the pools down in some hour.
type Availability = BTreeMap<String, Vec<bool>>;

/// Scenarios with equal demand and availability, solved once.
struct Group {
    /// Input scenarios it stands for, in input order.
    members: Vec<usize>,
    probability: f64,
}

/// The risk figures of one plan, from its rounded scenario costs.
#[derive(Debug, Clone, PartialEq)]
struct Figures {
    objective: f64,
    expected_cost: f64,
    p95_cost: f64,
    var_cost: f64,
    cvar_cost: f64,
    /// With `savings_shortfall`: the figures of L.
    shortfall: Option<Shortfall>,
    /// P95 and CVaR of the loss L, for the flat test.
    p95_loss: f64,
    cvar_loss: f64,
}

fn figures(
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

/// One scenario group's model and what was built from it.
struct Part<'a> {
    setup: Setup<'a>,
    milp: Milp,
    vars: Vars,
}

/// The extensive form's layout: reserved columns `0..reserved`, then each
/// group's recourse columns, then η⁺, η⁻ and the `u` (when built).
struct Extensive {
    milp: Milp,
    reserved: usize,
    /// Where group g's recourse columns start.
    offsets: Vec<usize>,
    /// Per column, its coefficient in its scenario's cost (`C_ω`).
    cost: Vec<f64>,
    /// Per column, its group (`None`: a reserved column, in every cost).
    group: Vec<Option<usize>>,
}

impl Extensive {
    fn new(parts: &[Part<'_>], reserved: usize) -> Self {
        let mut milp = Milp::default();
        let mut cost = Vec::new();
        let mut group = Vec::new();
        for v in &parts[0].milp.vars[..reserved] {
            milp.vars.push(v.clone());
            cost.push(v.cost);
            group.push(None);
        }
        let mut offsets = Vec::with_capacity(parts.len());
        for (g, part) in parts.iter().enumerate() {
            let offset = milp.vars.len();
            offsets.push(offset);
            for v in &part.milp.vars[reserved..] {
                milp.vars.push(v.clone());
                cost.push(v.cost);
                group.push(Some(g));
            }
            let remap = |i: usize| {
                if i < reserved {
                    i
                } else {
                    i - reserved + offset
                }
            };
            // The rows on purchases alone are the same in every scenario.
            let skip = if g > 0 { part.vars.reserved_rows } else { 0 };
            for row in &part.milp.rows[skip..] {
                milp.rows.push(Row {
                    terms: row.terms.iter().map(|(i, c)| (remap(*i), *c)).collect(),
                    sense: row.sense,
                    rhs: row.rhs,
                });
            }
        }
        Self {
            milp,
            reserved,
            offsets,
            cost,
            group,
        }
    }

    /// The model for one λ: `(1−λ)·Σ p_ω C_ω + λ·(η + 1/(1−β)·Σ p_ω u_ω)`
    /// with rows R1 `u_ω + η − C_ω ≥ −B_ω` (B only for the shortfall). With
    /// `cap = Some(V)` (λ = 1, second step) it minimises the mean subject to
    /// CVaR ≤ V instead.
    fn model(
        &self,
        groups: &[Group],
        lambda: f64,
        beta: f64,
        shift: &[f64],
        cap: Option<f64>,
    ) -> Milp {
        let mut m = self.milp.clone();
        let mean = if cap.is_some() { 1.0 } else { 1.0 - lambda };
        for (i, v) in m.vars.iter_mut().enumerate() {
            let p = self.group[i].map_or(1.0, |g| groups[g].probability);
            v.cost = mean * p * self.cost[i];
        }
        let eta = m.vars.len();
        if lambda == 0.0 {
            return m;
        }
        let tail = if cap.is_some() { 0.0 } else { lambda };
        m.add_var(tail, None, false);
        m.add_var(-tail, None, false);
        let mut cvar_terms = vec![(eta, 1.0), (eta + 1, -1.0)];
        for (g, group) in groups.iter().enumerate() {
            let weight = group.probability / (1.0 - beta);
            let u = m.add_var(tail * weight, None, false);
            cvar_terms.push((u, weight));
            let mut terms = vec![(u, 1.0), (eta, 1.0), (eta + 1, -1.0)];
            let end = self.offsets.get(g + 1).copied().unwrap_or(self.cost.len());
            for i in (0..self.reserved).chain(self.offsets[g]..end) {
                if self.cost[i] != 0.0 {
                    terms.push((i, -self.cost[i]));
                }
            }
            m.rows.push(Row {
                terms,
                sense: Sense::AtLeast,
                rhs: -shift[g],
            });
        }
        if let Some(v) = cap {
            m.rows.push(Row {
                terms: cvar_terms,
                sense: Sense::AtMost,
                rhs: v + 1e-9 * v.abs().max(1.0),
            });
        }
        m
    }

    /// Group g's values in its own model's column order.
    fn values_of(&self, values: &[f64], g: usize, len: usize) -> Vec<f64> {
        let mut out = values[..self.reserved].to_vec();
        let start = self.offsets[g];
        out.extend_from_slice(&values[start..start + len - self.reserved]);
        out
    }
}

/// Solves a validated version 3 problem.
///
/// # Errors
/// A time limit hit before optimality, or a solver failure. Infeasibility is
/// a result.
pub(super) fn solve(
    problem: &Problem,
    st: &Stochastic,
    opts: &SolveOptions,
) -> Result<PlanResult, OptimizeError> {
    let start = Instant::now();
    let mip = !opts.relax;
    let deadline = opts.time_limit.map(|t| start + t);
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<(Vec<u64>, &Availability), usize> = HashMap::new();
    let mut group_of = Vec::with_capacity(st.scenarios.len());
    for (i, s) in st.scenarios.iter().enumerate() {
        let key = (
            s.demand.iter().flatten().map(|d| d.to_bits()).collect(),
            &s.available,
        );
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(Group {
                members: Vec::new(),
                probability: 0.0,
            });
            groups.len() - 1
        });
        groups[g].members.push(i);
        groups[g].probability += s.probability;
        group_of.push(g);
    }
    let problems: Vec<Problem> = groups
        .iter()
        .map(|g| problem.scenario(&st.scenarios[g.members[0]]))
        .collect();
    let mut setups: Vec<Setup<'_>> = problems.iter().map(Setup::new).collect();
    let mut result = report::empty(&setups[0], opts);
    result.schema_version = 3;
    let demand_of = |c: usize| -> f64 {
        st.scenarios
            .iter()
            .map(|s| s.probability * s.demand[c].iter().sum::<f64>())
            .sum()
    };
    result.gpu_hours.demand = (0..problem.classes.len()).map(demand_of).sum();
    let mut v3 = V3Result {
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
    };
    if let Some(v2) = result.v2.as_mut() {
        for (c, class) in v2.classes.iter_mut().enumerate() {
            class.demand_units = demand_of(c);
        }
    }
    let finish = |mut result: PlanResult, v3: V3Result| {
        result.v3 = Some(v3);
        result.timings.total_ms = ms(start.elapsed());
        Ok(result)
    };

    if let Some(why) = no_eligible(&setups[0], st).or_else(|| capacity(&setups, &group_of, st)) {
        result.infeasibility = Some(why);
        return finish(result, v3);
    }

    let build_start = Instant::now();
    let removed: usize = if opts.reduce {
        setups.iter_mut().map(|s| s.reduce(mip)).max().unwrap_or(0)
    } else {
        0
    };
    let scope = Scope {
        mip,
        purchases: true,
    };
    let parts: Vec<Part<'_>> = setups
        .into_iter()
        .map(|setup| {
            let all: Vec<usize> = (0..setup.levels.len()).collect();
            let (milp, vars) = build(&setup, &all, scope);
            Part { setup, milp, vars }
        })
        .collect();
    let reserved = parts[0].vars.reserved.iter().flatten().flatten().count();
    if parts
        .iter()
        .any(|p| p.vars.reserved != parts[0].vars.reserved)
    {
        return Err(OptimizeError::Solver(
            "the scenarios' models disagree on the reserved columns".to_owned(),
        ));
    }
    let extensive = (parts.len() > 1).then(|| Extensive::new(&parts, reserved));
    let build_ms = ms(build_start.elapsed());

    let baseline_start = Instant::now();
    let baselines: Vec<Option<f64>> = parts
        .iter()
        .map(|p| checks::baseline(&p.setup, mip, opts))
        .collect::<Result<_, _>>()?;
    result.timings.baseline_ms = ms(baseline_start.elapsed());
    let shortfall = st.risk.measure == Measure::SavingsShortfall;
    let missing: Vec<&str> = group_of
        .iter()
        .zip(&st.scenarios)
        .filter(|(g, _)| baselines[**g].is_none())
        .map(|(_, s)| s.id.as_str())
        .collect();
    let shift: Vec<f64> = baselines
        .iter()
        .map(|b| if shortfall { b.unwrap_or(0.0) } else { 0.0 })
        .collect();

    let solve_start = Instant::now();
    let solve_point = |lambda: f64| -> Result<Result<Vec<f64>, LpError>, OptimizeError> {
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let solved = match &extensive {
            None => {
                solve_model(
                    &parts[0].setup,
                    &parts[0].milp,
                    &parts[0].vars,
                    scope,
                    opts,
                    deadline,
                )
                .0
            }
            Some(ext) => {
                let m = ext.model(&groups, lambda, st.risk.beta, &shift, None);
                let first = m.solve_bounded(opts.backend, left(), None, opts.memory_limit);
                match first {
                    Ok(Solved {
                        values,
                        bound: None,
                        ..
                    }) if lambda == 1.0 => {
                        let v: f64 = m.vars.iter().zip(&values).map(|(v, x)| v.cost * x).sum();
                        let m2 = ext.model(&groups, lambda, st.risk.beta, &shift, Some(v));
                        m2.solve_bounded(opts.backend, left(), None, opts.memory_limit)
                    }
                    other => other,
                }
            }
        };
        let memory = || OptimizeError::MemoryLimit(opts.memory_limit.unwrap_or_default() >> 20);
        match solved {
            Ok(Solved {
                values,
                bound: None,
                ..
            }) => Ok(Ok(values)),
            // A v3 plan needs every frontier point proven: a search cut
            // short is reported by the limit that cut it.
            Ok(Solved {
                memory_stop: true, ..
            })
            | Err(LpError::MemoryLimit) => Err(memory()),
            Ok(_) | Err(LpError::TimeLimit) => Err(OptimizeError::TimeLimit(
                opts.time_limit.unwrap_or_default(),
            )),
            Err(LpError::Infeasible) => Ok(Err(LpError::Infeasible)),
            Err(e) => Err(OptimizeError::Solver(e.to_string())),
        }
    };
    let owned_hours = result.gpu_hours.owned;
    let plans_of = |values: &[f64]| -> Vec<Plan> {
        parts
            .iter()
            .enumerate()
            .map(|(g, p)| {
                let own = match &extensive {
                    None => values.to_vec(),
                    Some(ext) => ext.values_of(values, g, p.milp.vars.len()),
                };
                report::extract(&p.setup, &p.milp, &p.vars, &own, owned_hours)
            })
            .collect()
    };
    let costs_of = |plans: &[Plan]| -> Vec<(f64, f64)> {
        group_of
            .iter()
            .zip(&st.scenarios)
            .map(|(g, s)| (plans[*g].objective(), s.probability))
            .collect()
    };
    let input_baselines: Vec<Option<f64>> = group_of.iter().map(|g| baselines[*g]).collect();

    let mut points: Vec<(f64, Figures, Vec<Plan>)> = Vec::new();
    let lambdas: Vec<f64> = if shortfall && !missing.is_empty() {
        vec![0.0]
    } else {
        st.risk.frontier.clone()
    };
    // One class: every λ's purchase from the exact scan, and each
    // scenario's recourse for it from its own model with the purchase fixed.
    let scanned = if opts.reduce && extensive.is_some() {
        let setups: Vec<&Setup<'_>> = parts.iter().map(|p| &p.setup).collect();
        let probability: Vec<f64> = groups.iter().map(|g| g.probability).collect();
        Scan::new(&setups, &parts[0].vars, mip)
            .and_then(|s| s.frontier(&lambdas, &probability, &shift, st.risk.beta))
    } else {
        None
    };
    let mut fixed: Vec<(BTreeMap<usize, f64>, Vec<Plan>)> = Vec::new();
    for (i, lambda) in lambdas.into_iter().enumerate() {
        let plans = match scanned.as_ref().map(|s| &s[i]) {
            Some(counts) => match fixed.iter().find(|(c, _)| c == counts) {
                Some((_, plans)) => plans.clone(),
                None => {
                    let plans = fixed_plans(&parts, counts, owned_hours, opts, deadline)?;
                    fixed.push((counts.clone(), plans.clone()));
                    plans
                }
            },
            None => match solve_point(lambda)? {
                Ok(values) => plans_of(&values),
                Err(_) => {
                    result.infeasibility =
                        Some(match shared_capacity(&parts, &group_of, st, opts)? {
                            Some(why) => why,
                            None => json!({"kind": "integrality"}),
                        });
                    return finish(result, v3);
                }
            },
        };
        let f = figures(&costs_of(&plans), &input_baselines, st, lambda);
        points.push((lambda, f, plans));
        if extensive.is_none() {
            // One scenario: every λ has the same plan and figures.
            let (_, _, plans) = points.remove(0);
            let costs = costs_of(&plans);
            points = st
                .risk
                .frontier
                .iter()
                .map(|l| (*l, figures(&costs, &input_baselines, st, *l), plans.clone()))
                .collect();
            break;
        }
    }
    if shortfall && !missing.is_empty() {
        result.infeasibility = Some(json!({"kind": "no_baseline", "scenarios": missing}));
        return finish(result, v3);
    }
    result.timings.solve_ms = ms(solve_start.elapsed());
    let primary = points
        .iter()
        .position(|(l, _, _)| *l == st.risk.lambda)
        .unwrap_or(0);
    let (_, f, plans) = &points[primary];
    if let Some(budget) = problem.policy.budget
        && f.objective > budget * (1.0 + 1e-9) + 1e-9
    {
        result.infeasibility =
            Some(json!({"kind": "budget", "budget": budget, "min_cost": f.objective}));
        return finish(result, v3);
    }

    let (m_vars, m_ints, m_rows) = match &extensive {
        Some(ext) => {
            // The largest model solved: with the tail columns and rows when
            // some λ > 0, and the second step's row when λ = 1 is solved.
            let tail = st.risk.frontier.iter().any(|l| *l > 0.0);
            let second = st.risk.frontier.contains(&1.0);
            (
                ext.milp.vars.len() + if tail { 2 + groups.len() } else { 0 },
                ext.milp.integer_count(),
                ext.milp.rows.len() + if tail { groups.len() } else { 0 } + usize::from(second),
            )
        }
        None => (
            parts[0].milp.vars.len(),
            parts[0].milp.integer_count(),
            parts[0].milp.rows.len(),
        ),
    };
    result.model_stats = ModelStats {
        eligible_offers: parts[0].setup.offers.len(),
        demand_levels: parts.iter().map(|p| p.setup.levels.len()).sum(),
        variables: m_vars,
        integer_variables: m_ints,
        constraints: m_rows,
        reduced_variables: removed + parts.iter().map(|p| p.vars.dominated).sum::<usize>(),
        method: match (&scanned, &extensive) {
            (Some(_), _) => "scan",
            (None, Some(_)) => "extensive_form",
            (None, None) => "milp",
        },
    };
    result.timings.build_ms = build_ms;

    let expected = |x: &dyn Fn(&Plan) -> f64| -> f64 {
        groups
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
        owned: owned_hours,
        spot_effective: expected(&|p| p.gpu_hours.spot_effective),
        spot_paid: expected(&|p| p.gpu_hours.spot_paid),
        on_demand: expected(&|p| p.gpu_hours.on_demand),
    };
    let baseline = baselines
        .iter()
        .zip(&groups)
        .map(|(b, g)| b.map(|b| b * g.probability))
        .sum::<Option<f64>>();
    result.baseline_on_demand_cost = baseline;
    result.savings = baseline.map(|b| b - f.expected_cost);
    result.savings_pct = baseline
        .filter(|b| *b > 0.0)
        .map(|b| 100.0 * (b - f.expected_cost) / b);
    let mut scenario_hourly = BTreeMap::new();
    for (i, s) in st.scenarios.iter().enumerate() {
        let plan = &plans[group_of[i]];
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
    let demand_units: f64 = (0..problem.classes.len()).map(demand_of).sum();
    result.spot_share_of_demand = if demand_units > 0.0 {
        spot_units / demand_units
    } else {
        0.0
    };
    let owned_total = owned_hours.unwrap_or(0.0);
    let owned_used = if owned_total > 0.0 {
        let mut used = 0.0;
        for (p, g) in parts.iter().zip(&groups) {
            let none = vec![0.0; p.setup.offers.len()];
            used += g.probability * checks::usable_gpu_hours(&p.setup, &none, opts)?;
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
    let (_, f0, _) = &points[0];
    let mut flat = true;
    let mut gain: f64 = 0.0;
    let tau = st.risk.flat_tolerance;
    for (_, fp, _) in &points {
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
    finish(result, v3)
}

/// Each scenario's plan with the new purchases fixed at `counts` (column:
/// count): its own model, where only the hourly counts are left to choose.
fn fixed_plans(
    parts: &[Part<'_>],
    counts: &BTreeMap<usize, f64>,
    owned: Option<f64>,
    opts: &SolveOptions,
    deadline: Option<Instant>,
) -> Result<Vec<Plan>, OptimizeError> {
    parts
        .iter()
        .map(|p| {
            let mut m = p.milp.clone();
            for (&col, &count) in counts {
                m.vars[col].integer = false;
                m.vars[col].upper = Some(count);
                m.rows.push(Row {
                    terms: vec![(col, 1.0)],
                    sense: Sense::AtLeast,
                    rhs: count,
                });
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match m.solve_within(opts.backend, left, None) {
                Ok(Solved {
                    values,
                    bound: None,
                    ..
                }) => Ok(report::extract(&p.setup, &p.milp, &p.vars, &values, owned)),
                Ok(_) | Err(LpError::TimeLimit) => Err(OptimizeError::TimeLimit(
                    opts.time_limit.unwrap_or_default(),
                )),
                Err(e) => Err(OptimizeError::Solver(format!(
                    "a scenario with the purchase fixed: {e}"
                ))),
            }
        })
        .collect()
}

/// Check 1 (§11.10): classes with demand in some scenario and no offer.
fn no_eligible(setup: &Setup<'_>, st: &Stochastic) -> Option<Value> {
    let ids = |c: usize| -> Vec<&str> {
        st.scenarios
            .iter()
            .filter(|s| s.demand[c].iter().any(|d| *d > 0.0))
            .map(|s| s.id.as_str())
            .collect()
    };
    let empty: Vec<usize> = (0..setup.classes.len())
        .filter(|c| setup.classes[*c].eligible == 0 && !ids(*c).is_empty())
        .collect();
    let first = *empty.first()?;
    let name = |c: usize| setup.problem.classes[c].id.as_str();
    Some(json!({
        "kind": "no_eligible_offers",
        "class": name(first),
        "classes": empty.iter().map(|c| name(*c)).collect::<Vec<_>>(),
        "scenarios": ids(first),
    }))
}

/// A per-scenario check's report (§11.10): the first short scenario's own
/// report with its id, and `scenarios` listing what `entries` gives for
/// every short scenario, in input order. `short` is per group.
fn per_scenario(
    short: &[Option<Value>],
    group_of: &[usize],
    st: &Stochastic,
    entries: impl Fn(&str, &Value) -> Vec<Value>,
) -> Option<Value> {
    let mut first: Option<Value> = None;
    let mut all = Vec::new();
    for (s, g) in st.scenarios.iter().zip(group_of) {
        let Some(why) = &short[*g] else {
            continue;
        };
        if first.is_none() {
            let mut doc = why.clone();
            doc["scenario"] = json!(s.id);
            first = Some(doc);
        }
        all.extend(entries(&s.id, why));
    }
    let mut doc = first?;
    doc["scenarios"] = json!(all);
    Some(doc)
}

/// Check 2 (§11.10): the version 2 capacity check in every scenario.
fn capacity(setups: &[Setup<'_>], group_of: &[usize], st: &Stochastic) -> Option<Value> {
    let short: Vec<Option<Value>> = setups.iter().map(checks::capacity).collect();
    let mut doc = per_scenario(&short, group_of, st, |id, why| {
        why["classes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                json!({"scenario": id, "class": c["class"], "hours": c["hours"],
                       "max_shortfall": c["max_shortfall"]})
            })
            .collect()
    })?;
    doc.as_object_mut()?.remove("classes");
    Some(doc)
}

/// Check 3 (§11.10), once the extensive form has no plan: the scenarios
/// whose own continuous problem is infeasible; `None` means integrality.
fn shared_capacity(
    parts: &[Part<'_>],
    group_of: &[usize],
    st: &Stochastic,
    opts: &SolveOptions,
) -> Result<Option<Value>, OptimizeError> {
    let short: Vec<Option<Value>> = parts
        .iter()
        .map(|p| checks::shared_capacity(&p.setup, opts))
        .collect::<Result<_, _>>()?;
    Ok(per_scenario(&short, group_of, st, |id, why| {
        vec![json!({"scenario": id, "hours": why["hours"]})]
    }))
}
