//! The HTTP API (axum): health, readiness, Prometheus metrics, and the catalog
//! queries the CLI offers, answering with the same JSON records. When the daemon
//! listens beyond loopback every route but the health checks needs the bearer
//! token, compared in constant time. Every request is treated as possibly
//! hostile: [`guard`] keeps browser pages out, bodies are bounded, solves run
//! on a capped [`SolverPool`], and a panicking handler answers 500.

mod bills;
mod guard;
pub(crate) mod params;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::Utc;
use gpuplan_providers::secret::Secret;
use gpuplan_providers::{PriceKind, PriceScope};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::catalog::{self, Freshness, PriceFilter, SpotQuery};
use crate::config::FxRates;
use crate::metrics::Metrics;
use crate::optimizer::{Backend, Problem, ValidationError};
use crate::plan_inputs::OwnedEntry;
use crate::planning::{Input, Overrides, PlanError, PlanRequest, PlanService};
use crate::store::{Pool, StoreError};

use params::Params;

/// What the handlers share.
pub struct AppState {
    pub pool: Arc<Pool>,
    pub metrics: Arc<Metrics>,
    /// Per source: the trigger that makes it sync now.
    pub triggers: BTreeMap<String, Arc<Notify>>,
    /// Per source: its sync interval, for staleness.
    pub intervals: BTreeMap<String, Duration>,
    pub token: Option<Secret>,
    /// Whether the listener is on loopback: then `Host` must name loopback.
    pub loopback: bool,
    pub cache: Mutex<CatalogCache>,
    /// Plans are made here, on its capped solver pool.
    pub planning: Arc<PlanService>,
    /// Rates for showing prices in another currency.
    pub fx: FxRates,
    /// The alert rules, for the dashboard to list.
    pub rules: Vec<crate::config::RuleConfig>,
    /// This replica's duties, for `GET /v1/cluster`.
    pub cluster: Arc<crate::cluster::Cluster>,
    /// Grace days of each bill source, for the state of its periods.
    pub bill_grace: BTreeMap<String, u32>,
    /// Budgets, bill sources and allocation, for `/v1/budgets` and `/v1/spend`.
    pub bills: crate::alerts::bills::BillAlerts,
}

/// The largest request body read: a problem with the most offers and the
/// longest horizon the optimizer takes fits in well under this.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// How long a client refused for busy solvers is asked to wait.
const SOLVER_RETRY_AFTER_SECS: u64 = 10;

/// An error answer: status and a JSON body naming what was wrong.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub parameter: Option<String>,
}

impl ApiError {
    pub(crate) fn bad_parameter(parameter: &str, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: format!("{parameter}: {}", message.into()),
            parameter: Some(parameter.to_owned()),
        }
    }

    fn internal(err: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %err, "Request failed.");
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: err.to_string(),
            parameter: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match &self.parameter {
            Some(p) => json!({"error": self.message, "parameter": p}),
            None => json!({"error": self.message}),
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::TooLarge { .. } => Self {
                status: StatusCode::BAD_REQUEST,
                message: e.to_string(),
                parameter: None,
            },
            e => Self::internal(&e),
        }
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    let routes = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .route("/v1/prices", get(prices))
        .route("/v1/spot-history", get(spot_history))
        .route("/v1/sync-runs", get(sync_runs))
        .route("/v1/cluster", get(cluster))
        .route("/v1/sync", post(trigger_sync))
        .route("/v1/alerts", get(alerts))
        .route("/v1/plans", post(create_plan))
        .route("/v1/plans/latest", get(latest_plan))
        .route("/v1/plans/{id}", get(plan_by_id))
        .route("/v1/bills", get(bills::bills))
        .route("/v1/usage", get(bills::usage))
        .route("/v1/spend", get(bills::spend))
        .route("/v1/commitments", get(bills::commitments))
        .route("/v1/coverage", get(bills::coverage))
        .route("/v1/budgets", get(bills::budgets))
        .merge(crate::ui::routes());
    harden(routes, state)
}

/// The layers every route gets, outermost last: metrics, the browser guard,
/// announced body sizes, the token, panics turned into 500s, and the body
/// limit as a body streams in.
fn harden(routes: Router<Arc<AppState>>, state: Arc<AppState>) -> Router {
    routes
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn(refuse_announced_oversize))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(middleware::from_fn_with_state(state.clone(), measure))
        .with_state(state)
}

/// A handler that panicked: logged, answered with a 500, connection kept.
fn panicked(payload: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(panic = %detail, "A request handler panicked.");
    ApiError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: "internal error; see the daemon's log".to_owned(),
        parameter: None,
    }
    .into_response()
}

