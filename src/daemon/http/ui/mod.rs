//! The dashboard: server-rendered pages over the same store reads as the JSON
//! API, on the same router and behind the same guards (Host, origin, content
//! type, token). Pages read without JavaScript; the charts and the plan form
//! need it. Every page is served with a Content-Security-Policy that allows
//! only the daemon's own origin and no inline script: chart data travels in
//! JSON data islands that the bundled script reads.

mod alerts;
mod assets;
mod bills;
mod jobs;
mod login;
mod overview;
mod plans;
mod prices;
mod spot;

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::catalog::age;
use crate::daemon::http::error::ApiError;
use crate::daemon::http::state::AppState;

pub use assets::{ASSETS, Asset};
pub use login::TOKEN_COOKIE;

/// Only the daemon's own origin, and no inline script or style: a provider
/// string that slipped past escaping still could not run.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// The dashboard's routes, for the API router to merge.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(overview::page))
        .route("/ui/prices", get(prices::page))
        .route("/ui/spot", get(spot::page))
        .route("/ui/plans/latest", get(plans::latest))
        .route("/ui/plans/{id}", get(plans::by_id))
        .route("/ui/jobs", get(jobs::page))
        .route("/ui/alerts", get(alerts::page))
        .route("/ui/spend", get(bills::spend))
        .route("/ui/usage", get(bills::usage))
        .route("/ui/commitments", get(bills::commitments))
        .route("/ui/login", get(login::page).post(login::submit))
        .route("/ui/assets/{name}", get(assets::serve))
        .layer(middleware::from_fn(secure_headers))
}

/// Paths a browser reaches without the token: the login page and the files it
/// needs.
#[must_use]
pub fn is_open(path: &str) -> bool {
    path == "/ui/login" || path.starts_with("/ui/assets/")
}

/// Whether `path` is a page, which a browser without the token is sent to
/// the login page from (an API client gets a 401 instead).
#[must_use]
pub fn is_page(path: &str) -> bool {
    path == "/" || (path.starts_with("/ui/") && !is_open(path))
}

async fn secure_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// A whole page: the navigation, `body`, and the bundled script and styles.
fn layout(title: &str, current: &str, body: &Markup) -> Response {
    let nav = [
        ("/", "Overview"),
        ("/ui/prices", "Prices"),
        ("/ui/spot", "Spot history"),
        ("/ui/plans/latest", "Plans"),
        ("/ui/jobs", "Jobs"),
        ("/ui/spend", "Spend"),
        ("/ui/usage", "Usage"),
        ("/ui/commitments", "Commitments"),
        ("/ui/alerts", "Alerts"),
    ];
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · gpuplan" }
                // No favicon request: the browser would log its 404.
                link rel="icon" href="data:,";
                link rel="stylesheet" href=(assets::href("uPlot.min.css"));
                link rel="stylesheet" href=(assets::href("app.css"));
                script defer src=(assets::href("uPlot.iife.min.js")) {}
                script defer src=(assets::href("app.js")) {}
            }
            body {
                header {
                    a.brand href="/" { "gpuplan" }
                    nav {
                        @for (href, label) in nav {
                            a href=(href) class=[(current == href).then_some("current")] { (label) }
                        }
                    }
                }
                main { (body) }
            }
        }
    };
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// A page for an error, with the status of the API's answer.
fn error_page(err: &ApiError) -> Response {
    let mut response = layout(
        "Error",
        "",
        &html! {
            h1 { "Cannot show this page" }
            p.error { (err.message) }
            @if let Some(p) = &err.parameter { p { "Parameter: " code { (p) } } }
        },
    );
    *response.status_mut() = err.status;
    response
}

/// `value` as JSON for a data island: `<` is escaped so that no string in it
/// can close the `<script>` element.
fn data_island(id: &str, value: &serde_json::Value) -> Markup {
    let json = value.to_string().replace('<', "\\u003c");
    html! { script type="application/json" id=(id) { (PreEscaped(json)) } }
}

/// A price for display: four decimals, or a dash with its reason.
fn money(value: Option<f64>, missing: &str) -> Markup {
    match value {
        Some(v) if v.is_finite() => html! { (format!("{v:.4}")) },
        _ => html! { span.missing title=(missing) { "—" } },
    }
}

/// The answer for a page that could not be read.
impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        error_page(&self.0)
    }
}

/// An [`ApiError`] answered as a page.
pub struct PageError(ApiError);

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

fn not_found(message: String) -> PageError {
    PageError(ApiError {
        status: StatusCode::NOT_FOUND,
        message,
        parameter: None,
    })
}
