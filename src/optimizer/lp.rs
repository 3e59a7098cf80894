//! The glue to the MIP solver: the only file that imports good_lp (and
//! microlp, for a search run in slices), so the backend can be swapped. It takes a solver-neutral [`Milp`] and returns the
//! variable values, or why there are none.

use std::time::{Duration, Instant};

use good_lp::solvers::microlp::microlp;
use good_lp::{
    Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, Variable,
    WithInitialSolution, WithMipGap, WithTimeLimit, variable,
};

/// The MIP solvers this build can use; microlp (pure Rust) is the default,
/// chosen by measurement (docs/planner.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Backend {
    #[default]
    Microlp,
    #[cfg(feature = "cbc")]
    Cbc,
}

impl Backend {
    /// The backends compiled in, by name.
    #[must_use]
    pub fn available() -> Vec<(&'static str, Backend)> {
        vec![
            ("microlp", Backend::Microlp),
            #[cfg(feature = "cbc")]
            ("cbc", Backend::Cbc),
        ]
    }
}

/// A variable: objective coefficient, bounds, integrality.
#[derive(Debug, Clone)]
pub struct Var {
    pub cost: f64,
    pub upper: Option<f64>,
    pub integer: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sense {
    AtLeast,
    AtMost,
    Equal,
}

/// `Σ coef·x  (>= | <= | =)  rhs`.
#[derive(Debug, Clone)]
pub struct Row {
    pub terms: Vec<(usize, f64)>,
    pub sense: Sense,
    pub rhs: f64,
}

/// Minimise `Σ cost·x` subject to the rows, with every variable `>= 0`.
#[derive(Debug, Clone, Default)]
pub struct Milp {
    pub vars: Vec<Var>,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LpError {
    #[error("the model is infeasible")]
    Infeasible,
    #[error("the model is unbounded")]
    Unbounded,
    #[error("the solver stopped at its time limit before proving optimality")]
    TimeLimit,
    #[error("the solver reached its memory limit before finding any plan")]
    MemoryLimit,
    #[error("the solver failed: {0}")]
    Solver(String),
}

/// What a solve found.
#[derive(Debug, Clone, PartialEq)]
pub struct Solved {
    /// Values in variable order.
    pub values: Vec<f64>,
    /// `None` when the values are optimal; else a limit stopped the
    /// search, and this is the best lower bound proven (`-∞` if none).
    pub bound: Option<f64>,
    /// Whether the memory limit, not the time limit, stopped it.
    pub memory_stop: bool,
}

/// Relative MIP gap at which a solution counts as optimal (good_lp defaults
/// to HiGHS's 1e-4, far too coarse for cost comparisons).
pub const MIP_GAP: f32 = 1e-7;

/// Branch-and-bound nodes a memory-bounded solve runs between two looks at
/// its memory: a few milliseconds of search, far less than the slack a limit
/// in MiB leaves.
const NODES_PER_LOOK: u64 = 200;

/// How far a whole-count search has got: microlp's branch-and-bound
/// between slices, or gpuplan's own searches over purchases.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// Nodes examined: branch-and-bound nodes, or the purchases the
    /// decompositions tried.
    pub nodes: u64,
    /// The least objective proven possible, once there is one.
    pub bound: Option<f64>,
    /// The best plan's relative gap above the bound, once both are known.
    pub gap: Option<f64>,
}

/// Where a MIP search reports its [`Search`]; called from the solving thread.
#[derive(Clone)]
pub struct SearchSink(pub std::sync::Arc<dyn Fn(&Search) + Send + Sync>);

impl std::fmt::Debug for SearchSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SearchSink")
    }
}

