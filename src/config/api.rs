//! `[api]`: where the daemon listens.

use super::*;

pub(super) const DEFAULT_LISTEN: &str = "127.0.0.1:8321";

#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Where `gpuplan serve` listens. Beyond loopback it requires a token.
    pub listen: std::net::SocketAddr,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApi {
    listen: Option<String>,
}

/// `[api]`.
pub(super) fn validate(raw: RawApi, c: &mut Checker) -> ApiConfig {
    let listen_text = raw.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let listen = listen_text.parse().unwrap_or_else(|_| {
        c.fail(
            "api.listen",
            format!("`{listen_text}` is not an address like \"127.0.0.1:8321\""),
        );
        std::net::SocketAddr::from(([127, 0, 0, 1], 8321))
    });

    ApiConfig { listen }
}
