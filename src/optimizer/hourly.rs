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
//! where `c(ρ)` is the cheapest purchase reaching at least `ρ`: only the
//! purchases on the Pareto frontier of supply against cost can be optimal,
//! and that frontier is built exactly offer by offer (units `φ·g` need not be
//! whole), and `H_l(x)` the cheapest whole spot and on-demand
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
//! two on the unreduced model. When the time limit cuts it short it returns
//! the best plan found with the lowest bound not yet ruled out.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use super::build::{Kind, Vars};
use super::lp::{LpError, Milp, Solved};
use super::setup::Setup;

/// Most purchase levels (distinct cheapest supplies) and (level, supply)
/// bound evaluations the decomposition takes on; bigger problems go to the
/// generic solver.
const MAX_SUPPLIES: usize = 50_000;
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

/// What the decomposition made of a problem.
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
    watch: Option<&super::SearchSink>,
) -> Outcome {
    let Some(plan) = Decomposition::new(setup, milp, vars) else {
        return Outcome::NotApplicable;
    };
    plan.run(milp.vars.len(), deadline, watch)
}

struct Decomposition {
    /// Per reserved variable: (var, units of work per instance, cost, upper count).
    reserved: Vec<(usize, f64, f64, f64)>,
    hours: Vec<Hour>,
    /// Demand left per level after owned capacity.
    rhs: Vec<f64>,
    /// The most supply any level can use.
    top: f64,
}