/// Bytes this process holds in memory now (`VmRSS`); `None` where that
/// cannot be read, which leaves a memory limit unenforced.
#[must_use]
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl Milp {
    pub fn add_var(&mut self, cost: f64, upper: Option<f64>, integer: bool) -> usize {
        self.vars.push(Var {
            cost,
            upper,
            integer,
        });
        self.vars.len() - 1
    }

    #[must_use]
    pub fn integer_count(&self) -> usize {
        self.vars.iter().filter(|v| v.integer).count()
    }

    /// Solves the model to optimality; values in variable order.
    ///
    /// # Errors
    /// Infeasible, unbounded, a time limit hit before optimality, or a solver failure.
    pub fn solve(
        &self,
        backend: Backend,
        time_limit: Option<Duration>,
    ) -> Result<Vec<f64>, LpError> {
        let solved = self.solve_within(backend, time_limit, None)?;
        if solved.bound.is_some() {
            return Err(LpError::TimeLimit);
        }
        Ok(solved.values)
    }

    /// [`Milp::solve_within`], and with `memory_limit` (bytes) the search also
    /// stops, keeping its best plan, once the process holds that much more
    /// than when it began. The whole process is measured, so solves running
    /// at once each stop earlier, never later. Only microlp's
    /// branch-and-bound grows without bound; anything else ignores the limit.
    ///
    /// # Errors
    /// As [`Milp::solve_within`], and `MemoryLimit` when the limit came
    /// before any plan.
    pub fn solve_bounded(
        &self,
        backend: Backend,
        time_limit: Option<Duration>,
        initial: Option<&[f64]>,
        memory_limit: Option<u64>,
        watch: Option<&SearchSink>,
    ) -> Result<Solved, LpError> {
        let limit = memory_limit.zip(resident_bytes());
        if backend == Backend::Microlp
            && self.integer_count() > 0
            && (limit.is_some() || watch.is_some())
        {
            let over = || {
                limit.is_some_and(|(limit, start)| {
                    resident_bytes().is_some_and(|now| now.saturating_sub(start) > limit)
                })
            };
            return self.microlp_in_slices(time_limit, initial, NODES_PER_LOOK, &over, watch);
        }
        self.solve_within(backend, time_limit, initial)
    }

    /// microlp's search run `nodes` nodes at a time, stopping when `over()`
    /// says the memory limit is passed or the time is up.
    fn microlp_in_slices(
        &self,
        time_limit: Option<Duration>,
        initial: Option<&[f64]>,
        nodes: u64,
        over: &dyn Fn() -> bool,
        watch: Option<&SearchSink>,
    ) -> Result<Solved, LpError> {
        use microlp::TerminationReason;
        let (p, vars) = self.microlp_problem(true)?;
        let started = Instant::now();
        let left = || time_limit.map(|t| t.saturating_sub(started.elapsed()));
        let mut first = microlp::SolveOptions::default();
        first.time_limit = left();
        first.node_limit = Some(nodes);
        first.mip_gap = f64::from(MIP_GAP);
        first.warm_start = initial.map(|x| vars.iter().copied().zip(x.iter().copied()).collect());
        let mut outcome = p.solve_with(first).map_err(microlp_error)?;
        // Each slice ends at its node limit; anything else is proven, within
        // the gap, or out of time.
        let mut memory = false;
        while outcome.termination_reason() == TerminationReason::NodeLimit {
            if let Some(watch) = watch {
                let stats = outcome.stats();
                (watch.0)(&Search {
                    nodes: stats.nodes_solved,
                    bound: stats.best_bound,
                    gap: stats.gap,
                });
            }
            if over() {
                memory = true;
                break;
            }
            if left().is_some_and(|t| t.is_zero()) {
                break;
            }
            let mut next = outcome.last_resume_options();
            next.time_limit = left();
            outcome = outcome.resume_with(next).map_err(microlp_error)?;
        }
        let proven =
            outcome.is_optimal() || outcome.termination_reason() == TerminationReason::MipGap;
        let bound = outcome.stats().best_bound;
        match outcome.into_solution() {
            Ok(solution) => Ok(Solved {
                values: vars.iter().map(|v| solution.var_value(*v)).collect(),
                bound: (!proven).then(|| bound.unwrap_or(f64::NEG_INFINITY)),
                memory_stop: memory,
            }),
            Err(_) if memory => Err(LpError::MemoryLimit),
            Err(_) => Err(LpError::TimeLimit),
        }
    }

    /// The model as a microlp problem, with its variables in order; whole
    /// counts stay whole iff `integers`.
    fn microlp_problem(
        &self,
        integers: bool,
    ) -> Result<(microlp::Problem, Vec<microlp::Variable>), LpError> {
        use microlp::{ComparisonOp, LinearExpr, OptimizationDirection};
        let (upper, rows) = self.bounded_rows()?;
        let mut p = microlp::Problem::new(OptimizationDirection::Minimize);
        let vars: Vec<microlp::Variable> = self
            .vars
            .iter()
            .zip(&upper)
            .map(|(v, u)| {
                if v.integer && integers {
                    let most = u.map_or(i32::MAX, |u| u.floor().min(f64::from(i32::MAX)) as i32);
                    p.add_integer_var(v.cost, (0, most))
                } else {
                    p.add_var(v.cost, (0.0, u.unwrap_or(f64::INFINITY)))
                }
            })
            .collect();
        for row in rows {
            let mut e = LinearExpr::empty();
            for (i, c) in &row.terms {
                e.add(vars[*i], *c);
            }
            let op = match row.sense {
                Sense::AtLeast => ComparisonOp::Ge,
                Sense::AtMost => ComparisonOp::Le,
                Sense::Equal => ComparisonOp::Eq,
            };
            p.add_constraint(e, op, row.rhs);
        }
        Ok((p, vars))
    }

    /// The variables' upper bounds with each row on one continuous variable
    /// folded in as its bound, and the rows left: the solver handles bounds
    /// far more cheaply than rows (share rows of one-offer pools are most of
    /// a model's rows).
    ///
    /// # Errors
    /// `Infeasible` when a bound is below zero.
    fn bounded_rows(&self) -> Result<(Vec<Option<f64>>, Vec<&Row>), LpError> {
        let mut upper: Vec<Option<f64>> = self.vars.iter().map(|v| v.upper).collect();
        let mut rows: Vec<&Row> = Vec::with_capacity(self.rows.len());
        for row in &self.rows {
            match row.terms[..] {
                [(i, c)] if row.sense == Sense::AtMost && c > 0.0 && !self.vars[i].integer => {
                    let bound = row.rhs / c;
                    upper[i] = Some(upper[i].map_or(bound, |u| u.min(bound)));
                }
                _ => rows.push(row),
            }
        }
        if upper.iter().any(|u| u.is_some_and(|u| u < 0.0)) {
            return Err(LpError::Infeasible);
        }
        Ok((upper, rows))
    }

    /// Solves the model, keeping the best plan found when the time limit
    /// stops the search before optimality. `initial`, a feasible plan when
    /// known, starts microlp's search (one it finds infeasible is ignored).
    ///
    /// # Errors
    /// Infeasible, unbounded, a time limit hit before any plan, or a solver failure.
    pub fn solve_within(
        &self,
        backend: Backend,
        time_limit: Option<Duration>,
        initial: Option<&[f64]>,
    ) -> Result<Solved, LpError> {
        if self.vars.is_empty() {
            return if self.rows.iter().all(|r| match r.sense {
                Sense::AtLeast => r.rhs <= 0.0,
                Sense::AtMost => r.rhs >= 0.0,
                Sense::Equal => r.rhs == 0.0,
            }) {
                Ok(Solved {
                    values: Vec::new(),
                    bound: None,
                    memory_stop: false,
                })
            } else {
                Err(LpError::Infeasible)
            };
        }
        let (upper, rows) = self.bounded_rows()?;
        let mut problem = ProblemVariables::new();
        let vars: Vec<Variable> = self
            .vars
            .iter()
            .zip(&upper)
            .map(|(v, upper)| {
                let mut def = variable().min(0.0);
                if let Some(u) = *upper {
                    def = def.max(u);
                }
                if v.integer {
                    def = def.integer();
                }
                problem.add(def)
            })
            .collect();
        let objective: Expression = self.vars.iter().zip(&vars).map(|(v, x)| v.cost * *x).sum();
        let unsolved = problem.minimise(objective);
        let gap = |e: good_lp::solvers::MipGapError| LpError::Solver(e.to_string());
        let started = Instant::now();
        // microlp reports a limit hit before any plan as a generic error.
        let out_of_time = || time_limit.is_some_and(|t| started.elapsed() >= t);
        match backend {
            Backend::Microlp => {
                let mut model = unsolved.using(microlp).with_mip_gap(MIP_GAP).map_err(gap)?;
                if let Some(start) = initial {
                    model = model
                        .with_initial_solution(vars.iter().copied().zip(start.iter().copied()));
                }
                let solution = Self::finish(&rows, model, &vars, time_limit, out_of_time)?;
                let values = vars.iter().map(|v| solution.value(*v)).collect();
                let timed_out = matches!(solution.status(), SolutionStatus::TimeLimit);
                let stats = solution.into_inner().stats();
                Ok(Solved {
                    values,
                    bound: timed_out.then(|| stats.best_bound.unwrap_or(f64::NEG_INFINITY)),
                    memory_stop: false,
                })
            }
            #[cfg(feature = "cbc")]
            Backend::Cbc => {
                let mut model = unsolved.using(good_lp::solvers::coin_cbc::coin_cbc);
                // CBC logs to stdout, which carries the result JSON.
                model.set_parameter("log", "0");
                model.set_parameter("slog", "0");
                let model = model.with_mip_gap(MIP_GAP).map_err(gap)?;
                let solution = Self::finish(&rows, model, &vars, time_limit, out_of_time)?;
                let timed_out = matches!(solution.status(), SolutionStatus::TimeLimit);
                Ok(Solved {
                    values: vars.iter().map(|v| solution.value(*v)).collect(),
                    // good_lp does not pass CBC's bound on.
                    bound: timed_out.then_some(f64::NEG_INFINITY),
                    memory_stop: false,
                })
            }
        }
    }

    fn finish<M>(
        rows: &[&Row],
        mut model: M,
        vars: &[Variable],
        time_limit: Option<Duration>,
        out_of_time: impl Fn() -> bool,
    ) -> Result<M::Solution, LpError>
    where
        M: SolverModel<Error = ResolutionError> + WithTimeLimit,
    {
        if let Some(limit) = time_limit {
            model = model.with_time_limit(limit.as_secs_f64());
        }
        for row in rows {
            let lhs: Expression = row.terms.iter().map(|(i, c)| *c * vars[*i]).sum();
            model = model.with(match row.sense {
                Sense::AtLeast => lhs.geq(row.rhs),
                Sense::AtMost => lhs.leq(row.rhs),
                Sense::Equal => lhs.eq(row.rhs),
            });
        }
        // A gap limit is the requested 1e-7 gap reached: optimal within
        // tolerance. A time limit is not (the caller sees `bound`).
        model.solve().map_err(|e| match e {
            ResolutionError::Infeasible => LpError::Infeasible,
            ResolutionError::Unbounded => LpError::Unbounded,
            _ if out_of_time() => LpError::TimeLimit,
            other => LpError::Solver(other.to_string()),
        })
    }
}

