//! Everything decided around the main solve: why a problem is infeasible
//! (§5, §10.8), the on-demand baseline (§6, §10.7) and utilisation (§10.9).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::build::{Scope, build};
use super::lp::{LpError, Milp, Row, Sense};
use super::setup::Setup;
use super::{OptimizeError, SolveOptions, solve_model};

fn solver_error(e: LpError, opts: &SolveOptions) -> OptimizeError {
    match e {
        LpError::TimeLimit => OptimizeError::TimeLimit(opts.time_limit.unwrap_or_default()),
        other => OptimizeError::Solver(other.to_string()),
    }
}

/// Check 1: classes with demand and no offer to serve them.
pub(super) fn no_eligible(setup: &Setup<'_>) -> Option<Value> {
    let problem = setup.problem;
    if problem.schema_version < 2 {
        return setup
            .offers
            .is_empty()
            .then(|| json!({"kind": "no_eligible_offers"}));
    }
    let empty: Vec<&str> = problem
        .classes
        .iter()
        .zip(&setup.classes)
        .filter(|(c, info)| info.eligible == 0 && c.demand.iter().any(|d| *d > 0.0))
        .map(|(c, _)| c.id.as_str())
        .collect();
    (!empty.is_empty())
        .then(|| json!({"kind": "no_eligible_offers", "class": empty[0], "classes": empty}))
}

/// Check 2: hours a class cannot cover even with every eligible offer's
/// capped capacity to itself.
pub(super) fn capacity(setup: &Setup<'_>) -> Option<Value> {
    let problem = setup.problem;
    let cap = |c: Option<f64>| c.unwrap_or(f64::INFINITY);
    // Per level and class: (demand, max supply).
    let mut short: Vec<Vec<Option<(f64, f64)>>> = vec![Vec::new(); problem.classes.len()];
    for level in &setup.levels {
        let t = level.first;
        for (c, info) in setup.classes.iter().enumerate() {
            let d = level.demand[c];
            let mut fixed = 0.0;
            let mut pools: BTreeMap<&str, f64> = BTreeMap::new();
            for (k, e) in setup.offers.iter().enumerate() {
                let Some(u) = setup.units(k, c) else {
                    continue;
                };
                if e.has_reserved() {
                    fixed += u * (cap(e.offer.max_reserved_instances) + e.owned_at(t));
                }
                if e.offer.on_demand_price.is_some() {
                    fixed += u * cap(e.offer.max_on_demand_instances);
                }
                if e.spot && info.spot_ok && e.offer.spot_price.at(t).is_some() {
                    *pools.entry(e.offer.spot_pool.as_str()).or_insert(0.0) +=
                        u * e.gamma * cap(e.offer.max_spot_instances);
                }
            }
            let pooled: f64 = pools
                .values()
                .map(|s| info.pi.map_or(*s, |pi| s.min(pi * d)))
                .sum();
            let supply = fixed + info.sigma.map_or(pooled, |sigma| pooled.min(sigma * d));
            short[c].push((supply < d - 1e-6 * d.max(1.0)).then_some((d, supply)));
        }
    }
    let mut classes = Vec::new();
    for (c, levels) in short.iter().enumerate() {
        let mut hours = Vec::new();
        let mut detail = Vec::new();
        let mut worst: f64 = 0.0;
        for (t, l) in setup.level_of.iter().enumerate() {
            if let Some((d, supply)) = levels[*l] {
                hours.push(t);
                worst = worst.max(d - supply);
                detail.push((t, d, supply));
            }
        }
        if !hours.is_empty() {
            classes.push((c, hours, worst, detail));
        }
    }
    let (c, hours, worst, detail) = classes.first()?;
    if problem.schema_version < 2 {
        let detail: Vec<Value> = detail
            .iter()
            .map(|(t, d, s)| json!({"hour": t, "demand_gpus": d, "max_supply_gpus": s}))
            .collect();
        return Some(
            json!({"kind": "capacity", "hours": hours, "max_shortfall_gpus": worst, "detail": detail}),
        );
    }
    let detail: Vec<Value> = detail
        .iter()
        .map(|(t, d, s)| json!({"hour": t, "demand": d, "max_supply": s}))
        .collect();
    let all: Vec<Value> = classes
        .iter()
        .map(|(c, hours, worst, _)| {
            json!({"class": problem.classes[*c].id, "hours": hours, "max_shortfall": worst})
        })
        .collect();
    Some(json!({
        "kind": "capacity", "class": problem.classes[*c].id, "hours": hours,
        "max_shortfall": worst, "detail": detail, "classes": all,
    }))
}

