//! Whole hourly counts (`integer_hourly`) by decomposition, for one class.
//!
//! With one class, the reserved purchases reach the hourly problems only
//! through their total supply `ρ = Σ φ·g·R` (reserved capacity is pure supply:
//! no share or cap of an hour involves it). So the optimum is
//!
//! ```text
//!     min over ρ of   c(ρ) + Σ_levels H_l(rhs_l − ρ)
//! ```
//!
//! where `c(ρ)` is the cheapest purchase reaching at least `ρ` (a bounded
//! knapsack, solved exactly by dynamic programming when every reserved unit
//! `φ·g` is a whole number) and `H_l(x)` the cheapest whole spot and on-demand
//! counts covering `x` in one level (weighted by its hours). Each `H_l` is a
//! small covering problem whose LP relaxation is solved greedily: its
//! capacities (offer caps inside pool shares inside the spot share) are
//! nested, so filling the cheapest unit of work first is optimal. A
//! depth-first branch and bound on those bounds solves it exactly. The `ρ`
//! are tried in order of their lower bound `c(ρ) + Σ LP_l`, and the search
//! stops once no bound can beat the best plan found: the answer is optimal
//! (no gap), not merely within one.
//!
//! It fills in the values of the same MILP the generic solver would get, so
//! reporting and checking are shared, and the randomized tests compare the
//! two on the unreduced model.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use super::build::{Kind, Vars};
use super::lp::{LpError, Milp, Solved};
use super::setup::Setup;

/// Most `ρ` values and (level, `ρ`) bound evaluations the decomposition
/// takes on; bigger problems go to the generic solver.
const MAX_RHO: usize = 20_000;
const MAX_EVALUATIONS: usize = 20_000_000;

/// Branch-and-bound nodes one hour may take before the decomposition gives
/// the problem back to the generic solver.
const MAX_NODES: usize = 2_000_000;

/// One whole-count variable of an hour.
#[derive(Debug, Clone)]
struct Item {
    var: usize,
    /// Work units per instance (`φ·g`, times `γ` for spot).
    unit: f64,
    /// Level-weighted cost per instance.
    cost: f64,
    upper: f64,
    /// Spot pool index, `None` for on-demand.
    pool: Option<usize>,
}

/// One level's covering problem, less the demand to cover.
struct Hour {
    /// Sorted by cost per unit of work, cheapest first.
    items: Vec<Item>,
    spot_cap: f64,
    pool_cap: f64,
    pools: usize,
}

/// Why the decomposition did not give a plan.
pub(super) enum Outcome {
    /// It does not apply, or the problem is too big for it: use the MILP.
    NotApplicable,
    Solved(Solved),
    Failed(LpError),
}

/// Solves `milp` (as built for `setup`) by decomposition when it applies.
pub(super) fn solve(
    setup: &Setup<'_>,
    milp: &Milp,
    vars: &Vars,
    deadline: Option<Instant>,
) -> Outcome {
    let Some(plan) = Decomposition::new(setup, milp, vars) else {
        return Outcome::NotApplicable;
    };
    plan.run(milp.vars.len(), deadline)
}

struct Decomposition {
    /// Per reserved variable: (var, unit, cost, upper count).
    reserved: Vec<(usize, usize, f64, f64)>,
    hours: Vec<Hour>,
    /// Demand left per level after owned capacity.
    rhs: Vec<f64>,
    rho_max: usize,
}

