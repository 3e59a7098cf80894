//! AWS without credentials: the public bulk price files. `region_index.json`
//! names each region's EC2 offer file; each is streamed to a temporary file
//! and parsed entry by entry, never held in memory.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{AwsConfig, PROVIDER, decode_error, merge, offer};
use crate::ProviderError;
use crate::http::HttpClient;
use crate::snapshot::{InstanceType, Snapshot};

const REGION_INDEX: &str = "/offers/v1.0/aws/AmazonEC2/current/region_index.json";

#[derive(Deserialize)]
struct RegionIndex {
    regions: BTreeMap<String, RegionEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RegionEntry {
    current_version_url: String,
}

/// Where each region's offer file is.
pub(super) struct BulkIndex {
    base: String,
    url: String,
    regions: BTreeMap<String, RegionEntry>,
}

impl BulkIndex {
    pub async fn load(http: &HttpClient, config: &AwsConfig) -> Result<Self, ProviderError> {
        let base = config.bulk_endpoint.trim_end_matches('/').to_owned();
        let url = format!("{base}{REGION_INDEX}");
        let body = http.get(&url).await?;
        let index: RegionIndex =
            serde_json::from_slice(&body).map_err(|e| decode_error(&url, e))?;
        Ok(Self {
            base,
            url,
            regions: index.regions,
        })
    }

    /// One region's prices, instance types and skips. Instance facts come from
    /// `described` when given (see [`offer::Collector`]).
    pub async fn region(
        &self,
        http: &HttpClient,
        region: &str,
        filter: Vec<String>,
        described: Option<BTreeMap<String, InstanceType>>,
    ) -> Result<Snapshot, ProviderError> {
        let Some(entry) = self.regions.get(region) else {
            return Err(decode_error(
                &self.url,
                format!("region {region} is not in the index"),
            ));
        };
        // The index's URLs are relative to the bulk endpoint.
        let url = format!("{}{}", self.base, entry.current_version_url);
        region_file(http, &url, filter, described).await
    }
}

/// Prices and instance types of the configured regions (all when none are).
pub(super) async fn fetch(
    http: &HttpClient,
    config: &AwsConfig,
) -> Result<Snapshot, ProviderError> {
    let index = BulkIndex::load(http, config).await?;
    let regions: Vec<String> = if config.regions.is_empty() {
        index.regions.keys().cloned().collect()
    } else {
        config.regions.clone()
    };
    let mut snapshot = Snapshot::default();
    for region in &regions {
        let part = index
            .region(http, region, config.instance_types.clone(), None)
            .await?;
        merge(&mut snapshot, part);
    }
    Ok(snapshot)
}

/// Downloads one region's offer file to a temporary file and parses it.
async fn region_file(
    http: &HttpClient,
    url: &str,
    filter: Vec<String>,
    described: Option<BTreeMap<String, InstanceType>>,
) -> Result<Snapshot, ProviderError> {
    let io = |e: std::io::Error| ProviderError::Io {
        provider: PROVIDER.to_owned(),
        path: "a temporary file for the offer file".to_owned(),
        detail: e.to_string(),
    };
    let temp = tempfile::tempfile().map_err(io)?;
    let mut file = tokio::fs::File::from_std(temp.try_clone().map_err(io)?);
    http.download(url, &mut file).await?;
    drop(file);
    let mut temp = temp;
    let shown = url.to_owned();
    tokio::task::spawn_blocking(move || {
        std::io::Seek::rewind(&mut temp).map_err(io)?;
        offer::parse(temp, filter, described).map_err(|e| decode_error(&shown, e))
    })
    .await
    .map_err(|e| decode_error(url, e))?
}