/// Check 3, once the solver found no plan: whether the classes together do
/// not fit in some hours although each fits alone. Buying more reserved
/// capacity never makes an hour infeasible, so the continuous problem is
/// feasible iff each level's one-hour problem is; `None` means the cause is
/// integrality.
pub(super) fn shared_capacity(
    setup: &Setup<'_>,
    opts: &SolveOptions,
) -> Result<Option<Value>, OptimizeError> {
    if setup.classes.len() < 2 {
        return Ok(None);
    }
    let relaxed = Scope {
        mip: false,
        purchases: true,
    };
    let all: Vec<usize> = (0..setup.levels.len()).collect();
    let (whole, _) = build(setup, &all, relaxed);
    match whole.solve(opts.backend, opts.time_limit) {
        Ok(_) => return Ok(None),
        Err(LpError::Infeasible) => {}
        Err(e) => return Err(solver_error(e, opts)),
    }
    let mut short_levels = Vec::new();
    for l in all {
        let (one, _) = build(setup, &[l], relaxed);
        match one.solve(opts.backend, opts.time_limit) {
            Ok(_) => {}
            Err(LpError::Infeasible) => short_levels.push(l),
            Err(e) => return Err(solver_error(e, opts)),
        }
    }
    let hours: Vec<usize> = setup
        .level_of
        .iter()
        .enumerate()
        .filter(|(_, l)| short_levels.contains(l))
        .map(|(t, _)| t)
        .collect();
    let classes: Vec<&str> = setup
        .problem
        .classes
        .iter()
        .enumerate()
        .filter(|(c, _)| {
            short_levels
                .iter()
                .any(|l| setup.levels[*l].demand[*c] > 0.0)
        })
        .map(|(_, class)| class.id.as_str())
        .collect();
    Ok(Some(
        json!({"kind": "shared_capacity", "hours": hours, "classes": classes}),
    ))
}

/// The LP relaxation's optimum: a lower bound on the MIP optimum, for a
/// search the time limit stopped (`-∞` when even it runs out of time).
pub(super) fn relaxed_bound(setup: &Setup<'_>, opts: &SolveOptions) -> Result<f64, OptimizeError> {
    let all: Vec<usize> = (0..setup.levels.len()).collect();
    let (milp, _) = build(
        setup,
        &all,
        Scope {
            mip: false,
            purchases: true,
        },
    );
    match milp.solve(opts.backend, opts.time_limit) {
        Ok(values) => Ok(milp.vars.iter().zip(&values).map(|(v, x)| v.cost * x).sum()),
        Err(LpError::TimeLimit) => Ok(f64::NEG_INFINITY),
        Err(e) => Err(solver_error(e, opts)),
    }
}

