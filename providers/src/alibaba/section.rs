//! `[providers.alibaba]`: read and checked here, into an [`AlibabaConfig`].

use serde::Deserialize;

use super::AlibabaConfig;
use crate::config::Problems;
use crate::http::RetryPolicy;
use crate::snapshot::Currency;

/// A full sync of 20 regions with about 40 GPU types each is about 20 x 40 x 5
/// calls (four terms and one spot page per type): 4,000, with room to spare.
pub const DEFAULT_MAX_REQUESTS: u32 = 10_000;

/// The table as written. `enabled` and `schedule` are the daemon's.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    site: Option<String>,
    regions: Option<Vec<String>>,
    instance_types: Option<Vec<String>>,
    endpoint: Option<String>,
    spot_history_days: Option<i64>,
    concurrency: Option<i64>,
    max_requests: Option<i64>,
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
    ) -> AlibabaConfig {
        let currency = p.site_currency("site", self.site.as_deref(), rates);
        AlibabaConfig {
            endpoint: self
                .endpoint
                .clone()
                .map(|v| p.endpoint("endpoint", Some(v), "")),
            regions: p.regions("regions", self.regions.clone()),
            instance_types: p.instance_types("instance_types", self.instance_types.clone()),
            access_key_id: None,
            access_key_secret: None,
            currency,
            spot_history_days: p.bounded("spot_history_days", self.spot_history_days, 7, 1..=30),
            concurrency: p.bounded("concurrency", self.concurrency, 4, 1..=16) as usize,
            max_requests: p.bounded(
                "max_requests",
                self.max_requests,
                DEFAULT_MAX_REQUESTS,
                1..=1_000_000,
            ),
            retry,
        }
    }
}
