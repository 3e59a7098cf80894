//! The HTTP API's handlers (axum): health, readiness, Prometheus metrics, and
//! the catalog queries the CLI offers, answering with the same JSON records.
//! Plans are solved on the capped solver pool; `server` puts these routes
//! behind the layers every request passes.

mod bills;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::Method;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Json, Router};
use chrono::{SubsecRound, Utc};
use serde_json::{Value, json};

use crate::catalog::{self, Freshness, SpotQuery};
use crate::daemon::metrics::Metrics;
use crate::optimizer::job::{JobProblem, is_job};
use crate::optimizer::{Backend, Problem, ValidationError};
use crate::plan::inputs::OwnedEntry;
use crate::plan::job_catalog::JobAsk;
use crate::plan::settings::Overrides;
use crate::plan::{Input, PlanError, PlanRequest};
use crate::store::{Generation, StoreError};

use crate::daemon::http::error::ApiError;
use crate::daemon::http::params::Params;
use crate::daemon::http::state::{
    AppState, PRICE_FILTERS, cheapest_at, current_records, lock, price_filter, read, read_in,
    spot_history_answer,
};

/// Every API route as (method, path, handler): one table, so the router
/// and the list the OpenAPI description is checked against cannot differ.
fn table() -> Vec<(Method, &'static str, MethodRouter<Arc<AppState>>)> {
    vec![
        (Method::GET, "/healthz", get(|| async { "ok\n" })),
        (Method::GET, "/readyz", get(ready)),
        (Method::GET, "/metrics", get(metrics)),
        (Method::GET, "/openapi.json", get(openapi)),
        (Method::GET, "/v1/prices", get(prices)),
        (Method::GET, "/v1/spot-history", get(spot_history)),
        (Method::GET, "/v1/windows", get(windows)),
        (Method::GET, "/v1/gpus", get(gpus)),
        (Method::GET, "/v1/perf", get(perf)),
        (Method::GET, "/v1/regions", get(regions)),
        (Method::GET, "/v1/sync-runs", get(sync_runs)),
        (Method::GET, "/v1/cluster", get(cluster)),
        (Method::POST, "/v1/sync", post(trigger_sync)),
        (Method::GET, "/v1/alerts", get(alerts)),
        (Method::POST, "/v1/plans", post(create_plan)),
        (Method::POST, "/v1/jobs", post(create_catalog_job)),
        (Method::GET, "/v1/plans/latest", get(latest_plan)),
        (Method::GET, "/v1/solves", get(running_solves)),
        (Method::POST, "/v1/solves/{id}/stop", post(stop_solve)),
        (Method::GET, "/v1/plans/{id}", get(plan_by_id)),
        (Method::GET, "/v1/bills", get(bills::bills)),
        (Method::GET, "/v1/usage", get(bills::usage)),
        (Method::GET, "/v1/spend", get(bills::spend)),
        (Method::GET, "/v1/commitments", get(bills::commitments)),
        (Method::GET, "/v1/coverage", get(bills::coverage)),
        (Method::GET, "/v1/budgets", get(bills::budgets)),
    ]
}

/// The API's routes; [`crate::daemon::http::router`] hardens them with the dashboard's.
pub fn routes() -> Router<Arc<AppState>> {
    table()
        .into_iter()
        .fold(Router::new(), |r, (_, path, handler)| {
            r.route(path, handler)
        })
}

/// The OpenAPI 3.1 description of the JSON routes (all but `/metrics` and
/// itself), served as written.
const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// How long a client refused for busy solvers is asked to wait.
const SOLVER_RETRY_AFTER_SECS: u64 = 10;

