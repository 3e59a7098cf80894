//! Schema version 3 (docs/planning-model.md §11): new reservations shared
//! by every scenario, hourly recourse per scenario, and the mean-CVaR
//! objective in the Rockafellar–Uryasev form, solved once per frontier λ.
//!
//! Each scenario is the version 2 problem it becomes once reservations are
//! fixed (`Problem::scenario`), built by the same model builder with the
//! same exact reductions. Their models share the reserved columns, which the
//! builder always makes first and identically (reductions of reserved
//! options depend on prices alone, never on demand or availability), so the
//! extensive form is their union with those columns merged, plus η and one
//! `u_ω` per scenario. Scenarios with the same demand and availability are
//! merged by adding their probabilities (§11.13); a problem that merges to
//! one scenario has one cost, so every λ gives the version 2 plan and it is
//! solved once, as version 2.

mod decompose;
mod extensive;
mod infeasible;
mod recourse;
mod summary;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde_json::json;

use super::build::{Scope, build};
use super::lp::{LpError, Row, Sense, Solved};
use super::model::{Measure, Problem, Stochastic};
use super::report::{self, Plan};
use super::scan::Scan;
use super::setup::Setup;
use super::{
    ModelStats, OptimizeError, PlanResult, SolveOptions, checks, ms, relative_gap, solve_model,
};
pub use decompose::Progress;
use decompose::{Decomposition, Failed, Goal};
use extensive::{Availability, Extensive, Group, Part};
pub use summary::{FrontierPoint, Holding, RiskReport, ScenarioReport, Shortfall, V3Result};
use summary::{Point, Totals, demand_of, figures};

/// New purchases per reserved column, as the one-class scan chose them.
type Counts = BTreeMap<usize, f64>;

