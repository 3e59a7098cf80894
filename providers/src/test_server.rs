//! A local HTTP server for adapter tests: answers every request with what the
//! test's handler returns for its path, query and headers, and records requests.

#[cfg(feature = "alibaba")]
pub mod alibaba;
pub mod aws;
#[cfg(feature = "nebius")]
pub mod nebius;
#[cfg(feature = "tencent")]
pub mod tencent;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Path and query, e.g. `/api/retail/prices?$skip=1000`.
    pub uri: String,
    pub headers: HeaderMap,
    pub body: String,
}

pub struct FixtureServer {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FixtureServer {
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

type Handler = dyn Fn(&Seen, &str, usize) -> Response + Send + Sync;

/// Starts a server; `handler(request, base_url, n)` answers the n-th request (0-based).
pub async fn serve(
    handler: impl Fn(&Seen, &str, usize) -> Response + Send + Sync + 'static,
) -> FixtureServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let handler: Arc<Handler> = Arc::new(handler);
    let (log, base_for_app) = (seen.clone(), base.clone());
    let app = Router::new().fallback(move |req: Request<Body>| {
        let (handler, log, base) = (handler.clone(), log.clone(), base_for_app.clone());
        async move {
            let uri = req.uri().to_string();
            let headers = req.headers().clone();
            let body = axum::body::to_bytes(req.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            let request = Seen {
                uri,
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            };
            let n = {
                let mut log = log.lock().unwrap();
                log.push(request.clone());
                log.len() - 1
            };
            handler(&request, &base, n)
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    FixtureServer { base, seen }
}

/// A JSON body with `{{BASE}}` replaced by the server's base URL.
pub fn json(body: &str, base: &str) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        body.replace("{{BASE}}", base),
    )
        .into_response()
}

/// A retry policy that keeps adapter tests fast: three tries, millisecond backoff.
#[must_use]
pub fn fast_retry() -> crate::http::RetryPolicy {
    crate::http::RetryPolicy {
        max_attempts: 3,
        base_delay: std::time::Duration::from_millis(1),
        max_delay: std::time::Duration::from_millis(5),
        request_timeout: std::time::Duration::from_secs(5),
        max_retry_after: std::time::Duration::from_secs(2),
    }
}

pub fn status(code: u16, body: &str) -> Response {
    (StatusCode::from_u16(code).unwrap(), body.to_owned()).into_response()
}

/// A JSON body with any status: APIs that answer errors as JSON.
pub fn status_json(code: u16, body: &str) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        [("content-type", "application/json")],
        body.to_owned(),
    )
        .into_response()
}
