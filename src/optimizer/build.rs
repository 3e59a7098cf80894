//! The MILP of docs/planning-model.md §3.5 and §10.5, over demand levels.
//!
//! Class-split variables exist only where an offer serves more than one class
//! in a level: where it serves one, its purchases are that class's supply
//! (`S_kct = S_kt`, `O_kct = O_kt`, and `Y_kct` at its bound `Σ_j R_kj + W_kt`,
//! since nothing else competes for it), so v1-shaped problems build exactly
//! the v1 model.

use std::collections::BTreeMap;

use super::lp::{Milp, Row, Sense};
use super::setup::Setup;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Reserved,
    Spot,
    OnDemand,
}

/// The share of one offer's instances that serves one class in a level.
pub(super) struct Part {
    /// The offer; for `Kind::Reserved`, the index of its pool in
    /// `Setup::reserved_pools`.
    pub offer: usize,
    pub class: usize,
    pub kind: Kind,
    pub var: usize,
}

#[derive(Default)]
pub(super) struct LevelVars {
    pub parts: Vec<Part>,
    /// `(offer, kind, var)`: a variable for the offer's whole hourly count,
    /// where there is one (one class served, or integer hourly counts).
    pub totals: Vec<(usize, Kind, usize)>,
    /// `(offer, class)`: all of the offer's reserved capacity serves that class.
    pub whole_reserved: Vec<(usize, usize)>,
    /// The variables made for this level, in order.
    pub vars: std::ops::Range<usize>,
}

pub(super) struct Vars {
    /// Per eligible offer, per reserved option: the new-purchase variable.
    pub reserved: Vec<Vec<Option<usize>>>,
    pub levels: Vec<LevelVars>,
    /// Hourly variables the dominance reduction left out.
    pub dominated: usize,
    /// The rows on new purchases alone (caps shared by an offer's options),
    /// which come first.
    pub reserved_rows: usize,
}

/// What a build contains.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scope {
    /// Integer counts as the policy asks (false: the LP relaxation).
    pub mip: bool,
    /// False for the on-demand baseline: no new reservations, no spot.
    pub purchases: bool,
}

/// Builds the model for the levels `which` (indices into `setup.levels`).
pub(super) fn build(setup: &Setup<'_>, which: &[usize], scope: Scope) -> (Milp, Vars) {
    let p = &setup.problem.policy;
    let mut m = Milp::default();
    let horizon = setup.problem.horizon() as f64;
    let int_reserved = scope.mip && p.integer_reserved;
    let int_hourly = scope.mip && p.integer_hourly;
    let mut reserved = Vec::with_capacity(setup.offers.len());
    for e in &setup.offers {
        let cap = e.offer.max_reserved_instances;
        let kept = e.options.iter().filter(|k| **k).count();
        let vars: Vec<Option<usize>> = e
            .offer
            .reserved
            .iter()
            .zip(&e.options)
            .map(|(opt, keep)| {
                (scope.purchases && *keep).then(|| {
                    let upper = if kept == 1 { cap } else { None };
                    m.add_var(horizon * opt.effective_hourly(), upper, int_reserved)
                })
            })
            .collect();
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
        reserved.push(vars);
    }
    let mut vars = Vars {
        reserved,
        levels: Vec::with_capacity(which.len()),
        dominated: 0,
        reserved_rows: m.rows.len(),
    };
    for &l in which {
        let first = m.vars.len();
        let mut lv = level(setup, l, scope, int_hourly, &mut m, &mut vars);
        lv.vars = first..m.vars.len();
        vars.levels.push(lv);
    }
    (m, vars)
}

/// One class's rows in a level, gathered while the offers are visited.
#[derive(Default)]
struct ClassRows<'a> {
    cover: Vec<(usize, f64)>,
    /// Demand left after the owned capacity that only this class can use.
    rhs: f64,
    spot: Vec<(usize, f64)>,
    pools: BTreeMap<&'a str, Vec<(usize, f64)>>,
}

