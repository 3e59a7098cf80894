//! The plan pipeline, one for every entry point (`gpuplan plan`, `POST
//! /v1/plans`, scheduled plans): take a problem as given or build it from the
//! catalog, solve it on the capped [`SolverPool`] with the store let go, and
//! save it with the plan-change test. The `[planner]` settings are the
//! defaults; a request overrides any of them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::{Value, json};

use crate::catalog::Freshness;
use crate::fingerprint::fingerprint;
use crate::optimizer::job::{FrontierPoint, JobError, JobProblem, JobResult, Plan, Ranked};
use crate::optimizer::{
    Backend, DemandClass, OptimizeError, Owned, PlanChange, PlanResult, Policy, Problem,
    SolveOptions, ValidationError, compare,
};
use crate::store::{NewPlan, Pool, Store, StoreError};
use from_catalog::CatalogInputs;
use job_catalog::{BuiltJob, JobAsk};
use settings::{Overrides, PlanSettings, PlannerConfig};
use solver_pool::{Busy, SolverPool};

pub mod forecast;
pub mod from_bills;
pub mod from_catalog;
pub mod inputs;
pub mod job_catalog;
pub mod owned_from_bills;
pub mod settings;
pub mod solver_pool;
pub mod work;

/// Where a plan's problem comes from.
#[derive(Debug, Clone)]
pub enum Input {
    /// A complete problem document.
    Problem(Problem),
    /// Demand classes and policy; offers from the current catalog.
    Catalog {
        /// One plain class plans as version 1; several, or filters and perf
        /// maps, as version 2.
        classes: Vec<DemandClass>,
        /// Reservations already bought; `None` takes `[planner.owned]`.
        owned: Option<Vec<Owned>>,
        /// Reservations the bills show, attached leniently: one outside this
        /// plan's offers is listed under `owned_skipped`, not refused.
        found: Vec<Owned>,
        policy: Policy,
        gpus: Vec<String>,
        clouds: Vec<String>,
        regions: Vec<String>,
        /// ISO country codes the offers must be in; empty means anywhere.
        countries: Vec<String>,
    },
}

/// One plan to make.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// The plan's name: what `save` compares with. `None` keeps the problem's.
    pub name: Option<String>,
    pub input: Input,
    pub overrides: Overrides,
    /// Solve the LP relaxation.
    pub relax: bool,
    pub backend: Backend,
    /// Save the plan and run the plan-change test.
    pub save: bool,
    /// Wait for a solver slot (the CLI, scheduled plans) rather than fail with
    /// [`PlanError::Busy`] (the API answers 503).
    pub wait: bool,
    /// The duty a scheduled plan is saved under: on a shared catalog the save
    /// is refused once another replica has taken the duty.
    pub fence: Option<crate::store::Fence>,
    /// Planning-model version 3 keys (`risk`, `scenario_generator`,
    /// `scenarios`) to add to the problem, which then plans as version 3.
    /// A `risk` object here is merged key by key over the problem's own.
    pub scenario_keys: serde_json::Map<String, Value>,
    /// Hears a long search's progress (the CLI shows it).
    pub progress: Option<crate::optimizer::ProgressSink>,
    /// Hears a MIP's branch-and-bound as it goes (the CLI shows it).
    pub search: Option<crate::optimizer::SearchSink>,
}

/// A problem ready to solve.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub problem: Problem,
    pub settings: PlanSettings,
    /// For catalog plans: the sources whose data behind the offers is stale.
    pub stale_sources: Option<Vec<String>>,
    /// `[planner.owned]` entries outside this plan's offers, one line each.
    pub owned_skipped: Vec<String>,
}

/// A solved (and maybe saved) plan.
#[derive(Debug, Clone)]
pub struct Planned {
    pub prepared: Prepared,
    pub result: PlanResult,
    pub saved: Option<Recorded>,
}