async fn metrics(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let metrics = state.metrics.clone();
    let text = read_in(&state, move |store, fresh, state, generation| {
        let solver = state.planning.solver();
        let figures = scrape_figures(store, (&fresh, generation), state)?;
        Ok(metrics.render(&fresh.last_good, fresh.now)
            + &Metrics::render_solves(solver.running(), solver.refused())
            + &figures.render())
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}

/// What `/metrics` reads from the catalog and the bills. Only canonical GPU
/// models get a series: a provider's unknown GPU names would make the
/// label set unbounded.
fn scrape_figures(
    store: &dyn crate::store::Store,
    (fresh, generation): (&Freshness, Generation),
    state: &AppState,
) -> Result<crate::daemon::metrics::Figures, StoreError> {
    let cheapest = cheapest_at(store, (fresh, generation), state, None)?
        .into_iter()
        .filter_map(|((model, group), r)| {
            gpuplan_providers::gpu::canonical(&model)
                .map(|m| (m.to_owned(), group, r.usd_per_gpu_hour))
        })
        .collect();
    let stale = fresh
        .sources()
        .into_iter()
        .map(|n| {
            let stale = fresh.is_stale(&n);
            (n, stale)
        })
        .collect();
    let budgets = crate::bills::budgets::budget_statuses(store, &state.bills)?
        .into_iter()
        .map(|b| crate::daemon::metrics::BudgetFigure {
            name: b.name,
            currency: b.currency,
            amount: b.amount,
            actual: b.actual,
            forecast: b.forecast,
        })
        .collect();
    let commitments = crate::bills::health::commitment_health(store, &state.bills.sources)?;
    Ok(crate::daemon::metrics::Figures {
        cheapest,
        stale,
        budgets,
        commitments,
    })
}

/// Ready while the catalog answers a query: a store that has become
/// unreadable (a broken or replaced file) takes the daemon out of rotation.
async fn ready(State(state): State<Arc<AppState>>) -> Response {
    let pool = state.pool.clone();
    let checked =
        tokio::task::spawn_blocking(move || pool.read(|store| store.catalog_generation())).await;
    match checked {
        Ok(Ok(_)) => Json(json!({"ready": true})).into_response(),
        Ok(Err(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ready": false, "error": format!("the catalog cannot be read: {e}")})),
        )
            .into_response(),
        Err(e) => ApiError::internal(&e).into_response(),
    }
}

async fn prices(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let p = Params::parse(
        uri.query(),
        &[PRICE_FILTERS, &["currency", "per_work", "reference"]].concat(),
    )?;
    let reference = p
        .one("reference")?
        .unwrap_or_else(|| crate::facts::DEFAULT_REFERENCE.to_owned());
    let work = match p.one("per_work")? {
        Some(w) => Some(
            facts()?
                .work(&w, &reference)
                .map_err(|e| ApiError::bad_parameter("per_work", e))?,
        ),
        None if p.one("reference")?.is_some() => {
            return Err(ApiError::bad_parameter("reference", "goes with per_work"));
        }
        None => None,
    };
    let currency = p
        .one("currency")?
        .map(|code| {
            state.fx.currency(&code).ok_or_else(|| {
                ApiError::bad_parameter(
                    "currency",
                    format!("no rate for `{code}`; configured: {}", state.fx.known()),
                )
            })
        })
        .transpose()?;
    let filter = price_filter(&p)?;
    let query = uri.query().unwrap_or("").to_owned();
    let body = read_in(&state, move |store, fresh, state, generation| {
        // With the state of the catalog: an answer built from what was read
        // before a commit is not kept for those who saw the commit.
        let key = (
            format!("{query}@{}", generation.data),
            fresh.stale_sources(),
        );
        if let Some(hit) = lock(&state.cache).answer(&key) {
            return Ok(hit);
        }
        // From the catalog's copy in memory, which the dashboard shares: a
        // distinct filter then costs the filter, not a query of the store.
        let current = current_records(store, &fresh, state, generation)?;
        let encoded = if currency.is_none() && work.is_none() {
            current.prices_json(&filter)
        } else {
            let mut records = current.prices(&filter);
            if let Some(currency) = &currency {
                catalog::convert(&mut records, currency);
            }
            if let Some(work) = &work {
                catalog::per_work(&mut records, work);
            }
            serde_json::to_vec(&records)
        };
        let body = Bytes::from(encoded.map_err(|e| StoreError::Corrupt(e.to_string()))?);
        lock(&state.cache).keep_answer(key, body.clone());
        Ok(body)
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

async fn spot_history(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let p = Params::parse(
        uri.query(),
        &["instance", "provider", "region", "zone", "since"],
    )?;
    let instance_type = p.one("instance")?.ok_or_else(|| {
        ApiError::bad_parameter("instance", "required, e.g. instance=p5.48xlarge")
    })?;
    let since_text = p.one("since")?.unwrap_or_else(|| "7d".to_owned());
    // To the second: the requests of one second in one state of the
    // catalog ask one question, answered once (a dashboard many watch).
    let now = Utc::now().trunc_subsecs(0);
    let since =
        catalog::parse_since(&since_text, now).map_err(|e| ApiError::bad_parameter("since", e))?;
    let query = SpotQuery {
        instance_type,
        provider: p.one("provider")?,
        region: p.one("region")?,
        zone: p.one("zone")?,
        since,
        max_observations: Some(catalog::MAX_SPOT_OBSERVATIONS),
    };
    let body = read_in(&state, move |store, fresh, state, generation| {
        let fresh = Freshness { now, ..fresh };
        spot_history_answer(store, &fresh, &state.cache, generation, &query)
    })
    .await
    .map_err(|e| match e.status {
        // The window holds too many observations: `since` is what to narrow.
        StatusCode::BAD_REQUEST => ApiError::bad_parameter("since", e.message),
        _ => e,
    })?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// The most priced windows one answer lists; past it, `since` is what to narrow.
const MAX_WINDOWS: usize = 10_000;

async fn windows(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let p = Params::parse(
        uri.query(),
        &[
            "gpu",
            "provider",
            "region",
            "kind",
            "max_usd_per_gpu_hour",
            "since",
            "min_days",
        ],
    )?;
    let filter = price_filter(&p)?;
    let since_text = p.one("since")?.unwrap_or_else(|| "30d".to_owned());
    let since = catalog::parse_since(&since_text, Utc::now())
        .map_err(|e| ApiError::bad_parameter("since", e))?;
    let min_days = p
        .parsed::<f64>("min_days", "a number of days")?
        .unwrap_or(0.0);
    if !(0.0..=366.0).contains(&min_days) {
        return Err(ApiError::bad_parameter(
            "min_days",
            "must be between 0 and 366",
        ));
    }
    let records = read(&state, move |store, _, _| {
        catalog::windows(store, &filter, since, min_days * 24.0)
    })
    .await?;
    if records.len() > MAX_WINDOWS {
        return Err(ApiError::bad_parameter(
            "since",
            format!(
                "{} windows match, more than the {MAX_WINDOWS} one answer lists; give a later since or narrow the filter",
                records.len()
            ),
        ));
    }
    Ok(Json(records).into_response())
}

/// The facts shipped in this build; a broken file (a bug the tests catch)
/// is a 500 naming it.
fn facts() -> Result<&'static crate::facts::Facts, ApiError> {
    crate::facts::builtin().map_err(|e| ApiError::internal(e))
}

async fn gpus(uri: axum::http::Uri) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["gpu"])?;
    Ok(Json(facts()?.gpus_of(&p.all("gpu"))).into_response())
}

async fn perf(uri: axum::http::Uri) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["workload", "gpu"])?;
    let rows = facts()?
        .perf_of(&p.all("workload"), &p.all("gpu"))
        .map_err(|e| ApiError::bad_parameter("workload", e))?;
    Ok(Json(rows).into_response())
}

async fn regions(uri: axum::http::Uri) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["provider", "country"])?;
    Ok(Json(facts()?.regions_of(&p.all("provider"), &p.all("country"))).into_response())
}

