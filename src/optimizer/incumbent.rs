//! A first plan for whole hourly counts when the decomposition does not
//! apply (several classes): the generic MILP can search for minutes before it
//! finds any plan, and a time limit would then leave the user with nothing.
//! On such problems the search rarely improves on the first plan at all, so
//! the first plan is the plan most users get: it is worth searching for.
//!
//! With the reserved counts fixed the hours are independent, so each level's
//! small MILP is solved on its own, exactly. The counts start as the LP
//! relaxation's rounded up (within their caps). Then a local search moves one
//! count by one instance at a time: each neighbour's LP relaxation, with its
//! counts fixed, is a lower bound on its whole-count cost, so only neighbours
//! whose bound beats the best plan are solved, cheapest bound first, and the
//! first one that is cheaper is taken. Rounding every fractional count up is
//! often one instance too many: the hours' whole counts absorb part of the
//! demand the relaxation reserved for.
//!
//! The plan is feasible by construction and starts the full search; it is
//! only a starting point, so any failure here just means the search starts
//! from the best plan found so far, or without one.

use std::time::{Duration, Instant};

use super::SolveOptions;
use super::build::{Scope, Vars, build};
use super::lp::{LpError, Milp, Row, Sense};
use super::setup::Setup;

/// Relative improvement a neighbour must bring to be taken, so rounding
/// noise cannot make the search walk in circles.
const IMPROVEMENT: f64 = 1e-9;

/// A plan of the whole-count model: its values and their cost.
pub(super) struct Plan {
    pub(super) values: Vec<f64>,
    pub(super) cost: f64,
}

/// What solving the hours at fixed reserved counts came to.
pub(super) enum Hours {
    Plan(Plan),
    /// The cutoff showed they cannot beat its best plan.
    CannotBeat,
    /// A level has no whole counts at all.
    Infeasible,
    /// A level had no whole counts within the time left.
    Failed,
}

impl Hours {
    fn plan(self) -> Option<Plan> {
        match self {
            Hours::Plan(plan) => Some(plan),
            Hours::CannotBeat | Hours::Infeasible | Hours::Failed => None,
        }
    }
}

/// The values of a feasible plan of `milp` (as built for `setup` with whole
/// counts, and new purchases iff `purchases`), or `None` when one was not
/// found before `deadline`. The local search spends at most half of the time
/// left, so the full search that follows still gets its share.
pub(super) fn find(
    setup: &Setup<'_>,
    milp: &Milp,
    vars: &Vars,
    purchases: bool,
    local_search: bool,
    opts: &SolveOptions,
    deadline: Option<Instant>,
) -> Option<Vec<f64>> {
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let reserved = reserved_counts(milp, vars);
    let whole = Scope {
        mip: true,
        purchases,
    };
    if reserved.is_empty() {
        // Nothing to round or search: the hours alone are the plan.
        return whole_hours(setup, milp, vars, &[], &[], whole, opts, left(), None)
            .plan()
            .map(|plan| plan.values);
    }
    let all: Vec<usize> = (0..setup.levels.len()).collect();
    let relaxed = Scope {
        mip: false,
        purchases,
    };
    let (lp, lp_vars) = build(setup, &all, relaxed);
    let lp_values = lp.solve(opts.backend, left()).ok()?;
    let mut counts: Vec<f64> = reserved
        .iter()
        .map(|(var, cap)| {
            let up = (lp_values[*var] - 1e-9).ceil().max(0.0);
            cap.map_or(up, |cap| up.min(cap))
        })
        .collect();
    let solve = |counts: &[f64], cutoff: Option<Cutoff<'_>>| {
        whole_hours(
            setup,
            milp,
            vars,
            &reserved,
            counts,
            whole,
            opts,
            left(),
            cutoff,
        )
        .plan()
    };
    let mut best = solve(&counts, None)?;
    let search_until = deadline.map(|d| {
        let now = Instant::now();
        now + d.saturating_duration_since(now) / 2
    });
    let past = |until: Option<Instant>| until.is_some_and(|u| Instant::now() >= u);
    'search: while local_search && !past(search_until) {
        let mut moves: Vec<(f64, Vec<f64>, Vec<f64>)> = Vec::new();
        for (i, (_, cap)) in reserved.iter().enumerate() {
            for step in [-1.0, 1.0] {
                let next = counts[i] + step;
                if next < 0.0 || cap.is_some_and(|cap| next > cap) {
                    continue;
                }
                let mut moved = counts.clone();
                moved[i] = next;
                let bound = fixed(&lp, &reserved, &moved).solve(opts.backend, left());
                // An infeasible neighbour (a cap shared by options) is no move.
                if let Ok(values) = bound {
                    let bound = cost(&lp, &values);
                    if better(bound, best.cost) {
                        let levels = lp_vars
                            .levels
                            .iter()
                            .map(|l| l.vars.clone().map(|v| lp.vars[v].cost * values[v]).sum())
                            .collect();
                        moves.push((bound, moved, levels));
                    }
                }
                if past(search_until) {
                    break 'search;
                }
            }
        }
        moves.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (bound, moved, levels) in moves {
            if past(search_until) || !better(bound, best.cost) {
                break 'search;
            }
            let cutoff = Cutoff {
                levels: &levels,
                best: best.cost,
            };
            if let Some(plan) = solve(&moved, Some(cutoff))
                && better(plan.cost, best.cost)
            {
                best = plan;
                counts = moved;
                continue 'search;
            }
        }
        break;
    }
    Some(best.values)
}