/// A body announced larger than [`MAX_BODY_BYTES`] is refused before any of
/// it is read; bodies without a length are cut off at the limit as they come.
async fn refuse_announced_oversize(req: Request, next: Next) -> Response {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("body: larger than the limit of {MAX_BODY_BYTES} bytes"),
            parameter: Some("body".to_owned()),
        }
        .into_response();
    }
    next.run(req).await
}

async fn guard(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    match guard::check(req.method(), req.headers(), state.loopback) {
        Ok(()) => next.run(req).await,
        Err(refused) => refused.into_response(),
    }
}

/// The method as a metric label: known methods only, so a client cannot mint
/// label values (and time series) by inventing method names.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

async fn measure(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = method_label(req.method());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(req).await;
    state.metrics.record_request(
        method,
        &route,
        response.status().as_u16(),
        start.elapsed().as_secs_f64(),
    );
    response
}

async fn authorize(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let open = matches!(path, "/healthz" | "/readyz") || crate::ui::is_open(path);
    match &state.token {
        Some(token) if !open && !presents(req.headers(), token) => {
            if crate::ui::is_page(path) && req.method() == axum::http::Method::GET {
                // A person at a browser: to the login form, not a JSON error.
                return (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/login")]).into_response();
            }
            ApiError {
                status: StatusCode::UNAUTHORIZED,
                message: "a bearer token is required: Authorization: Bearer $GPUPLAN_API_TOKEN"
                    .to_owned(),
                parameter: None,
            }
            .into_response()
        }
        _ => next.run(req).await,
    }
}

/// Whether the request carries our token: as `Authorization: Bearer`, or as
/// the dashboard's login cookie.
fn presents(headers: &HeaderMap, token: &Secret) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == crate::ui::TOKEN_COOKIE)
        .map(|(_, value)| value);
    bearer
        .into_iter()
        .chain(cookie)
        .any(|given| token_matches(given.trim(), token))
}

/// Compares a presented token with ours in time independent of where they differ.
pub(crate) fn token_matches(given: &str, token: &Secret) -> bool {
    constant_time_eq(given.as_bytes(), token.expose().as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What the API remembers between requests for one state of the catalog. The
/// catalog changes only when a sync commits, and every commit of data marks a
/// run `ok` in the same transaction, so [`crate::store::Store::catalog_generation`]
/// identifies the state exactly, whichever process wrote it.
#[derive(Default)]
pub struct CatalogCache {
    generation: Option<(i64, Option<i64>)>,
    last_good: BTreeMap<String, chrono::DateTime<Utc>>,
    /// Encoded `/v1/prices` answers by query and by which sources are stale
    /// (staleness changes with time alone).
    prices: HashMap<(String, Vec<String>), Bytes>,
    /// Price records the dashboard asked for, by the same kind of key.
    records: HashMap<(String, Vec<String>), Arc<Vec<catalog::CatalogRecord>>>,
    cached_bytes: usize,
}

/// What one cached record is counted as against the budget.
const RECORD_BYTES: usize = 600;

impl CatalogCache {
    fn clear(&mut self) {
        self.prices.clear();
        self.records.clear();
        self.cached_bytes = 0;
    }

    /// Makes room for `bytes` more, forgetting everything when the budget
    /// would be passed.
    fn reserve(&mut self, bytes: usize) {
        if self.cached_bytes + bytes > CACHE_BUDGET_BYTES {
            self.clear();
        }
        self.cached_bytes += bytes;
    }
}

/// Records the dashboard computed with `compute`, from the cache while the
/// catalog is unchanged. `key` names the question (a query string, say);
/// which sources are stale is added to it, as their records say so.
///
/// # Errors
/// What `compute` fails with.
pub(crate) fn cached_records(
    fresh: &Freshness,
    state: &AppState,
    key: String,
    compute: impl FnOnce() -> Result<Vec<catalog::CatalogRecord>, StoreError>,
) -> Result<Arc<Vec<catalog::CatalogRecord>>, StoreError> {
    let key = (key, fresh.stale_sources());
    if let Some(hit) = lock(&state.cache).records.get(&key) {
        return Ok(hit.clone());
    }
    let records = Arc::new(compute()?);
    let mut cache = lock(&state.cache);
    cache.reserve(records.len() * RECORD_BYTES);
    cache.records.insert(key, records.clone());
    Ok(records)
}

/// The cheapest instance price per (GPU model, price group) now, or `back`
/// before now. Only those records are cached, per catalog state and minute:
/// the overview and each scrape of `/metrics` read the whole catalog once a
/// minute at most.
///
/// # Errors
/// On a store error.
pub(crate) fn cheapest_at(
    store: &dyn crate::store::Store,
    fresh: &Freshness,
    state: &AppState,
    back: Option<chrono::Duration>,
) -> Result<catalog::Cheapest, StoreError> {
    let filter = catalog::PriceFilter {
        scopes: vec![gpuplan_providers::PriceScope::Instance],
        ..catalog::PriceFilter::default()
    };
    let minute = fresh.now.timestamp() / 60;
    let key = format!("cheapest:{minute}:{}", back.map_or(0, |b| b.num_hours()));
    let kept = cached_records(fresh, state, key, || {
        let records = catalog::prices_at(store, fresh, &filter, back.map(|b| fresh.now - b))?;
        Ok(catalog::cheapest(&records).into_values().collect())
    })?;
    Ok(catalog::cheapest(&kept))
}

/// Bytes of cached answers kept at most, so distinct queries cannot grow memory.
const CACHE_BUDGET_BYTES: usize = 16 << 20;

/// Runs a store read off the async runtime, with the catalog's freshness.
pub(crate) async fn read<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&dyn crate::store::Store, Freshness, &AppState) -> Result<T, StoreError>
    + Send
    + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        state.pool.read(|store| {
            let generation = store.catalog_generation()?;
            let last_good = {
                let mut cache = lock(&state.cache);
                if cache.generation != Some(generation) {
                    cache.last_good = store.last_good_syncs()?;
                    cache.clear();
                    cache.generation = Some(generation);
                }
                cache.last_good.clone()
            };
            let fresh = Freshness::new(last_good, state.intervals.clone(), Utc::now());
            f(store, fresh, &state)
        })
    })
    .await
    .map_err(|e| ApiError::internal(&e))?
    .map_err(ApiError::from)
}

