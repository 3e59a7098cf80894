//! `[providers.tencent]`: read and checked here, into a [`TencentConfig`].

use serde::Deserialize;

use super::{DEFAULT_ENDPOINT, TencentConfig};
use crate::config::Problems;
use crate::http::RetryPolicy;
use crate::snapshot::Currency;

/// The table as written. `enabled` and `schedule` are the daemon's.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    site: Option<String>,
    regions: Option<Vec<String>>,
    endpoint: Option<String>,
}

impl Section {
    /// The provider's config, its site's currency taken from `rates` (the
    /// config's `[fx]`), with each problem noted in `p`. The keys come from
    /// the environment when it is built.
    pub fn config(
        &self,
        retry: RetryPolicy,
        rates: &dyn Fn(&str) -> Option<Currency>,
        p: &mut Problems,
    ) -> TencentConfig {
        let currency = p.site_currency("site", self.site.as_deref(), rates);
        let regions = p.regions("regions", self.regions.clone());
        // The API has no "every region" call: each one is asked by name.
        if self.enabled == Some(true) && regions.is_empty() {
            p.fail(
                "regions",
                "list the regions to read (like [\"ap-singapore\", \"na-siliconvalley\"])",
            );
        }
        TencentConfig {
            endpoint: p.endpoint("endpoint", self.endpoint.clone(), DEFAULT_ENDPOINT),
            regions,
            secret_id: None,
            secret_key: None,
            currency,
            retry,
        }
    }
}