/// The new-purchase count variables of `milp`, each with its whole cap.
pub(super) fn reserved_counts(milp: &Milp, vars: &Vars) -> Vec<(usize, Option<f64>)> {
    vars.reserved
        .iter()
        .flatten()
        .flatten()
        .map(|var| (*var, milp.vars[*var].upper.map(f64::floor)))
        .collect()
}

pub(super) fn better(cost: f64, than: f64) -> bool {
    cost < than - IMPROVEMENT * than.abs().max(1.0)
}

pub(super) fn cost(m: &Milp, values: &[f64]) -> f64 {
    m.vars.iter().zip(values).map(|(v, x)| v.cost * x).sum()
}

/// `m` with the reserved counts fixed at `counts`.
fn fixed(m: &Milp, reserved: &[(usize, Option<f64>)], counts: &[f64]) -> Milp {
    let mut m = m.clone();
    for (&(var, _), &count) in reserved.iter().zip(counts) {
        m.vars[var].upper = Some(count);
        m.rows.push(Row {
            terms: vec![(var, 1.0)],
            sense: Sense::AtLeast,
            rhs: count,
        });
    }
    m
}

/// When to give up on a neighbour: once the levels solved so far plus the
/// relaxation's cost of the others (a lower bound on them, per level, since
/// with the reserved counts fixed the relaxation splits by level) cannot
/// beat the best plan.
#[derive(Clone, Copy)]
struct Cutoff<'a> {
    /// The relaxation's hourly cost of each level, reserved counts fixed.
    levels: &'a [f64],
    best: f64,
}

/// The cheapest whole hourly counts with the reserved counts fixed at
/// `counts`, level by level, unless a level has none within `time` or
/// `cutoff` shows they cannot beat its best plan.
#[allow(clippy::too_many_arguments)]
fn whole_hours(
    setup: &Setup<'_>,
    milp: &Milp,
    vars: &Vars,
    reserved: &[(usize, Option<f64>)],
    counts: &[f64],
    whole: Scope,
    opts: &SolveOptions,
    time: Option<Duration>,
    cutoff: Option<Cutoff<'_>>,
) -> Hours {
    let start = Instant::now();
    let mut values = vec![0.0; milp.vars.len()];
    for (&(var, _), &count) in reserved.iter().zip(counts) {
        values[var] = count;
    }
    let mut at_least = cutoff.map(|c| cost(milp, &values) + c.levels.iter().sum::<f64>());
    for (l, level) in vars.levels.iter().enumerate() {
        if level.vars.is_empty() {
            continue;
        }
        let left = time.map(|t| t.saturating_sub(start.elapsed()));
        match whole_level(setup, milp, vars, l, reserved, counts, whole, opts, left) {
            Ok(level_values) => {
                for (var, x) in level.vars.clone().zip(level_values) {
                    values[var] = x;
                }
            }
            Err(LpError::Infeasible) => return Hours::Infeasible,
            Err(_) => return Hours::Failed,
        }
        if let (Some(sum), Some(c)) = (at_least.as_mut(), cutoff) {
            let whole: f64 = level
                .vars
                .clone()
                .map(|v| milp.vars[v].cost * values[v])
                .sum();
            *sum += whole - c.levels[l];
            if !better(*sum, c.best) {
                return Hours::CannotBeat;
            }
        }
    }
    let cost = cost(milp, &values);
    Hours::Plan(Plan { values, cost })
}

