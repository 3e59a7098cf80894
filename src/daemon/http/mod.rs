//! The daemon's HTTP server: the API's and the dashboard's routes together,
//! behind the layers every request passes. Every request is treated as
//! possibly hostile: [`guard`] keeps browser pages out, bodies are bounded,
//! the token is compared in constant time when the daemon listens beyond
//! loopback, every request is measured, and a panicking handler answers 500.

pub mod api;
pub mod error;
mod guard;
mod history;
pub mod params;
pub mod state;
pub mod ui;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use gpuplan_providers::secret::Secret;

use error::ApiError;
use state::{AppState, MAX_BODY_BYTES, token_matches};

/// Every route of the daemon: the API's and the dashboard's, hardened.
pub fn router(state: Arc<AppState>) -> Router {
    harden(
        crate::daemon::http::api::routes().merge(crate::daemon::http::ui::routes()),
        state,
    )
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
    let open = matches!(path, "/healthz" | "/readyz") || crate::daemon::http::ui::is_open(path);
    match &state.token {
        Some(token) if !open && !presents(req.headers(), token) => {
            if crate::daemon::http::ui::is_page(path) && req.method() == axum::http::Method::GET {
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
        .find(|(name, _)| *name == crate::daemon::http::ui::TOKEN_COOKIE)
        .map(|(_, value)| value);
    bearer
        .into_iter()
        .chain(cookie)
        .any(|given| token_matches(given.trim(), token))
}

#[cfg(test)]
mod tests {
    use axum::routing::get;

    use super::*;
    use crate::store::Pool;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_and_the_connection_survives() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 1).unwrap(),
        );
        let state = Arc::new(AppState::for_tests(pool));
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
        assert!(token_matches("abc", &Secret::new("abc")));
        assert!(!token_matches("abc", &Secret::new("abd")));
        assert!(!token_matches("abc", &Secret::new("abcd")));
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