impl Decomposition {
    fn new(setup: &Setup<'_>, milp: &Milp, vars: &Vars) -> Option<Self> {
        if setup.classes.len() != 1
            || vars
                .levels
                .iter()
                .any(|lv| lv.parts.iter().any(|p| p.kind == Kind::Reserved))
        {
            return None;
        }
        let mut reserved = Vec::new();
        for (k, options) in vars.reserved.iter().enumerate() {
            let kept: Vec<usize> = options.iter().flatten().copied().collect();
            match kept[..] {
                [] => {}
                [var] => {
                    let unit = setup.units(k, 0)?;
                    if unit.fract() != 0.0 || unit < 1.0 {
                        return None;
                    }
                    let v = &milp.vars[var];
                    // Continuous purchases make the supply continuous too.
                    if !v.integer {
                        return None;
                    }
                    reserved.push((
                        var,
                        unit as usize,
                        v.cost,
                        v.upper.unwrap_or(f64::INFINITY).floor(),
                    ));
                }
                // Options sharing one cap need more than one item per offer.
                _ => return None,
            }
        }
        let info = &setup.classes[0];
        let mut pool_index: BTreeMap<&str, usize> = BTreeMap::new();
        let mut hours = Vec::with_capacity(vars.levels.len());
        let mut rhs = Vec::with_capacity(vars.levels.len());
        for (l, lv) in vars.levels.iter().enumerate() {
            let level = &setup.levels[l];
            let d = level.demand[0];
            let owned: f64 = (0..setup.offers.len())
                .map(|k| setup.units(k, 0).unwrap_or(0.0) * setup.offers[k].owned_at(level.first))
                .sum();
            let mut items = Vec::new();
            for &(k, kind, var) in &lv.totals {
                let e = &setup.offers[k];
                let v = &milp.vars[var];
                if !v.integer {
                    return None;
                }
                let units = setup.units(k, 0).unwrap_or(0.0);
                let (unit, pool) = match kind {
                    Kind::Spot => {
                        let next = pool_index.len();
                        (
                            units * e.gamma,
                            Some(*pool_index.entry(e.offer.spot_pool.as_str()).or_insert(next)),
                        )
                    }
                    _ => (units, None),
                };
                if unit > 0.0 {
                    items.push(Item {
                        var,
                        unit,
                        cost: v.cost,
                        upper: v.upper.unwrap_or(f64::INFINITY).floor(),
                        pool,
                    });
                }
            }
            items.sort_by(|a, b| (a.cost / a.unit).total_cmp(&(b.cost / b.unit)));
            hours.push(Hour {
                items,
                spot_cap: info.sigma.map_or(f64::INFINITY, |s| s * d),
                pool_cap: info.pi.map_or(f64::INFINITY, |p| p * d),
                pools: pool_index.len(),
            });
            rhs.push(if d > 0.0 { d - owned } else { 0.0 });
        }
        let top = rhs.iter().copied().fold(0.0_f64, f64::max);
        let rho_max = (top - 1e-9).ceil().max(0.0) as usize;
        let evaluations = (rho_max + 1).saturating_mul(hours.len().max(1));
        (rho_max <= MAX_RHO && evaluations <= MAX_EVALUATIONS).then_some(Self {
            reserved,
            hours,
            rhs,
            rho_max,
        })
    }

    fn run(&self, n_vars: usize, deadline: Option<Instant>) -> Outcome {
        let Some(bought) = self.purchases() else {
            return Outcome::NotApplicable;
        };
        // Lower bounds per ρ from the hours' LP relaxations.
        let mut order: Vec<(f64, usize)> = Vec::new();
        for rho in 0..=self.rho_max {
            let mut bound = bought.cost(rho);
            if !bound.is_finite() {
                continue;
            }
            for (hour, rhs) in self.hours.iter().zip(&self.rhs) {
                match hour.relaxation(rhs - rho as f64, &Bounds::new(hour)) {
                    Some(lp) => bound += lp.cost,
                    None => {
                        bound = f64::INFINITY;
                        break;
                    }
                }
            }
            if bound.is_finite() {
                order.push((bound, rho));
            }
        }
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut best: Option<(f64, usize, Vec<Vec<f64>>)> = None;
        let mut memo: HashMap<(usize, usize), Option<HourPlan>> = HashMap::new();
        // Set when the time limit stops the search: the lowest bound left.
        let mut open_bound = None;
        for (bound, rho) in order {
            if let Some((b, _, _)) = &best
                && bound >= b - 1e-9 * b.abs().max(1.0)
            {
                break;
            }
            if best.is_some() && deadline.is_some_and(|d| Instant::now() >= d) {
                open_bound = Some(bound);
                break;
            }
            let mut total = bought.cost(rho);
            let mut counts = Vec::with_capacity(self.hours.len());
            let mut feasible = true;
            // Whether the time limit cut an hour's search short: its plan
            // stands, but is not proven the cheapest.
            let mut cut = false;
            for (l, (hour, rhs)) in self.hours.iter().zip(&self.rhs).enumerate() {
                let key = (l, rho);
                let found = match memo.get(&key) {
                    Some(found) => found.clone(),
                    None => match hour.solve(rhs - rho as f64, deadline) {
                        Ok(Searched::Proven(found)) => {
                            memo.insert(key, found.clone());
                            found
                        }
                        Ok(Searched::Cut(found)) => {
                            cut = true;
                            Some(found)
                        }
                        Err(outcome) => return outcome,
                    },
                };
                match found {
                    Some((c, x)) => {
                        total += c;
                        counts.push(x);
                    }
                    None => {
                        feasible = false;
                        break;
                    }
                }
            }
            if feasible && best.as_ref().is_none_or(|(b, _, _)| total < *b) {
                best = Some((total, rho, counts));
            }
            if cut {
                // This supply's bound is the lowest of those left to try.
                open_bound = Some(bound);
                break;
            }
        }
        let Some((_, rho, counts)) = best else {
            return Outcome::Failed(LpError::Infeasible);
        };
        let mut values = vec![0.0; n_vars];
        for (var, count) in bought.counts(rho) {
            values[var] = count;
        }
        for (hour, x) in self.hours.iter().zip(counts) {
            for (item, v) in hour.items.iter().zip(x) {
                values[item.var] = v;
            }
        }
        Outcome::Solved(Solved {
            values,
            bound: open_bound,
        })
    }

