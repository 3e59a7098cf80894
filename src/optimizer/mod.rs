//! The purchase-plan optimizer (docs/planning-model.md): pure and synchronous. It
//! knows nothing of clouds, SQL or HTTP; callers run it on a blocking thread.
//!
//! Version 1 and version 2 problems go through one model: a v1 problem is
//! one class with no filters or perf map and nothing owned, and class-split
//! variables exist only where an offer serves more than one class in a level
//! (see `build`), so a v1 problem builds exactly the v1 MILP.
//!
//! Exact reductions before solving (each keeps the optimal objective; the
//! randomized reduced-vs-unreduced tests check both versions):
//! - Hours that share every hour-dependent input (each class's demand, the
//!   hourly spot prices, the owned capacity) share one set of hourly
//!   variables weighted by their count. Given the reserved counts the hours
//!   are independent, and equal hours have equal optimal choices (with or
//!   without integer hourly counts); the plan is expanded back to every hour.
//! - Of an offer's reserved options only the cheapest (first on ties) is kept:
//!   options share the offer's GPUs, cap and class factors, so swapping a new
//!   purchase for it never costs more. Owned entries keep their own option:
//!   they are facts, not choices.
//! - With continuous hourly counts, for each class `c` let `b_c` be the
//!   cheapest on-demand price per unit of work (`o/(φ·g)`) among uncapped
//!   offers serving `c` (its anchor). Uncapped on-demand at `b_c` can stand
//!   in for anything dearer serving `c`, without caps or share limits, so
//!   dropped are: `c`'s share of other on-demand offers at `b_c` or more per
//!   unit, `c`'s share of spot at `b_c` or more per useful unit (hour by hour
//!   when the price is hourly), and new reservations whose unit-hour costs at
//!   least `b_c` for every class they could serve (the hours of such an
//!   instance, whichever classes they go to, could be bought as anchor
//!   on-demand for no more). Owned capacity is free and untouched.
//! - With whole hourly counts the anchors would be wrong (a dearer unit can
//!   come in a better-sized instance), but an instance can still stand in
//!   for another: an uncapped on-demand offer that costs no more an hour and
//!   does at least as much work for every class with demand in a level
//!   replaces, one for one, any spot or on-demand instance that does no
//!   more. The swap keeps every coverage row met, meets no cap (it has
//!   none) and no spot or pool share (on-demand counts in none), so such
//!   variables are left out (`Setup::swapped_out`; of two equal on-demand
//!   offers the first is kept). On a catalog several regions sell the same
//!   GPU at several prices, and without this every dearer one is a whole
//!   count the per-hour branch and bound has to rule out.
//! - Reserved capacity is split between classes per pool of offers whose
//!   instances do the same work for every class (same `φ·g` per class, e.g.
//!   one GPU model and size in several regions): such instances are
//!   interchangeable in every coverage row, so a pool's split can be handed
//!   back to its offers, each up to what it holds, and any per-offer split is
//!   a pool split. This is what keeps several classes affordable: one split
//!   row per pool and hour instead of one per offer.
//! - Where an offer serves a single class in a level, its class split is the
//!   offer itself (`S_kct = S_kt`, `O_kct = O_kt`), and its reserved share
//!   sits at its bound `Σ_j R_kj + W_kt`: nothing else can use it there.

mod build;
mod change;
mod checks;
mod hourly;
mod incumbent;
pub mod job;
mod lp;
mod measure;
mod model;
mod report;
mod reserved_search;
mod risk;
mod scan;
mod setup;
mod verify;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

pub use change::{PlanChange, compare};
pub use lp::{Backend, LpError, Search, SearchSink};
pub use measure::{cvar, quantile};
pub use model::{
    DemandClass, DemandPaths, MAX_CLASSES, MAX_DEMAND_PER_HOUR, MAX_HORIZON_HOURS, MAX_OFFERS,
    MAX_OWNED, MAX_SCENARIO_HOURS, MAX_SCENARIOS, Measure, Offer, Owned, Policy, Problem, Ranges,
    ReservedOption, Residuals, Risk, Scenario, SplitMix64, SpotPrice, Stochastic, ValidationError,
    half_width,
};
pub use risk::{FrontierPoint, Holding, Progress, RiskReport, ScenarioReport, Shortfall, V3Result};
pub use verify::verify;

use build::{Scope, build};
use setup::Setup;

