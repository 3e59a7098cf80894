//! `[providers.azure]`: read and checked here, into an [`AzureConfig`].

use serde::Deserialize;

use super::AzureConfig;
use crate::config::Problems;
use crate::http::RetryPolicy;

pub const DEFAULT_ENDPOINT: &str = "https://prices.azure.com";

/// The table as written. `enabled` and `schedule` are the daemon's.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    endpoint: Option<String>,
    regions: Option<Vec<String>>,
    concurrency: Option<i64>,
}

impl Section {
    /// The provider's config, with each problem noted in `p`.
    pub fn config(&self, retry: RetryPolicy, p: &mut Problems) -> AzureConfig {
        AzureConfig {
            endpoint: p.endpoint("endpoint", self.endpoint.clone(), DEFAULT_ENDPOINT),
            regions: p.regions("regions", self.regions.clone()),
            concurrency: p.bounded("concurrency", self.concurrency, 4, 1..=32) as usize,
            retry,
        }
    }
}