/// Solves a validated version 3 problem.
///
/// # Errors
/// A time limit hit before optimality, or a solver failure. Infeasibility is
/// a result.
pub(super) fn solve(
    problem: &Problem,
    st: &Stochastic,
    opts: &SolveOptions,
) -> Result<PlanResult, OptimizeError> {
    let start = Instant::now();
    let mip = !opts.relax;
    let (groups, group_of) = group_scenarios(st);
    let problems: Vec<Problem> = groups
        .iter()
        .map(|g| problem.scenario(&st.scenarios[g.members[0]]))
        .collect();
    let mut setups: Vec<Setup<'_>> = problems.iter().map(Setup::new).collect();
    let mut result = report::empty(&setups[0], opts);
    result.schema_version = 3;
    result.gpu_hours.demand = (0..problem.classes.len()).map(|c| demand_of(st, c)).sum();
    if let Some(v2) = result.v2.as_mut() {
        for (c, class) in v2.classes.iter_mut().enumerate() {
            class.demand_units = demand_of(st, c);
        }
    }
    let mut v3 = summary::unsolved(st);
    let finish = |mut result: PlanResult, v3: V3Result| {
        result.v3 = Some(v3);
        result.timings.total_ms = ms(start.elapsed());
        Ok(result)
    };

    if let Some(why) = infeasible::no_eligible(&setups[0], st)
        .or_else(|| infeasible::capacity(&setups, &group_of, st))
    {
        result.infeasibility = Some(why);
        return finish(result, v3);
    }

    let build_start = Instant::now();
    let removed: usize = if opts.reduce {
        setups.iter_mut().map(|s| s.reduce(mip)).max().unwrap_or(0)
    } else {
        0
    };
    let scope = Scope {
        mip,
        purchases: true,
    };
    let (parts, extensive) = build_parts(setups, scope)?;
    let build_ms = ms(build_start.elapsed());

    let baseline_start = Instant::now();
    let baselines: Vec<Option<f64>> = parts
        .iter()
        .map(|p| checks::baseline(&p.setup, mip, opts))
        .collect::<Result<_, _>>()?;
    result.timings.baseline_ms = ms(baseline_start.elapsed());
    let shortfall = st.risk.measure == Measure::SavingsShortfall;
    let missing: Vec<&str> = group_of
        .iter()
        .zip(&st.scenarios)
        .filter(|(g, _)| baselines[**g].is_none())
        .map(|(_, s)| s.id.as_str())
        .collect();
    let input_baselines: Vec<Option<f64>> = group_of.iter().map(|g| baselines[*g]).collect();
    let shift: Vec<f64> = baselines
        .iter()
        .map(|b| if shortfall { b.unwrap_or(0.0) } else { 0.0 })
        .collect();
    let decomposition =
        (opts.decompose && extensive.is_some() && !(mip && problem.policy.integer_hourly))
            .then(|| decomposition(&parts, &groups, &shift, opts))
            .flatten();
    let solver = Solver {
        st,
        opts,
        deadline: opts.time_limit.map(|t| start + t),
        scope,
        shift,
        owned_hours: result.gpu_hours.owned,
        groups,
        group_of,
        parts,
        extensive,
        decomposition: RefCell::new(decomposition),
        unproven: RefCell::new(Vec::new()),
    };

    let solve_start = Instant::now();
    let lambdas: Vec<f64> = if shortfall && !missing.is_empty() {
        vec![0.0]
    } else {
        st.risk.frontier.clone()
    };
    let scanned = solver.scan(&lambdas);
    let Some(points) = solver.frontier(&lambdas, scanned.as_deref(), &input_baselines)? else {
        result.infeasibility = Some(
            infeasible::shared_capacity(&solver.parts, &solver.group_of, st, opts)?
                .unwrap_or_else(|| json!({"kind": "integrality"})),
        );
        return finish(result, v3);
    };
    if shortfall && !missing.is_empty() {
        result.infeasibility = Some(json!({"kind": "no_baseline", "scenarios": missing}));
        return finish(result, v3);
    }
    result.timings.solve_ms = ms(solve_start.elapsed());
    let primary = points
        .iter()
        .position(|(l, _, _)| *l == st.risk.lambda)
        .unwrap_or(0);
    let (lambda, f, _) = &points[primary];
    // A plan cut short by a limit is over the budget only when its bound is.
    let least = solver
        .unproven
        .borrow()
        .iter()
        .find(|(l, _)| l == lambda)
        .map_or(f.objective, |(_, bound)| bound.min(f.objective));
    if let Some(budget) = problem.policy.budget
        && least > budget * (1.0 + 1e-9) + 1e-9
    {
        result.infeasibility = Some(json!({"kind": "budget", "budget": budget, "min_cost": least}));
        return finish(result, v3);
    }
    result.model_stats = solver.model_stats(removed, scanned.is_some());
    result.timings.build_ms = build_ms;
    let unproven = solver.unproven.take();
    let memory_stopped = solver
        .decomposition
        .borrow()
        .as_ref()
        .is_some_and(|d| d.memory_stopped);
    let totals = Totals {
        st,
        opts,
        groups: &solver.groups,
        group_of: &solver.group_of,
        parts: &solver.parts,
        owned_hours: solver.owned_hours,
    };
    summary::fill(
        &mut result,
        &mut v3,
        &totals,
        problem,
        (&points, primary),
        (&baselines, &input_baselines),
    )?;
    if !unproven.is_empty() {
        // A search cut short before every frontier point was proven: the
        // primary plan's bound (its objective when it was proven), the
        // largest relative gap of any point, and what stopped it.
        result.status = "time_limit";
        result.best_bound = Some(least);
        result.gap = unproven
            .iter()
            .filter_map(|(l, b)| {
                let (_, f, _) = points.iter().find(|(pl, _, _)| pl == l)?;
                Some(relative_gap(f.objective, *b))
            })
            .reduce(f64::max);
        let asked = opts
            .stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
        result.stopped_by = Some(match (memory_stopped, asked) {
            (true, _) => "memory_limit",
            (false, true) => "stopped",
            (false, false) => "time_limit",
        });
    }
    finish(result, v3)
}

/// The L-shaped decomposition of the groups' models, when every level's
/// recourse is a continuous LP with costs ≥ 0 (else `None`: the extensive
/// form solves it).
fn decomposition(
    parts: &[Part<'_>],
    groups: &[Group],
    shift: &[f64],
    opts: &SolveOptions,
) -> Option<Decomposition> {
    let reserved = parts[0].vars.reserved.iter().flatten().flatten().count();
    let skip = parts[0].vars.reserved_rows;
    let mut splits = Vec::with_capacity(parts.len());
    for ((p, g), s) in parts.iter().zip(groups).zip(shift) {
        let ranges: Vec<std::ops::Range<usize>> =
            p.vars.levels.iter().map(|l| l.vars.clone()).collect();
        let split = recourse::split(&p.milp, reserved, skip, &ranges).ok()?;
        splits.push((split, g.probability, *s));
    }
    Some(Decomposition::new(
        parts[0].milp.vars[..reserved].to_vec(),
        splits,
        parts[0].milp.rows[..skip].to_vec(),
        opts.backend,
        opts.memory_limit,
    ))
}

/// Groups scenarios with equal demand and availability (§11.13): the
/// groups, and each input scenario's group.
fn group_scenarios(st: &Stochastic) -> (Vec<Group>, Vec<usize>) {
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<(Vec<u64>, &Availability), usize> = HashMap::new();
    let mut group_of = Vec::with_capacity(st.scenarios.len());
    for (i, s) in st.scenarios.iter().enumerate() {
        let key = (
            s.demand.iter().flatten().map(|d| d.to_bits()).collect(),
            &s.available,
        );
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(Group {
                members: Vec::new(),
                probability: 0.0,
            });
            groups.len() - 1
        });
        groups[g].members.push(i);
        groups[g].probability += s.probability;
        group_of.push(g);
    }
    (groups, group_of)
}

