//! Whole hourly counts where the one-class decomposition does not apply
//! (several classes): branch and bound over the reserved counts alone.
//!
//! With the reserved counts fixed the hours are independent small MILPs,
//! solved exactly level by level (`incumbent::whole_hours`), so the search
//! runs over the purchases only. A node is a box of reserved counts, and its
//! bound is the LP relaxation restricted to the box, re-solved from the root
//! relaxation by the dual simplex. A node whose relaxation has a fractional
//! count is split at it. A node whose relaxation has whole counts `p` has
//! its hours solved exactly at `p`, stopping as soon as they cannot beat the
//! best plan (the levels not yet solved counted at their relaxation's cost,
//! which is a lower bound on each), and the rest of its box is split into
//! boxes that leave `p` out. Nodes are taken lowest bound first; the search
//! ends when none can beat the best plan (proven optimal), or at the
//! deadline with the lowest bound left, which is a bound on the optimum.
//!
//! The generic MILP search branches on the hourly counts too, thousands of
//! them, and its bound hardly moves from the relaxation's; here every whole
//! point is valued exactly, and the relaxation is only asked about boxes of
//! purchases, where it is strong: a reserved instance more or less than the
//! relaxation wants costs tens of dollars over a week.
//!
//! Before the search each count's range is narrowed by probing: once the
//! relaxation with `R ≥ v` cannot beat the best plan, no improving plan has
//! `R ≥ v` (and likewise below). Most counts the relaxation leaves at zero
//! end fixed there, so few counts are left to split around a point.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::SolveOptions;
use super::build::{Scope, Vars};
use super::incumbent::{Hours, Plan, better, cost, reserved_counts, whole_level};
use super::lp::{LpError, Milp, Relaxation, Solved, resident_bytes};
use super::setup::Setup;

/// How far a relaxation's count may be from whole and still count as whole.
const WHOLE: f64 = 1e-6;

/// Counts above which probing stops looking for where a count's range ends.
const PROBE_TOP: f64 = 1_048_576.0;

/// The gap the search closes first (docs/planning-model.md §9.9): a point
/// or box that cannot beat the best plan by more than this share of its
/// cost waits until nothing else is left. A search stopped by its time
/// limit after that has at most this gap.
const FIRST_GAP: f64 = 1e-3;

/// Memory the search may grow by while it keeps nodes' relaxations for
/// their children to start from; past it (or past a quarter of the solve's
/// memory limit) a child starts from the probed root's. Each holds the
/// whole model's solver state, about 11 MB on a week of 20 offers. Where
/// the process's memory cannot be read, none is kept.
const WARM_BYTES: u64 = 256 << 20;

/// A box of reserved counts, in the order of the search's reserved list.
#[derive(Clone)]
struct Node {
    lower: Vec<f64>,
    upper: Vec<Option<f64>>,
    /// Its relaxation's optimum, or its parent's until it is solved.
    bound: f64,
    relaxed: Option<Relaxed>,
    /// A relaxation to re-solve from: until the node is solved, its
    /// parent's; after, its own, for its children. A child's box adds a
    /// bound or two to its parent's, so the dual simplex takes a few pivots
    /// from there, against many from the root.
    warm: Option<Rc<Warm>>,
}

/// A solved relaxation and the box it was solved in.
struct Warm {
    relaxation: Relaxation,
    lower: Vec<f64>,
    upper: Vec<Option<f64>>,
}

/// A point's valuation as its workers fill it in.
struct Valuing<'a> {
    values: Vec<f64>,
    gaps: &'a mut [f64],
    /// Each level's least hourly cost at the point, once solved.
    solved: Vec<Option<f64>>,
    /// The point's cost so far, levels not solved yet at a lower bound.
    at_least: f64,
    /// Set once the valuation is over before every level is solved.
    outcome: Option<Hours>,
}

/// Points valued so far, each level's least hourly cost at each where it
/// was solved. A level sees the reserved counts only through each reserved
/// pool's supply, the pool's counts summed (offers in a pool do the same
/// work for every class, and share one reserved split), so points are kept
/// by that supply: two purchases of the same supply have the same hours.
/// That cost can only fall as supply rises: it appears only on the right of
/// the reserved split (docs/planning-model.md §9.4), so more of it leaves
/// every plan of the hours feasible. So a supply at or above `p`'s in every
/// pool bounds `p`'s level from below, and one at or below bounds it from
/// above.
struct History {
    /// The gap over its relaxation's cost each level showed last time.
    gaps: Vec<f64>,
    points: Vec<(Vec<f64>, Vec<Option<f64>>)>,
}