#[derive(Debug, Clone)]
pub struct SolveOptions {
    /// LP relaxation: every count continuous (docs/planning-model.md §3.8).
    pub relax: bool,
    pub time_limit: Option<Duration>,
    /// Apply the dominance reductions (they never change the optimum; off only
    /// to check exactly that).
    pub reduce: bool,
    pub backend: Backend,
    /// Bytes a MIP search may add to the process before it stops with its
    /// best plan, as the time limit does (`planner.max_solve_memory_mib`).
    pub memory_limit: Option<u64>,
    /// Decompose version 3 problems by scenario where that applies (off
    /// only to check the decomposition against the extensive form).
    pub decompose: bool,
    /// Hears a long search's bound and best plan as it goes.
    pub progress: Option<ProgressSink>,
    /// Hears a MIP's branch-and-bound (nodes, bound, gap) as it goes.
    pub search: Option<SearchSink>,
    /// Once set, a search that can stop with its best plan does so, as at
    /// its time limit (`stopped_by: "stopped"`).
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// Where a solve reports its [`Progress`]; called from the solving thread.
#[derive(Clone)]
pub struct ProgressSink(pub std::sync::Arc<dyn Fn(&Progress) + Send + Sync>);

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

impl Default for SolveOptions {
    fn default() -> Self {
        Self {
            relax: false,
            time_limit: None,
            reduce: true,
            backend: Backend::default(),
            memory_limit: None,
            decompose: true,
            progress: None,
            search: None,
            stop: None,
        }
    }
}

/// The result document (docs/planning-model.md §4.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanResult {
    pub schema_version: u32,
    pub name: Option<String>,
    pub mode: &'static str,
    pub horizon_hours: usize,
    pub status: &'static str,
    pub objective: Option<f64>,
    pub cost_breakdown: Option<CostBreakdown>,
    pub reserved: Vec<ReservedPurchase>,
    pub hourly: Hourly,
    pub baseline_on_demand_cost: Option<f64>,
    pub savings: Option<f64>,
    pub savings_pct: Option<f64>,
    pub reserved_gpus: f64,
    pub gpu_hours: GpuHours,
    pub spot_share_of_demand: f64,
    pub reserved_utilization: Option<f64>,
    pub excluded_offers: Vec<Excluded>,
    pub infeasibility: Option<Value>,
    pub model_stats: ModelStats,
    pub timings: Timings,
    pub mip_gap: f64,
    /// With `status: "time_limit"`: the best lower bound proven on the
    /// optimum, and the relative gap of the plan above it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_bound: Option<f64>,
    /// With `status: "time_limit"`: which limit stopped the search,
    /// `time_limit` or `memory_limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// The schema version 2 additions (§10.13); absent from v1 results.
    #[serde(flatten)]
    pub v2: Option<V2Result>,
    /// The schema version 3 additions (§11.12).
    #[serde(flatten)]
    pub v3: Option<V3Result>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct V2Result {
    /// What the owned reservations cost over the horizon, whatever the plan.
    pub sunk_cost: f64,
    /// `objective + sunk_cost`; null when there is no plan.
    pub total_cost: Option<f64>,
    pub owned: Vec<OwnedReport>,
    pub owned_utilization: Option<f64>,
    pub classes: Vec<ClassReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OwnedReport {
    pub offer: String,
    pub option: String,
    pub count: f64,
    pub remaining_hours: Option<u64>,
    pub active_hours: usize,
    pub gpus: f64,
    pub effective_hourly_price: f64,
    pub sunk_cost: f64,
    /// Whether the offer serves some class (false: paid for, never used).
    pub usable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassReport {
    pub id: String,
    /// Which rows the class's perf factors came from, when it named a workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perf_basis: Option<Value>,
    pub demand_units: f64,
    pub eligible_offers: usize,
    pub served_units: Served,
    pub spot_share_of_demand: f64,
    pub excluded_offers: Vec<Excluded>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Served {
    pub reserved: f64,
    pub spot: f64,
    pub on_demand: f64,
}

/// One class's share of each offer's instances, per hour.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ClassHourly {
    pub reserved_instances: BTreeMap<String, Vec<f64>>,
    pub spot_instances: BTreeMap<String, Vec<f64>>,
    pub on_demand_instances: BTreeMap<String, Vec<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostBreakdown {
    pub reserved: f64,
    pub spot: f64,
    pub on_demand: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReservedPurchase {
    pub offer: String,
    pub option: String,
    pub count: f64,
    pub gpus: f64,
    pub effective_hourly_price: f64,
    pub horizon_cost: f64,
    pub term_hours: f64,
    pub commitment_liability: f64,
    pub break_even_utilization: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hourly {
    pub spot_instances: BTreeMap<String, Vec<f64>>,
    pub on_demand_instances: BTreeMap<String, Vec<f64>>,
    /// The class split (v2 only).
    pub classes: Option<BTreeMap<String, ClassHourly>>,
    /// Each scenario's own recourse (v3 only, which has no top-level counts).
    pub scenarios: Option<BTreeMap<String, Hourly>>,
}

impl Serialize for Hourly {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        if let Some(scenarios) = &self.scenarios {
            m.serialize_entry("scenarios", scenarios)?;
        } else {
            m.serialize_entry("spot_instances", &self.spot_instances)?;
            m.serialize_entry("on_demand_instances", &self.on_demand_instances)?;
            if let Some(classes) = &self.classes {
                m.serialize_entry("classes", classes)?;
            }
        }
        m.end()
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GpuHours {
    pub demand: f64,
    pub reserved: f64,
    /// Owned GPU-hours (v2 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owned: Option<f64>,
    pub spot_effective: f64,
    pub spot_paid: f64,
    pub on_demand: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Excluded {
    pub offer: String,
    pub reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ModelStats {
    pub eligible_offers: usize,
    pub demand_levels: usize,
    pub variables: usize,
    pub integer_variables: usize,
    pub constraints: usize,
    /// Variables the exact reductions removed before solving.
    pub reduced_variables: usize,
    /// How the model was solved: `milp`, or `decomposition` for whole
    /// hourly counts of one class (see the module `hourly`).
    pub method: &'static str,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Timings {
    pub build_ms: f64,
    pub solve_ms: f64,
    pub baseline_ms: f64,
    pub total_ms: f64,
}

/// Solving failed in a way that is neither a plan nor an infeasibility.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptimizeError {
    #[error("no optimal plan within the time limit ({0:?}); raise it or relax the problem")]
    TimeLimit(Duration),
    #[error(
        "no plan within the memory limit of {0} MiB (planner.max_solve_memory_mib); relax the problem or drop integer_hourly"
    )]
    MemoryLimit(u64),
    #[error("the solver failed: {0}")]
    Solver(String),
}

/// How far a plan's `objective` may be above the optimum, given a proven
/// lower `bound`, relative to the objective (0 for a zero objective).
fn relative_gap(objective: f64, bound: f64) -> f64 {
    if objective.abs() > 0.0 {
        ((objective - bound) / objective.abs()).max(0.0)
    } else {
        0.0
    }
}

/// Solves a validated problem.
///
/// # Errors
/// A time limit hit before optimality, or a solver failure. Infeasibility is a
/// result (`status: "infeasible"`), not an error.
pub fn solve(problem: &Problem, opts: &SolveOptions) -> Result<PlanResult, OptimizeError> {
    if let Some(st) = &problem.stochastic {
        return risk::solve(problem, st, opts);
    }
    let start = Instant::now();
    let mip = !opts.relax;
    let mut setup = Setup::new(problem);
    let mut result = report::empty(&setup, opts);

    if problem
        .classes
        .iter()
        .all(|c| c.demand.iter().all(|d| *d == 0.0))
    {
        result.status = "optimal";
        result.objective = Some(0.0);
        result.cost_breakdown = Some(CostBreakdown {
            reserved: 0.0,
            spot: 0.0,
            on_demand: 0.0,
        });
        result.baseline_on_demand_cost = Some(0.0);
        result.savings = Some(0.0);
        finish_v2(&setup, &mut result, None, opts)?;
        result.timings.total_ms = ms(start.elapsed());
        return Ok(result);
    }
    if let Some(why) = checks::no_eligible(&setup).or_else(|| checks::capacity(&setup)) {
        result.infeasibility = Some(why);
        return Ok(result);
    }

    let build_start = Instant::now();
    let removed_reserved = if opts.reduce { setup.reduce(mip) } else { 0 };
    let all: Vec<usize> = (0..setup.levels.len()).collect();
    let (milp, vars) = build(
        &setup,
        &all,
        Scope {
            mip,
            purchases: true,
        },
    );
    let build_ms = ms(build_start.elapsed());
    let solve_start = Instant::now();
    let deadline = opts.time_limit.map(|t| solve_start + t);
    let scope = Scope {
        mip,
        purchases: true,
    };
    let (solved, method) = solve_model(&setup, &milp, &vars, scope, opts, deadline);
    result.model_stats.method = method;
    let lp::Solved {
        values,
        bound,
        memory_stop,
    } = match solved {
        Ok(v) => v,
        Err(LpError::Infeasible) => {
            result.infeasibility = Some(
                checks::shared_capacity(&setup, opts)?
                    .unwrap_or_else(|| json!({"kind": "integrality"})),
            );
            return Ok(result);
        }
        Err(LpError::TimeLimit) => {
            return Err(OptimizeError::TimeLimit(
                opts.time_limit.unwrap_or_default(),
            ));
        }
        Err(LpError::MemoryLimit) => {
            return Err(OptimizeError::MemoryLimit(
                opts.memory_limit.unwrap_or_default() >> 20,
            ));
        }
        Err(e) => return Err(OptimizeError::Solver(e.to_string())),
    };
    let stopped_by = bound.map(|_| {
        if memory_stop {
            "memory_limit"
        } else {
            "time_limit"
        }
    });
    let solve_ms = ms(solve_start.elapsed());
    let mut plan = report::extract(&setup, &milp, &vars, &values, result.gpu_hours.owned);
    let objective = plan.objective();
    result.model_stats = ModelStats {
        eligible_offers: setup.offers.len(),
        demand_levels: setup.levels.len(),
        variables: milp.vars.len(),
        integer_variables: milp.integer_count(),
        constraints: milp.rows.len(),
        reduced_variables: removed_reserved + vars.dominated,
        method,
    };
    result.timings.build_ms = build_ms;
    result.timings.solve_ms = solve_ms;

    let over = |cost: f64, budget: f64| cost > budget * (1.0 + 1e-9) + 1e-9;
    if let Some(bound) = bound {
        // The time limit stopped the search: the best plan found, checked
        // independently, with what is proven about the optimum.
        let bound = bound.max(checks::relaxed_bound(&setup, opts)?);
        if let Some(budget) = problem.policy.budget
            && over(bound, budget)
        {
            result.infeasibility =
                Some(json!({"kind": "budget", "budget": budget, "min_cost": bound}));
            result.timings.total_ms = ms(start.elapsed());
            return Ok(result);
        }
        result.best_bound = Some(bound);
        result.stopped_by = stopped_by;
        result.gap = Some(relative_gap(objective, bound));
    } else if let Some(budget) = problem.policy.budget
        && over(objective, budget)
    {
        result.infeasibility =
            Some(json!({"kind": "budget", "budget": budget, "min_cost": objective}));
        result.timings.total_ms = ms(start.elapsed());
        return Ok(result);
    }

    let baseline_start = Instant::now();
    let baseline = if bound.is_some() {
        // A plan cut short by the time limit goes out within that limit: the
        // baseline gets what is left of it, and without one there is no
        // savings figure.
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|t| t.is_zero()) {
            None
        } else {
            let within = SolveOptions {
                time_limit: left,
                ..opts.clone()
            };
            match checks::baseline(&setup, mip, &within) {
                Err(OptimizeError::TimeLimit(_)) => None,
                other => other?,
            }
        }
    } else {
        checks::baseline(&setup, mip, opts)?
    };
    result.timings.baseline_ms = ms(baseline_start.elapsed());

    let total_demand = result.gpu_hours.demand;
    result.status = if bound.is_some() {
        "time_limit"
    } else {
        "optimal"
    };
    result.objective = Some(objective);
    result.baseline_on_demand_cost = baseline;
    result.savings = baseline.map(|b| b - objective);
    result.savings_pct = baseline
        .filter(|b| *b > 0.0)
        .map(|b| 100.0 * (b - objective) / b);
    result.reserved_gpus = plan.reserved_gpus;
    result.reserved = std::mem::take(&mut plan.reserved);
    result.hourly = std::mem::take(&mut plan.hourly);
    result.cost_breakdown = Some(plan.breakdown.clone());
    result.gpu_hours = std::mem::take(&mut plan.gpu_hours);
    if problem.schema_version < 2 {
        result.spot_share_of_demand = if total_demand > 0.0 {
            result.gpu_hours.spot_effective / total_demand
        } else {
            0.0
        };
        let (r, t) = (plan.reserved_gpus, problem.horizon() as f64);
        result.reserved_utilization = (r > 0.0).then(|| {
            problem.classes[0]
                .demand
                .iter()
                .map(|d| d.min(r))
                .sum::<f64>()
                / (r * t)
        });
    }
    finish_v2(&setup, &mut result, Some(&plan), opts)?;
    if bound.is_some() {
        let doc = serde_json::to_value(&result)
            .map_err(|e| OptimizeError::Solver(format!("cannot encode the plan: {e}")))?;
        verify(problem, &doc, opts.relax).map_err(|e| {
            OptimizeError::Solver(format!("the best plan found fails its check: {e}"))
        })?;
    }
    result.timings.total_ms = ms(start.elapsed());
    Ok(result)
}

/// Solves a model `build` made for `scope`: whole hourly counts of one class,
/// or of several with nothing to buy, by decomposition, anything else by the
/// MILP solver, started from a first plan when hourly counts are whole. Also
/// says which method it used.
fn solve_model(
    setup: &Setup<'_>,
    milp: &lp::Milp,
    vars: &build::Vars,
    scope: Scope,
    opts: &SolveOptions,
    deadline: Option<Instant>,
) -> (Result<lp::Solved, LpError>, &'static str) {
    let whole_hours = scope.mip && setup.problem.policy.integer_hourly;
    let decomposed = if whole_hours {
        hourly::solve(setup, milp, vars, deadline, opts.search.as_ref())
    } else {
        hourly::Outcome::NotApplicable
    };
    match decomposed {
        hourly::Outcome::Solved(s) => (Ok(s), "decomposition"),
        hourly::Outcome::Failed(e) => (Err(e), "decomposition"),
        hourly::Outcome::NotApplicable => {
            let start = if whole_hours {
                // The search over reserved counts values points far better
                // than the local search, so only the rounded plan starts it.
                let local_search = !reserved_search::applies(milp, vars);
                incumbent::find(
                    setup,
                    milp,
                    vars,
                    scope.purchases,
                    local_search,
                    opts,
                    deadline,
                )
            } else {
                None
            };
            // Without new purchases nothing links the levels, so the first
            // plan, every level solved exactly on its own, is the optimum
            // (the on-demand baseline, or a plan with nothing to buy).
            let linked = vars.reserved.iter().flatten().any(Option::is_some);
            let start = match start {
                Some(values) if !linked => {
                    let solved = lp::Solved {
                        values,
                        bound: None,
                        memory_stop: false,
                    };
                    return (Ok(solved), "decomposition");
                }
                other => other,
            };
            if whole_hours
                && let Some(solved) =
                    reserved_search::solve(setup, milp, vars, start.clone(), opts, deadline)
            {
                return (solved, "reserved_search");
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            (
                milp.solve_bounded(
                    opts.backend,
                    left,
                    start.as_deref(),
                    opts.memory_limit,
                    opts.search.as_ref(),
                ),
                "milp",
            )
        }
    }
}

/// Fills the v2 additions of an optimal result: costs with the sunk part,
/// utilisation and what each class got.
fn finish_v2(
    setup: &Setup<'_>,
    result: &mut PlanResult,
    plan: Option<&report::Plan>,
    opts: &SolveOptions,
) -> Result<(), OptimizeError> {
    let Some(v2) = result.v2.as_mut() else {
        return Ok(());
    };
    v2.total_cost = result.objective.map(|o| o + v2.sunk_cost);
    let none = vec![0.0; setup.offers.len()];
    let bought = plan.map_or(&none, |p| &p.bought);
    let owned_hours = result.gpu_hours.owned.unwrap_or(0.0);
    let owned_used = if owned_hours > 0.0 || plan.is_some_and(|p| p.reserved_gpus > 0.0) {
        checks::usable_gpu_hours(setup, &none, opts)?
    } else {
        0.0
    };
    v2.owned_utilization = (owned_hours > 0.0).then(|| owned_used / owned_hours);
    if let Some(plan) = plan {
        let new_hours = plan.reserved_gpus * setup.problem.horizon() as f64;
        if new_hours > 0.0 {
            let with_new = checks::usable_gpu_hours(setup, bought, opts)?;
            result.reserved_utilization = Some((with_new - owned_used) / new_hours);
        }
        let mut spot_units = 0.0;
        for (class, served) in v2.classes.iter_mut().zip(&plan.served) {
            class.served_units = served.clone();
            class.spot_share_of_demand = if class.demand_units > 0.0 {
                served.spot / class.demand_units
            } else {
                0.0
            };
            spot_units += served.spot;
        }
        let demand = result.gpu_hours.demand;
        result.spot_share_of_demand = if demand > 0.0 {
            spot_units / demand
        } else {
            0.0
        };
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_v2;
#[cfg(test)]
mod tests_v3;