/// Each group's model, and their extensive form when there are several.
fn build_parts(
    setups: Vec<Setup<'_>>,
    scope: Scope,
) -> Result<(Vec<Part<'_>>, Option<Extensive>), OptimizeError> {
    let parts: Vec<Part<'_>> = setups
        .into_iter()
        .map(|setup| {
            let all: Vec<usize> = (0..setup.levels.len()).collect();
            let (milp, vars) = build(&setup, &all, scope);
            Part { setup, milp, vars }
        })
        .collect();
    let reserved = parts[0].vars.reserved.iter().flatten().flatten().count();
    if parts
        .iter()
        .any(|p| p.vars.reserved != parts[0].vars.reserved)
    {
        return Err(OptimizeError::Solver(
            "the scenarios' models disagree on the reserved columns".to_owned(),
        ));
    }
    let extensive = (parts.len() > 1).then(|| Extensive::new(&parts, reserved));
    Ok((parts, extensive))
}

/// A version 3 problem built and ready to solve at each λ.
struct Solver<'p, 's> {
    st: &'s Stochastic,
    opts: &'s SolveOptions,
    deadline: Option<Instant>,
    scope: Scope,
    /// Per group: its baseline under `savings_shortfall`, else 0.
    shift: Vec<f64>,
    owned_hours: Option<f64>,
    groups: Vec<Group>,
    group_of: Vec<usize>,
    parts: Vec<Part<'p>>,
    /// With several groups.
    extensive: Option<Extensive>,
    /// With several groups and continuous hourly counts.
    decomposition: RefCell<Option<Decomposition>>,
    /// `(λ, bound)` of the points a time limit left unproven.
    unproven: RefCell<Vec<(f64, f64)>>,
}

impl Solver<'_, '_> {
    /// One class: every λ's purchase from the exact scan.
    fn scan(&self, lambdas: &[f64]) -> Option<Vec<Counts>> {
        if !(self.opts.reduce && self.extensive.is_some()) {
            return None;
        }
        let setups: Vec<&Setup<'_>> = self.parts.iter().map(|p| &p.setup).collect();
        let probability: Vec<f64> = self.groups.iter().map(|g| g.probability).collect();
        Scan::new(&setups, &self.parts[0].vars, self.scope.mip)
            .and_then(|s| s.frontier(lambdas, &probability, &self.shift, self.st.risk.beta))
    }

    /// Every λ's point: from `scanned` purchases with each scenario's
    /// recourse for them from its own model with the purchase fixed, or
    /// from the extensive form. `None` when a λ has no plan.
    fn frontier(
        &self,
        lambdas: &[f64],
        scanned: Option<&[Counts]>,
        input_baselines: &[Option<f64>],
    ) -> Result<Option<Vec<Point>>, OptimizeError> {
        let mut points: Vec<Point> = Vec::new();
        let mut fixed: Vec<(Counts, Vec<Plan>)> = Vec::new();
        for (i, &lambda) in lambdas.iter().enumerate() {
            let plans = match scanned.map(|s| &s[i]) {
                Some(counts) => match fixed.iter().find(|(c, _)| c == counts) {
                    Some((_, plans)) => plans.clone(),
                    None => {
                        let plans = fixed_plans(
                            &self.parts,
                            counts,
                            self.owned_hours,
                            self.opts,
                            self.deadline,
                        )?;
                        fixed.push((counts.clone(), plans.clone()));
                        plans
                    }
                },
                None => match self.decomposed(lambda)? {
                    Some(Ok(plans)) => plans,
                    Some(Err(())) => return Ok(None),
                    None => match self.solve_point(lambda)? {
                        Ok(values) => self.plans_of(&values),
                        Err(_) => return Ok(None),
                    },
                },
            };
            let f = figures(&self.costs_of(&plans), input_baselines, self.st, lambda);
            points.push((lambda, f, plans));
            if self.extensive.is_none() {
                // One scenario: every λ has the same plan and figures.
                let (_, _, plans) = points.remove(0);
                let costs = self.costs_of(&plans);
                return Ok(Some(
                    self.st
                        .risk
                        .frontier
                        .iter()
                        .map(|l| {
                            (
                                *l,
                                figures(&costs, input_baselines, self.st, *l),
                                plans.clone(),
                            )
                        })
                        .collect(),
                ));
            }
        }
        Ok(Some(points))
    }