    /// `c(ρ)` for every `ρ` up to `rho_max` (∞ where unreachable), and the
    /// purchase reaching it: a bounded knapsack over the reserved offers,
    /// each split into 1, 2, 4, … instances so every piece is taken once.
    fn purchases(&self) -> Option<Purchases> {
        let n = self.rho_max + 1;
        let mut pieces: Vec<(usize, usize, f64, usize)> = Vec::new();
        for &(var, unit, price, upper) in &self.reserved {
            let mut left = upper.min(n.div_ceil(unit) as f64) as usize;
            let mut size = 1;
            while left > 0 {
                let take = size.min(left);
                pieces.push((var, unit * take, price * take as f64, take));
                left -= take;
                size *= 2;
            }
        }
        if pieces.len().saturating_mul(n) > MAX_EVALUATIONS / 2 {
            return None;
        }
        // Exact supply (capped at `rho_max`) -> cheapest cost, and per piece
        // the state it was taken from.
        let mut cost = vec![f64::INFINITY; n];
        cost[0] = 0.0;
        let mut taken: Vec<Vec<u32>> = Vec::with_capacity(pieces.len());
        for &(_, units, price, _) in &pieces {
            let before = cost.clone();
            let mut from_of = vec![u32::MAX; n];
            for (from, c) in before.iter().enumerate() {
                if c.is_finite() {
                    let to = (from + units).min(self.rho_max);
                    if c + price < cost[to] {
                        cost[to] = c + price;
                        from_of[to] = from as u32;
                    }
                }
            }
            taken.push(from_of);
        }
        // "At least ρ": the cheapest state at or above it.
        let mut at_least = vec![(f64::INFINITY, 0usize); n];
        let mut best = (f64::INFINITY, self.rho_max);
        for rho in (0..n).rev() {
            if cost[rho] < best.0 {
                best = (cost[rho], rho);
            }
            at_least[rho] = best;
        }
        Some(Purchases {
            at_least,
            pieces,
            taken,
        })
    }
}

/// The cheapest purchase reaching each reserved supply `ρ`.
struct Purchases {
    /// Per `ρ`: its cost and the exact (capped) supply state that gives it.
    at_least: Vec<(f64, usize)>,
    /// `(var, units, price, instances)` of each piece.
    pieces: Vec<(usize, usize, f64, usize)>,
    /// Per piece, per state: the state it was taken from, if taking it was
    /// how that state was reached at its stage.
    taken: Vec<Vec<u32>>,
}

impl Purchases {
    fn cost(&self, rho: usize) -> f64 {
        self.at_least[rho].0
    }

    /// Instances per reserved variable for `ρ`, walking the stages back.
    fn counts(&self, rho: usize) -> BTreeMap<usize, f64> {
        let mut counts = BTreeMap::new();
        let mut s = self.at_least[rho].1;
        for (piece, from_of) in self.pieces.iter().zip(&self.taken).rev() {
            if from_of[s] != u32::MAX {
                *counts.entry(piece.0).or_default() += piece.3 as f64;
                s = from_of[s] as usize;
            }
        }
        counts
    }
}

/// Branching bounds on an hour's counts.
#[derive(Clone)]
struct Bounds {
    lo: Vec<f64>,
    hi: Vec<f64>,
}

