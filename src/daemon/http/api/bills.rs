//! `GET /v1/bills`, `/v1/usage`, `/v1/spend`, `/v1/commitments` and
//! `/v1/coverage`: the bills' answers with the CLI's parameters, each
//! bounded by a window and a row limit.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use crate::bills::query::{self, QueryError};
use crate::bills::{allocation, load};
use crate::daemon::http::error::ApiError;
use crate::daemon::http::params::Params;
use crate::daemon::http::state::{AppState, read};
use crate::store::{Store, StoreError};

const WINDOW: &[&str] = &["since", "until", "provider", "limit"];

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        Self::bad_parameter(&e.parameter, e.message)
    }
}

fn params(p: &Params) -> Result<query::Params, ApiError> {
    let gpu_only = match p.one("gpu_only")?.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(v) => {
            return Err(ApiError::bad_parameter(
                "gpu_only",
                format!("`{v}` is not true or false"),
            ));
        }
    };
    Ok(query::Params {
        since: p.one("since")?,
        until: p.one("until")?,
        by: p.one("by")?,
        group: p.all("group"),
        teams: p.all("team"),
        providers: p.all("provider"),
        gpus: p.all("gpu"),
        price_kinds: p.all("price_kind"),
        gpu_only,
        limit: p.parsed::<usize>("limit", "a whole number")?,
    })
}

pub(super) async fn bills(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let p = Params::parse(uri.query(), &["source"])?;
    let source = p.one("source")?;
    let loads = read(&state, move |store, _, _| {
        store.bill_loads(source.as_deref())
    })
    .await?;
    Ok(Json(load::status_rows(loads, &state.bill_grace, Utc::now())).into_response())
}

pub(super) async fn usage(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let known = [WINDOW, &["by", "group", "team", "gpu", "price_kind"]].concat();
    let p = params(&Params::parse(uri.query(), &known)?)?;
    let q = query::usage(&p, Utc::now())?;
    let rows = read(&state, move |store, _, _| store.bill_usage(&q)).await?;
    Ok(Json(rows).into_response())
}

pub(super) async fn spend(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let known = [WINDOW, &["by", "group", "team", "gpu_only"]].concat();
    let p = params(&Params::parse(uri.query(), &known)?)?;
    let q = query::spend(&p, Utc::now())?;
    let proportional = state.bills.proportional;
    let rows = read(&state, move |store, _, _| {
        allocation::spend(store, &q, proportional)
    })
    .await?;
    Ok(Json(rows).into_response())
}

pub(super) async fn budgets(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    Params::parse(uri.query(), &[])?;
    let over_bills = state.bills.clone();
    let rows = read(&state, move |store, _, _| {
        crate::bills::budgets::budget_statuses(store, &over_bills)
    })
    .await?;
    Ok(Json(rows).into_response())
}

pub(super) async fn commitments(
    state: State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    windowed(state, uri, |store, providers, since, until| {
        store.bill_commitments(providers, since, until)
    })
    .await
}

pub(super) async fn coverage(
    state: State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    windowed(state, uri, |store, providers, since, until| {
        store.bill_coverage(providers, since, until)
    })
    .await
}

/// A store read over providers and `[since, until)`.
type WindowRead<T> = fn(&dyn Store, &[String], i64, i64) -> Result<T, StoreError>;

/// An answer over providers and a window.
async fn windowed<T: serde::Serialize + Send + 'static>(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
    answer: WindowRead<T>,
) -> Result<Response, ApiError> {
    let p = params(&Params::parse(uri.query(), WINDOW)?)?;
    let (providers, since, until) = query::window_of(&p, Utc::now())?;
    let rows = read(&state, move |store, _, _| {
        answer(store, &providers, since, until)
    })
    .await?;
    Ok(Json(rows).into_response())
}
