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

mod extensive;
mod infeasible;
mod summary;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde_json::json;

use super::build::{Scope, build};
use super::lp::{LpError, Row, Sense, Solved};
use super::model::{Measure, Problem, Stochastic};
use super::report::{self, Plan};
use super::scan::Scan;
use super::setup::Setup;
use super::{ModelStats, OptimizeError, PlanResult, SolveOptions, checks, ms, solve_model};
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
    let solver = Solver {
        st,
        opts,
        deadline: opts.time_limit.map(|t| start + t),
        scope,
        shift: baselines
            .iter()
            .map(|b| if shortfall { b.unwrap_or(0.0) } else { 0.0 })
            .collect(),
        owned_hours: result.gpu_hours.owned,
        groups,
        group_of,
        parts,
        extensive,
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
    let (_, f, _) = &points[primary];
    if let Some(budget) = problem.policy.budget
        && f.objective > budget * (1.0 + 1e-9) + 1e-9
    {
        result.infeasibility =
            Some(json!({"kind": "budget", "budget": budget, "min_cost": f.objective}));
        return finish(result, v3);
    }
    result.model_stats = solver.model_stats(removed, scanned.is_some());
    result.timings.build_ms = build_ms;
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
    finish(result, v3)
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
                None => match self.solve_point(lambda)? {
                    Ok(values) => self.plans_of(&values),
                    Err(_) => return Ok(None),
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
                let first = m.solve_bounded(opts.backend, left(), None, opts.memory_limit);
                match first {
                    Ok(Solved {
                        values,
                        bound: None,
                        ..
                    }) if lambda == 1.0 => {
                        let v: f64 = m.vars.iter().zip(&values).map(|(v, x)| v.cost * x).sum();
                        let m2 =
                            ext.model(&self.groups, lambda, st.risk.beta, &self.shift, Some(v));
                        m2.solve_bounded(opts.backend, left(), None, opts.memory_limit)
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
