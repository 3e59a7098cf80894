//! `[providers.gcp]`: read and checked here, into a [`GcpConfig`]. The API
//! key and token come from the environment when the provider is built.

use serde::Deserialize;

use super::GcpConfig;
use crate::config::Problems;
use crate::http::RetryPolicy;

pub const DEFAULT_BILLING_ENDPOINT: &str = "https://cloudbilling.googleapis.com";
pub const DEFAULT_COMPUTE_ENDPOINT: &str = "https://compute.googleapis.com";

/// The table as written. `enabled` and `schedule` are the daemon's.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    billing_endpoint: Option<String>,
    compute_endpoint: Option<String>,
    project: Option<String>,
    regions: Option<Vec<String>>,
}

impl Section {
    /// The provider's config without its keys, with each problem noted in `p`.
    pub fn config(&self, retry: RetryPolicy, p: &mut Problems) -> GcpConfig {
        GcpConfig {
            billing_endpoint: p.endpoint(
                "billing_endpoint",
                self.billing_endpoint.clone(),
                DEFAULT_BILLING_ENDPOINT,
            ),
            compute_endpoint: p.endpoint(
                "compute_endpoint",
                self.compute_endpoint.clone(),
                DEFAULT_COMPUTE_ENDPOINT,
            ),
            project: self.project.clone().filter(|p| !p.trim().is_empty()),
            regions: p.regions("regions", self.regions.clone()),
            api_key: None,
            token: None,
            retry,
        }
    }
}