/// The optimum with no new reservations and no spot, owned capacity kept;
/// `None` when that cannot cover demand. With one class, no on-demand caps
/// and continuous hourly counts it is closed-form: every unit of work the
/// owned capacity leaves at the cheapest on-demand price per unit.
pub(super) fn baseline(
    setup: &Setup<'_>,
    mip: bool,
    opts: &SolveOptions,
) -> Result<Option<f64>, OptimizeError> {
    let p = &setup.problem.policy;
    let od: Vec<usize> = (0..setup.offers.len())
        .filter(|k| setup.offers[*k].offer.on_demand_price.is_some())
        .collect();
    let uncapped = od
        .iter()
        .all(|k| setup.offers[*k].offer.max_on_demand_instances.is_none());
    if setup.classes.len() == 1 && uncapped && !(mip && p.integer_hourly) {
        let best = od
            .iter()
            .map(|k| {
                setup.offers[*k].offer.on_demand_price.unwrap_or(0.0)
                    / setup.units(*k, 0).unwrap_or(0.0)
            })
            .min_by(f64::total_cmp);
        let mut total = 0.0;
        for level in &setup.levels {
            let owned: f64 = (0..setup.offers.len())
                .map(|k| setup.units(k, 0).unwrap_or(0.0) * setup.offers[k].owned_at(level.first))
                .sum();
            let net = level.demand[0] - owned;
            if net > 0.0 {
                let Some(best) = best else {
                    return Ok(None);
                };
                total += net * level.hours * best;
            }
        }
        return Ok(Some(total));
    }
    let all: Vec<usize> = (0..setup.levels.len()).collect();
    let scope = Scope {
        mip,
        purchases: false,
    };
    let (milp, vars) = build(setup, &all, scope);
    let deadline = opts.time_limit.map(|t| std::time::Instant::now() + t);
    // The plan's own search is what its watchers follow, not this one.
    let quiet = SolveOptions {
        search: None,
        ..opts.clone()
    };
    let solved = match solve_model(setup, &milp, &vars, scope, &quiet, deadline).0 {
        Ok(s) if s.bound.is_none() => Ok(s.values),
        Ok(_) => Err(LpError::TimeLimit),
        Err(e) => Err(e),
    };
    match solved {
        Ok(values) => Ok(Some(
            milp.vars
                .iter()
                .zip(&values)
                .map(|(v, x)| v.cost * if v.integer { x.round() } else { *x })
                .sum(),
        )),
        Err(LpError::Infeasible) => Ok(None),
        Err(e) => Err(solver_error(e, opts)),
    }
}

/// `U(cap)` of §10.9 with `cap_kt = W_kt + extra_k`: the most GPU-hours that
/// capacity can spend on demand without serving any class past its demand.
pub(super) fn usable_gpu_hours(
    setup: &Setup<'_>,
    extra: &[f64],
    opts: &SolveOptions,
) -> Result<f64, OptimizeError> {
    let mut m = Milp::default();
    for level in &setup.levels {
        let t = level.first;
        let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); setup.classes.len()];
        for (k, e) in setup.offers.iter().enumerate() {
            let cap = e.owned_at(t) + extra[k];
            if cap <= 0.0 {
                continue;
            }
            let classes: Vec<usize> = (0..rows.len())
                .filter(|c| e.phi[*c].is_some() && level.demand[*c] > 0.0)
                .collect();
            let single = classes.len() == 1;
            let mut split = Vec::new();
            for c in classes {
                let y = m.add_var(-level.hours * e.g, single.then_some(cap), false);
                rows[c].push((y, setup.units(k, c).unwrap_or(0.0)));
                split.push((y, 1.0));
            }
            if split.len() > 1 {
                m.rows.push(Row {
                    terms: split,
                    sense: Sense::AtMost,
                    rhs: cap,
                });
            }
        }
        for (c, terms) in rows.into_iter().enumerate() {
            if !terms.is_empty() {
                m.rows.push(Row {
                    terms,
                    sense: Sense::AtMost,
                    rhs: level.demand[c],
                });
            }
        }
    }
    let values = m
        .solve(opts.backend, opts.time_limit)
        .map_err(|e| solver_error(e, opts))?;
    Ok(-m
        .vars
        .iter()
        .zip(&values)
        .map(|(v, x)| v.cost * x)
        .sum::<f64>())
}
