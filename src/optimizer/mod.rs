//! The purchase-plan optimizer (docs/planning-model.md): pure and synchronous. It
//! knows nothing of clouds, SQL or HTTP; callers run it on a blocking thread.
//!
//! Exact reductions before solving (each keeps the optimal objective):
//! - Hours with equal demand share one set of hourly variables weighted by
//!   their count. Given the reserved counts the hours are independent, and
//!   equal hours have equal optimal choices (with or without integer hourly
//!   counts); the plan is expanded back to every hour.
//! - Of an offer's reserved options only the cheapest (first on ties) is kept:
//!   options share the offer's GPUs and cap, so swapping for it never costs more.
//! - With continuous hourly counts, let `b` be the cheapest on-demand price per
//!   GPU-hour among offers without an on-demand cap. Uncapped on-demand supply
//!   at `b` can stand in for anything dearer, without caps or share limits, so
//!   dropped are: other uncapped on-demand offers, capped ones at `b` or more
//!   per GPU, spot at `b` or more per useful GPU, and reserved options at `b` or
//!   more per GPU-hour.

mod change;
mod lp;
mod model;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

pub use change::{PlanChange, compare};
pub use lp::{Backend, LpError};
pub use model::{
    MAX_DEMAND_PER_HOUR, MAX_HORIZON_HOURS, MAX_OFFERS, Offer, Policy, Problem, ReservedOption,
    ValidationError,
};

use lp::{Milp, Row, Sense};

#[derive(Debug, Clone)]
pub struct SolveOptions {
    /// LP relaxation: every count continuous (docs/planning-model.md §3.8).
    pub relax: bool,
    pub time_limit: Option<Duration>,
    /// Apply the dominance reductions (they never change the optimum; off only
    /// to check exactly that).
    pub reduce: bool,
    pub backend: Backend,
}

