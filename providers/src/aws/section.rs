//! `[providers.aws]`: read and checked here, into an [`AwsConfig`].

use serde::Deserialize;

use super::{AwsConfig, Credentials, Sources};
use crate::config::Problems;
use crate::http::RetryPolicy;

pub const DEFAULT_BULK_ENDPOINT: &str = "https://pricing.us-east-1.amazonaws.com";
pub const DEFAULT_SPOT_ADVISOR_URL: &str =
    "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json";
/// Each region's offer file is hundreds of MB, so the default is two regions, not all.
pub const DEFAULT_REGIONS: [&str; 2] = ["us-east-1", "us-west-2"];
/// A day and a week: each duration and count is one request per type and region.
pub const DEFAULT_CAPACITY_BLOCK_HOURS: [u32; 2] = [24, 168];
pub const DEFAULT_CAPACITY_BLOCK_COUNTS: [u32; 2] = [1, 4];

/// The table as written. `enabled`, `schedule` and `spot_schedule` are the
/// daemon's (when the source runs); the rest configures the provider.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    pub spot_schedule: Option<String>,
    regions: Option<Vec<String>>,
    instance_types: Option<Vec<String>>,
    credentials: Option<String>,
    sources: Option<Vec<String>>,
    bulk_endpoint: Option<String>,
    spot_advisor_url: Option<String>,
    pricing_endpoint: Option<String>,
    ec2_endpoint: Option<String>,
    spot_history_days: Option<i64>,
    placement_capacity: Option<i64>,
    capacity_block_hours: Option<Vec<i64>>,
    capacity_block_counts: Option<Vec<i64>>,
}

impl Section {
    /// The provider's config, with each problem noted in `p`.
    pub fn config(&self, retry: RetryPolicy, p: &mut Problems) -> AwsConfig {
        let regions = p.regions(
            "regions",
            Some(
                self.regions
                    .clone()
                    .unwrap_or_else(|| DEFAULT_REGIONS.map(str::to_owned).to_vec()),
            ),
        );
        AwsConfig {
            regions,
            bulk_endpoint: p.endpoint(
                "bulk_endpoint",
                self.bulk_endpoint.clone(),
                DEFAULT_BULK_ENDPOINT,
            ),
            spot_advisor_url: p.endpoint(
                "spot_advisor_url",
                self.spot_advisor_url.clone(),
                DEFAULT_SPOT_ADVISOR_URL,
            ),
            instance_types: p.instance_types("instance_types", self.instance_types.clone()),
            credentials: match self.credentials.as_deref().unwrap_or("auto") {
                "auto" => Credentials::Auto,
                "chain" => Credentials::Chain,
                "none" => Credentials::None,
                other => {
                    p.fail(
                        "credentials",
                        format!("`{other}` is not one of \"auto\", \"chain\", \"none\""),
                    );
                    Credentials::Auto
                }
            },
            sources: sources(self.sources.as_deref(), p),
            pricing_endpoint: self
                .pricing_endpoint
                .clone()
                .map(|v| p.endpoint("pricing_endpoint", Some(v), "")),
            ec2_endpoint: self
                .ec2_endpoint
                .clone()
                .map(|v| p.endpoint("ec2_endpoint", Some(v), "")),
            spot_history_days: p.bounded("spot_history_days", self.spot_history_days, 30, 1..=90),
            placement_capacity: p.bounded(
                "placement_capacity",
                self.placement_capacity,
                1,
                1..=100_000,
            ),
            capacity_block_hours: list(
                p,
                "capacity_block_hours",
                self.capacity_block_hours.as_deref(),
                &DEFAULT_CAPACITY_BLOCK_HOURS,
                "24 to 336 in steps of 24, or 504 to 4368 in steps of 168",
                |h| {
                    ((24..=336).contains(&h) && h % 24 == 0)
                        || ((504..=4368).contains(&h) && h % 168 == 0)
                },
            ),
            capacity_block_counts: list(
                p,
                "capacity_block_counts",
                self.capacity_block_counts.as_deref(),
                &DEFAULT_CAPACITY_BLOCK_COUNTS,
                "1 to 64",
                |n| (1..=64).contains(&n),
            ),
            retry,
        }
    }
}

/// A list of whole numbers that `allowed` accepts (the default when not
/// given); each refused one is a problem naming its place and what is allowed.
fn list(
    p: &mut Problems,
    key: &str,
    value: Option<&[i64]>,
    default: &[u32],
    allowed_text: &str,
    allowed: impl Fn(i64) -> bool,
) -> Vec<u32> {
    let Some(values) = value else {
        return default.to_vec();
    };
    if values.is_empty() {
        p.fail(
            key,
            format!("is empty; give at least one of {allowed_text}"),
        );
    }
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        match u32::try_from(*v) {
            Ok(n) if allowed(*v) => {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
            _ => p.fail(
                format!("{key}[{i}]"),
                format!("`{v}` is not {allowed_text}"),
            ),
        }
    }
    out
}

fn sources(value: Option<&[String]>, p: &mut Problems) -> Sources {
    let Some(names) = value else {
        return Sources::default();
    };
    let mut sources = Sources {
        spot_history: false,
        offerings: false,
        spot_advisor: false,
        placement_scores: false,
        capacity_blocks: false,
    };
    for (i, name) in names.iter().enumerate() {
        let flag = match name.as_str() {
            "spot_history" => &mut sources.spot_history,
            "offerings" => &mut sources.offerings,
            "spot_advisor" => &mut sources.spot_advisor,
            "placement_scores" => &mut sources.placement_scores,
            "capacity_blocks" => &mut sources.capacity_blocks,
            other => {
                p.fail(
                    format!("sources[{i}]"),
                    format!("`{other}` is not one of \"spot_history\", \"offerings\", \"spot_advisor\", \"placement_scores\", \"capacity_blocks\""),
                );
                continue;
            }
        };
        *flag = true;
    }
    sources
}
