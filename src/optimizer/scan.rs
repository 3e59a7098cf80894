//! One class, whole reserved counts, continuous hourly counts: the exact
//! breakpoint method of docs/planning-model.md §11.13, with no solver.
//!
//! With one class, reserved capacity serves that class whoever sells it, so
//! a scenario's cost depends on the purchase only through the reserved units
//! `Y` it adds and what they cost. Given `Y`, each hour's recourse is a
//! covering problem whose caps nest (an offer's cap within its spot pool's
//! share, within the spot share), which the greedy by price per unit solves
//! exactly; its cost is a convex piecewise-linear function of the demand
//! left, built once per scenario and hour. The cheapest purchase of exactly
//! `Y` units is a bounded knapsack over whole `Y`. Every frontier λ is then a
//! scan over `Y` of `(1−λ)·E[L] + λ·CVaR_β[L]`, computed from the scenario
//! costs, and λ = 1 takes the least mean among the least CVaR.

use std::collections::BTreeMap;

use super::build::Vars;
use super::measure::cvar;
use super::setup::Setup;

/// More knapsack cells than this (split items × reachable units) leave the
/// problem to the extensive form: the table is kept for reconstruction.
const MAX_CELLS: usize = 20_000_000;

/// A new-purchase column: its index, units of work per instance, cost per
/// instance over the horizon, and the most instances it may buy.
struct Column {
    col: usize,
    units: usize,
    cost: f64,
    cap: usize,
}

/// One hour class (a level) of one scenario.
struct Level {
    hours: f64,
    /// Demand left once owned capacity serves it.
    need: f64,
    /// The greedy's segments: `(units, price per unit)`, cheapest first.
    segments: Vec<(f64, f64)>,
}

impl Level {
    /// The level's recourse cost with `y` reserved units; `∞` when uncoverable.
    fn cost(&self, y: f64) -> f64 {
        let mut left = self.need - y;
        if left <= 0.0 {
            return 0.0;
        }
        let tolerance = 1e-9 * self.need.max(1.0);
        let mut cost = 0.0;
        for (amount, price) in &self.segments {
            let take = amount.min(left);
            cost += take * price;
            left -= take;
            if left <= tolerance {
                return cost * self.hours;
            }
        }
        f64::INFINITY
    }
}

pub(super) struct Scan {
    columns: Vec<Column>,
    /// Per scenario group, its levels.
    groups: Vec<Vec<Level>>,
    /// `best[y]`: the cheapest purchase of exactly `y` units (`∞`: none).
    best: Vec<f64>,
    /// `take[i][y]`: whether split item `i` is in the best purchase of `y`.
    take: Vec<Vec<bool>>,
    /// Per split item: `(column, instances)`.
    items: Vec<(usize, usize)>,
}

impl Scan {
    /// The scan for these scenario setups (after reductions) and their
    /// shared reserved columns; `None` when the problem is outside its
    /// conditions (several classes, whole hourly counts, continuous reserved
    /// counts, fractional units, an offer with two reserved options, or too
    /// large a table).
    pub fn new(setups: &[&Setup<'_>], vars: &Vars, mip: bool) -> Option<Self> {
        let first = setups.first()?;
        let policy = &first.problem.policy;
        if first.classes.len() != 1 || !mip || policy.integer_hourly || !policy.integer_reserved {
            return None;
        }
        let hours = first.problem.horizon() as f64;
        let groups: Vec<Vec<Level>> = setups.iter().map(|s| levels(s)).collect();
        let peak = groups
            .iter()
            .flatten()
            .map(|l| l.need)
            .fold(0.0_f64, f64::max)
            .ceil();
        let mut columns = Vec::new();
        for (k, options) in vars.reserved.iter().enumerate() {
            let mut kept = options
                .iter()
                .enumerate()
                .filter_map(|(j, c)| c.map(|c| (j, c)));
            let Some((j, col)) = kept.next() else {
                continue;
            };
            if kept.next().is_some() {
                return None;
            }
            let units = first.units(k, 0)?;
            if units.fract() != 0.0 || units < 1.0 {
                return None;
            }
            let units = units as usize;
            let e = &first.offers[k];
            let most = (peak as usize).div_ceil(units);
            let cap = e
                .offer
                .max_reserved_instances
                .map_or(most, |c| (c.floor() as usize).min(most));
            columns.push(Column {
                col,
                units,
                cost: hours * e.offer.reserved[j].effective_hourly(),
                cap,
            });
        }
        let widest = columns.iter().map(|c| c.units).max().unwrap_or(0);
        let top = peak as usize + widest;
        // Bounded knapsack by binary splitting of each column's cap.
        let mut items = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            let mut left = c.cap;
            let mut chunk = 1;
            while left > 0 {
                let n = chunk.min(left);
                items.push((i, n));
                left -= n;
                chunk *= 2;
            }
        }
        if items.len().saturating_mul(top + 1) > MAX_CELLS {
            return None;
        }
        let mut best = vec![f64::INFINITY; top + 1];
        best[0] = 0.0;
        let mut take = Vec::with_capacity(items.len());
        for &(i, n) in &items {
            let (w, cost) = (columns[i].units * n, columns[i].cost * n as f64);
            let mut chosen = vec![false; top + 1];
            for y in (w..=top).rev() {
                let with = best[y - w] + cost;
                if with < best[y] {
                    best[y] = with;
                    chosen[y] = true;
                }
            }
            take.push(chosen);
        }
        Some(Self {
            columns,
            groups,
            best,
            take,
            items,
        })
    }