async fn sync_runs(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["limit"])?;
    let limit = p.parsed::<u32>("limit", "a whole number")?.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_parameter(
            "limit",
            "must be between 1 and 1000",
        ));
    }
    let runs = read(&state, move |store, _, _| store.sync_runs(limit)).await?;
    Ok(Json(runs).into_response())
}

/// This replica and what it holds, with every duty's lease as the store has
/// it (on SQLite, one daemon holds everything and no lease is stored).
async fn cluster(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    Params::parse(uri.query(), &[])?;
    let leases = read(&state, |store, _, _| store.leases()).await?;
    Ok(Json(serde_json::json!({
        "replica": state.pool.replica(),
        "backend": if state.pool.is_shared() { "postgres" } else { "sqlite" },
        "duties_held": state.cluster.held(),
        "leases": leases,
    }))
    .into_response())
}

async fn trigger_sync(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["provider"])?;
    let wanted = p.all("provider");
    if let Some(unknown) = wanted.iter().find(|w| !state.triggers.contains_key(*w)) {
        let known: Vec<&str> = state.triggers.keys().map(String::as_str).collect();
        return Err(ApiError::bad_parameter(
            "provider",
            format!(
                "no enabled provider `{unknown}`; enabled: {}",
                known.join(", ")
            ),
        ));
    }
    let mut triggered = Vec::new();
    for (id, notify) in &state.triggers {
        if wanted.is_empty() || wanted.contains(id) {
            notify.notify_one();
            triggered.push(id.clone());
        }
    }
    Ok((StatusCode::ACCEPTED, Json(json!({"triggered": triggered}))).into_response())
}

