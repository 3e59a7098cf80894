//! The error answer of the API and the dashboard: a status and a JSON body
//! naming what was wrong.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;

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

    pub(crate) fn internal(err: &dyn std::fmt::Display) -> Self {
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