impl Decomposition {
    fn new(setup: &Setup<'_>, milp: &Milp, vars: &Vars) -> Option<Self> {
        // With one class no reserved capacity is split: it all serves it.
        if setup.classes.len() != 1 {
            return None;
        }
        let mut reserved = Vec::new();
        for (k, options) in vars.reserved.iter().enumerate() {
            let kept: Vec<usize> = options.iter().flatten().copied().collect();
            match kept[..] {
                [] => {}
                [var] => {
                    let unit = setup.units(k, 0)?;
                    let v = &milp.vars[var];
                    // Continuous purchases make the supply continuous too.
                    if !v.integer {
                        return None;
                    }
                    reserved.push((var, unit, v.cost, v.upper.unwrap_or(f64::INFINITY).floor()));
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
        Some(Self {
            reserved,
            hours,
            rhs,
            top,
        })
    }

    fn run(
        &self,
        n_vars: usize,
        deadline: Option<Instant>,
        watch: Option<&super::SearchSink>,
    ) -> Outcome {
        let Some(bought) = self.purchases() else {
            return Outcome::NotApplicable;
        };
        if bought
            .frontier
            .len()
            .saturating_mul(self.hours.len().max(1))
            > MAX_EVALUATIONS
        {
            return Outcome::NotApplicable;
        }
        // Lower bounds per supply from the hours' LP relaxations.
        let mut order: Vec<(f64, usize)> = Vec::new();
        for (i, point) in bought.frontier.iter().enumerate() {
            let (supply, mut bound) = (point.supply, point.cost);
            for (hour, rhs) in self.hours.iter().zip(&self.rhs) {
                match hour.relaxation(rhs - supply, &Bounds::new(hour)) {
                    Some(lp) => bound += lp.cost,
                    None => {
                        bound = f64::INFINITY;
                        break;
                    }
                }
            }
            if bound.is_finite() {
                order.push((bound, i));
            }
        }
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut best: Option<(f64, usize, Vec<Vec<f64>>)> = None;
        let mut memo: HashMap<(usize, usize), Option<HourPlan>> = HashMap::new();
        // Set when the time limit stops the search: the lowest bound left.
        let mut open_bound = None;
        for (tried, (bound, i)) in order.into_iter().enumerate() {
            if let Some((b, _, _)) = &best
                && bound >= b - 1e-9 * b.abs().max(1.0)
            {
                break;
            }
            // Purchases come lowest bound first: this one's is the search's.
            if let Some(watch) = watch {
                (watch.0)(&super::Search {
                    nodes: tried as u64 + 1,
                    bound: Some(bound),
                    gap: best
                        .as_ref()
                        .map(|(b, _, _)| super::relative_gap(*b, bound)),
                });
            }
            if best.is_some() && deadline.is_some_and(|d| Instant::now() >= d) {
                open_bound = Some(bound);
                break;
            }
            let Point {
                supply,
                cost: mut total,
                ..
            } = bought.frontier[i];
            let mut counts = Vec::with_capacity(self.hours.len());
            let mut feasible = true;
            // Whether the time limit cut an hour's search short: its plan
            // stands, but is not proven the cheapest.
            let mut cut = false;
            for (l, (hour, rhs)) in self.hours.iter().zip(&self.rhs).enumerate() {
                let key = (l, i);
                let found = match memo.get(&key) {
                    Some(found) => found.clone(),
                    None => match hour.solve(rhs - supply, deadline) {
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
                best = Some((total, i, counts));
            }
            if cut {
                // This supply's bound is the lowest of those left to try.
                open_bound = Some(bound);
                break;
            }
        }
        let Some((_, i, counts)) = best else {
            return Outcome::Failed(LpError::Infeasible);
        };
        let mut values = vec![0.0; n_vars];
        for (var, count) in bought.counts(i) {
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
            memory_stop: false,
        })
    }

    /// Every purchase that is the cheapest way to its supply of reserved
    /// work (the Pareto frontier of supply against cost), built exactly by
    /// adding the reserved offers one piece at a time, each offer split into
    /// 1, 2, 4, … instances so that every piece is taken at most once. Supply
    /// above what any level can use counts as that much. `None` when the
    /// frontier grows past [`MAX_SUPPLIES`].
    fn purchases(&self) -> Option<Purchases> {
        let mut nodes: Vec<(usize, f64, Option<usize>)> = Vec::new();
        let mut frontier: Vec<Point> = vec![Point {
            supply: 0.0,
            cost: 0.0,
            path: None,
            added: None,
        }];
        for &(var, unit, price, upper) in &self.reserved {
            if unit <= 0.0 {
                continue;
            }
            let useful = (self.top / unit).ceil().max(0.0);
            let mut left = upper.min(useful) as usize;
            let mut size = 1;
            while left > 0 {
                let take = size.min(left);
                left -= take;
                size *= 2;
                let mut next = frontier.clone();
                next.extend(frontier.iter().map(|p| Point {
                    supply: (p.supply + unit * take as f64).min(self.top),
                    cost: p.cost + price * take as f64,
                    path: p.path,
                    added: Some((var, take as f64)),
                }));
                frontier = pareto(next);
                // Only the points that stay get a node for their new piece.
                for p in &mut frontier {
                    if let Some((var, take)) = p.added.take() {
                        nodes.push((var, take, p.path));
                        p.path = Some(nodes.len() - 1);
                    }
                }
                if frontier.len() > MAX_SUPPLIES {
                    return None;
                }
            }
        }
        Some(Purchases { frontier, nodes })
    }
}

/// A purchase: its reserved supply, its cost, the last node of its path of
/// pieces, and a piece just added that has no node yet.
#[derive(Debug, Clone, Copy)]
struct Point {
    supply: f64,
    cost: f64,
    path: Option<usize>,
    added: Option<(usize, f64)>,
}

/// Keeps the points no other point beats: none with at least the supply
/// for at most the cost. Sorted by supply.
fn pareto(mut points: Vec<Point>) -> Vec<Point> {
    points.sort_by(|a, b| {
        b.supply
            .total_cmp(&a.supply)
            .then(a.cost.total_cmp(&b.cost))
    });
    let mut kept: Vec<Point> = Vec::with_capacity(points.len());
    let mut cheapest = f64::INFINITY;
    for p in points {
        let same_supply = kept
            .last()
            .is_some_and(|k| (k.supply - p.supply).abs() <= 1e-9 * p.supply.abs().max(1.0));
        let cheaper = cheapest.is_infinite() || p.cost < cheapest - 1e-12 * cheapest.abs().max(1.0);
        if cheaper && !same_supply {
            cheapest = p.cost;
            kept.push(p);
        }
    }
    kept.reverse();
    kept
}

/// The cheapest purchases by reserved supply.
struct Purchases {
    /// Sorted by supply.
    frontier: Vec<Point>,
    /// `(var, instances, previous node)`: purchase paths as linked pieces.
    nodes: Vec<(usize, f64, Option<usize>)>,
}

impl Purchases {
    /// Instances per reserved variable of frontier point `i`.
    fn counts(&self, i: usize) -> BTreeMap<usize, f64> {
        let mut counts = BTreeMap::new();
        let mut node = self.frontier[i].path;
        while let Some(n) = node {
            let (var, take, previous) = self.nodes[n];
            *counts.entry(var).or_default() += take;
            node = previous;
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
