//! Where alerts go: the channels of `[alerts.channels]`, as validated.

use gpuplan_providers::secret::Secret;

#[derive(Debug, Clone, PartialEq)]
pub enum ChannelConfig {
    /// Generic webhook: JSON body, `Idempotency-Key` header, optional HMAC-SHA256
    /// signature with the secret read from the environment variable named here.
    Webhook {
        url: ChannelUrl,
        secret_env: Option<String>,
    },
    /// Slack incoming webhook.
    Slack { url: ChannelUrl },
    /// The daemon's log.
    Log,
}

/// Where a channel's URL comes from. Slack and webhook URLs carry their
/// credential in the path, so they are secrets either way.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelUrl {
    /// `url` in the file.
    Inline(Secret),
    /// `url_env`: the environment variable holding it, read at start.
    Env(String),
}

/// An absolute http(s) URL with a host and no whitespace.
#[must_use]
pub fn is_http_url(u: &str) -> bool {
    ["http://", "https://"].iter().any(|scheme| {
        u.strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
    }) && !u.contains(char::is_whitespace)
}