fn lock(m: &Mutex<CatalogCache>) -> std::sync::MutexGuard<'_, CatalogCache> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn metrics(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let metrics = state.metrics.clone();
    let text = read(&state, move |store, fresh, state| {
        let solver = state.planning.solver();
        let figures = scrape_figures(store, &fresh, state)?;
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
    fresh: &Freshness,
    state: &AppState,
) -> Result<crate::metrics::Figures, StoreError> {
    let cheapest = cheapest_at(store, fresh, state, None)?
        .into_iter()
        .filter_map(|((model, group), r)| {
            gpuplan_providers::gpu::canonical(&model)
                .map(|m| (m.to_owned(), group, r.usd_per_gpu_hour))
        })
        .collect();
    let mut names: Vec<String> = state.intervals.keys().cloned().collect();
    names.extend(fresh.last_good.keys().cloned());
    names.sort();
    names.dedup();
    let stale = names
        .into_iter()
        .map(|n| {
            let stale = fresh.is_stale(&n);
            (n, stale)
        })
        .collect();
    let budgets = crate::alerts::bills::budget_statuses(store, &state.bills)?
        .into_iter()
        .map(|b| crate::metrics::BudgetFigure {
            name: b.name,
            currency: b.currency,
            amount: b.amount,
            actual: b.actual,
            forecast: b.forecast,
        })
        .collect();
    let commitments = crate::bills::health::commitment_health(store, &state.bills.sources)?;
    Ok(crate::metrics::Figures {
        cheapest,
        stale,
        budgets,
        commitments,
    })
}

/// The query parameters that filter prices, as `/v1/prices` and the
/// dashboard's price table take them.
pub(crate) const PRICE_FILTERS: &[&str] = &[
    "gpu",
    "provider",
    "region",
    "kind",
    "scope",
    "form_factor",
    "max_usd_per_gpu_hour",
];

/// The filter [`PRICE_FILTERS`] describe.
///
/// # Errors
/// A 400 naming the parameter that is malformed.
pub(crate) fn price_filter(p: &Params) -> Result<PriceFilter, ApiError> {
    let scopes = p
        .all("scope")
        .iter()
        .map(|s| {
            s.parse::<PriceScope>()
                .map_err(|e| ApiError::bad_parameter("scope", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let kinds = p
        .all("kind")
        .iter()
        .map(|k| {
            k.parse::<PriceKind>()
                .map_err(|e| ApiError::bad_parameter("kind", e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let form_factors = p
        .all("form_factor")
        .iter()
        .map(|f| {
            f.parse::<gpuplan_providers::FormFactor>()
                .map_err(|e| ApiError::bad_parameter("form_factor", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let max = p.parsed::<f64>("max_usd_per_gpu_hour", "a price in USD")?;
    if max.is_some_and(|m| !m.is_finite() || m < 0.0) {
        return Err(ApiError::bad_parameter(
            "max_usd_per_gpu_hour",
            "must be a number >= 0",
        ));
    }
    Ok(PriceFilter {
        gpus: p.all("gpu"),
        providers: p.all("provider"),
        regions: p.all("region"),
        kinds,
        scopes,
        form_factors,
        max_usd_per_gpu_hour: max,
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
    let p = Params::parse(uri.query(), &[PRICE_FILTERS, &["currency"]].concat())?;
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
    let body = read(&state, move |store, fresh, state| {
        let key = (query, fresh.stale_sources());
        if let Some(hit) = lock(&state.cache).prices.get(&key) {
            return Ok(hit.clone());
        }
        let mut records = catalog::prices(store, &fresh, &filter)?;
        if let Some(currency) = &currency {
            catalog::convert(&mut records, currency);
        }
        let body = Bytes::from(
            serde_json::to_vec(&records).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        );
        let mut cache = lock(&state.cache);
        cache.reserve(body.len());
        cache.prices.insert(key, body.clone());
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
    let since = catalog::parse_since(&since_text, Utc::now())
        .map_err(|e| ApiError::bad_parameter("since", e))?;
    let query = SpotQuery {
        instance_type,
        provider: p.one("provider")?,
        region: p.one("region")?,
        zone: p.one("zone")?,
        since,
        max_observations: Some(catalog::MAX_SPOT_OBSERVATIONS),
    };
    let history = read(&state, move |store, fresh, _| {
        catalog::spot_history(store, &query, &fresh)
    })
    .await
    .map_err(|e| match e.status {
        // The window holds too many observations: `since` is what to narrow.
        StatusCode::BAD_REQUEST => ApiError::bad_parameter("since", e.message),
        _ => e,
    })?;
    Ok(Json(history).into_response())
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
    "spot_window",
    "restart_hours",
    "checkpoint_hours",
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
    let doc: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_parameter("body", format!("not JSON: {e}")))?;
    let mut overrides = Overrides {
        time_limit,
        ..Overrides::default()
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
    };
    match state.planning.plan(request).await {
        Ok(planned) => {
            Ok(Json(planned.to_json().map_err(|e| ApiError::internal(&e))?).into_response())
        }
        Err(PlanError::Invalid(e)) => Err(field(e)),
        Err(PlanError::Busy(busy)) => {
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
        Err(PlanError::Solve(e)) => Err(ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            message: e.to_string(),
            parameter: None,
        }),
        Err(PlanError::Store(e)) => Err(e.into()),
        Err(e @ PlanError::Internal(_)) => Err(ApiError::internal(&e)),
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
    };
    Ok((problem.name, input))
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
    let id: i64 = id
        .parse()
        .map_err(|_| ApiError::bad_parameter("id", format!("`{id}` is not a plan id")))?;
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

fn not_found(message: &str) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        message: message.to_owned(),
        parameter: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_and_the_connection_survives() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 1).unwrap(),
        );
        let config = crate::config::Config::default();
        let state = Arc::new(AppState {
            pool: pool.clone(),
            cluster: crate::cluster::Cluster::new(pool.clone()),
            metrics: Arc::default(),
            triggers: BTreeMap::new(),
            intervals: BTreeMap::new(),
            token: None,
            loopback: true,
            cache: Mutex::default(),
            planning: Arc::new(PlanService::new(
                Some(pool),
                &config.planner,
                BTreeMap::new(),
            )),
            fx: config.fx.clone(),
            rules: Vec::new(),
            bill_grace: BTreeMap::new(),
            bills: crate::alerts::bills::BillAlerts::default(),
        });
        let routes = Router::new()
            .route(
                "/boom",
                get(|| async {
                    if true {
                        panic!("deliberate");
                    }
                    "unreachable"
                }),
            )
            .route("/fine", get(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = harden(routes, state);
        tokio::spawn(async move { axum::serve(listener, app).await });
        // One connection for both requests: the panic must not drop it.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let boom = http.get(format!("{base}/boom")).send().await.unwrap();
        assert_eq!(boom.status().as_u16(), 500);
        assert!(boom.text().await.unwrap().contains("internal error"));
        let fine = http.get(format!("{base}/fine")).send().await.unwrap();
        assert_eq!(fine.status().as_u16(), 200);
    }

    #[test]
    fn tokens_compare_equal_only_when_identical() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert!(presents(&h, &Secret::new("s3cret")));
        assert!(!presents(&h, &Secret::new("other")));
        h.insert(header::AUTHORIZATION, "Basic s3cret".parse().unwrap());
        assert!(!presents(&h, &Secret::new("s3cret")));
        h.insert(
            header::COOKIE,
            "theme=dark; gpuplan_token=s3cret".parse().unwrap(),
        );
        assert!(presents(&h, &Secret::new("s3cret")));
        assert!(!presents(&h, &Secret::new("other")));
    }
}