fn microlp_error(e: microlp::Error) -> LpError {
    match e {
        microlp::Error::Infeasible => LpError::Infeasible,
        microlp::Error::Unbounded => LpError::Unbounded,
        other => LpError::Solver(other.to_string()),
    }
}

/// A model's LP relaxation kept solved, so that bounds on a few variables
/// are re-solved from its optimal basis by microlp's dual simplex, in a few
/// pivots, rather than from scratch: a search over the reserved counts
/// solves hundreds of such relaxations (whatever the MILP backend).
#[derive(Clone)]
pub struct Relaxation {
    vars: Vec<microlp::Variable>,
    solution: microlp::Solution,
}

impl Relaxation {
    /// # Errors
    /// Infeasible, unbounded, or a solver failure.
    pub fn new(m: &Milp) -> Result<Self, LpError> {
        let (p, vars) = m.microlp_problem(false)?;
        let solution = p
            .solve()
            .map_err(microlp_error)?
            .into_solution()
            .map_err(|_| LpError::TimeLimit)?;
        Ok(Self { vars, solution })
    }

    #[must_use]
    pub fn objective(&self) -> f64 {
        self.solution.objective()
    }

    #[must_use]
    pub fn value(&self, var: usize) -> f64 {
        self.solution.var_value(self.vars[var])
    }