    /// One λ's plans by the decomposition: `None` where it does not apply
    /// (the extensive form then solves the point), `Some(Err)` when no
    /// purchase serves every scenario.
    fn decomposed(&self, lambda: f64) -> Result<Option<Result<Vec<Plan>, ()>>, OptimizeError> {
        let mut guard = self.decomposition.borrow_mut();
        let Some(d) = guard.as_mut() else {
            return Ok(None);
        };
        let mut report = |p: Progress| {
            if let Some(sink) = &self.opts.progress {
                (sink.0)(&p);
            }
        };
        let goal = Goal {
            lambda,
            beta: self.st.risk.beta,
            cap: None,
        };
        let whole = self.scope.mip;
        let stop = self.opts.stop.as_deref();
        let mut found = d.solve(goal, whole, self.deadline, stop, &mut report);
        if lambda == 1.0
            && let Ok(first) = &found
            && first.bound.is_none()
            && let Some(v) = d.value_of(goal, &first.counts)
        {
            // λ = 1 is lexicographic (§11.5): the least mean among the
            // plans of least CVaR.
            let capped = Goal {
                cap: Some(v),
                ..goal
            };
            found = d.solve(capped, whole, self.deadline, stop, &mut report);
        }
        let found = match found {
            Ok(found) => found,
            Err(Failed::Infeasible) => return Ok(Some(Err(()))),
            Err(Failed::Unsuited(why)) => {
                tracing::debug!(
                    reason = why.0,
                    "decomposition gave way to the extensive form"
                );
                *guard = None;
                return Ok(None);
            }
            Err(Failed::Solver(e)) => return Err(OptimizeError::Solver(e)),
        };
        if let Some(bound) = found.bound {
            self.unproven.borrow_mut().push((lambda, bound));
        }
        let lens: Vec<usize> = self.parts.iter().map(|p| p.milp.vars.len()).collect();
        let values = d
            .values_at(&found.counts, &lens)
            .map_err(|e| OptimizeError::Solver(format!("the decomposition's plan: {}", e.0)))?;
        Ok(Some(Ok(self
            .parts
            .iter()
            .zip(&values)
            .map(|(p, v)| report::extract(&p.setup, &p.milp, &p.vars, v, self.owned_hours))
            .collect())))
    }

    /// The values of one λ's optimum, or `Err` when it has no plan.
    fn solve_point(&self, lambda: f64) -> Result<Result<Vec<f64>, LpError>, OptimizeError> {
        let (st, opts) = (self.st, self.opts);
        let left = || {
            self.deadline
                .map(|d| d.saturating_duration_since(Instant::now()))
        };
        let solved = match &self.extensive {
            None => {
                let p = &self.parts[0];
                solve_model(&p.setup, &p.milp, &p.vars, self.scope, opts, self.deadline).0
            }
            Some(ext) => {
                let m = ext.model(&self.groups, lambda, st.risk.beta, &self.shift, None);
                let first = m.solve_bounded(
                    opts.backend,
                    left(),
                    None,
                    opts.memory_limit,
                    opts.search.as_ref(),
                );
                match first {
                    Ok(Solved {
                        values,
                        bound: None,
                        ..
                    }) if lambda == 1.0 => {
                        let v: f64 = m.vars.iter().zip(&values).map(|(v, x)| v.cost * x).sum();
                        let m2 =
                            ext.model(&self.groups, lambda, st.risk.beta, &self.shift, Some(v));
                        m2.solve_bounded(
                            opts.backend,
                            left(),
                            None,
                            opts.memory_limit,
                            opts.search.as_ref(),
                        )
                    }
                    other => other,
                }
            }
        };
        let memory = || OptimizeError::MemoryLimit(opts.memory_limit.unwrap_or_default() >> 20);
        match solved {
            Ok(Solved {
                values,
                bound: None,
                ..
            }) => Ok(Ok(values)),
            // A v3 plan needs every frontier point proven: a search cut
            // short is reported by the limit that cut it.
            Ok(Solved {
                memory_stop: true, ..
            })
            | Err(LpError::MemoryLimit) => Err(memory()),
            Ok(_) | Err(LpError::TimeLimit) => Err(OptimizeError::TimeLimit(
                opts.time_limit.unwrap_or_default(),
            )),
            Err(LpError::Infeasible) => Ok(Err(LpError::Infeasible)),
            Err(e) => Err(OptimizeError::Solver(e.to_string())),
        }
    }