impl Planned {
    /// The result document with what else the plan carries: the catalog's
    /// offers and staleness, how it was saved, and the settings it was made with.
    ///
    /// # Errors
    /// When the result cannot be encoded.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        let mut doc = serde_json::to_value(&self.result)?;
        if let Some(stale) = &self.prepared.stale_sources {
            doc["catalog"] =
                json!({"offers": self.prepared.problem.offers.len(), "stale_sources": stale});
            if !self.prepared.owned_skipped.is_empty() {
                doc["catalog"]["owned_skipped"] = json!(self.prepared.owned_skipped);
            }
        }
        if let Some(saved) = &self.saved {
            doc["saved"] = serde_json::to_value(saved)?;
        }
        doc["settings"] = serde_json::to_value(&self.prepared.settings)?;
        Ok(doc)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Bad input: a 400 / exit 2 naming the field.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Busy(#[from] Busy),
    /// No plan: a time limit or a solver failure.
    #[error(transparent)]
    Solve(#[from] OptimizeError),
    /// No job plan: a time limit or a solver failure.
    #[error(transparent)]
    Job(#[from] JobError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A task of the pipeline died, or it was set up without a catalog.
    #[error("the plan pipeline failed: {0}")]
    Internal(String),
}

pub struct PlanService {
    /// The catalog; `None` for a CLI solve of a problem file that is not saved.
    pool: Option<Arc<Pool>>,
    solver: SolverPool,
    defaults: PlanSettings,
    /// `[planner.owned]`: what catalog plans own unless a request says.
    owned: Vec<Owned>,
    /// Sync interval per source, for staleness.
    intervals: BTreeMap<String, Duration>,
    /// `planner.max_solve_memory_mib`, in bytes.
    memory_limit: u64,
}

impl PlanService {
    #[must_use]
    /// A pipeline on `pool` with the `[planner]` settings: its solver slots,
    /// and its defaults and owned reservations for what a request leaves out.
    pub fn new(
        pool: Option<Arc<Pool>>,
        planner: &PlannerConfig,
        intervals: BTreeMap<String, Duration>,
    ) -> Self {
        Self {
            pool,
            solver: SolverPool::new(planner.max_concurrent_solves),
            defaults: planner.defaults.clone(),
            owned: planner.owned.clone(),
            intervals,
            memory_limit: planner.max_solve_memory_mib << 20,
        }
    }

    fn catalog(&self) -> Result<Arc<Pool>, PlanError> {
        self.pool.clone().ok_or_else(|| {
            PlanError::Internal("this plan needs the catalog, and none was opened".to_owned())
        })
    }

    /// The solver slots, for their gauges.
    #[must_use]
    pub fn solver(&self) -> &SolverPool {
        &self.solver
    }

    /// Makes the plan `req` asks for.
    ///
    /// # Errors
    /// See [`PlanError`].
    pub async fn plan(&self, req: PlanRequest) -> Result<Planned, PlanError> {
        let prepared = self.prepare(&req).await?;
        self.finish(prepared, &req).await
    }

    /// Plans a job (planning-model version 4) with the `[planner]` time
    /// limit unless `overrides` sets one.
    ///
    /// # Errors
    /// `Invalid` for settings out of range, `Busy`, or `Job`.
    pub async fn job(
        &self,
        problem: JobProblem,
        overrides: &Overrides,
        backend: Backend,
        wait: bool,
    ) -> Result<JobResult, PlanError> {
        let settings = self.defaults.with(overrides)?;
        let limit = settings.time_limit;
        let span = job_span(&problem);
        let solved = self
            .solver
            .call(wait, span, move || problem.solve(backend, Some(limit)))
            .await?;
        Ok(solved.map_err(PlanError::Internal)??)
    }

    /// Answers a question about a job from the catalog: builds its problem
    /// (hour 0 now), plans it, and traces its cost against finish time, on
    /// one solver slot.
    ///
    /// # Errors
    /// `Invalid` for a question the facts or the model refuse, `Busy`,
    /// `Job`, or `Store`.
    pub async fn catalog_job(
        &self,
        ask: JobAsk,
        overrides: &Overrides,
        wait: bool,
    ) -> Result<JobAnswer, PlanError> {
        let settings = self.defaults.with(overrides)?;
        let inputs = CatalogInputs {
            gpus: ask.gpu.clone(),
            clouds: ask.clouds.clone(),
            regions: ask.regions.clone(),
            countries: ask.countries.clone(),
            spot_window: settings.spot_window,
            restart_hours: settings.restart_hours,
            checkpoint_hours: settings.checkpoint_hours,
        };
        let (pool, intervals) = (self.catalog()?, self.intervals.clone());
        let built = tokio::task::spawn_blocking(move || {
            pool.read(|store| {
                let fresh = Freshness::read(store, intervals, Utc::now())?;
                job_catalog::build_job(store, &fresh, &ask, &inputs)
            })
        })
        .await
        .map_err(|e| PlanError::Internal(format!("the catalog read: {e}")))???;
        let (limit, problem) = (settings.time_limit, built.problem.clone());
        let span = job_span(&problem);
        let solved = self
            .solver
            .call(wait, span, move || {
                let result = problem.solve(Backend::default(), Some(limit))?;
                let frontier = problem.frontier(Backend::default(), Some(limit))?;
                Ok::<_, JobError>((result, frontier))
            })
            .await?;
        let (result, frontier) = solved.map_err(PlanError::Internal)??;
        Ok(JobAnswer {
            built,
            result,
            frontier,
        })
    }

    /// Settles the settings and builds the problem, reading the catalog and
    /// letting go of it before any solve.
    ///
    /// # Errors
    /// `Invalid` for settings out of range or a problem too large; `Store`.
    pub async fn prepare(&self, req: &PlanRequest) -> Result<Prepared, PlanError> {
        let settings = self.defaults.with(&req.overrides)?;
        let (mut problem, stale_sources, owned_skipped) = match req.input.clone() {
            Input::Problem(p) => (p, None, Vec::new()),
            Input::Catalog {
                classes,
                owned,
                found,
                policy,
                gpus,
                clouds,
                regions,
                countries,
            } => {
                let inputs = CatalogInputs {
                    gpus,
                    clouds,
                    regions,
                    countries,
                    spot_window: settings.spot_window,
                    restart_hours: settings.restart_hours,
                    checkpoint_hours: settings.checkpoint_hours,
                };
                let (pool, intervals) = (self.catalog()?, self.intervals.clone());
                let built = tokio::task::spawn_blocking(move || {
                    pool.read(|store| {
                        let fresh = Freshness::read(store, intervals, Utc::now())?;
                        from_catalog::build_problem(store, &fresh, classes, &inputs, policy)
                    })
                })
                .await
                .map_err(|e| PlanError::Internal(format!("the catalog read: {e}")))??;
                let mut problem = built.problem;
                let mut skipped = match owned {
                    Some(given) => from_catalog::attach_owned(&mut problem, given, true)?,
                    None => from_catalog::attach_owned(&mut problem, self.owned.clone(), false)?,
                };
                skipped.extend(from_catalog::attach_owned(&mut problem, found, false)?);
                (problem, Some(built.stale_sources), skipped)
            }
        };
        if let Some(name) = &req.name {
            problem.name = Some(name.clone());
        }
        if !req.scenario_keys.is_empty() {
            problem = with_scenarios(&problem, &req.scenario_keys)?;
        }
        problem.check_size()?;
        Ok(Prepared {
            problem,
            settings,
            stale_sources,
            owned_skipped,
        })
    }

    /// Solves a prepared problem and, when asked, saves it.
    ///
    /// # Errors
    /// `Busy`, `Solve` or `Store`.
    pub async fn finish(
        &self,
        prepared: Prepared,
        req: &PlanRequest,
    ) -> Result<Planned, PlanError> {
        let opts = SolveOptions {
            relax: req.relax,
            time_limit: Some(prepared.settings.time_limit),
            memory_limit: Some(self.memory_limit),
            backend: req.backend,
            progress: req.progress.clone(),
            search: req.search.clone(),
            ..SolveOptions::default()
        };
        let problem = prepared.problem.clone();
        let solved = if req.wait {
            self.solver.solve_when_free(problem, opts).await
        } else {
            self.solver.solve(problem, opts).await?
        };
        let result = solved?;
        let saved = if req.save {
            let name = prepared
                .problem
                .name
                .clone()
                .unwrap_or_else(|| "plan".to_owned());
            let (pool, problem, result, settings, fence) = (
                self.catalog()?,
                prepared.problem.clone(),
                result.clone(),
                prepared.settings.clone(),
                req.fence.clone(),
            );
            let recorded = tokio::task::spawn_blocking(move || {
                pool.write_fenced(fence.as_ref(), |w| {
                    record_plan(w, &name, &problem, &result, &settings)
                })
            })
            .await
            .map_err(|e| PlanError::Internal(format!("saving the plan: {e}")))??;
            Some(recorded)
        } else {
            None
        };
        Ok(Planned {
            prepared,
            result,
            saved,
        })
    }
}

fn job_span(problem: &JobProblem) -> tracing::Span {
    tracing::info_span!(
        "solve",
        name = problem.name.as_deref().unwrap_or("-"),
        offers = problem.offers.len(),
        hours = problem.hours,
        kind = "job"
    )
}

/// A job planned from the catalog: its problem, its answer and its
/// cost-versus-finish frontier.
#[derive(Debug, Clone)]
pub struct JobAnswer {
    pub built: BuiltJob,
    pub result: JobResult,
    pub frontier: Vec<FrontierPoint>,
}

impl JobAnswer {
    /// The result document with the frontier and what the answer rests on:
    /// the perf basis, the catalog's staleness, and the basis of each offer
    /// the answer names.
    ///
    /// # Errors
    /// When the result cannot be encoded.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        let mut doc = serde_json::to_value(&self.result)?;
        doc["frontier"] = serde_json::to_value(&self.frontier)?;
        doc["catalog"] = json!({
            "offers": self.built.problem.offers.len(),
            "stale_sources": self.built.stale_sources,
            "perf_basis": self.built.perf_basis,
            "offer_basis": self.offer_basis(),
        });
        Ok(doc)
    }

    /// What the price and interruption rate of each offer the answer names
    /// (in its schedule or ranking) rest on, by offer id.
    #[must_use]
    pub fn offer_basis(&self) -> serde_json::Map<String, Value> {
        let named: std::collections::BTreeSet<&str> = match &self.result.plan {
            Plan::Bag { schedule, .. } => schedule.iter().map(|s| s.offer.as_str()).collect(),
            Plan::Gang { ranking, .. } => ranking
                .iter()
                .map(|r| match r {
                    Ranked::Feasible { run, .. } => run.offer.as_str(),
                    Ranked::Infeasible { offer, .. } => offer.as_str(),
                })
                .collect(),
        };
        self.built.doc["offers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["id"].as_str().is_some_and(|id| named.contains(id)))
            .map(|o| {
                (
                    o["id"].as_str().unwrap_or_default().to_owned(),
                    o["description"].clone(),
                )
            })
            .collect()
    }
}

/// `problem` as a version 3 problem with `keys` added, validated as a
/// document so every error names its field.
fn with_scenarios(
    problem: &Problem,
    keys: &serde_json::Map<String, Value>,
) -> Result<Problem, ValidationError> {
    let mut doc = problem.to_json();
    doc["schema_version"] = json!(3);
    for (key, value) in keys {
        match (doc.get_mut(key), value) {
            (Some(Value::Object(mine)), Value::Object(given)) if key == "risk" => {
                for (k, v) in given {
                    mine.insert(k.clone(), v.clone());
                }
            }
            _ => doc[key] = value.clone(),
        }
    }
    if keys.contains_key("scenario_generator") {
        doc.as_object_mut().map(|d| d.remove("scenarios"));
    }
    if keys.contains_key("scenarios") {
        doc.as_object_mut().map(|d| d.remove("scenario_generator"));
    }
    Problem::from_json(&doc)
}

/// A plan saved, and how it compares with the previous plan of the same name.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Recorded {
    pub id: i64,
    /// `None` when there was no earlier plan of this name.
    pub change: Option<PlanChange>,
}

/// Saves `result` (with the `settings` it was made with) under `name` and
/// runs the plan-change test (docs/planning-model.md §7) against the previous plan
/// of that name.
///
/// # Errors
/// On a store error or a result that cannot be encoded.
pub fn record_plan(
    store: &dyn Store,
    name: &str,
    problem: &Problem,
    result: &PlanResult,
    settings: &PlanSettings,
) -> Result<Recorded, StoreError> {
    let encoding =
        |e: serde_json::Error| StoreError::Corrupt(format!("cannot encode the plan: {e}"));
    let problem_json = serde_json::to_string(&problem.to_json()).map_err(encoding)?;
    let mut result_value = serde_json::to_value(result).map_err(encoding)?;
    // What the plan was made with goes with it: a saved plan says how to
    // make it again.
    result_value["settings"] = serde_json::to_value(settings).map_err(encoding)?;
    let result_json = serde_json::to_string(&result_value).map_err(encoding)?;
    let previous = store.saved_plan(None, Some(name))?;
    let change = previous.map(|p| {
        compare(
            &p.result,
            &result_value,
            problem.policy.alert_cost_change_pct,
        )
    });
    let id = store.save_plan(&NewPlan {
        created_at: chrono::Utc::now(),
        name,
        inputs_hash: &fingerprint(problem_json.as_bytes()),
        status: result.status,
        objective: result.objective,
        problem_json: &problem_json,
        result_json: &result_json,
    })?;
    Ok(Recorded { id, change })
}