/// Keys of a catalog plan request (`POST /v1/plans` without `offers`).
const CATALOG_PLAN_KEYS: &[&str] = &[
    "name",
    "demand",
    "classes",
    "owned",
    "policy",
    "gpu",
    "clouds",
    "regions",
    "countries",
    "spot_window",
    "restart_hours",
    "checkpoint_hours",
    "risk",
    "scenarios",
    "scenario_generator",
];

/// `POST /v1/plans`: a full problem document (with `offers`), or demand and
/// policy with offers taken from the catalog. `?relax=true` solves the LP
/// relaxation; `?save=true` saves the plan and runs the plan-change test;
/// `?time_limit_secs=` overrides the `[planner]` default, as the catalog
/// request's `spot_window`, `restart_hours` and `checkpoint_hours` do.
async fn create_plan(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
    body: Bytes,
) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["relax", "save", "time_limit_secs"])?;
    let relax = p.parsed::<bool>("relax", "true or false")?.unwrap_or(false);
    let save = p.parsed::<bool>("save", "true or false")?.unwrap_or(false);
    let time_limit = p.parsed::<f64>("time_limit_secs", "a number of seconds")?;
    let mut doc: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_parameter("body", format!("not JSON: {e}")))?;
    if is_job(&doc) {
        return create_job(&state, &doc, relax, save, time_limit).await;
    }
    // Classes whose perf names a workload get their factors from the facts.
    crate::plan::work::resolve_problem(&mut doc).map_err(field)?;
    let mut overrides = Overrides {
        time_limit,
        ..Overrides::default()
    };
    // A catalog plan with version 3 keys plans as version 3 on the offers
    // the catalog gives (its scenarios may name their spot pools).
    let scenario_keys: serde_json::Map<String, Value> = match (&doc, doc.get("offers")) {
        (Value::Object(obj), None) => ["risk", "scenarios", "scenario_generator"]
            .iter()
            .filter_map(|k| obj.get(*k).map(|v| ((*k).to_owned(), v.clone())))
            .collect(),
        _ => serde_json::Map::new(),
    };
    let (name, input) = if doc.get("offers").is_none() {
        catalog_plan(&doc, &mut overrides)?
    } else {
        let problem = Problem::from_json(&doc).map_err(field)?;
        (None, Input::Problem(problem))
    };
    let request = PlanRequest {
        name,
        input,
        overrides,
        relax,
        backend: Backend::default(),
        save,
        wait: false,
        fence: None,
        scenario_keys,
        progress: None,
        search: None,
    };
    match state.planning.plan(request).await {
        Ok(planned) => {
            Ok(Json(planned.to_json().map_err(|e| ApiError::internal(&e))?).into_response())
        }
        Err(e) => plan_refused(e),
    }
}

