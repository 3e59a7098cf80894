//! `[providers.oci]`: read and checked here, into an [`OciConfig`].

use serde::Deserialize;

use super::OciConfig;
use crate::config::Problems;
use crate::http::RetryPolicy;

pub const DEFAULT_ENDPOINT: &str = "https://apexapps.oracle.com";

/// The table as written. `enabled` and `schedule` are the daemon's.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    endpoint: Option<String>,
}

impl Section {
    /// The provider's config, with each problem noted in `p`.
    pub fn config(&self, retry: RetryPolicy, p: &mut Problems) -> OciConfig {
        OciConfig {
            endpoint: p.endpoint("endpoint", self.endpoint.clone(), DEFAULT_ENDPOINT),
            retry,
        }
    }
}