fn level(
    setup: &Setup<'_>,
    l: usize,
    scope: Scope,
    int_hourly: bool,
    m: &mut Milp,
    vars: &mut Vars,
) -> LevelVars {
    let level = &setup.levels[l];
    let mut lv = LevelVars::default();
    if level.demand.iter().all(|d| *d <= 0.0) {
        return lv;
    }
    let t = level.first;
    let n = level.hours;
    let mut rows: Vec<ClassRows<'_>> = level
        .demand
        .iter()
        .map(|d| ClassRows {
            rhs: *d,
            ..ClassRows::default()
        })
        .collect();
    let demanded = |c: usize| level.demand[c] > 0.0;
    // Reserved capacity, new plus owned, per pool of offers that do the same
    // work for every class: their instances are interchangeable, so one
    // split serves the pool.
    for (g, pool) in setup.reserved_pools.iter().enumerate() {
        let owned: f64 = pool.iter().map(|k| setup.offers[*k].owned_at(t)).sum();
        let bought: Vec<usize> = pool
            .iter()
            .flat_map(|k| vars.reserved[*k].iter().flatten().copied())
            .collect();
        if bought.is_empty() && owned <= 0.0 {
            continue;
        }
        let k0 = pool[0];
        let classes: Vec<usize> = (0..rows.len())
            .filter(|c| setup.offers[k0].phi[*c].is_some() && demanded(*c))
            .collect();
        if let [c] = classes[..] {
            let u = setup.units(k0, c).unwrap_or(0.0);
            rows[c].cover.extend(bought.iter().map(|v| (*v, u)));
            rows[c].rhs -= u * owned;
            lv.whole_reserved.extend(pool.iter().map(|k| (*k, c)));
        } else if classes.len() > 1 {
            let mut split: Vec<(usize, f64)> = bought.iter().map(|v| (*v, -1.0)).collect();
            for c in classes {
                let y = m.add_var(0.0, None, false);
                rows[c].cover.push((y, setup.units(k0, c).unwrap_or(0.0)));
                split.push((y, 1.0));
                lv.parts.push(Part {
                    offer: g,
                    class: c,
                    kind: Kind::Reserved,
                    var: y,
                });
            }
            m.rows.push(Row {
                terms: split,
                sense: Sense::AtMost,
                rhs: owned,
            });
        }
    }
    for (k, e) in setup.offers.iter().enumerate() {
        let serving = |c: &usize| e.phi[*c].is_some();
        // Spot.
        if scope.purchases
            && e.spot
            && let Some(price) = e.offer.spot_price.at(t)
        {
            let wanted = (0..rows.len()).filter(serving).filter(|c| {
                let info = &setup.classes[*c];
                // A class without demand can still absorb part of an
                // integer instance when nothing caps its spot.
                info.spot_ok
                    && (demanded(*c) || (int_hourly && info.sigma.is_none() && info.pi.is_none()))
            });
            let classes = undominated(
                wanted,
                |c| setup.spot_dominated(k, c, price),
                &mut vars.dominated,
            );
            let needed: Vec<usize> = classes.iter().copied().filter(|c| demanded(*c)).collect();
            let units = |c: usize| setup.units(k, c).unwrap_or(0.0) * e.gamma;
            let swapped = setup.swapped_out(k, price, units, &needed, false);
            let classes = unless_swapped(classes, swapped, &mut vars.dominated);
            let parts = hourly(
                m,
                &mut lv,
                k,
                Kind::Spot,
                &classes,
                n * price,
                e.offer.max_spot_instances,
                int_hourly,
            );
            for (c, v) in parts {
                let u = setup.units(k, c).unwrap_or(0.0) * e.gamma;
                rows[c].cover.push((v, u));
                rows[c].spot.push((v, u));
                rows[c]
                    .pools
                    .entry(e.offer.spot_pool.as_str())
                    .or_default()
                    .push((v, u));
            }
        }
        // On-demand.
        if e.on_demand
            && let Some(price) = e.offer.on_demand_price
        {
            let wanted = (0..rows.len()).filter(serving).filter(|c| demanded(*c));
            let classes = undominated(wanted, |c| setup.od_dominated(k, c), &mut vars.dominated);
            let units = |c: usize| setup.units(k, c).unwrap_or(0.0);
            let swapped = setup.swapped_out(k, price, units, &classes, true);
            let classes = unless_swapped(classes, swapped, &mut vars.dominated);
            let parts = hourly(
                m,
                &mut lv,
                k,
                Kind::OnDemand,
                &classes,
                n * price,
                e.offer.max_on_demand_instances,
                int_hourly,
            );
            for (c, v) in parts {
                rows[c].cover.push((v, setup.units(k, c).unwrap_or(0.0)));
            }
        }
    }
    for (c, r) in rows.into_iter().enumerate() {
        let d = level.demand[c];
        if d <= 0.0 && r.spot.is_empty() {
            continue;
        }
        if r.rhs > 0.0 {
            m.rows.push(Row {
                terms: r.cover,
                sense: Sense::AtLeast,
                rhs: r.rhs,
            });
        }
        let info = &setup.classes[c];
        if let Some(sigma) = info.sigma
            && !r.spot.is_empty()
        {
            m.rows.push(Row {
                terms: r.spot,
                sense: Sense::AtMost,
                rhs: sigma * d,
            });
        }
        if let Some(pi) = info.pi {
            for terms in r.pools.into_values() {
                m.rows.push(Row {
                    terms,
                    sense: Sense::AtMost,
                    rhs: pi * d,
                });
            }
        }
    }
    lv
}

