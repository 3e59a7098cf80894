//! AWS without credentials: the public bulk price files. `region_index.json`
//! names each region's EC2 offer file; each is streamed to a temporary file
//! and parsed entry by entry, never held in memory.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{AwsConfig, PROVIDER, decode_error, offer};
use crate::ProviderError;
use crate::http::HttpClient;
use crate::snapshot::Snapshot;

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

/// Prices and instance types of the configured regions (all when none are).
pub(super) async fn fetch(
    http: &HttpClient,
    config: &AwsConfig,
) -> Result<Snapshot, ProviderError> {
    let base = config.bulk_endpoint.trim_end_matches('/');
    let index_url = format!("{base}{REGION_INDEX}");
    let body = http.get(&index_url).await?;
    let index: RegionIndex =
        serde_json::from_slice(&body).map_err(|e| decode_error(&index_url, e))?;
    let wanted: Vec<&String> = if config.regions.is_empty() {
        index.regions.keys().collect()
    } else {
        config.regions.iter().collect()
    };
    let mut snapshot = Snapshot::default();
    let mut types = BTreeMap::new();
    for region in wanted {
        let Some(entry) = index.regions.get(region) else {
            return Err(decode_error(
                &index_url,
                format!("region {region} is not in the index"),
            ));
        };
        // The index's URLs are relative to the bulk endpoint.
        let url = format!("{base}{}", entry.current_version_url);
        let part = region_file(http, &url, config.instance_types.clone()).await?;
        for (reason, n) in part.skipped {
            *snapshot.skipped.entry(reason).or_insert(0) += n;
        }
        snapshot.prices.extend(part.prices);
        for t in part.instance_types {
            types.entry(t.instance_type.clone()).or_insert(t);
        }
    }
    snapshot.instance_types = types.into_values().collect();
    Ok(snapshot)
}

/// Downloads one region's offer file to a temporary file and parses it.
async fn region_file(
    http: &HttpClient,
    url: &str,
    filter: Vec<String>,
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
        offer::parse(temp, filter).map_err(|e| decode_error(&shown, e))
    })
    .await
    .map_err(|e| decode_error(url, e))?
}
