//! AWS: on-demand and reserved prices, spot history, availability and GPU facts.
//!
//! Two ways in, chosen per sync by [`Credentials`]:
//! - with credentials ([`sdk`]): the Price List Query API and EC2's describe
//!   calls, through the official SDK and the standard credential chain;
//! - without ([`public`]): the public bulk price files.
//!
//! Both turn price-list products into records through the same code
//! ([`offer::Collector`]), so a SKU gives the same records either way. The
//! public spot advisor JSON (interruption bucket and savings per type and
//! region) is read in both.

mod capacity_blocks;
pub mod gpus;
mod offer;
mod public;
mod sdk;
mod section;

pub use section::Section;

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use serde::Deserialize;

use crate::http::{HttpClient, RetryPolicy};
use crate::secret::Secret;
use crate::snapshot::{AvailabilityRecord, AvailabilitySignal, Snapshot};
use crate::{FetchContext, Provider, ProviderError, RegionScope, Scope};

pub use offer::parse as parse_offer_file;

const PROVIDER: &str = "aws";

/// Where credentials come from.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// The standard chain (environment, profile, SSO, container or instance
    /// role); when it finds none, the public files.
    Auto,
    /// The standard chain; finding none fails the sync.
    Chain,
    /// Never look: the public files only.
    None,
    /// Fixed keys, for tests and embedding; never read from the config file.
    Static {
        access_key_id: String,
        secret_access_key: Secret,
    },
}

/// Which optional sources a sync reads. Prices and instance types always are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources {
    /// `DescribeSpotPriceHistory` (credentials).
    pub spot_history: bool,
    /// `DescribeInstanceTypeOfferings` and `DescribeAvailabilityZones` (credentials).
    pub offerings: bool,
    /// The public spot advisor JSON.
    pub spot_advisor: bool,
    /// `GetSpotPlacementScores` (credentials); off by default, as AWS limits
    /// how many configurations an account may score a day.
    pub placement_scores: bool,
    /// `DescribeCapacityBlockOfferings` (credentials): Capacity Blocks for ML.
    pub capacity_blocks: bool,
}

impl Default for Sources {
    fn default() -> Self {
        Self {
            spot_history: true,
            offerings: true,
            spot_advisor: true,
            placement_scores: false,
            capacity_blocks: true,
        }
    }
}

#[derive(Debug, Clone)]
pub struct AwsConfig {
    /// Region codes; empty means every region.
    pub regions: Vec<String>,
    /// Instance-type patterns (`p5.*`, `g6.xlarge`); empty means every type
    /// with GPUs or accelerators.
    pub instance_types: Vec<String>,
    pub credentials: Credentials,
    pub sources: Sources,
    /// Base URL of the bulk price files (`https://pricing.us-east-1.amazonaws.com`).
    pub bulk_endpoint: String,
    /// The spot advisor JSON's full URL.
    pub spot_advisor_url: String,
    /// Overrides of the SDK's endpoints (tests, proxies); `None` is AWS's own.
    pub pricing_endpoint: Option<String>,
    /// `{region}` in it is replaced by each region's code.
    pub ec2_endpoint: Option<String>,
    /// How far back the first spot-history sync of a region reads (1..=90).
    pub spot_history_days: u32,
    /// Instances per placement-score request.
    pub placement_capacity: u32,
    /// The Capacity Block durations asked for, in hours.
    pub capacity_block_hours: Vec<u32>,
    /// The Capacity Block instance counts asked for.
    pub capacity_block_counts: Vec<u32>,
    pub retry: RetryPolicy,
}

impl AwsConfig {
    /// The defaults for everything but the endpoints.
    #[must_use]
    pub fn new(bulk_endpoint: String, spot_advisor_url: String, retry: RetryPolicy) -> Self {
        Self {
            regions: Vec::new(),
            instance_types: Vec::new(),
            credentials: Credentials::Auto,
            sources: Sources::default(),
            bulk_endpoint,
            spot_advisor_url,
            pricing_endpoint: None,
            ec2_endpoint: None,
            spot_history_days: 30,
            placement_capacity: 1,
            capacity_block_hours: section::DEFAULT_CAPACITY_BLOCK_HOURS.to_vec(),
            capacity_block_counts: section::DEFAULT_CAPACITY_BLOCK_COUNTS.to_vec(),
            retry,
        }
    }
}

pub use crate::config::selected;

/// Adds `part` (one region's, or one source's) to `into`; an instance type
/// seen twice keeps its first description.
fn merge(into: &mut Snapshot, part: Snapshot) {
    into.prices.extend(part.prices);
    into.spot_observations.extend(part.spot_observations);
    into.availability.extend(part.availability);
    for t in part.instance_types {
        if !into
            .instance_types
            .iter()
            .any(|known| known.instance_type == t.instance_type)
        {
            into.instance_types.push(t);
        }
    }
    for (reason, n) in part.skipped {
        *into.skipped.entry(reason).or_insert(0) += n;
    }
}

fn auth_hint(e: ProviderError) -> ProviderError {
    e.with_auth_hint(
        "the IAM permissions pricing:GetProducts and ec2:Describe*, \
         [providers.aws] sources, or credentials = \"none\" for the public files",
    )
}

fn decode_error(location: &str, detail: impl ToString) -> ProviderError {
    ProviderError::Decode {
        provider: PROVIDER.to_owned(),
        location: location.to_owned(),
        detail: detail.to_string(),
    }
}

