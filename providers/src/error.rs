//! The one error type providers return. Variants are what a caller can act on;
//! every one names the provider and the URL or file involved.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    #[error("{provider}: credentials rejected or missing at {url}: {detail}")]
    Auth {
        provider: String,
        url: String,
        detail: String,
    },
    #[error("{provider}: rate limited by {url}{}", retry_after.map(|d| format!(" (retry after {}s)", d.as_secs())).unwrap_or_default())]
    RateLimited {
        provider: String,
        url: String,
        retry_after: Option<Duration>,
    },
    #[error("{provider}: {url} answered HTTP {status}: {body}")]
    Http {
        provider: String,
        url: String,
        status: u16,
        body: String,
    },
    #[error("{provider}: request to {url} failed: {detail}")]
    Transport {
        provider: String,
        url: String,
        detail: String,
    },
    /// A gRPC call's non-OK status (`code` as gRPC spells it, `UNAVAILABLE`).
    #[error("{provider}: {url} answered gRPC {code}: {message}")]
    Grpc {
        provider: String,
        url: String,
        code: String,
        message: String,
    },
    #[error("{provider}: cannot decode {location}: {detail}")]
    Decode {
        provider: String,
        location: String,
        detail: String,
    },
    #[error("{provider}: {path}: {detail}")]
    Io {
        provider: String,
        path: String,
        detail: String,
    },
    /// A sync would take more requests than the source's budget allows.
    #[error("{provider}: the budget of {limit} requests per sync is spent before {call}; {hint}")]
    Budget {
        provider: String,
        limit: u32,
        call: String,
        hint: String,
    },
    #[error("{provider}: {}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Sheet {
        provider: String,
        errors: Vec<SheetRowError>,
    },
}

/// One bad cell of a price sheet: enough to find and fix it in an editor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: field `{field}`: {message}")]
pub struct SheetRowError {
    pub file: String,
    pub line: u64,
    pub field: String,
    pub message: String,
}

impl ProviderError {
    /// Whether trying again later can help (the scheduler backs off on these).
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::RateLimited { .. } | Self::Transport { .. } => true,
            Self::Http { status, .. } => *status >= 500,
            Self::Grpc { code, .. } => matches!(
                code.as_str(),
                "UNAVAILABLE"
                    | "RESOURCE_EXHAUSTED"
                    | "DEADLINE_EXCEEDED"
                    | "ABORTED"
                    | "CANCELLED"
            ),
            Self::Auth { .. }
            | Self::Decode { .. }
            | Self::Io { .. }
            | Self::Sheet { .. }
            | Self::Budget { .. } => false,
        }
    }

    /// An `Auth` error with a hint of what to check appended (the variable
    /// holding the key); other errors unchanged.
    #[must_use]
    pub fn with_auth_hint(self, hint: &str) -> Self {
        match self {
            Self::Auth {
                provider,
                url,
                detail,
            } => Self::Auth {
                provider,
                url,
                detail: format!("{detail} (check {hint})"),
            },
            other => other,
        }
    }

    /// The server's requested wait, when it gave one.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