impl Bounds {
    fn new(hour: &Hour) -> Self {
        Self {
            lo: vec![0.0; hour.items.len()],
            hi: hour.items.iter().map(|i| i.upper).collect(),
        }
    }
}

/// An LP solution of an hour.
struct Relaxed {
    cost: f64,
    x: Vec<f64>,
}

impl Hour {
    /// The LP relaxation under `b`, covering `need`: greedy, cheapest unit of
    /// work first, within every enclosing cap; `None` when infeasible.
    fn relaxation(&self, need: f64, b: &Bounds) -> Option<Relaxed> {
        let mut x = b.lo.clone();
        let mut cost = 0.0;
        let mut covered = 0.0;
        let mut spot = 0.0;
        let mut pools = vec![0.0; self.pools];
        for (i, item) in self.items.iter().enumerate() {
            cost += item.cost * x[i];
            covered += item.unit * x[i];
            if let Some(p) = item.pool {
                spot += item.unit * x[i];
                pools[p] += item.unit * x[i];
            }
        }
        let slack = |cap: f64| 1e-9 * cap.abs().max(1.0);
        if spot > self.spot_cap + slack(self.spot_cap)
            || pools
                .iter()
                .any(|p| *p > self.pool_cap + slack(self.pool_cap))
        {
            return None;
        }
        let mut left = need - covered;
        for (i, item) in self.items.iter().enumerate() {
            if left <= 1e-9 * need.abs().max(1.0) {
                break;
            }
            let mut room = (b.hi[i] - b.lo[i]) * item.unit;
            if let Some(p) = item.pool {
                room = room.min(self.spot_cap - spot).min(self.pool_cap - pools[p]);
            }
            if room <= 0.0 {
                continue;
            }
            let take = room.min(left);
            x[i] += take / item.unit;
            cost += take / item.unit * item.cost;
            left -= take;
            if let Some(p) = item.pool {
                spot += take;
                pools[p] += take;
            }
        }
        (left <= 1e-9 * need.abs().max(1.0)).then_some(Relaxed { cost, x })
    }

    /// The cheapest whole counts covering `need`, with their cost (`None`
    /// when no whole counts do), or the best found when the deadline passed.
    /// `Err` when the search cannot go on: out of time with nothing found, or
    /// too many nodes.
    fn solve(&self, need: f64, deadline: Option<Instant>) -> Result<Searched, Outcome> {
        if need <= 0.0 {
            return Ok(Searched::Proven(Some((0.0, vec![0.0; self.items.len()]))));
        }
        let mut best: Option<HourPlan> = None;
        let mut stack = vec![Bounds::new(self)];
        let mut nodes = 0usize;
        while let Some(b) = stack.pop() {
            nodes += 1;
            if nodes > MAX_NODES {
                return Err(Outcome::NotApplicable);
            }
            if nodes.is_multiple_of(1024) && deadline.is_some_and(|d| Instant::now() >= d) {
                return match best {
                    Some(found) => Ok(Searched::Cut(found)),
                    None => Err(Outcome::Failed(LpError::TimeLimit)),
                };
            }
            let Some(lp) = self.relaxation(need, &b) else {
                continue;
            };
            if let Some((c, _)) = &best
                && lp.cost >= c - 1e-9 * c.abs().max(1.0)
            {
                continue;
            }
            let fractional = lp.x.iter().position(|v| (v - v.round()).abs() > 1e-9);
            let Some(i) = fractional else {
                let x: Vec<f64> = lp.x.iter().map(|v| v.round()).collect();
                let cost = self.items.iter().zip(&x).map(|(it, v)| it.cost * v).sum();
                best = Some((cost, x));
                continue;
            };
            let v = lp.x[i];
            // Round down is explored after round up (pushed first): rounding
            // up covers, so a plan is found at once.
            let mut down = b.clone();
            down.hi[i] = v.floor();
            stack.push(down);
            let mut up = b;
            up.lo[i] = v.ceil();
            stack.push(up);
        }
        Ok(Searched::Proven(best))
    }
}

/// An hour's cost and whole counts (in item order).
type HourPlan = (f64, Vec<f64>);

/// What an hour's search found.
enum Searched {
    /// The cheapest whole counts, or `None` if there are none.
    Proven(Option<HourPlan>),
    /// The best found before the deadline.
    Cut(HourPlan),
}