/// The classes of `wanted` whose share `dominated` does not drop, with the
/// dropped ones counted in `dropped`.
fn undominated(
    wanted: impl Iterator<Item = usize>,
    dominated: impl Fn(usize) -> bool,
    dropped: &mut usize,
) -> Vec<usize> {
    wanted
        .filter(|c| {
            let drop = dominated(*c);
            *dropped += usize::from(drop);
            !drop
        })
        .collect()
}

/// `classes`, or none when their offer's count is `swapped` out
/// (`Setup::swapped_out`), with the dropped shares counted in `dropped`.
fn unless_swapped(classes: Vec<usize>, swapped: bool, dropped: &mut usize) -> Vec<usize> {
    if swapped {
        *dropped += classes.len();
        Vec::new()
    } else {
        classes
    }
}

/// The variables of one offer's spot or on-demand count in a level, split
/// over `classes`; returns `(class, variable)` for each class's share.
#[allow(clippy::too_many_arguments)]
fn hourly(
    m: &mut Milp,
    lv: &mut LevelVars,
    k: usize,
    kind: Kind,
    classes: &[usize],
    cost: f64,
    cap: Option<f64>,
    integer: bool,
) -> Vec<(usize, usize)> {
    match classes {
        [] => Vec::new(),
        [c] => {
            let v = m.add_var(cost, cap, integer);
            lv.totals.push((k, kind, v));
            lv.parts.push(Part {
                offer: k,
                class: *c,
                kind,
                var: v,
            });
            vec![(*c, v)]
        }
        _ => {
            // The split is continuous; the count bought is the total, which
            // carries the price, the cap and integrality.
            let total = integer.then(|| m.add_var(cost, cap, true));
            let part_cost = if integer { 0.0 } else { cost };
            let parts: Vec<(usize, usize)> = classes
                .iter()
                .map(|c| (*c, m.add_var(part_cost, None, false)))
                .collect();
            for (c, v) in &parts {
                lv.parts.push(Part {
                    offer: k,
                    class: *c,
                    kind,
                    var: *v,
                });
            }
            let mut terms: Vec<(usize, f64)> = parts.iter().map(|(_, v)| (*v, 1.0)).collect();
            if let Some(total) = total {
                lv.totals.push((k, kind, total));
                terms.push((total, -1.0));
                m.rows.push(Row {
                    terms,
                    sense: Sense::Equal,
                    rhs: 0.0,
                });
            } else if let Some(cap) = cap {
                m.rows.push(Row {
                    terms,
                    sense: Sense::AtMost,
                    rhs: cap,
                });
            }
            parts
        }
    }
}