/// A job (planning-model version 4): solved on a solver slot, never saved.
async fn create_job(
    state: &AppState,
    doc: &Value,
    relax: bool,
    save: bool,
    time_limit: Option<f64>,
) -> Result<Response, ApiError> {
    if relax || save {
        let flag = if relax { "relax" } else { "save" };
        return Err(ApiError::bad_parameter(
            flag,
            "applies to demand plans (schema versions 1 to 3), not to a job",
        ));
    }
    let problem = JobProblem::from_json(doc).map_err(field)?;
    let overrides = Overrides {
        time_limit,
        ..Overrides::default()
    };
    match state
        .planning
        .job(problem, &overrides, Backend::default(), false)
        .await
    {
        Ok(result) => Ok(Json(result).into_response()),
        Err(e) => plan_refused(e),
    }
}

/// `POST /v1/jobs`: a question about a job (work, deadline, budget, where
/// and how), answered from the catalog with its plan, its ranking or
/// schedule, its cost against finish time and what it rests on.
/// `?time_limit_secs=` overrides the `[planner]` default.
async fn create_catalog_job(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
    body: Bytes,
) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["time_limit_secs"])?;
    let overrides = Overrides {
        time_limit: p.parsed::<f64>("time_limit_secs", "a number of seconds")?,
        ..Overrides::default()
    };
    let ask: JobAsk = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_parameter("body", format!("not a job question: {e}")))?;
    match state.planning.catalog_job(ask, &overrides, false).await {
        Ok(answer) => {
            Ok(Json(answer.to_json().map_err(|e| ApiError::internal(&e))?).into_response())
        }
        Err(e) => plan_refused(e),
    }
}

/// The answer to a plan that was not made.
fn plan_refused(e: PlanError) -> Result<Response, ApiError> {
    match e {
        PlanError::Invalid(e) => Err(field(e)),
        PlanError::Busy(busy) => {
            let mut refused = ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: busy.to_string(),
                parameter: None,
            }
            .into_response();
            refused.headers_mut().insert(
                header::RETRY_AFTER,
                axum::http::HeaderValue::from(SOLVER_RETRY_AFTER_SECS),
            );
            Ok(refused)
        }
        e @ (PlanError::Solve(_) | PlanError::Job(_)) => Err(ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            message: e.to_string(),
            parameter: None,
        }),
        PlanError::Store(e) => Err(e.into()),
        e @ PlanError::Internal(_) => Err(ApiError::internal(&e)),
    }
}

fn field(e: ValidationError) -> ApiError {
    ApiError::bad_parameter(&e.path, e.message)
}

/// A catalog plan request's name and input, with its overrides added.
fn catalog_plan(
    doc: &Value,
    overrides: &mut Overrides,
) -> Result<(Option<String>, Input), ApiError> {
    let Some(obj) = doc.as_object() else {
        return Err(ApiError::bad_parameter("body", "must be a JSON object"));
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !CATALOG_PLAN_KEYS.contains(&k.as_str()))
    {
        return Err(ApiError::bad_parameter(
            k,
            format!(
                "unknown key; a catalog plan takes {} (or send a full problem with offers)",
                CATALOG_PLAN_KEYS.join(", ")
            ),
        ));
    }
    let name = obj.get("name").cloned().unwrap_or(json!("api plan"));
    // Demand, classes and policy follow the planning model's rules: a body
    // with `classes` is read as schema version 2.
    let mut base = json!({"name": name, "offers": [], "policy": obj.get("policy")});
    for key in ["demand", "classes"] {
        if let Some(v) = obj.get(key) {
            base[key] = v.clone();
        }
    }
    if obj.contains_key("classes") {
        base["schema_version"] = json!(2);
    }
    let problem = Problem::from_json(&base).map_err(field)?;
    let owned = match obj.get("owned") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let at = format!("owned[{i}]");
                    serde_json::from_value::<OwnedEntry>(item.clone())
                        .map_err(|e| e.to_string())
                        .and_then(OwnedEntry::resolve)
                        .map_err(|m| ApiError::bad_parameter(&at, m))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(ApiError::bad_parameter(
                "owned",
                "must be a list of reservations",
            ));
        }
    };
    let list = |key: &str| -> Result<Vec<String>, ApiError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| ApiError::bad_parameter(key, "must be a list of strings"))
                })
                .collect(),
            Some(_) => Err(ApiError::bad_parameter(key, "must be a list of strings")),
        }
    };
    let number = |key: &str| -> Result<Option<f64>, ApiError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                ApiError::bad_parameter(key, format!("must be a number, found {v}"))
            }),
        }
    };
    if let Some(window) = obj.get("spot_window").filter(|v| !v.is_null()) {
        let text = window
            .as_str()
            .ok_or_else(|| ApiError::bad_parameter("spot_window", "must be a string like 7d"))?;
        overrides.spot_window = Some(
            catalog::window_since(text).map_err(|e| ApiError::bad_parameter("spot_window", e))?,
        );
    }
    overrides.restart_hours = number("restart_hours")?;
    overrides.checkpoint_hours = number("checkpoint_hours")?;
    let input = Input::Catalog {
        classes: problem.classes,
        owned,
        found: Vec::new(),
        policy: problem.policy,
        gpus: list("gpu")?,
        clouds: list("clouds")?,
        regions: list("regions")?,
        countries: list("countries")?,
    };
    Ok((problem.name, input))
}