    /// This relaxation with each `(var, lower, upper)` bound added.
    ///
    /// # Errors
    /// Infeasible when no values meet the bounds, or a solver failure.
    pub fn within(&self, bounds: &[(usize, f64, Option<f64>)]) -> Result<Self, LpError> {
        use microlp::{ComparisonOp, LinearExpr};
        let mut solution = self.solution.clone();
        let add = |solution: microlp::Solution, var: usize, op, rhs: f64| {
            let mut e = LinearExpr::empty();
            e.add(self.vars[var], 1.0);
            solution
                .add_constraint(e, op, rhs)
                .map_err(microlp_error)?
                .into_solution()
                .map_err(|_| LpError::TimeLimit)
        };
        for &(var, lower, upper) in bounds {
            if lower > 0.0 {
                solution = add(solution, var, ComparisonOp::Ge, lower)?;
            }
            if let Some(upper) = upper {
                solution = add(solution, var, ComparisonOp::Le, upper)?;
            }
        }
        Ok(Self {
            vars: self.vars.clone(),
            solution,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A knapsack whose proof takes many nodes: 24 items of near-equal
    /// value per weight.
    fn knapsack() -> Milp {
        let mut m = Milp::default();
        let mut weights = Vec::new();
        for i in 0..24 {
            let w = 10.0 + f64::from(i % 7) + f64::from(i) * 0.37;
            let v = m.add_var(-(w * 1.01 + f64::from(i % 3) * 0.1), Some(1.0), true);
            weights.push((v, w));
        }
        m.rows.push(Row {
            terms: weights,
            sense: Sense::AtMost,
            rhs: 97.5,
        });
        m
    }

    #[test]
    fn a_search_in_slices_finds_the_same_optimum_and_stops_when_memory_runs_out() {
        let m = knapsack();
        let whole = m.solve_within(Backend::Microlp, None, None).unwrap();
        let cost = |x: &[f64]| -> f64 { m.vars.iter().zip(x).map(|(v, x)| v.cost * x).sum() };
        let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let watch = SearchSink(std::sync::Arc::new({
            let heard = heard.clone();
            move |s: &Search| heard.lock().unwrap().push(*s)
        }));
        let sliced = m
            .microlp_in_slices(None, None, 3, &|| false, Some(&watch))
            .unwrap();
        assert_eq!(sliced.bound, None);
        assert!((cost(&sliced.values) - cost(&whole.values)).abs() < 1e-6);
        // Each slice reported how far the search got, and its bounds never
        // passed the optimum.
        let heard = heard.lock().unwrap();
        assert!(!heard.is_empty());
        assert!(
            heard.windows(2).all(|w| w[0].nodes < w[1].nodes),
            "{heard:?}"
        );
        assert!(
            heard
                .iter()
                .filter_map(|s| s.bound)
                .all(|b| b <= cost(&whole.values) + 1e-9),
            "{heard:?}"
        );
        // Memory "runs out" at the first look: the best plan so far, with
        // its bound, or no plan at all; never a proof it does not have.
        match m.microlp_in_slices(None, None, 1, &|| true, None) {
            Ok(s) => {
                let bound = s.bound.expect("stopped early, so not proven");
                assert!(bound <= cost(&s.values) + 1e-9);
            }
            Err(e) => assert_eq!(e, LpError::MemoryLimit),
        }
        // Without integers the limit does not apply.
        let mut lp = Milp::default();
        let x = lp.add_var(1.0, None, false);
        lp.rows.push(Row {
            terms: vec![(x, 1.0)],
            sense: Sense::AtLeast,
            rhs: 2.0,
        });
        let s = lp
            .solve_bounded(Backend::Microlp, None, None, Some(0), None)
            .unwrap();
        assert_eq!((s.values[0], s.bound), (2.0, None));
    }

    #[test]
    fn the_resident_size_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(resident_bytes().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn a_small_mip_solves_to_its_integer_optimum() {
        // min 3x + 2y, x + y >= 2.5, x integer <= 1, y continuous.
        let mut m = Milp::default();
        let x = m.add_var(3.0, Some(1.0), true);
        let y = m.add_var(2.0, None, false);
        m.rows.push(Row {
            terms: vec![(x, 1.0), (y, 1.0)],
            sense: Sense::AtLeast,
            rhs: 2.5,
        });
        let v = m.solve(Backend::default(), None).unwrap();
        assert!(v[x].abs() < 1e-9 && (v[y] - 2.5).abs() < 1e-9, "{v:?}");
        m.rows.push(Row {
            terms: vec![(y, 1.0)],
            sense: Sense::AtMost,
            rhs: 1.0,
        });
        assert_eq!(m.solve(Backend::default(), None), Err(LpError::Infeasible));
    }
}
