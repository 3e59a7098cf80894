//! The L-shaped method (docs/planning-model.md §11.13) for version 3
//! problems the one-class scan does not cover: several classes, continuous
//! hourly counts.
//!
//! The new purchases are shared by every scenario, and once they are fixed
//! each scenario's recourse splits into its levels' small LPs
//! (`recourse`). The master holds the purchases, one `θ_g` per scenario
//! group bounding its recourse cost from below by cuts (the levels' values
//! and slopes at each purchase tried, summed per group: a multi-cut), and
//! the Rockafellar–Uryasev rows on `C_g = cost·R + θ_g`. The cuts bound the
//! recourse, not the objective, so they hold for every λ, and the frontier's
//! points share them. Each λ first converges with continuous purchases
//! (cheap master LPs, and cuts where the relaxation wants them), then with
//! whole ones, until the best whole purchase evaluated is within
//! [`GAP`] of the master's bound. Scenario groups are evaluated in parallel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::super::lp::{Backend, LpError, Milp, Row, Sense, Solved, Var};
use super::super::measure::cvar;
use super::super::relative_gap;
use super::recourse::{LevelLp, Outcome, Split, Unsuited};

/// Relative distance between the best plan and the master's bound at which
/// a point counts as proven: well inside the 1e-6 that plans are compared at.
const GAP: f64 = 1e-7;

/// A purchase is whole when every count is this close to an integer.
const WHOLE: f64 = 1e-6;

/// One scenario group's levels.
pub(super) struct Scenario {
    pub(super) levels: Vec<LevelLp>,
    pub(super) probability: f64,
    /// Its baseline under `savings_shortfall`, else 0.
    pub(super) shift: f64,
}

/// A purchase evaluated: its counts and each group's recourse cost (`None`
/// when some group has no recourse at it).
struct Point {
    counts: Vec<f64>,
    recourse: Option<Vec<f64>>,
}

/// How far a λ's search got, reported after each master solve.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Progress {
    pub lambda: f64,
    /// Master solves so far for this λ.
    pub iteration: usize,
    /// The least objective proven possible.
    pub bound: f64,
    /// The best plan's objective, when there is one.
    pub best: Option<f64>,
    /// `(best − bound) / best`, when there is a best plan.
    pub gap: Option<f64>,
}

/// One λ's answer: the purchase and, when a limit stopped the search
/// before it was proven, the bound it reached.
#[derive(Debug, Clone)]
pub(super) struct Found {
    pub(super) counts: Vec<f64>,
    pub(super) bound: Option<f64>,
}

/// Why a λ has no answer.
#[derive(Debug)]
pub(super) enum Failed {
    /// No purchase serves every scenario (the master is infeasible).
    Infeasible,
    /// The method does not suit the problem after all.
    Unsuited(Unsuited),
    Solver(String),
}

/// The λ objective's terms: `(1−λ)·E[L] + λ·CVaR_β[L]`, or with `cap` the
/// mean among plans whose CVaR is at most `cap` (λ = 1's second step).
#[derive(Debug, Clone, Copy)]
pub(super) struct Goal {
    pub(super) lambda: f64,
    pub(super) beta: f64,
    pub(super) cap: Option<f64>,
}

impl Goal {
    /// The mean term's weight: `1 − λ`, or 1 under a CVaR cap.
    fn mean_weight(self) -> f64 {
        if self.cap.is_some() {
            1.0
        } else {
            1.0 - self.lambda
        }
    }
}

pub(super) struct Decomposition {
    /// The purchase columns, as the scenarios' models have them.
    columns: Vec<Var>,
    /// Rows on purchases alone: caps, coverage only reservations give.
    master_rows: Vec<Row>,
    scenarios: Vec<Scenario>,
    /// Cuts `θ_g − Σ s·R ≥ v − Σ s·r̂`, as `(group, row)`.
    cuts: Vec<(usize, Row)>,
    feasibility: Vec<Row>,
    points: Vec<Point>,
    backend: Backend,
    /// Bytes a master MIP's search may add (`SolveOptions::memory_limit`).
    memory_limit: Option<u64>,
    /// Whether a master's search stopped at the memory limit: every search
    /// after it ends with its best plan, as at the time limit.
    pub(super) memory_stopped: bool,
    threads: usize,
}

