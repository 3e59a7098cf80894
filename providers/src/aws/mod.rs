//! AWS without credentials: the public bulk price files (`region_index.json`,
//! then each configured region's EC2 offer file, streamed to a temporary file
//! and parsed entry by entry) and the public spot advisor JSON (interruption
//! bucket and savings per instance type and region).
//!
//! The credentialed path (Price List Query API, EC2 spot history, offerings)
//! is not built yet; its records will match these for the same SKUs.

mod gpus;
mod offer;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use async_trait::async_trait;
use serde::Deserialize;

use crate::http::{HttpClient, RetryPolicy};
use crate::snapshot::{AvailabilityRecord, AvailabilitySignal, Snapshot};
use crate::{FetchContext, Provider, ProviderError, RegionScope};

const PROVIDER: &str = "aws";
const REGION_INDEX: &str = "/offers/v1.0/aws/AmazonEC2/current/region_index.json";

#[derive(Debug, Clone)]
pub struct AwsPublicConfig {
    /// Base URL of the bulk price files (`https://pricing.us-east-1.amazonaws.com`).
    pub bulk_endpoint: String,
    /// The spot advisor JSON's full URL.
    pub spot_advisor_url: String,
    /// Region codes; empty means every region of the index.
    pub regions: Vec<String>,
    pub retry: RetryPolicy,
}

pub struct AwsPublicProvider {
    config: AwsPublicConfig,
    http: HttpClient,
}

impl AwsPublicProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: AwsPublicConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }

    fn decode_error(location: &str, detail: impl ToString) -> ProviderError {
        ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: location.to_owned(),
            detail: detail.to_string(),
        }
    }

    /// Downloads one region's offer file to a temporary file and parses it.
    async fn region(&self, url: &str) -> Result<Snapshot, ProviderError> {
        let io = |e: std::io::Error| ProviderError::Io {
            provider: PROVIDER.to_owned(),
            path: "a temporary file for the offer file".to_owned(),
            detail: e.to_string(),
        };
        let temp = tempfile::tempfile().map_err(io)?;
        let mut file = tokio::fs::File::from_std(temp.try_clone().map_err(io)?);
        self.http.download(url, &mut file).await?;
        drop(file);
        let mut temp = temp;
        let shown = url.to_owned();
        tokio::task::spawn_blocking(move || {
            std::io::Seek::rewind(&mut temp).map_err(io)?;
            offer::parse(temp).map_err(|e| Self::decode_error(&shown, e))
        })
        .await
        .map_err(|e| Self::decode_error(url, e))?
    }
}

#[derive(Deserialize)]
struct RegionIndex {
    regions: BTreeMap<String, RegionEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RegionEntry {
    current_version_url: String,
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

#[async_trait]
impl Provider for AwsPublicProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::of_configured(&self.config.regions)
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER))]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let base = self.config.bulk_endpoint.trim_end_matches('/');
        let index_url = format!("{base}{REGION_INDEX}");
        let body = self.http.get(&index_url).await?;
        let index: RegionIndex =
            serde_json::from_slice(&body).map_err(|e| Self::decode_error(&index_url, e))?;
        let mut snapshot = Snapshot::default();
        let wanted: Vec<&String> = if self.config.regions.is_empty() {
            index.regions.keys().collect()
        } else {
            self.config.regions.iter().collect()
        };
        let mut types = BTreeMap::new();
        for region in wanted {
            let Some(entry) = index.regions.get(region) else {
                return Err(Self::decode_error(
                    &index_url,
                    format!("region {region} is not in the index"),
                ));
            };
            // The index's URLs are relative to the bulk endpoint.
            let url = format!("{base}{}", entry.current_version_url);
            let part = self.region(&url).await?;
            for (reason, n) in part.skipped {
                *snapshot.skipped.entry(reason).or_insert(0) += n;
            }
            snapshot.prices.extend(part.prices);
            for t in part.instance_types {
                types.entry(t.instance_type.clone()).or_insert(t);
            }
        }
        snapshot.instance_types = types.into_values().collect();

        let advisor_url = &self.config.spot_advisor_url;
        let body = self.http.get(advisor_url).await?;
        let advisor: Advisor =
            serde_json::from_slice(&body).map_err(|e| Self::decode_error(advisor_url, e))?;
        let offered: BTreeSet<(&str, &str)> = snapshot
            .prices
            .iter()
            .map(|p| (p.region.as_str(), p.instance_type.as_str()))
            .collect();
        let mut availability = Vec::new();
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
                availability.push(AvailabilityRecord {
                    region: region.to_owned(),
                    zone: None,
                    instance_type: instance_type.to_owned(),
                    signal,
                });
            }
        }
        snapshot.availability = availability;
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests;