    /// The purchase for each λ of `lambdas`, as `(column, count)`:
    /// `probability[g]` is group g's, `shift[g]` its loss offset (its
    /// baseline with the shortfall measure, else 0). `None` when no
    /// purchase covers every scenario.
    pub fn frontier(
        &self,
        lambdas: &[f64],
        probability: &[f64],
        shift: &[f64],
        beta: f64,
    ) -> Option<Vec<BTreeMap<usize, f64>>> {
        // Per reachable y: (mean loss, CVaR of the loss).
        let mut candidates: Vec<(usize, f64, f64)> = Vec::new();
        for (y, purchase) in self.best.iter().enumerate() {
            if !purchase.is_finite() {
                continue;
            }
            let mut losses = Vec::with_capacity(self.groups.len());
            for ((levels, p), s) in self.groups.iter().zip(probability).zip(shift) {
                let recourse: f64 = levels.iter().map(|l| l.cost(y as f64)).sum();
                losses.push((purchase + recourse - s, *p));
            }
            if losses.iter().any(|(l, _)| !l.is_finite()) {
                continue;
            }
            let mean = losses.iter().map(|(l, p)| l * p).sum();
            candidates.push((y, mean, cvar(&losses, beta)));
        }
        if candidates.is_empty() {
            return None;
        }
        let least_cvar = candidates.iter().map(|c| c.2).fold(f64::INFINITY, f64::min);
        let within = least_cvar + 1e-9 * least_cvar.abs().max(1.0);
        let picks = lambdas.iter().map(|&lambda| {
            let chosen = if lambda == 1.0 {
                candidates
                    .iter()
                    .filter(|c| c.2 <= within)
                    .min_by(|a, b| a.1.total_cmp(&b.1))
            } else {
                candidates.iter().min_by(|a, b| {
                    let f = |c: &(usize, f64, f64)| (1.0 - lambda) * c.1 + lambda * c.2;
                    f(a).total_cmp(&f(b))
                })
            };
            chosen.map(|c| self.purchase(c.0))
        });
        picks.collect()
    }

    /// The counts per column of the cheapest purchase of exactly `y` units.
    fn purchase(&self, mut y: usize) -> BTreeMap<usize, f64> {
        let mut counts: BTreeMap<usize, f64> = self.columns.iter().map(|c| (c.col, 0.0)).collect();
        for (i, &(c, n)) in self.items.iter().enumerate().rev() {
            if self.take[i][y] {
                let column = &self.columns[c];
                *counts.entry(column.col).or_default() += n as f64;
                y -= column.units * n;
            }
        }
        counts
    }
}

/// Each level's demand left after owned capacity and its greedy segments.
fn levels(setup: &Setup<'_>) -> Vec<Level> {
    let info = &setup.classes[0];
    setup
        .levels
        .iter()
        .map(|level| {
            let t = level.first;
            let d = level.demand[0];
            let owned: f64 = (0..setup.offers.len())
                .map(|k| setup.units(k, 0).unwrap_or(0.0) * setup.offers[k].owned_at(t))
                .sum();
            // (price per unit, most units, spot pool when spot).
            let mut sources: Vec<(f64, f64, Option<&str>)> = Vec::new();
            for (k, e) in setup.offers.iter().enumerate() {
                let Some(units) = setup.units(k, 0) else {
                    continue;
                };
                let cap = |c: Option<f64>, per: f64| c.map_or(f64::INFINITY, |c| c * per);
                if d > 0.0
                    && info.spot_ok
                    && e.gamma > 0.0
                    && e.offer.max_spot_instances != Some(0.0)
                    && let Some(price) = e.offer.spot_price.at(t)
                {
                    let per = units * e.gamma;
                    sources.push((
                        price / per,
                        cap(e.offer.max_spot_instances, per),
                        Some(e.offer.spot_pool.as_str()),
                    ));
                }
                if e.offer.max_on_demand_instances != Some(0.0)
                    && let Some(price) = e.offer.on_demand_price
                {
                    sources.push((
                        price / units,
                        cap(e.offer.max_on_demand_instances, units),
                        None,
                    ));
                }
            }
            sources.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut spot_left = info.sigma.map_or(f64::INFINITY, |s| s * d);
            let mut pool_left: BTreeMap<&str, f64> = BTreeMap::new();
            let mut segments = Vec::new();
            for (price, most, pool) in sources {
                let amount = match pool {
                    Some(p) => {
                        let left = pool_left
                            .entry(p)
                            .or_insert_with(|| info.pi.map_or(f64::INFINITY, |pi| pi * d));
                        let a = most.min(*left).min(spot_left);
                        *left -= a;
                        spot_left -= a;
                        a
                    }
                    None => most,
                };
                if amount > 0.0 {
                    segments.push((amount, price));
                }
                if amount.is_infinite() {
                    break;
                }
            }
            Level {
                hours: level.hours,
                need: d - owned,
                segments,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_costs_its_cheapest_segments_first() {
        let l = Level {
            hours: 2.0,
            need: 10.0,
            segments: vec![(4.0, 1.0), (f64::INFINITY, 3.0)],
        };
        assert_eq!(l.cost(10.0), 0.0);
        assert_eq!(l.cost(8.0), 2.0 * 2.0);
        assert_eq!(l.cost(0.0), 2.0 * (4.0 + 18.0));
        let capped = Level {
            hours: 1.0,
            need: 5.0,
            segments: vec![(4.0, 1.0)],
        };
        assert!(capped.cost(0.0).is_infinite());
    }
}
