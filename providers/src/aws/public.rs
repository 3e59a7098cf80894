//! AWS without credentials: the public bulk price files. `region_index.json`
//! names each region's EC2 offer file; each is streamed to a temporary file
//! and parsed entry by entry, never held in memory.
//!
//! Each file is hundreds of MB and AWS republishes it a few times a month, so
//! a region whose published version is the one the last good sync read is not
//! downloaded again: the snapshot names it unchanged and the store keeps its
//! prices. The index itself is fetched conditionally (`ETag` or
//! `Last-Modified`), so an unchanged index costs one empty 304.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{AwsConfig, PROVIDER, decode_error, merge, offer};
use crate::http::{Conditional, HttpClient};
use crate::snapshot::{InstanceType, Snapshot};
use crate::{FetchContext, ProviderError};

const REGION_INDEX: &str = "/offers/v1.0/aws/AmazonEC2/current/region_index.json";

/// The part name under which the index's validator is kept (see
/// [`Snapshot::versions`]).
pub const INDEX_PART: &str = "region_index.json";

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
        // A GET without a validator is never answered "not modified".
        Self::load_if_changed(http, config, None)
            .await?
            .0
            .ok_or_else(|| decode_error(REGION_INDEX, "not modified, though nothing was cached"))
    }

    /// The index unless it is still what `validator` names (then `None`), and
    /// the validator for next time.
    async fn load_if_changed(
        http: &HttpClient,
        config: &AwsConfig,
        validator: Option<&str>,
    ) -> Result<(Option<Self>, Option<String>), ProviderError> {
        let base = config.bulk_endpoint.trim_end_matches('/').to_owned();
        let url = format!("{base}{REGION_INDEX}");
        let (body, validator) = match http.get_if_changed(&url, validator).await? {
            Conditional::NotModified => return Ok((None, validator.map(str::to_owned))),
            Conditional::Changed { body, validator } => (body, validator),
        };
        let index: RegionIndex =
            serde_json::from_slice(&body).map_err(|e| decode_error(&url, e))?;
        let index = Self {
            base,
            url,
            regions: index.regions,
        };
        Ok((Some(index), validator))
    }

    /// The version of `region`'s prices this index points at: the offer
    /// file's URL, which names its publication, with what else decides the
    /// records made of it (this build and the instance-type filter).
    fn version(&self, region: &str, filter: &[String]) -> Result<String, ProviderError> {
        let entry = self.regions.get(region).ok_or_else(|| {
            decode_error(&self.url, format!("region {region} is not in the index"))
        })?;
        Ok(version_of(&entry.current_version_url, filter))
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

/// The revision of what [`offer::parse`] keeps of a file. A catalog synced
/// before a change to it (revision 2: Capacity Block and $0.00 rows are no
/// longer prices) reads every offer file again, though AWS published nothing
/// new, so prices read by the old rules are replaced.
const PARSE_RULES: u32 = 2;

fn version_of(offer_url: &str, filter: &[String]) -> String {
    let mut types = filter.to_vec();
    types.sort();
    format!(
        "{offer_url} gpuplan/{} rules/{PARSE_RULES} types={}",
        env!("CARGO_PKG_VERSION"),
        types.join(",")
    )
}

/// Prices and instance types of the configured regions (all when none are).
/// Regions whose offer file is the version `ctx` names are not downloaded.
pub(super) async fn fetch(
    http: &HttpClient,
    config: &AwsConfig,
    ctx: &FetchContext,
) -> Result<Snapshot, ProviderError> {
    let mut snapshot = Snapshot::default();
    let stored_validator = ctx.versions.get(INDEX_PART).map(String::as_str);
    let (index, validator) =
        match BulkIndex::load_if_changed(http, config, stored_validator).await? {
            (Some(index), validator) => (index, validator),
            (None, validator) => {
                // Nothing was published since the last good sync: every region
                // that sync read is unchanged. A region it did not read needs the
                // index after all.
                let known = !config.regions.is_empty()
                    && config.regions.iter().all(|r| ctx.versions.contains_key(r));
                if known {
                    for region in &config.regions {
                        snapshot.unchanged_regions.insert(region.clone());
                        snapshot
                            .versions
                            .insert(region.clone(), ctx.versions[region].clone());
                    }
                    snapshot
                        .versions
                        .extend(validator.map(|v| (INDEX_PART.to_owned(), v)));
                    tracing::info!(
                        provider = PROVIDER,
                        "The price index is unchanged; no offer file downloaded."
                    );
                    return Ok(snapshot);
                }
                (BulkIndex::load(http, config).await?, None)
            }
        };
    snapshot
        .versions
        .extend(validator.map(|v| (INDEX_PART.to_owned(), v)));
    let regions: Vec<String> = if config.regions.is_empty() {
        index.regions.keys().cloned().collect()
    } else {
        config.regions.clone()
    };
    for region in &regions {
        let version = index.version(region, &config.instance_types)?;
        if ctx.versions.get(region) == Some(&version) {
            tracing::info!(provider = PROVIDER, region = %region, "Offer file unchanged since the last good sync; not downloaded.");
            snapshot.unchanged_regions.insert(region.clone());
        } else {
            let part = index
                .region(http, region, config.instance_types.clone(), None)
                .await?;
            merge(&mut snapshot, part);
        }
        snapshot.versions.insert(region.clone(), version);
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