/// The cheapest whole hourly counts of level `l` alone with the reserved
/// counts fixed at `counts`: the values of `vars.levels[l]`, in order.
#[allow(clippy::too_many_arguments)]
pub(super) fn whole_level(
    setup: &Setup<'_>,
    milp: &Milp,
    vars: &Vars,
    l: usize,
    reserved: &[(usize, Option<f64>)],
    counts: &[f64],
    whole: Scope,
    opts: &SolveOptions,
    time: Option<Duration>,
) -> Result<Vec<f64>, LpError> {
    let (one, one_vars) = build(setup, &[l], whole);
    let solved = fixed(&one, reserved, counts).solve(opts.backend, time)?;
    let range = one_vars.levels[0].vars.clone();
    Ok(vars.levels[l]
        .vars
        .clone()
        .zip(&solved[range])
        .map(|(var, x)| {
            if milp.vars[var].integer {
                x.round()
            } else {
                *x
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::optimizer::Problem;

    #[test]
    fn a_first_plan_drops_the_reserved_instance_that_rounding_up_adds() {
        // The relaxation reserves 1.5 H100s for class a (0.5 a unit, against
        // 0.6 for an L4 on demand). Rounded up that is 2 reserved (3.2 in
        // all); one reserved and one more whole L4 an hour cover the same
        // demand for 2.8, which is the optimum (R = 0 costs 3.0 or more).
        let offer = |id: &str, model: &str, od: f64| {
            json!({"id": id, "cloud": "aws", "region": "us-east-1", "instance_type": id,
                   "gpu_model": model, "gpu_memory_gib": 80, "gpus_per_instance": 1,
                   "on_demand_price": od})
        };
        let mut h100 = offer("h100", "H100-80GB", 1.0);
        h100["reserved"] = json!([{"id": "1y", "term_hours": 8760, "hourly_price": 0.5}]);
        let doc = json!({"schema_version": 2,
            "classes": [{"id": "a", "demand": [1.5, 1.5], "perf": {"H100-80GB": 1.0, "L4": 0.5}},
                        {"id": "b", "demand": [1, 1], "perf": {"L4": 0.5}}],
            "offers": [h100, offer("l4", "L4", 0.3)],
            "policy": {"integer_hourly": true}});
        let problem = Problem::from_json(&doc).unwrap();
        let setup = Setup::new(&problem);
        let all: Vec<usize> = (0..setup.levels.len()).collect();
        let whole = Scope {
            mip: true,
            purchases: true,
        };
        let (milp, vars) = build(&setup, &all, whole);
        let values = find(
            &setup,
            &milp,
            &vars,
            true,
            true,
            &SolveOptions::default(),
            None,
        )
        .unwrap();
        let reserved = vars.reserved[0][0].unwrap();
        assert_eq!(values[reserved], 1.0);
        assert!((cost(&milp, &values) - 2.8).abs() < 1e-9, "{values:?}");
        for (row, r) in milp.rows.iter().enumerate() {
            let lhs: f64 = r.terms.iter().map(|(v, c)| c * values[*v]).sum();
            let ok = match r.sense {
                Sense::AtLeast => lhs >= r.rhs - 1e-9,
                Sense::AtMost => lhs <= r.rhs + 1e-9,
                Sense::Equal => (lhs - r.rhs).abs() <= 1e-9,
            };
            assert!(ok, "row {row} {r:?} has {lhs}");
        }
        for (v, x) in milp.vars.iter().zip(&values) {
            assert!(!v.integer || x.fract() == 0.0, "{x} is not whole");
        }
    }
}