impl Default for SolveOptions {
    fn default() -> Self {
        Self {
            relax: false,
            time_limit: None,
            reduce: true,
            backend: Backend::default(),
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

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Hourly {
    pub spot_instances: BTreeMap<String, Vec<f64>>,
    pub on_demand_instances: BTreeMap<String, Vec<f64>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GpuHours {
    pub demand: f64,
    pub reserved: f64,
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
    #[error("the solver failed: {0}")]
    Solver(String),
}

/// Which filter excludes an offer, checked in the order the model fixes.
fn exclusion(o: &Offer, p: &Policy) -> Option<&'static str> {
    let outside = |list: &Option<Vec<String>>, v: &str| {
        list.as_ref().is_some_and(|l| !l.iter().any(|x| x == v))
    };
    if outside(&p.allowed_clouds, &o.cloud) {
        Some("cloud")
    } else if outside(&p.allowed_regions, &o.region) {
        Some("region")
    } else if outside(&p.gpu_models, &o.gpu_model) {
        Some("gpu_model")
    } else if p
        .min_gpu_memory_gib
        .is_some_and(|min| o.gpu_memory_gib.is_none_or(|m| m < min))
    {
        Some("gpu_memory")
    } else {
        None
    }
}

/// An eligible offer with what the model needs of it.
struct Eligible<'a> {
    offer: &'a Offer,
    g: f64,
    /// Effective GPUs per spot instance; `None` when the offer has no usable spot.
    spot_gpus: Option<f64>,
    /// Whether its on-demand capacity gets variables (after reductions).
    on_demand: bool,
    /// Which reserved options get variables (after reductions).
    options: Vec<bool>,
}

/// Applies the dominance reductions of the module docs; returns how many
/// variables per demand level (hourly) and in total (reserved) it removed.
fn reduce(eligible: &mut [Eligible<'_>], continuous_hourly: bool) -> (usize, usize) {
    let mut removed_reserved = 0;
    for e in eligible.iter_mut() {
        let best = e
            .offer
            .reserved
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.effective_hourly().total_cmp(&b.1.effective_hourly()))
            .map(|(j, _)| j);
        for (j, keep) in e.options.iter_mut().enumerate() {
            if *keep && Some(j) != best {
                *keep = false;
                removed_reserved += 1;
            }
        }
    }
    if !continuous_hourly {
        return (0, removed_reserved);
    }
    let Some((anchor, b)) = eligible
        .iter()
        .enumerate()
        .filter(|(_, e)| e.on_demand && e.offer.max_on_demand_instances.is_none())
        .map(|(k, e)| (k, e.offer.on_demand_price.unwrap_or(f64::INFINITY) / e.g))
        .min_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return (0, removed_reserved);
    };
    let mut removed_hourly = 0;
    for (k, e) in eligible.iter_mut().enumerate() {
        let od_per_gpu = e.offer.on_demand_price.unwrap_or(f64::INFINITY) / e.g;
        if e.on_demand
            && k != anchor
            && (e.offer.max_on_demand_instances.is_none() || od_per_gpu >= b)
        {
            e.on_demand = false;
            removed_hourly += 1;
        }
        if let (Some(sg), Some(price)) = (e.spot_gpus, e.offer.spot_price)
            && price / sg >= b
        {
            e.spot_gpus = None;
            removed_hourly += 1;
        }
        for (j, keep) in e.options.iter_mut().enumerate() {
            if *keep && e.offer.reserved[j].effective_hourly() / e.g >= b {
                *keep = false;
                removed_reserved += 1;
            }
        }
    }
    (removed_hourly, removed_reserved)
}

/// Variables of one demand level.
struct LevelVars {
    spot: Vec<Option<usize>>,
    on_demand: Vec<Option<usize>>,
}

/// Solves a validated problem.
///
/// # Errors
/// A time limit hit before optimality, or a solver failure. Infeasibility is a
/// result (`status: "infeasible"`), not an error.
pub fn solve(problem: &Problem, opts: &SolveOptions) -> Result<PlanResult, OptimizeError> {
    let start = Instant::now();
    let policy = &problem.policy;
    let mip = !opts.relax;
    let t_len = problem.demand.len();
    let mut excluded = Vec::new();
    let mut eligible = Vec::new();
    let no_spot = policy.max_spot_share == Some(0.0) || policy.max_pool_share == Some(0.0);
    for o in &problem.offers {
        match exclusion(o, policy) {
            Some(reason) => excluded.push(Excluded {
                offer: o.id.clone(),
                reason,
            }),
            None => {
                let g = f64::from(o.gpus_per_instance);
                let gamma = o.spot_yield(policy.spot_overhead_factor);
                let spot_gpus = (o.spot_price.is_some()
                    && gamma > 0.0
                    && o.max_spot_instances != Some(0.0)
                    && !no_spot)
                    .then_some(gamma * g);
                eligible.push(Eligible {
                    offer: o,
                    g,
                    spot_gpus,
                    on_demand: o.on_demand_price.is_some()
                        && o.max_on_demand_instances != Some(0.0),
                    options: vec![o.max_reserved_instances != Some(0.0); o.reserved.len()],
                });
            }
        }
    }
    let mut result = empty_result(problem, opts, excluded);

    let total_demand: f64 = problem.demand.iter().sum();
    if problem.demand.iter().all(|d| *d == 0.0) {
        result.status = "optimal";
        result.objective = Some(0.0);
        result.cost_breakdown = Some(CostBreakdown {
            reserved: 0.0,
            spot: 0.0,
            on_demand: 0.0,
        });
        result.baseline_on_demand_cost = Some(0.0);
        result.savings = Some(0.0);
        result.timings.total_ms = ms(start.elapsed());
        return Ok(result);
    }
    if eligible.is_empty() {
        result.infeasibility = Some(json!({"kind": "no_eligible_offers"}));
        return Ok(result);
    }
    if let Some(capacity) = capacity_shortfall(problem, &eligible) {
        result.infeasibility = Some(capacity);
        return Ok(result);
    }

    // Distinct demand levels, in order of first appearance.
    let mut level_of = Vec::with_capacity(t_len);
    let mut levels: Vec<(f64, f64)> = Vec::new();
    let mut index: BTreeMap<u64, usize> = BTreeMap::new();
    for d in &problem.demand {
        let i = *index.entry(d.to_bits()).or_insert_with(|| {
            levels.push((*d, 0.0));
            levels.len() - 1
        });
        levels[i].1 += 1.0;
        level_of.push(i);
    }

    let build_start = Instant::now();
    let (removed_hourly, removed_reserved) = if opts.reduce {
        reduce(&mut eligible, !(mip && policy.integer_hourly))
    } else {
        (0, 0)
    };
    let (milp, reserved_vars, level_vars) = build(&eligible, &levels, policy, mip, true);
    let build_ms = ms(build_start.elapsed());
    let solve_start = Instant::now();
    let values = match milp.solve(opts.backend, opts.time_limit) {
        Ok(v) => v,
        Err(LpError::Infeasible) => {
            result.infeasibility = Some(json!({"kind": "integrality"}));
            return Ok(result);
        }
        Err(LpError::TimeLimit) => {
            return Err(OptimizeError::TimeLimit(
                opts.time_limit.unwrap_or_default(),
            ));
        }
        Err(e) => return Err(OptimizeError::Solver(e.to_string())),
    };
    let solve_ms = ms(solve_start.elapsed());

    // Report rounded integers and clean continuous values, then cost that plan.
    let value = |var: usize| {
        let v = values[var];
        if milp.vars[var].integer {
            v.round()
        } else if v.abs() < 1e-9 {
            0.0
        } else {
            v
        }
    };
    let t = t_len as f64;
    let mut breakdown = CostBreakdown {
        reserved: 0.0,
        spot: 0.0,
        on_demand: 0.0,
    };
    let mut reserved_gpus = 0.0;
    for (k, e) in eligible.iter().enumerate() {
        for (j, opt) in e.offer.reserved.iter().enumerate() {
            let Some(var) = reserved_vars[k][j] else {
                continue;
            };
            let count = value(var);
            if count <= 0.0 {
                continue;
            }
            let r = opt.effective_hourly();
            breakdown.reserved += t * r * count;
            reserved_gpus += e.g * count;
            result.reserved.push(ReservedPurchase {
                offer: e.offer.id.clone(),
                option: opt.id.clone(),
                count,
                gpus: e.g * count,
                effective_hourly_price: r,
                horizon_cost: t * r * count,
                term_hours: opt.term_hours,
                commitment_liability: count * (opt.upfront + opt.hourly_price * opt.term_hours),
                break_even_utilization: e.offer.on_demand_price.filter(|o| *o > 0.0).map(|o| r / o),
            });
        }
    }
    let mut gpu_hours = GpuHours {
        demand: total_demand,
        reserved: reserved_gpus * t,
        ..GpuHours::default()
    };
    for (k, e) in eligible.iter().enumerate() {
        let series = |pick: &dyn Fn(&LevelVars) -> Option<usize>| -> Vec<f64> {
            level_of
                .iter()
                .map(|l| pick(&level_vars[*l]).map_or(0.0, value))
                .collect()
        };
        let spot = series(&|lv| lv.spot[k]);
        let od = series(&|lv| lv.on_demand[k]);
        let spot_sum: f64 = spot.iter().sum();
        let od_sum: f64 = od.iter().sum();
        if spot_sum > 0.0 {
            breakdown.spot += e.offer.spot_price.unwrap_or(0.0) * spot_sum;
            gpu_hours.spot_paid += e.g * spot_sum;
            gpu_hours.spot_effective += e.spot_gpus.unwrap_or(0.0) * spot_sum;
            result
                .hourly
                .spot_instances
                .insert(e.offer.id.clone(), spot);
        }
        if od_sum > 0.0 {
            breakdown.on_demand += e.offer.on_demand_price.unwrap_or(0.0) * od_sum;
            gpu_hours.on_demand += e.g * od_sum;
            result
                .hourly
                .on_demand_instances
                .insert(e.offer.id.clone(), od);
        }
    }
    let objective = breakdown.reserved + breakdown.spot + breakdown.on_demand;
    result.model_stats = ModelStats {
        eligible_offers: eligible.len(),
        demand_levels: levels.len(),
        variables: milp.vars.len(),
        integer_variables: milp.integer_count(),
        constraints: milp.rows.len(),
        reduced_variables: removed_reserved
            + removed_hourly * levels.iter().filter(|(d, _)| *d > 0.0).count(),
    };
    result.timings.build_ms = build_ms;
    result.timings.solve_ms = solve_ms;

    if let Some(budget) = policy.budget
        && objective > budget * (1.0 + 1e-9) + 1e-9
    {
        result.reserved.clear();
        result.hourly = Hourly::default();
        result.infeasibility =
            Some(json!({"kind": "budget", "budget": budget, "min_cost": objective}));
        result.timings.total_ms = ms(start.elapsed());
        return Ok(result);
    }

    let baseline_start = Instant::now();
    let baseline = baseline(&eligible, &levels, policy, mip, opts)?;
    result.timings.baseline_ms = ms(baseline_start.elapsed());

    result.status = "optimal";
    result.objective = Some(objective);
    result.cost_breakdown = Some(breakdown);
    result.baseline_on_demand_cost = baseline;
    result.savings = baseline.map(|b| b - objective);
    result.savings_pct = baseline
        .filter(|b| *b > 0.0)
        .map(|b| 100.0 * (b - objective) / b);
    result.reserved_gpus = reserved_gpus;
    result.spot_share_of_demand = if total_demand > 0.0 {
        gpu_hours.spot_effective / total_demand
    } else {
        0.0
    };
    result.reserved_utilization = (reserved_gpus > 0.0).then(|| {
        problem
            .demand
            .iter()
            .map(|d| d.min(reserved_gpus))
            .sum::<f64>()
            / (reserved_gpus * t)
    });
    result.gpu_hours = gpu_hours;
    result.timings.total_ms = ms(start.elapsed());
    Ok(result)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn empty_result(problem: &Problem, opts: &SolveOptions, excluded: Vec<Excluded>) -> PlanResult {
    PlanResult {
        schema_version: 1,
        name: problem.name.clone(),
        mode: if opts.relax { "lp" } else { "mip" },
        horizon_hours: problem.demand.len(),
        status: "infeasible",
        objective: None,
        cost_breakdown: None,
        reserved: Vec::new(),
        hourly: Hourly::default(),
        baseline_on_demand_cost: None,
        savings: None,
        savings_pct: None,
        reserved_gpus: 0.0,
        gpu_hours: GpuHours {
            demand: problem.demand.iter().sum(),
            ..GpuHours::default()
        },
        spot_share_of_demand: 0.0,
        reserved_utilization: None,
        excluded_offers: excluded,
        infeasibility: None,
        model_stats: ModelStats::default(),
        timings: Timings::default(),
        mip_gap: if opts.relax {
            0.0
        } else {
            f64::from(lp::MIP_GAP)
        },
    }
}

/// docs/planning-model.md §5: hours that cannot be covered even with every cap maxed.
fn capacity_shortfall(problem: &Problem, eligible: &[Eligible<'_>]) -> Option<Value> {
    let p = &problem.policy;
    let cap = |c: Option<f64>| c.unwrap_or(f64::INFINITY);
    let mut fixed = 0.0;
    for e in eligible {
        if !e.offer.reserved.is_empty() {
            fixed += e.g * cap(e.offer.max_reserved_instances);
        }
        if e.offer.on_demand_price.is_some() {
            fixed += e.g * cap(e.offer.max_on_demand_instances);
        }
    }
    let mut pools: BTreeMap<&str, f64> = BTreeMap::new();
    for e in eligible {
        if let Some(sg) = e.spot_gpus {
            *pools.entry(e.offer.spot_pool.as_str()).or_insert(0.0) +=
                sg * cap(e.offer.max_spot_instances);
        }
    }
    let mut hours = Vec::new();
    let mut detail = Vec::new();
    let mut worst: f64 = 0.0;
    for (t, d) in problem.demand.iter().enumerate() {
        let pooled: f64 = pools
            .values()
            .map(|s| match p.max_pool_share {
                Some(pi) => s.min(pi * d),
                None => *s,
            })
            .sum();
        let spot = match p.max_spot_share {
            Some(sigma) => pooled.min(sigma * d),
            None => pooled,
        };
        let supply = fixed + spot;
        if supply < d - 1e-6 * d.max(1.0) {
            hours.push(t);
            worst = worst.max(d - supply);
            detail.push(json!({"hour": t, "demand_gpus": d, "max_supply_gpus": supply}));
        }
    }
    (!hours.is_empty()).then(|| {
        json!({"kind": "capacity", "hours": hours, "max_shortfall_gpus": worst, "detail": detail})
    })
}

/// Builds the model over demand levels `(D_l, hours at that level)`. With
/// `with_reserved_and_spot` false it is the on-demand-only baseline.
fn build(
    eligible: &[Eligible<'_>],
    levels: &[(f64, f64)],
    p: &Policy,
    mip: bool,
    with_reserved_and_spot: bool,
) -> (Milp, Vec<Vec<Option<usize>>>, Vec<LevelVars>) {
    let mut m = Milp::default();
    let t: f64 = levels.iter().map(|l| l.1).sum();
    let int_reserved = mip && p.integer_reserved;
    let int_hourly = mip && p.integer_hourly;
    let mut reserved_vars = Vec::with_capacity(eligible.len());
    for e in eligible {
        let cap = e.offer.max_reserved_instances;
        let mut vars = Vec::new();
        let kept = e.options.iter().filter(|k| **k).count();
        for (opt, keep) in e.offer.reserved.iter().zip(&e.options) {
            let usable = with_reserved_and_spot && *keep;
            vars.push(usable.then(|| {
                let upper = if kept == 1 { cap } else { None };
                m.add_var(t * opt.effective_hourly(), upper, int_reserved)
            }));
        }
        let present: Vec<(usize, f64)> = vars.iter().flatten().map(|v| (*v, 1.0)).collect();
        if let Some(c) = cap
            && present.len() > 1
        {
            m.rows.push(Row {
                terms: present,
                sense: Sense::AtMost,
                rhs: c,
            });
        }
        reserved_vars.push(vars);
    }
    let reserved_supply: Vec<(usize, f64)> = eligible
        .iter()
        .zip(&reserved_vars)
        .flat_map(|(e, vars)| vars.iter().flatten().map(move |v| (*v, e.g)))
        .collect();

    let mut level_vars = Vec::with_capacity(levels.len());
    for (d, hours) in levels {
        let mut lv = LevelVars {
            spot: vec![None; eligible.len()],
            on_demand: vec![None; eligible.len()],
        };
        if *d > 0.0 {
            let mut cover = reserved_supply.clone();
            let mut spot_terms = Vec::new();
            let mut pools: BTreeMap<&str, Vec<(usize, f64)>> = BTreeMap::new();
            for (k, e) in eligible.iter().enumerate() {
                if with_reserved_and_spot
                    && let (Some(sg), Some(price)) = (e.spot_gpus, e.offer.spot_price)
                {
                    let v = m.add_var(hours * price, e.offer.max_spot_instances, int_hourly);
                    lv.spot[k] = Some(v);
                    cover.push((v, sg));
                    spot_terms.push((v, sg));
                    pools
                        .entry(e.offer.spot_pool.as_str())
                        .or_default()
                        .push((v, sg));
                }
                if let Some(price) = e.offer.on_demand_price
                    && e.on_demand
                {
                    let v = m.add_var(hours * price, e.offer.max_on_demand_instances, int_hourly);
                    lv.on_demand[k] = Some(v);
                    cover.push((v, e.g));
                }
            }
            m.rows.push(Row {
                terms: cover,
                sense: Sense::AtLeast,
                rhs: *d,
            });
            if let Some(sigma) = p.max_spot_share
                && !spot_terms.is_empty()
            {
                m.rows.push(Row {
                    terms: spot_terms,
                    sense: Sense::AtMost,
                    rhs: sigma * d,
                });
            }
            if let Some(pi) = p.max_pool_share {
                for terms in pools.into_values() {
                    m.rows.push(Row {
                        terms,
                        sense: Sense::AtMost,
                        rhs: pi * d,
                    });
                }
            }
        }
        level_vars.push(lv);
    }
    (m, reserved_vars, level_vars)
}

/// docs/planning-model.md §6: the optimum with on-demand only; `None` when on-demand
/// alone cannot cover demand. Without caps and with continuous hourly counts
/// it is closed-form: every GPU-hour at the cheapest on-demand GPU price.
fn baseline(
    eligible: &[Eligible<'_>],
    levels: &[(f64, f64)],
    p: &Policy,
    mip: bool,
    opts: &SolveOptions,
) -> Result<Option<f64>, OptimizeError> {
    let time_limit = opts.time_limit;
    let demanded = levels.iter().any(|(d, _)| *d > 0.0);
    let od: Vec<&Eligible<'_>> = eligible
        .iter()
        .filter(|e| e.offer.on_demand_price.is_some())
        .collect();
    if !demanded {
        return Ok(Some(0.0));
    }
    let uncapped = od.iter().all(|e| e.offer.max_on_demand_instances.is_none());
    if uncapped && !(mip && p.integer_hourly) {
        let Some(best) = od
            .iter()
            .map(|e| e.offer.on_demand_price.unwrap_or(0.0) / e.g)
            .min_by(f64::total_cmp)
        else {
            return Ok(None);
        };
        return Ok(Some(levels.iter().map(|(d, n)| d * n * best).sum()));
    }
    let (milp, _, _) = build(eligible, levels, p, mip, false);
    match milp.solve(opts.backend, time_limit) {
        Ok(values) => Ok(Some(
            milp.vars
                .iter()
                .zip(&values)
                .map(|(v, x)| {
                    let x = if v.integer { x.round() } else { *x };
                    v.cost * x
                })
                .sum(),
        )),
        Err(LpError::Infeasible) => Ok(None),
        Err(LpError::TimeLimit) => Err(OptimizeError::TimeLimit(time_limit.unwrap_or_default())),
        Err(e) => Err(OptimizeError::Solver(e.to_string())),
    }
}

#[cfg(test)]
mod tests;