/// `GET /v1/solves`: the plans solving now, each with its progress (the
/// bound, best plan and gap of a long risk plan's search).
async fn running_solves(State(state): State<Arc<AppState>>) -> Response {
    let solver = state.planning.solver();
    Json(json!({"slots": solver.max(), "solves": solver.running_solves()})).into_response()
}

/// `POST /v1/solves/{id}/stop`: asks a running plan to return its best
/// plan so far, with its bound and gap.
async fn stop_solve(
    State(state): State<Arc<AppState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    let id: u64 = path_id(&id, "solve")?;
    if state.planning.solver().stop(id) {
        Ok(Json(json!({"stopping": id})).into_response())
    } else {
        Err(not_found(&format!("no solve {id} is running")))
    }
}

async fn latest_plan(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["name"])?;
    let name = p.one("name")?;
    let plan = read(&state, move |store, _, _| {
        store.saved_plan(None, name.as_deref())
    })
    .await?;
    plan.map(|p| Json(p).into_response())
        .ok_or_else(|| not_found("no plan has been saved yet"))
}

async fn plan_by_id(
    State(state): State<Arc<AppState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    let id: i64 = path_id(&id, "plan")?;
    let plan = read(&state, move |store, _, _| store.saved_plan(Some(id), None)).await?;
    plan.map(|p| Json(p).into_response())
        .ok_or_else(|| not_found(&format!("no plan {id}")))
}

/// `GET /v1/alerts`: every (rule, key) state and the newest queued messages.
async fn alerts(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["limit"])?;
    let limit = p.parsed::<u32>("limit", "a whole number")?.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_parameter(
            "limit",
            "must be between 1 and 1000",
        ));
    }
    let doc = read(&state, move |store, _, _| {
        Ok(json!({"state": store.alert_states(None)?, "messages": store.message_history(limit)?}))
    })
    .await?;
    Ok(Json(doc).into_response())
}

/// A path's `{id}`, or the 400 that names it as not a `what` id.
fn path_id<T: std::str::FromStr>(id: &str, what: &str) -> Result<T, ApiError> {
    id.parse()
        .map_err(|_| ApiError::bad_parameter("id", format!("`{id}` is not a {what} id")))
}

fn not_found(message: &str) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        message: message.to_owned(),
        parameter: None,
    }
}

#[cfg(test)]
mod openapi_tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_openapi_description_lists_exactly_the_json_routes() {
        let doc: Value = serde_json::from_str(OPENAPI).unwrap();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let mut described = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                described.insert((method.to_ascii_uppercase(), path.clone()));
            }
        }
        let served: BTreeSet<(String, String)> = table()
            .into_iter()
            .filter(|(_, path, _)| !matches!(*path, "/metrics" | "/openapi.json"))
            .map(|(method, path, _)| (method.to_string(), path.to_owned()))
            .collect();
        assert_eq!(described, served);
        // Every reference resolves.
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let text = OPENAPI;
        for at in text.match_indices("#/components/schemas/") {
            let name: String = text[at.0 + at.1.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            assert!(schemas.contains_key(&name), "no schema {name}");
        }
    }
}
