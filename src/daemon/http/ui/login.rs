//! The browser's login beyond loopback: a form takes the API token and the
//! script posts it as JSON (the same origin and content-type rules as every
//! write); a right token comes back as an HttpOnly, SameSite=Strict cookie
//! that the token check accepts like `Authorization: Bearer`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout;
use crate::daemon::http::error::ApiError;
use crate::daemon::http::state::AppState;

/// The cookie that carries the token.
pub const TOKEN_COOKIE: &str = "gpuplan_token";

/// The most a login body may hold.
const MAX_TOKEN_BYTES: usize = 4096;

pub async fn page() -> Response {
    let body = html! {
        h1 { "Sign in" }
        p { "This daemon listens beyond loopback, so its pages need the API token ("
            code { "GPUPLAN_API_TOKEN" } ")." }
        form #login-form method="post" action="/ui/login" {
            label { "Token " input type="password" name="token" autocomplete="current-password" required; }
            button type="submit" { "Sign in" }
            p #login-status role="status" {}
        }
        noscript { p { "Signing in needs JavaScript." } }
    };
    layout("Sign in", "", &body)
}

/// `POST /ui/login` with `{"token": "…"}`.
pub async fn submit(State(state): State<Arc<AppState>>, body: axum::body::Bytes) -> Response {
    let refuse = |status, message: &str| {
        ApiError {
            status,
            message: message.to_owned(),
            parameter: Some("token".to_owned()),
        }
        .into_response()
    };
    let Some(expected) = &state.token else {
        return refuse(
            StatusCode::NOT_FOUND,
            "token: this daemon needs no token (it listens on loopback)",
        );
    };
    if body.len() > MAX_TOKEN_BYTES {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "token: too long");
    }
    let given = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("token").and_then(|t| t.as_str()).map(str::to_owned));
    let Some(given) = given else {
        return refuse(StatusCode::BAD_REQUEST, "token: send {\"token\": \"…\"}");
    };
    if !crate::daemon::http::state::token_matches(given.trim(), expected) {
        return refuse(StatusCode::UNAUTHORIZED, "token: not the daemon's token");
    }
    let cookie = format!(
        "{TOKEN_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        expected.expose()
    );
    let cookie_safe = expected
        .expose()
        .chars()
        .all(|c| c.is_ascii_graphic() && !matches!(c, ';' | ',' | '"' | '\\'));
    let value = HeaderValue::from_str(&cookie).ok().filter(|_| cookie_safe);
    let Some(value) = value else {
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "token: GPUPLAN_API_TOKEN holds characters a cookie cannot carry; use letters, digits, '-', '_' and '.'",
        );
    };
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, value);
    response
}