impl AwsConfig {
    /// The provider this config describes.
    ///
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<AwsProvider, ProviderError> {
        AwsProvider::new(self)
    }
}

pub struct AwsProvider {
    config: AwsConfig,
    http: HttpClient,
}

impl AwsProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: AwsConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }

    /// The SDK settings to sync with, or `None` for the public files.
    async fn sdk_config(
        &self,
        scope: Scope,
    ) -> Result<Option<aws_config::SdkConfig>, ProviderError> {
        let retry = &self.config.retry;
        match &self.config.credentials {
            Credentials::None => Ok(None),
            Credentials::Static {
                access_key_id,
                secret_access_key,
            } => {
                let keys = aws_sdk_ec2::config::Credentials::new(
                    access_key_id,
                    secret_access_key.expose(),
                    None,
                    None,
                    "gpuplan-static",
                );
                Ok(Some(
                    sdk::load(
                        retry,
                        Some(aws_sdk_ec2::config::SharedCredentialsProvider::new(keys)),
                    )
                    .await,
                ))
            }
            Credentials::Auto | Credentials::Chain => {
                let sdk = sdk::load(retry, None).await;
                match sdk::has_credentials(&sdk).await {
                    Ok(()) => Ok(Some(sdk)),
                    Err(why) if matches!(self.config.credentials, Credentials::Auto) => {
                        // Said once per full sync, not every few minutes.
                        if scope == Scope::Full {
                            tracing::info!(provider = PROVIDER, reason = %why, "No AWS credentials found; using the public price files.");
                        }
                        Ok(None)
                    }
                    Err(why) => Err(ProviderError::Auth {
                        provider: PROVIDER.to_owned(),
                        url: "the AWS credential chain".to_owned(),
                        detail: why,
                    }),
                }
            }
        }
    }
}

#[derive(Deserialize)]
struct Advisor {
    spot_advisor: HashMap<String, HashMap<String, HashMap<String, AdvisorEntry>>>,
}

#[derive(Deserialize)]
struct AdvisorEntry {
    /// Index into `ranges`: the interruption-frequency bucket.
    r: u8,
    /// Savings over on-demand, percent.
    s: u8,
}

impl AwsProvider {
    /// Interruption bucket and savings of every (region, type) that has prices:
    /// in the snapshot, or stored for a region the snapshot names unchanged.
    async fn advisor(
        &self,
        snapshot: &mut Snapshot,
        ctx: &FetchContext,
    ) -> Result<(), ProviderError> {
        let url = &self.config.spot_advisor_url;
        let body = self.http.get(url).await?;
        let advisor: Advisor = serde_json::from_slice(&body).map_err(|e| decode_error(url, e))?;
        let unchanged = snapshot.unchanged_regions.iter().flat_map(|region| {
            ctx.priced_types
                .get(region)
                .into_iter()
                .flatten()
                .map(move |t| (region.as_str(), t.as_str()))
        });
        let offered: BTreeSet<(&str, &str)> = snapshot
            .prices
            .iter()
            .map(|p| (p.region.as_str(), p.instance_type.as_str()))
            .chain(unchanged)
            .collect();
        let mut records = Vec::new();
        for (region, instance_type) in offered {
            let Some(entry) = advisor
                .spot_advisor
                .get(region)
                .and_then(|r| r.get("Linux"))
                .and_then(|l| l.get(instance_type))
            else {
                continue;
            };
            for signal in [
                AvailabilitySignal::InterruptionBucket(entry.r),
                AvailabilitySignal::SpotSavingsPct(entry.s),
            ] {
                records.push(AvailabilityRecord {
                    region: region.to_owned(),
                    zone: None,
                    instance_type: instance_type.to_owned(),
                    signal,
                });
            }
        }
        snapshot.availability.extend(records);
        Ok(())
    }
}

#[async_trait]
impl Provider for AwsProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::of_configured(&self.config.regions)
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER, mode))]
    async fn fetch(&self, ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let sdk = self.sdk_config(ctx.scope).await?;
        if ctx.scope == Scope::SpotHistory {
            tracing::Span::current().record("mode", "spot_history");
            return match sdk {
                Some(sdk) if self.config.sources.spot_history => {
                    sdk::fetch_spot_history(&sdk, &self.config, ctx)
                        .await
                        .map_err(auth_hint)
                }
                // Spot history needs credentials: there is nothing to add.
                _ => Ok(Snapshot {
                    scope: Scope::SpotHistory,
                    ..Snapshot::default()
                }),
            };
        }
        let mut snapshot = match sdk {
            Some(sdk) => {
                tracing::Span::current().record("mode", "credentials");
                // With `auto`, keys that may not read the price list still
                // get EC2's data, with prices from the public files.
                let bulk =
                    matches!(self.config.credentials, Credentials::Auto).then_some(&self.http);
                sdk::fetch(&sdk, &self.config, ctx, bulk)
                    .await
                    .map_err(auth_hint)?
            }
            None => {
                tracing::Span::current().record("mode", "public");
                public::fetch(&self.http, &self.config, ctx).await?
            }
        };
        if self.config.sources.spot_advisor {
            self.advisor(&mut snapshot, ctx).await?;
        }
        Ok(snapshot)
    }
}

#[cfg(test)]
mod integrity_tests;
#[cfg(test)]
mod sdk_tests;
#[cfg(test)]
mod tests;