    /// Each group's plan from the values of a solve.
    fn plans_of(&self, values: &[f64]) -> Vec<Plan> {
        self.parts
            .iter()
            .enumerate()
            .map(|(g, p)| {
                let own = match &self.extensive {
                    None => values.to_vec(),
                    Some(ext) => ext.values_of(values, g, p.milp.vars.len()),
                };
                report::extract(&p.setup, &p.milp, &p.vars, &own, self.owned_hours)
            })
            .collect()
    }

    /// Each input scenario's (cost, probability) under `plans`.
    fn costs_of(&self, plans: &[Plan]) -> Vec<(f64, f64)> {
        self.group_of
            .iter()
            .zip(&self.st.scenarios)
            .map(|(g, s)| (plans[*g].objective(), s.probability))
            .collect()
    }

    /// The size of the largest model solved, and how.
    fn model_stats(&self, removed: usize, scanned: bool) -> ModelStats {
        let parts = &self.parts;
        let (variables, integer_variables, constraints) = match &self.extensive {
            Some(ext) => {
                // With the tail columns and rows when some λ > 0, and the
                // second step's row when λ = 1 is solved.
                let frontier = &self.st.risk.frontier;
                let tail = frontier.iter().any(|l| *l > 0.0);
                let second = frontier.contains(&1.0);
                let groups = self.groups.len();
                (
                    ext.milp.vars.len() + if tail { 2 + groups } else { 0 },
                    ext.milp.integer_count(),
                    ext.milp.rows.len() + if tail { groups } else { 0 } + usize::from(second),
                )
            }
            None => (
                parts[0].milp.vars.len(),
                parts[0].milp.integer_count(),
                parts[0].milp.rows.len(),
            ),
        };
        ModelStats {
            eligible_offers: parts[0].setup.offers.len(),
            demand_levels: parts.iter().map(|p| p.setup.levels.len()).sum(),
            variables,
            integer_variables,
            constraints,
            reduced_variables: removed + parts.iter().map(|p| p.vars.dominated).sum::<usize>(),
            method: match (scanned, &self.extensive) {
                (true, _) => "scan",
                (false, Some(_)) if self.decomposition.borrow().is_some() => "l_shaped",
                (false, Some(_)) => "extensive_form",
                (false, None) => "milp",
            },
        }
    }
}

/// Each scenario's plan with the new purchases fixed at `counts` (column:
/// count): its own model, where only the hourly counts are left to choose.
fn fixed_plans(
    parts: &[Part<'_>],
    counts: &Counts,
    owned: Option<f64>,
    opts: &SolveOptions,
    deadline: Option<Instant>,
) -> Result<Vec<Plan>, OptimizeError> {
    parts
        .iter()
        .map(|p| {
            let mut m = p.milp.clone();
            for (&col, &count) in counts {
                m.vars[col].integer = false;
                m.vars[col].upper = Some(count);
                m.rows.push(Row {
                    terms: vec![(col, 1.0)],
                    sense: Sense::AtLeast,
                    rhs: count,
                });
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match m.solve_within(opts.backend, left, None) {
                Ok(Solved {
                    values,
                    bound: None,
                    ..
                }) => Ok(report::extract(&p.setup, &p.milp, &p.vars, &values, owned)),
                Ok(_) | Err(LpError::TimeLimit) => Err(OptimizeError::TimeLimit(
                    opts.time_limit.unwrap_or_default(),
                )),
                Err(e) => Err(OptimizeError::Solver(format!(
                    "a scenario with the purchase fixed: {e}"
                ))),
            }
        })
        .collect()
}