impl Decomposition {
    /// The master's purchase `columns` and `shared_rows` (rows on purchases
    /// alone, the same in every scenario), and each group's levels with its
    /// probability and shift.
    pub(super) fn new(
        columns: Vec<Var>,
        parts: Vec<(Split, f64, f64)>,
        shared_rows: Vec<Row>,
        backend: Backend,
        memory_limit: Option<u64>,
    ) -> Self {
        let mut master_rows = shared_rows;
        let mut scenarios = Vec::with_capacity(parts.len());
        for (split, probability, shift) in parts {
            master_rows.extend(split.master_rows);
            scenarios.push(Scenario {
                levels: split.levels,
                probability,
                shift,
            });
        }
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            columns,
            master_rows,
            scenarios,
            cuts: Vec::new(),
            feasibility: Vec::new(),
            points: Vec::new(),
            backend,
            memory_limit,
            memory_stopped: false,
            threads,
        }
    }

    fn reserved(&self) -> usize {
        self.columns.len()
    }

    /// The goal's value at a purchase with these group recourse costs, or
    /// `None` when it breaks the goal's CVaR cap.
    fn value(&self, goal: Goal, counts: &[f64], recourse: &[f64]) -> Option<f64> {
        let losses = self.losses(counts, recourse);
        let mean: f64 = losses.iter().map(|(l, p)| l * p).sum();
        let tail = cvar(&losses, goal.beta);
        match goal.cap {
            Some(cap) => (tail <= cap + 1e-9 * cap.abs().max(1.0) + 1e-9 * tail.abs().max(1.0))
                .then_some(mean),
            None => Some((1.0 - goal.lambda) * mean + goal.lambda * tail),
        }
    }

    /// Each group's `(L_g, p_g)` at a purchase with these recourse costs.
    fn losses(&self, counts: &[f64], recourse: &[f64]) -> Vec<(f64, f64)> {
        let bought: f64 = self
            .columns
            .iter()
            .zip(counts)
            .map(|(c, x)| c.cost * x)
            .sum();
        self.scenarios
            .iter()
            .zip(recourse)
            .map(|(s, r)| (bought + r - s.shift, s.probability))
            .collect()
    }

    /// The goal's value at an evaluated purchase.
    pub(super) fn value_of(&self, goal: Goal, counts: &[f64]) -> Option<f64> {
        let p = self.points.iter().find(|p| p.counts == counts)?;
        self.value(goal, &p.counts, p.recourse.as_ref()?)
    }

    /// The best evaluated purchase for `goal` (whole ones only if `whole`).
    fn best(&self, goal: Goal, whole: bool) -> Option<(f64, usize)> {
        self.points
            .iter()
            .enumerate()
            .filter(|(_, p)| !whole || p.counts.iter().all(|x| (x - x.round()).abs() <= WHOLE))
            .filter_map(|(i, p)| {
                let r = p.recourse.as_ref()?;
                Some((self.value(goal, &p.counts, r)?, i))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The master for `goal`: purchases `0..R`, then `θ_g`, then (with a
    /// tail term or cap) `η⁺`, `η⁻` and each group's `u_g`.
    fn master(&self, goal: Goal, whole: bool) -> Milp {
        let mut m = Milp::default();
        let mean = goal.mean_weight();
        for c in &self.columns {
            m.vars.push(Var {
                cost: mean * c.cost,
                upper: c.upper,
                integer: whole && c.integer,
            });
        }
        let theta = m.vars.len();
        for s in &self.scenarios {
            m.add_var(mean * s.probability, None, false);
        }
        m.rows.extend(self.master_rows.iter().cloned());
        m.rows.extend(self.feasibility.iter().cloned());
        for (g, row) in &self.cuts {
            let mut row = row.clone();
            row.terms.push((theta + g, 1.0));
            m.rows.push(row);
        }
        if goal.lambda == 0.0 && goal.cap.is_none() {
            return m;
        }
        let tail = if goal.cap.is_some() { 0.0 } else { goal.lambda };
        let eta = m.add_var(tail, None, false);
        m.add_var(-tail, None, false);
        let mut cvar_terms = vec![(eta, 1.0), (eta + 1, -1.0)];
        for (g, s) in self.scenarios.iter().enumerate() {
            let weight = s.probability / (1.0 - goal.beta);
            let u = m.add_var(tail * weight, None, false);
            cvar_terms.push((u, weight));
            let mut terms = vec![(u, 1.0), (eta, 1.0), (eta + 1, -1.0), (theta + g, -1.0)];
            for (k, c) in self.columns.iter().enumerate() {
                if c.cost != 0.0 {
                    terms.push((k, -c.cost));
                }
            }
            m.rows.push(Row {
                terms,
                sense: Sense::AtLeast,
                rhs: -s.shift,
            });
        }
        if let Some(v) = goal.cap {
            m.rows.push(Row {
                terms: cvar_terms,
                sense: Sense::AtMost,
                rhs: v + 1e-9 * v.abs().max(1.0),
            });
        }
        m
    }

    /// Evaluates every group at `counts`, adding its cuts.
    fn evaluate(&mut self, counts: Vec<f64>) -> Result<(), Unsuited> {
        let threads = self.threads.max(1);
        let chunk = self.scenarios.len().div_ceil(threads).max(1);
        let results: Vec<Result<Vec<Outcome>, Unsuited>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .scenarios
                .chunks_mut(chunk)
                .map(|group| {
                    let counts = &counts;
                    scope.spawn(move || {
                        group
                            .iter_mut()
                            .map(|s| aggregate(&mut s.levels, counts))
                            .collect::<Result<Vec<Outcome>, Unsuited>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(Unsuited("a worker panicked"))))
                .collect()
        });
        let mut recourse = Some(Vec::with_capacity(self.scenarios.len()));
        let mut g = 0;
        for outcomes in results {
            for outcome in outcomes? {
                match outcome {
                    Outcome::Optimal { cost, slope } => {
                        if let Some(r) = recourse.as_mut() {
                            r.push(cost);
                        }
                        let shifted: f64 = slope.iter().map(|(k, s)| s * counts[*k]).sum();
                        self.cuts.push((
                            g,
                            Row {
                                terms: slope.iter().map(|(k, s)| (*k, -s)).collect(),
                                sense: Sense::AtLeast,
                                rhs: cost - shifted,
                            },
                        ));
                    }
                    Outcome::Infeasible(row) => {
                        recourse = None;
                        self.feasibility.push(row);
                    }
                }
                g += 1;
            }
        }
        self.points.push(Point { counts, recourse });
        Ok(())
    }

    /// Searches one goal to its optimum, or to `deadline` (or until `stop`
    /// is set) with the best plan and the bound reached; `report` hears each
    /// master solve.
    ///
    /// # Errors
    /// See [`Failed`].
    pub(super) fn solve(
        &mut self,
        goal: Goal,
        whole: bool,
        deadline: Option<Instant>,
        stop: Option<&AtomicBool>,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Found, Failed> {
        let any_whole = whole && self.columns.iter().any(|c| c.integer);
        let mut phase_whole = false;
        let mut bound = f64::NEG_INFINITY;
        for iteration in 1.. {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let out_of_time = left.is_some_and(|l| l.is_zero())
                || self.memory_stopped
                || stop.is_some_and(|s| s.load(Ordering::Relaxed));
            let best = self.best(goal, any_whole);
            // At the limit: the best plan so far, with the master's bound
            // (one relaxed master, quick, when no bound was reached yet).
            if out_of_time && let Some((_, i)) = best {
                if bound == f64::NEG_INFINITY {
                    bound = self.relaxed_bound(goal).unwrap_or(bound);
                }
                return Ok(Found {
                    counts: self.points[i].counts.clone(),
                    bound: Some(bound),
                });
            }
            // Before any plan, the limit waits for the first one: a search
            // stopped by its limit returns a plan, never nothing.
            let left = left.filter(|_| best.is_some());
            let master = self.master(goal, phase_whole);
            let initial = best
                .filter(|_| phase_whole)
                .map(|(_, i)| self.master_start(goal, i));
            let solved = master.solve_bounded(
                self.backend,
                left,
                initial.as_deref(),
                self.memory_limit,
                None,
            );
            let values = match solved {
                Ok(Solved {
                    values,
                    bound: None,
                    ..
                }) => values,
                Ok(Solved {
                    bound: Some(b),
                    memory_stop,
                    ..
                }) => {
                    bound = bound.max(b - self.offset(goal));
                    self.memory_stopped |= memory_stop;
                    continue;
                }
                Err(LpError::Infeasible) => return Err(Failed::Infeasible),
                Err(LpError::TimeLimit) => continue,
                Err(e) => return Err(Failed::Solver(e.to_string())),
            };
            let objective = self.objective(goal, &master, &values);
            // A relaxed master's optimum bounds the whole one's too.
            bound = bound.max(objective);
            // The points have not changed since `best` was taken.
            let phase_best = if phase_whole == any_whole {
                best
            } else {
                self.best(goal, phase_whole)
            };
            let best_value = best.map(|b| b.0);
            report(Progress {
                lambda: goal.lambda,
                iteration,
                bound,
                best: best_value,
                gap: best_value.map(|b| relative_gap(b, bound)),
            });
            let close = |best: f64| best - objective <= GAP * best.abs().max(1.0);
            let counts: Vec<f64> = values[..self.reserved()]
                .iter()
                .zip(&self.columns)
                .map(|(x, c)| {
                    if phase_whole && c.integer {
                        x.round()
                    } else {
                        x.max(0.0)
                    }
                })
                .collect();
            // A purchase evaluated before has its exact cuts in the master,
            // which then values it at its cost: nothing is left to learn.
            let known = self.points.iter().any(|p| p.counts == counts);
            if phase_best.is_some_and(|(b, _)| close(b)) || known {
                if any_whole && !phase_whole {
                    phase_whole = true;
                    continue;
                }
                let Some((value, i)) = best else {
                    return Err(Failed::Infeasible);
                };
                let proven = close(value);
                return Ok(Found {
                    counts: self.points[i].counts.clone(),
                    bound: (!proven).then_some(bound),
                });
            }
            self.evaluate(counts).map_err(Failed::Unsuited)?;
        }
        unreachable!("the loop returns")
    }

    /// The relaxed master's optimum for `goal`: a lower bound.
    fn relaxed_bound(&self, goal: Goal) -> Option<f64> {
        let master = self.master(goal, false);
        let values = master.solve(self.backend, None).ok()?;
        Some(self.objective(goal, &master, &values))
    }

    /// The constant a master's mean term leaves out: the shortfall's shifts.
    fn offset(&self, goal: Goal) -> f64 {
        let mean = goal.mean_weight();
        self.scenarios
            .iter()
            .map(|s| mean * s.probability * s.shift)
            .sum()
    }

    /// A master's objective at `values`, with its constant.
    fn objective(&self, goal: Goal, master: &Milp, values: &[f64]) -> f64 {
        master
            .vars
            .iter()
            .zip(values)
            .map(|(v, x)| v.cost * x)
            .sum::<f64>()
            - self.offset(goal)
    }

    /// A feasible master solution at evaluated point `i`, to start the
    /// whole-count search from.
    fn master_start(&self, goal: Goal, i: usize) -> Vec<f64> {
        let point = &self.points[i];
        let recourse = point.recourse.clone().unwrap_or_default();
        let mut x = point.counts.clone();
        x.extend(recourse.iter().copied());
        if goal.lambda == 0.0 && goal.cap.is_none() {
            return x;
        }
        let losses = self.losses(&point.counts, &recourse);
        let eta = super::super::measure::quantile(&losses, goal.beta);
        x.push(eta.max(0.0));
        x.push((-eta).max(0.0));
        x.extend(losses.iter().map(|(l, _)| (l - eta).max(0.0)));
        x
    }

    /// Each group's model values at `counts` (purchase columns first, then
    /// every hourly column, by model index; `len` columns in all).
    ///
    /// # Errors
    /// `Unsuited` as for a solve; a group without recourse is one too (the
    /// counts came from an evaluated, feasible point).
    pub(super) fn values_at(
        &mut self,
        counts: &[f64],
        len: &[usize],
    ) -> Result<Vec<Vec<f64>>, Unsuited> {
        let mut out = Vec::with_capacity(self.scenarios.len());
        for (s, n) in self.scenarios.iter_mut().zip(len) {
            let mut values = vec![0.0; *n];
            values[..counts.len()].copy_from_slice(counts);
            for level in &mut s.levels {
                match level.solve(counts)? {
                    Outcome::Optimal { .. } => {
                        for (j, x) in level.values() {
                            values[j] = x;
                        }
                    }
                    Outcome::Infeasible(_) => return Err(Unsuited("a plan without recourse")),
                }
            }
            out.push(values);
        }
        Ok(out)
    }
}

/// A group's recourse at `counts`: the sum of its levels' costs and slopes,
/// or the first level's feasibility cut.
fn aggregate(levels: &mut [LevelLp], counts: &[f64]) -> Result<Outcome, Unsuited> {
    let mut total = 0.0;
    let mut slope: Vec<f64> = vec![0.0; counts.len()];
    for level in levels {
        match level.solve(counts)? {
            Outcome::Optimal { cost, slope: s } => {
                total += cost;
                for (k, g) in s {
                    slope[k] += g;
                }
            }
            infeasible @ Outcome::Infeasible(_) => return Ok(infeasible),
        }
    }
    Ok(Outcome::Optimal {
        cost: total,
        slope: slope
            .into_iter()
            .enumerate()
            .filter(|(_, g)| *g != 0.0)
            .collect(),
    })
}
