//! A first plan for whole hourly counts when the decomposition does not
//! apply (several classes): the generic MILP can search for minutes before it
//! finds any plan, and a time limit would then leave the user with nothing.
//!
//! Reserved counts are the LP relaxation's rounded up (within their caps).
//! With them fixed the hours are independent, so each level's small MILP is
//! solved on its own. The plan is feasible by construction and starts the
//! full search; it is only a starting point, so any failure here just means
//! the search starts without one.

use std::time::Instant;

use super::SolveOptions;
use super::build::{Scope, Vars, build};
use super::lp::{Milp, Row, Sense};
use super::setup::Setup;

/// The values of a feasible plan of `milp` (as built for `setup` with whole
/// counts, and new purchases iff `purchases`), or `None` when one was not
/// found before `deadline`.
pub(super) fn find(
    setup: &Setup<'_>,
    milp: &Milp,
    vars: &Vars,
    purchases: bool,
    opts: &SolveOptions,
    deadline: Option<Instant>,
) -> Option<Vec<f64>> {
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let all: Vec<usize> = (0..setup.levels.len()).collect();
    let relaxed = Scope {
        mip: false,
        purchases,
    };
    let (lp, _) = build(setup, &all, relaxed);
    let lp_values = lp.solve(opts.backend, left()).ok()?;
    let mut values = vec![0.0; milp.vars.len()];
    let mut fixed = Vec::new();
    for var in vars.reserved.iter().flatten().flatten() {
        let v = &milp.vars[*var];
        let mut count = (lp_values[*var] - 1e-9).ceil().max(0.0);
        if let Some(cap) = v.upper {
            count = count.min(cap.floor());
        }
        values[*var] = count;
        fixed.push((*var, count));
    }
    let whole = Scope {
        mip: true,
        purchases,
    };
    for (l, level) in vars.levels.iter().enumerate() {
        if level.vars.is_empty() {
            continue;
        }
        let (mut one, one_vars) = build(setup, &[l], whole);
        for &(var, count) in &fixed {
            one.vars[var].upper = Some(count);
            one.rows.push(Row {
                terms: vec![(var, 1.0)],
                sense: Sense::AtLeast,
                rhs: count,
            });
        }
        let solved = one.solve(opts.backend, left()).ok()?;
        let range = one_vars.levels[0].vars.clone();
        for (var, x) in level.vars.clone().zip(&solved[range]) {
            values[var] = if milp.vars[var].integer {
                x.round()
            } else {
                *x
            };
        }
    }
    Some(values)
}