/// Points kept in the history; past it the oldest are dropped (a bound on
/// memory and on the time a lookup takes, not on correctness).
const HISTORY: usize = 4096;

impl History {
    /// Per level at `point`: the greatest cost known at or above it and the
    /// least known at or below it.
    fn around(&self, supply: &[f64], levels: usize) -> (Vec<f64>, Vec<f64>) {
        let mut lower = vec![f64::NEG_INFINITY; levels];
        let mut upper = vec![f64::INFINITY; levels];
        for (at, costs) in &self.points {
            let above = at.iter().zip(supply).all(|(a, p)| a >= p);
            let below = at.iter().zip(supply).all(|(a, p)| a <= p);
            for (l, cost) in costs.iter().enumerate() {
                if let Some(c) = *cost {
                    if above {
                        lower[l] = lower[l].max(c);
                    }
                    if below {
                        upper[l] = upper[l].min(c);
                    }
                }
            }
        }
        (lower, upper)
    }

    fn record(&mut self, supply: &[f64], solved: Vec<Option<f64>>) {
        if solved.iter().any(Option::is_some) {
            if self.points.len() == HISTORY {
                self.points.remove(0);
            }
            self.points.push((supply.to_vec(), solved));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a node's relaxation said.
#[derive(Clone)]
struct Relaxed {
    counts: Vec<f64>,
    /// The relaxation's hourly cost per level.
    levels: Vec<f64>,
    /// Every value, kept only when the counts are whole (the point is
    /// valued next).
    values: Option<Vec<f64>>,
}

impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Node {}

impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Node {
    /// Lowest bound first out of the max-heap.
    fn cmp(&self, other: &Self) -> Ordering {
        other.bound.total_cmp(&self.bound)
    }
}

/// Solves `milp` (as built for `setup` with whole counts and new purchases)
/// by the search, starting from `start` when known; `None` when it does not
/// apply (a purchase with a continuous count).
pub(super) fn solve(
    setup: &Setup<'_>,
    milp: &Milp,
    vars: &Vars,
    start: Option<Vec<f64>>,
    opts: &SolveOptions,
    deadline: Option<Instant>,
) -> Option<Result<Solved, LpError>> {
    if !applies(milp, vars) {
        return None;
    }
    let reserved = reserved_counts(milp, vars);
    let pool_of = pools_of(setup, vars);
    let search = Search {
        setup,
        milp,
        vars,
        reserved,
        pool_of,
        opts,
        deadline,
    };
    let best = start.map(|values| Plan {
        cost: cost(milp, &values),
        values,
    });
    Some(search.run(best))
}

/// Whether the search takes `milp`: something to buy, every count whole.
pub(super) fn applies(milp: &Milp, vars: &Vars) -> bool {
    let mut reserved = vars.reserved.iter().flatten().flatten().peekable();
    reserved.peek().is_some() && reserved.all(|var| milp.vars[*var].integer)
}

/// Per reserved count (in `reserved_counts`' order), the index of the
/// reserved pool its offer belongs to.
fn pools_of(setup: &Setup<'_>, vars: &Vars) -> Vec<usize> {
    let mut pool_of = Vec::new();
    for (k, options) in vars.reserved.iter().enumerate() {
        let pool = setup
            .reserved_pools
            .iter()
            .position(|members| members.contains(&k));
        for _ in options.iter().flatten() {
            // Every offer with a purchase variable is in a pool
            // (`Setup::new`); one outside would be a pool of its own.
            pool_of.push(pool.unwrap_or(setup.reserved_pools.len() + k));
        }
    }
    pool_of
}

struct Search<'a> {
    setup: &'a Setup<'a>,
    milp: &'a Milp,
    vars: &'a Vars,
    reserved: Vec<(usize, Option<f64>)>,
    pool_of: Vec<usize>,
    opts: &'a SolveOptions,
    deadline: Option<Instant>,
}

impl Search<'_> {
    fn out_of_time(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    fn can_beat(bound: f64, best: Option<&Plan>) -> bool {
        Self::can_beat_by(bound, best, false)
    }

    /// Whether `bound` can beat `best`, or with `first` beat it by more
    /// than `FIRST_GAP` of its cost.
    fn can_beat_by(bound: f64, best: Option<&Plan>, first: bool) -> bool {
        best.is_none_or(|b| {
            let margin = if first { FIRST_GAP * b.cost.abs() } else { 0.0 };
            better(bound + margin, b.cost)
        })
    }

    fn run(&self, mut best: Option<Plan>) -> Result<Solved, LpError> {
        let root = Relaxation::new(self.milp)?;
        let (lower, upper) = self.probe(&root, best.as_ref());
        let bounds = self.bounds(&lower, &upper);
        let probed = match root.within(&bounds) {
            Ok(probed) => probed,
            // No plan can beat the best one: it is the optimum.
            Err(LpError::Infeasible) if best.is_some() => return Ok(Self::finish(best, None)),
            Err(e) => return Err(e),
        };
        let mut open = BinaryHeap::new();
        open.push(Node {
            bound: probed.objective(),
            relaxed: Some(self.relaxed(&probed)),
            lower: lower.clone(),
            upper: upper.clone(),
            warm: None,
        });
        let started_at = resident_bytes();
        let budget = self
            .opts
            .memory_limit
            .map_or(WARM_BYTES, |limit| WARM_BYTES.min(limit / 4));
        let can_keep = || {
            started_at
                .zip(resident_bytes())
                .is_some_and(|(then, now)| now.saturating_sub(then) < budget)
        };
        // The lowest bound of a point whose hours ran out of time.
        let mut unresolved = f64::INFINITY;
        let mut history = History {
            gaps: vec![0.0; self.vars.levels.len()],
            points: Vec::new(),
        };
        // First every box and point that could beat the best plan by more
        // than `FIRST_GAP`; the rest wait with their bounds until none is
        // left, so that a search cut short still has its gap that small.
        let mut first = true;
        let mut nodes = 0;
        while let Some(mut node) = open.pop() {
            if !Self::can_beat(node.bound, best.as_ref()) {
                open.clear();
                break;
            }
            // Nodes come lowest bound first: this one's is the search's.
            nodes += 1;
            if let Some(watch) = &self.opts.search {
                let bound = node.bound.min(unresolved);
                (watch.0)(&super::Search {
                    nodes,
                    bound: Some(bound),
                    gap: best.as_ref().map(|b| super::relative_gap(b.cost, bound)),
                });
            }
            if first && !Self::can_beat_by(node.bound, best.as_ref(), true) {
                first = false;
            }
            if self.out_of_time() {
                open.push(node);
                break;
            }
            let Some(relaxed) = node.relaxed.take() else {
                let warm = node.warm.take();
                let (from, within) = match warm.as_deref() {
                    Some(w) => (&w.relaxation, self.bounds_from(&node, &w.lower, &w.upper)),
                    None => (&probed, self.bounds_from(&node, &lower, &upper)),
                };
                match from.within(&within) {
                    Ok(solved) => {
                        node.bound = solved.objective();
                        if Self::can_beat(node.bound, best.as_ref()) {
                            node.relaxed = Some(self.relaxed(&solved));
                            if can_keep() {
                                node.warm = Some(Rc::new(Warm {
                                    relaxation: solved,
                                    lower: node.lower.clone(),
                                    upper: node.upper.clone(),
                                }));
                            }
                            open.push(node);
                        }
                    }
                    Err(LpError::Infeasible) => {}
                    Err(e) => return Err(e),
                }
                continue;
            };
            let fractional = relaxed
                .counts
                .iter()
                .enumerate()
                .map(|(i, x)| (i, (x - x.round()).abs()))
                .filter(|(_, f)| *f > WHOLE)
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((i, _)) = fractional {
                let x = relaxed.counts[i];
                let mut below = node.clone();
                below.upper[i] = Some(x.floor());
                let mut above = node;
                above.lower[i] = x.ceil();
                open.push(below);
                open.push(above);
                continue;
            }
            let point: Vec<f64> = relaxed.counts.iter().map(|x| x.round()).collect();
            let (hours, at_least) =
                self.value(&point, &relaxed, best.as_ref(), first, &mut history);
            match hours {
                Hours::Plan(plan) => {
                    if Self::can_beat(plan.cost, best.as_ref()) {
                        best = Some(plan);
                    }
                }
                // Told only within the first gap: the point waits at the
                // bound its hours reached, to be finished from the history.
                Hours::CannotBeat if Self::can_beat(at_least, best.as_ref()) => {
                    open.push(Node {
                        lower: point.clone(),
                        upper: point.iter().map(|p| Some(*p)).collect(),
                        bound: at_least,
                        relaxed: Some(relaxed),
                        warm: None,
                    });
                }
                Hours::CannotBeat | Hours::Infeasible => {}
                Hours::Failed => unresolved = unresolved.min(node.bound),
            }
            for child in Self::around(&node, &point) {
                open.push(child);
            }
        }
        let lowest = open.iter().map(|n| n.bound).fold(unresolved, f64::min);
        let proven = lowest == f64::INFINITY;
        let bound = (!proven).then(|| best.as_ref().map_or(lowest, |b| lowest.min(b.cost)));
        match best {
            Some(_) => Ok(Self::finish(best, bound)),
            None if proven => Err(LpError::Infeasible),
            None => Err(LpError::TimeLimit),
        }
    }

    fn finish(best: Option<Plan>, bound: Option<f64>) -> Solved {
        Solved {
            values: best.map(|b| b.values).unwrap_or_default(),
            bound,
            memory_stop: false,
        }
    }

    /// The boxes that cover `node`'s box less `point`: for each count in
    /// turn that the box leaves free, the part below and the part above the
    /// point's count, with the counts before it at the point's.
    fn around(node: &Node, point: &[f64]) -> Vec<Node> {
        let mut children = Vec::new();
        let mut rest = node.clone();
        for (i, &p) in point.iter().enumerate() {
            if rest.upper[i] == Some(rest.lower[i]) {
                continue;
            }
            if p - 1.0 >= rest.lower[i] {
                let mut below = rest.clone();
                below.upper[i] = Some(p - 1.0);
                children.push(below);
            }
            if rest.upper[i].is_none_or(|u| p + 1.0 <= u) {
                let mut above = rest.clone();
                above.lower[i] = p + 1.0;
                children.push(above);
            }
            rest.lower[i] = p;
            rest.upper[i] = Some(p);
        }
        children
    }

    /// Each count's range in any plan that can beat `best`, by probing the
    /// relaxation a step, then doubling steps, away from the root's value.
    fn probe(&self, root: &Relaxation, best: Option<&Plan>) -> (Vec<f64>, Vec<Option<f64>>) {
        let mut lower = vec![0.0; self.reserved.len()];
        let mut upper: Vec<Option<f64>> = self.reserved.iter().map(|(_, cap)| *cap).collect();
        let Some(best) = best else {
            return (lower, upper);
        };
        let cannot_beat =
            |var: usize, low: f64, high: Option<f64>| match root.within(&[(var, low, high)]) {
                Ok(r) => !better(r.objective(), best.cost),
                Err(_) => true,
            };
        for (i, &(var, cap)) in self.reserved.iter().enumerate() {
            let x = root.value(var);
            // Upwards: the least v with nothing that beats `best` at R >= v.
            let mut good = x.floor();
            let mut step = 1.0;
            let mut bad = None;
            while good + step <= cap.unwrap_or(PROBE_TOP) && good + step <= PROBE_TOP {
                if self.out_of_time() {
                    return (lower, upper);
                }
                if cannot_beat(var, good + step, None) {
                    bad = Some(good + step);
                    break;
                }
                good += step;
                step *= 2.0;
            }
            if let Some(mut bad) = bad {
                while bad - good > 1.0 {
                    let mid = ((good + bad) / 2.0).floor();
                    if cannot_beat(var, mid, None) {
                        bad = mid;
                    } else {
                        good = mid;
                    }
                }
                upper[i] = Some(bad - 1.0);
            }
            // Downwards: the greatest v with nothing that beats it at R <= v.
            let mut good = x.ceil();
            let mut step = 1.0;
            let mut bad = None;
            while good - step >= 0.0 {
                if self.out_of_time() {
                    return (lower, upper);
                }
                if cannot_beat(var, 0.0, Some(good - step)) {
                    bad = Some(good - step);
                    break;
                }
                good -= step;
                step *= 2.0;
            }
            if let Some(mut bad) = bad {
                while good - bad > 1.0 {
                    let mid = ((good + bad) / 2.0).ceil();
                    if cannot_beat(var, 0.0, Some(mid)) {
                        bad = mid;
                    } else {
                        good = mid;
                    }
                }
                lower[i] = bad + 1.0;
            }
        }
        (lower, upper)
    }

    /// The bounds a box adds to the model's own.
    fn bounds(&self, lower: &[f64], upper: &[Option<f64>]) -> Vec<(usize, f64, Option<f64>)> {
        self.reserved
            .iter()
            .zip(lower.iter().zip(upper))
            .filter(|((_, cap), (low, high))| **low > 0.0 || **high != *cap)
            .map(|((var, _), (low, high))| (*var, *low, *high))
            .collect()
    }

    /// The bounds `node` adds to the box `lower`..`upper` (the probed box,
    /// or the one a warm start was solved in), which holds `node`'s.
    fn bounds_from(
        &self,
        node: &Node,
        lower: &[f64],
        upper: &[Option<f64>],
    ) -> Vec<(usize, f64, Option<f64>)> {
        let mut bounds = Vec::new();
        for (i, (var, _)) in self.reserved.iter().enumerate() {
            let low = node.lower[i];
            let high = node.upper[i];
            let tighter_low = (low > lower[i]).then_some(low);
            let tighter_high = high.filter(|h| upper[i].is_none_or(|u| *h < u));
            if tighter_low.is_some() || tighter_high.is_some() {
                bounds.push((*var, tighter_low.unwrap_or(0.0), tighter_high));
            }
        }
        bounds
    }

    fn relaxed(&self, r: &Relaxation) -> Relaxed {
        let counts: Vec<f64> = self.reserved.iter().map(|(var, _)| r.value(*var)).collect();
        let whole = counts.iter().all(|x| (x - x.round()).abs() <= WHOLE);
        let values: Vec<f64> = (0..self.milp.vars.len()).map(|v| r.value(v)).collect();
        Relaxed {
            counts,
            levels: self
                .vars
                .levels
                .iter()
                .map(|l| {
                    l.vars
                        .clone()
                        .map(|v| self.milp.vars[v].cost * values[v])
                        .sum()
                })
                .collect(),
            values: whole.then_some(values),
        }
    }

    /// The plan at whole reserved counts `point`, its hours solved exactly
    /// level by level, unless it cannot beat `best`. A level not solved yet
    /// counts at a lower bound: its relaxation's cost, or what `history`
    /// knows at a supply at or above the point's. A level whose relaxation is already whole is
    /// optimal as it is. The others are solved largest expected gap over
    /// that bound first (the gap they showed last time), so that a point
    /// that cannot win is told early. A level whose cost `history` pins
    /// from both sides is solved last, only for a point that wins, since
    /// its cost is known. The levels are independent, so one worker per
    /// core takes them in that order.
    fn value(
        &self,
        point: &[f64],
        relaxed: &Relaxed,
        best: Option<&Plan>,
        first: bool,
        history: &mut History,
    ) -> (Hours, f64) {
        let Some(lp) = relaxed.values.as_deref() else {
            return (Hours::Failed, f64::NEG_INFINITY);
        };
        let mut values = vec![0.0; self.milp.vars.len()];
        for (&(var, _), &count) in self.reserved.iter().zip(point) {
            values[var] = count;
        }
        let levels = self.vars.levels.len();
        let supply = self.supply(point);
        let (above, below) = history.around(&supply, levels);
        let lower: Vec<f64> = (0..levels)
            .map(|l| relaxed.levels[l].max(above[l]))
            .collect();
        let pinned: Vec<bool> = (0..levels)
            .map(|l| below[l].is_finite() && !better(lower[l], below[l]))
            .collect();
        // Each level as counted until it is solved.
        let counted: Vec<f64> = (0..levels)
            .map(|l| if pinned[l] { below[l] } else { lower[l] })
            .collect();
        let at_least = cost(self.milp, &values) + counted.iter().sum::<f64>();
        if !Self::can_beat_by(at_least, best, first) {
            return (Hours::CannotBeat, at_least);
        }
        let expected = |l: usize| (relaxed.levels[l] + history.gaps[l] - lower[l]).max(0.0);
        let mut order: Vec<usize> = (0..levels)
            .filter(|l| !self.vars.levels[*l].vars.is_empty())
            .collect();
        order.sort_by(|a, b| {
            pinned[*a]
                .cmp(&pinned[*b])
                .then(expected(*b).total_cmp(&expected(*a)))
        });
        let shared = Mutex::new(Valuing {
            values,
            gaps: &mut history.gaps,
            solved: vec![None; levels],
            at_least,
            outcome: None,
        });
        let next = AtomicUsize::new(0);
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        std::thread::scope(|scope| {
            for _ in 0..workers.min(order.len()) {
                scope.spawn(|| {
                    while let Some(&l) = order.get(next.fetch_add(1, AtomicOrdering::Relaxed)) {
                        if lock(&shared).outcome.is_some() {
                            return;
                        }
                        let level = self.level(l, point, lp);
                        let mut state = lock(&shared);
                        if state.outcome.is_some() {
                            return;
                        }
                        let level = match level {
                            Ok(level) => level,
                            Err(e) => {
                                state.outcome = Some(if e == LpError::Infeasible {
                                    Hours::Infeasible
                                } else {
                                    Hours::Failed
                                });
                                return;
                            }
                        };
                        let range = self.vars.levels[l].vars.clone();
                        let mut level_cost = 0.0;
                        for (v, x) in range.zip(level) {
                            state.values[v] = x;
                            level_cost += self.milp.vars[v].cost * x;
                        }
                        state.gaps[l] = level_cost - relaxed.levels[l];
                        state.solved[l] = Some(level_cost);
                        state.at_least += level_cost - counted[l];
                        if !Self::can_beat_by(state.at_least, best, first) {
                            state.outcome = Some(Hours::CannotBeat);
                            return;
                        }
                    }
                });
            }
        });
        let Valuing {
            values,
            solved,
            at_least,
            outcome,
            ..
        } = shared.into_inner().unwrap_or_else(PoisonError::into_inner);
        history.record(&supply, solved);
        if let Some(outcome) = outcome {
            return (outcome, at_least);
        }
        let cost = cost(self.milp, &values);
        (Hours::Plan(Plan { values, cost }), cost)
    }

    /// Each reserved pool's supply at `point`: its counts summed.
    fn supply(&self, point: &[f64]) -> Vec<f64> {
        let pools = self.pool_of.iter().max().map_or(0, |p| p + 1);
        let mut supply = vec![0.0; pools];
        for (&pool, &count) in self.pool_of.iter().zip(point) {
            supply[pool] += count;
        }
        supply
    }

    /// Level `l`'s whole counts at `point`: the relaxation's own `lp` when
    /// they are already whole, else its small MILP solved.
    fn level(&self, l: usize, point: &[f64], lp: &[f64]) -> Result<Vec<f64>, LpError> {
        let range = self.vars.levels[l].vars.clone();
        let integer = |v: usize| self.milp.vars[v].integer;
        if range
            .clone()
            .all(|v| !integer(v) || (lp[v] - lp[v].round()).abs() <= WHOLE)
        {
            return Ok(range
                .map(|v| if integer(v) { lp[v].round() } else { lp[v] })
                .collect());
        }
        let left = self
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        let whole = Scope {
            mip: true,
            purchases: true,
        };
        whole_level(
            self.setup,
            self.milp,
            self.vars,
            l,
            &self.reserved,
            point,
            whole,
            self.opts,
            left,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::History;

    #[test]
    fn the_history_bounds_a_level_from_supplies_above_and_below_in_every_pool() {
        let mut history = History {
            gaps: vec![0.0; 2],
            points: Vec::new(),
        };
        history.record(&[2.0, 1.0], vec![Some(10.0), None]);
        history.record(&[1.0, 1.0], vec![Some(14.0), Some(7.0)]);
        history.record(&[3.0, 0.0], vec![Some(9.0), Some(8.0)]);
        // Nothing solved at a point is not kept.
        history.record(&[5.0, 5.0], vec![None, None]);
        assert_eq!(history.points.len(), 3);
        // (1, 1) itself and (2, 1) are at or above (1, 1); (3, 0) is neither
        // above nor below it, so it tells nothing.
        let (lower, upper) = history.around(&[1.0, 1.0], 2);
        assert_eq!(lower, vec![14.0, 7.0]);
        assert_eq!(upper, vec![14.0, 7.0]);
        let (lower, upper) = history.around(&[2.0, 0.0], 2);
        assert_eq!(lower, vec![10.0, 8.0]);
        assert_eq!(upper, vec![f64::INFINITY; 2]);
        let (lower, upper) = history.around(&[3.0, 1.0], 2);
        assert_eq!(lower, vec![f64::NEG_INFINITY; 2]);
        assert_eq!(upper, vec![9.0, 7.0]);
    }
}
