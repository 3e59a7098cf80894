//! The glue to the MIP solver: the only file that imports good_lp, so the
//! backend can be swapped. It takes a solver-neutral [`Milp`] and returns the
//! variable values, or why there are none.

use std::time::{Duration, Instant};

use good_lp::solvers::microlp::microlp;
use good_lp::{
    Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, Variable,
    WithInitialSolution, WithMipGap, WithTimeLimit, variable,
};

/// The MIP solvers this build can use; microlp (pure Rust) is the default,
/// chosen by measurement (README, "Planner").
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
    #[error("the solver failed: {0}")]
    Solver(String),
}

/// What a solve found.
#[derive(Debug, Clone, PartialEq)]
pub struct Solved {
    /// Values in variable order.
    pub values: Vec<f64>,
    /// `None` when the values are optimal; else the time limit stopped the
    /// search, and this is the best lower bound proven (`-∞` if none).
    pub bound: Option<f64>,
}

/// Relative MIP gap at which a solution counts as optimal (good_lp defaults
/// to HiGHS's 1e-4, far too coarse for cost comparisons).
pub const MIP_GAP: f32 = 1e-7;

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
                })
            } else {
                Err(LpError::Infeasible)
            };
        }
        // A row `c·x <= b` on one continuous variable is its bound: the
        // solver handles bounds far more cheaply than rows (share rows of
        // one-offer pools are most of a model's rows).
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

#[cfg(test)]
mod tests {
    use super::*;

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
