//! AWS with credentials, through the official SDK: the Price List Query API
//! (`GetProducts`) for on-demand and reserved prices, and per region EC2's
//! `DescribeInstanceTypes` (GPU and accelerator facts), `DescribeSpotPriceHistory`
//! (incremental), `DescribeInstanceTypeOfferings` with `DescribeAvailabilityZones`,
//! and optionally `GetSpotPlacementScores`. Spot-only syncs read just the
//! instance types and the new spot history.
//!
//! The SDK signs, retries throttling (`ThrottlingException`,
//! `RequestLimitExceeded`) and 5xx with backoff, and pages; its paginators treat
//! EC2's empty `<nextToken/>` as the end. What it cannot retry becomes a
//! [`ProviderError`] naming the call and the region.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::primitives::DateTime as AwsDateTime;
use aws_sdk_ec2::types::{Filter as Ec2Filter, InstanceTypeInfo, LocationType};
use aws_sdk_pricing::types::{Filter as PriceFilter, FilterType};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use futures_util::StreamExt;

use super::offer::{Collector, PriceListItem};
use super::public::BulkIndex;
use super::{AwsConfig, PROVIDER, gpus, merge};
use crate::http::{HttpClient, RetryPolicy};
use crate::snapshot::{
    AvailabilityRecord, AvailabilitySignal, InstanceType, Scope, Snapshot, SpotObservation,
};
use crate::{FetchContext, ProviderError};

/// The Price List Query API answers from us-east-1 for every region.
const PRICING_REGION: &str = "us-east-1";
/// Spot history rows are per instance-hour prices of this product only.
const LINUX: &str = "Linux/UNIX";
/// GetProducts requests in flight at once (one per instance type and region).
const PRICE_QUERIES_IN_FLIGHT: usize = 4;
/// Instance types per spot-history or offerings request.
const TYPES_PER_REQUEST: usize = 100;

/// The shared SDK settings: region for the pricing endpoint, retries and
/// timeouts from the daemon's policy, and the given credentials provider
/// (or the standard chain when `None`).
pub(super) async fn load(
    retry: &RetryPolicy,
    credentials: Option<aws_sdk_ec2::config::SharedCredentialsProvider>,
) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        // A fixed region: the SDK never asks the instance metadata service for one.
        .region(Region::new(PRICING_REGION))
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(retry.max_attempts.max(1))
                .with_initial_backoff(retry.base_delay)
                .with_max_backoff(retry.max_delay),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(retry.request_timeout)
                .build(),
        );
    if let Some(c) = credentials {
        loader = loader.credentials_provider(c);
    }
    loader.load().await
}

/// Whether the SDK settings resolve to credentials; the error says why not.
pub(super) async fn has_credentials(sdk: &SdkConfig) -> Result<(), String> {
    use aws_sdk_ec2::config::ProvideCredentials;
    match sdk.credentials_provider() {
        None => Err("no credentials provider is configured".to_owned()),
        Some(p) => p
            .provide_credentials()
            .await
            .map(|_| ())
            // The message chain, without the Debug dump of the last response.
            .map_err(|e| {
                let full = DisplayErrorContext(&e).to_string();
                full.split(" (").next().unwrap_or_default().to_owned()
            }),
    }
}

struct Clients {
    pricing: aws_sdk_pricing::Client,
    sdk: SdkConfig,
    ec2_endpoint: Option<String>,
}

impl Clients {
    fn new(sdk: &SdkConfig, config: &AwsConfig) -> Self {
        let mut pricing = aws_sdk_pricing::config::Builder::from(sdk);
        if let Some(url) = &config.pricing_endpoint {
            pricing = pricing.endpoint_url(url);
        }
        Self {
            pricing: aws_sdk_pricing::Client::from_conf(pricing.build()),
            sdk: sdk.clone(),
            ec2_endpoint: config.ec2_endpoint.clone(),
        }
    }

    /// An EC2 client for `region`: requests are signed for that region and go
    /// to its endpoint (or to the override, for tests and proxies).
    fn ec2(&self, region: &str) -> aws_sdk_ec2::Client {
        let mut b = aws_sdk_ec2::config::Builder::from(&self.sdk)
            .region(Region::new(region.to_owned()))
            .interceptor(CompleteXml);
        if let Some(url) = &self.ec2_endpoint {
            b = b.endpoint_url(url.replace("{region}", region));
        }
        aws_sdk_ec2::Client::from_conf(b.build())
    }
}

/// Rejects an EC2 answer whose XML document is cut short. The SDK's XML reader
/// takes a truncated page as a shorter page (missing rows, no `nextToken`, so
/// paging ends early), which would silently drop data.
#[derive(Debug)]
struct CompleteXml;

impl aws_sdk_ec2::config::Intercept for CompleteXml {
    fn name(&self) -> &'static str {
        "gpuplan-complete-xml"
    }

    fn read_after_deserialization(
        &self,
        context: &aws_sdk_ec2::config::interceptors::AfterDeserializationInterceptorContextRef<'_>,
        _: &aws_sdk_ec2::config::RuntimeComponents,
        _: &mut aws_sdk_ec2::config::ConfigBag,
    ) -> Result<(), aws_sdk_ec2::error::BoxError> {
        let response = context.response();
        if !response.status().is_success() {
            return Ok(());
        }
        let body = String::from_utf8_lossy(response.body().bytes().unwrap_or_default());
        if xml_is_complete(&body) {
            Ok(())
        } else {
            Err(format!("the XML answer is truncated ({} bytes)", body.len()).into())
        }
    }
}

/// Whether a document ends by closing the element it opened first.
fn xml_is_complete(body: &str) -> bool {
    let mut rest = body.trim();
    if let Some(after_decl) = rest.strip_prefix("<?") {
        rest = after_decl
            .split_once("?>")
            .map_or("", |(_, r)| r.trim_start());
    }
    let Some(open) = rest.strip_prefix('<') else {
        return false;
    };
    let name: String = open
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '>' && *c != '/')
        .collect();
    !name.is_empty() && rest.ends_with(&format!("</{name}>"))
}

/// An SDK error as a [`ProviderError`] naming the call (`ec2
/// DescribeSpotPriceHistory in us-west-2`).
pub(super) fn sdk_error<E>(call: &str, err: &SdkError<E>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let provider = PROVIDER.to_owned();
    let detail = DisplayErrorContext(err).to_string();
    match err {
        SdkError::ServiceError(service) => {
            let e = service.err();
            let status = service.raw().status();
            match e.code() {
                Some(
                    "AuthFailure"
                    | "UnauthorizedOperation"
                    | "AccessDeniedException"
                    | "UnrecognizedClientException"
                    | "InvalidClientTokenId"
                    | "SignatureDoesNotMatch"
                    | "ExpiredToken"
                    | "ExpiredTokenException",
                ) => ProviderError::Auth {
                    provider,
                    url: call.to_owned(),
                    detail,
                },
                Some("ThrottlingException" | "RequestLimitExceeded" | "Throttling") => {
                    ProviderError::RateLimited {
                        provider,
                        url: call.to_owned(),
                        retry_after: None,
                    }
                }
                Some(code) => ProviderError::Http {
                    provider,
                    url: call.to_owned(),
                    status: status.as_u16(),
                    body: format!("{code}: {}", e.message().unwrap_or_default()),
                },
                // A failure without an AWS error body (a proxy's 502 page, say).
                None if !status.is_success() => ProviderError::Http {
                    provider,
                    url: call.to_owned(),
                    status: status.as_u16(),
                    body: detail,
                },
                // A success that did not parse.
                None => ProviderError::Decode {
                    provider,
                    location: call.to_owned(),
                    detail,
                },
            }
        }
        SdkError::ResponseError(_) => ProviderError::Decode {
            provider,
            location: call.to_owned(),
            detail,
        },
        _ => ProviderError::Transport {
            provider,
            url: call.to_owned(),
            detail,
        },
    }
}

/// Everything the credentialed path fetches, for `regions`. With `bulk`, keys
/// that the Price List Query API refuses fall back to the public files for
/// prices (instance facts still from `DescribeInstanceTypes`: the records are
/// the same either way); without, that refusal fails the sync.
pub(super) async fn fetch(
    sdk: &SdkConfig,
    config: &AwsConfig,
    ctx: &FetchContext,
    bulk: Option<&HttpClient>,
) -> Result<Snapshot, ProviderError> {
    let clients = Clients::new(sdk, config);
    let regions = regions(&clients, config).await?;
    let filter = &config.instance_types;
    let mut snapshot = Snapshot::default();
    let mut bulk_index: Option<BulkIndex> = None;
    for region in &regions {
        let ec2 = clients.ec2(region);
        let types = instance_types(&ec2, region, filter).await?;
        let priced = match (&bulk_index, bulk) {
            (Some(index), Some(http)) => {
                index
                    .region(http, region, filter.clone(), Some(types.clone()))
                    .await?
            }
            _ => match prices(&clients.pricing, region, &types, filter).await {
                Err(refused @ ProviderError::Auth { .. }) => {
                    let Some(http) = bulk else {
                        return Err(refused);
                    };
                    tracing::warn!(provider = PROVIDER, error = %refused, "The price list refused these credentials; prices come from the public files.");
                    let index = BulkIndex::load(http, config).await?;
                    let part = index
                        .region(http, region, filter.clone(), Some(types.clone()))
                        .await?;
                    bulk_index = Some(index);
                    part
                }
                other => other?,
            },
        };
        merge(&mut snapshot, priced);
        let names: Vec<&str> = types.keys().map(String::as_str).collect();
        if config.sources.spot_history {
            spot_history(
                &ec2,
                region,
                &names,
                since(config, ctx, region),
                &mut snapshot,
            )
            .await?;
        }
        if config.sources.offerings || config.sources.placement_scores {
            let zones = zones(&ec2, region).await?;
            if config.sources.offerings {
                offerings(&ec2, region, &names, &zones, &mut snapshot).await?;
            }
            if config.sources.placement_scores {
                placement_scores(
                    &ec2,
                    region,
                    &names,
                    &zones,
                    config.placement_capacity,
                    &mut snapshot,
                )
                .await?;
            }
        }
        if config.sources.capacity_blocks {
            super::capacity_blocks::offerings(&ec2, region, &names, config, &mut snapshot).await?;
        }
    }
    Ok(snapshot)
}

/// Only new spot history (and the instance types it names), for a spot-only
/// sync between full ones: no prices, so nothing is withdrawn.
pub(super) async fn fetch_spot_history(
    sdk: &SdkConfig,
    config: &AwsConfig,
    ctx: &FetchContext,
) -> Result<Snapshot, ProviderError> {
    let clients = Clients::new(sdk, config);
    let regions = regions(&clients, config).await?;
    let mut out = Snapshot {
        scope: Scope::SpotHistory,
        ..Snapshot::default()
    };
    let mut described = BTreeMap::new();
    for region in &regions {
        let ec2 = clients.ec2(region);
        let types = instance_types(&ec2, region, &config.instance_types).await?;
        let names: Vec<&str> = types.keys().map(String::as_str).collect();
        spot_history(&ec2, region, &names, since(config, ctx, region), &mut out).await?;
        described.extend(types);
    }
    let seen: BTreeSet<&str> = out
        .spot_observations
        .iter()
        .map(|o| o.instance_type.as_str())
        .collect();
    out.instance_types = described
        .into_values()
        .filter(|t| seen.contains(t.instance_type.as_str()))
        .collect();
    Ok(out)
}

/// Where a region's spot history starts: after the newest stored observation,
/// or `spot_history_days` back on the first sync.
fn since(config: &AwsConfig, ctx: &FetchContext, region: &str) -> DateTime<Utc> {
    ctx.newest_spot_by_region
        .get(region)
        .copied()
        .unwrap_or_else(|| Utc::now() - ChronoDuration::days(i64::from(config.spot_history_days)))
}

/// The configured regions, or when none are, every region of the account.
async fn regions(clients: &Clients, config: &AwsConfig) -> Result<Vec<String>, ProviderError> {
    if !config.regions.is_empty() {
        return Ok(config.regions.clone());
    }
    let call = format!("ec2 DescribeRegions in {PRICING_REGION}");
    let out = clients
        .ec2(PRICING_REGION)
        .describe_regions()
        .send()
        .await
        .map_err(|e| sdk_error(&call, &e))?;
    let mut regions: Vec<String> = out
        .regions()
        .iter()
        .filter_map(|r| r.region_name().map(str::to_owned))
        .collect();
    regions.sort();
    Ok(regions)
}

/// The region's instance types with GPUs or accelerators that pass the filter.
async fn instance_types(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
    filter: &[String],
) -> Result<BTreeMap<String, InstanceType>, ProviderError> {
    let call = format!("ec2 DescribeInstanceTypes in {region}");
    let pages: Vec<_> = ec2
        .describe_instance_types()
        .max_results(100)
        .into_paginator()
        .send()
        .collect()
        .await;
    let mut out = BTreeMap::new();
    for page in pages {
        crate::progress::answered();
        let page = page.map_err(|e| sdk_error(&call, &e))?;
        for info in page.instance_types() {
            if let Some(t) = describe(info)
                && super::selected(filter, &t.instance_type)
            {
                out.insert(t.instance_type.clone(), t);
            }
        }
    }
    Ok(out)
}

/// An instance type's accelerator facts, or `None` when it has none. The GPU is
/// named from the API's name and per-GPU memory; where that name is not one the
/// catalog knows (p5en reports just `NVIDIA`), the family table decides.
fn describe(info: &InstanceTypeInfo) -> Option<InstanceType> {
    info.instance_type()?;
    let (model, count, memory) = if let Some(gpu) = info.gpu_info().and_then(|g| g.gpus().first()) {
        let mib = gpu.memory_info().and_then(|m| m.size_in_mib());
        let gpu_name = gpu.name().unwrap_or_default().to_owned();
        // A slice (g6f) says 0 or 1 in `count`; its share is the partition
        // size times the logical GPUs, and its memory is the slice's.
        match gpu.gpu_partition_size() {
            Some(share) if share > 0.0 && share < 1.0 => {
                let logical = f64::from(gpu.logical_gpu_count().unwrap_or(1).max(1));
                return Some(described(info, gpu_name, share * logical, None));
            }
            _ => (gpu_name, gpu.count(), mib),
        }
    } else if let Some(n) = info.neuron_info().and_then(|n| n.neuron_devices().first()) {
        (
            n.name().unwrap_or_default().to_owned(),
            n.count(),
            n.memory_info().and_then(|m| m.size_in_mib()),
        )
    } else if let Some(a) = info
        .inference_accelerator_info()
        .and_then(|a| a.accelerators().first())
    {
        (
            a.name().unwrap_or_default().to_owned(),
            a.count(),
            a.memory_info().and_then(|m| m.size_in_mib()),
        )
    } else {
        return None;
    };
    let count = count.unwrap_or(0);
    if count <= 0 {
        return None;
    }
    let hint = memory.map(|mib| f64::from(mib) / 1024.0);
    Some(described(info, model, f64::from(count), hint))
}

/// The instance type of `info` with `count` GPUs (or a share of one) of the
/// API's `model`; where that name is not one the catalog knows, the family
/// table decides.
fn described(
    info: &InstanceTypeInfo,
    model: String,
    count: f64,
    hint: Option<f64>,
) -> InstanceType {
    let name = info
        .instance_type()
        .map_or_else(String::new, |t| t.as_str().to_owned());
    let mut normalized = crate::gpu::normalize(&model, hint);
    if !normalized.known
        && let Some(table) = gpus::model(gpus::family(&name))
    {
        normalized = crate::gpu::normalize(table, None);
    }
    InstanceType {
        gpu_form_factor: gpus::form_factor(gpus::family(&name)),
        instance_type: name,
        gpu_model: normalized.name,
        gpu_count: count,
        gpu_memory_gib: crate::gpu::share_memory(normalized.memory_gib, count),
        mig_profile: None,
        vcpus: info
            .v_cpu_info()
            .and_then(|v| v.default_v_cpus())
            .and_then(|v| u32::try_from(v).ok()),
        memory_gib: info
            .memory_info()
            .and_then(|m| m.size_in_mib())
            .map(|mib| mib as f64 / 1024.0),
    }
}

/// On-demand and reserved prices: one paginated `GetProducts` per instance
/// type of the region, a few in flight, added in instance-type order.
async fn prices(
    pricing: &aws_sdk_pricing::Client,
    region: &str,
    types: &BTreeMap<String, InstanceType>,
    filter: &[String],
) -> Result<Snapshot, ProviderError> {
    let mut collector = Collector::new(filter.to_vec(), Some(types.clone()));
    // Collected first: a lazily mapped iterator of borrowing futures makes the
    // whole fetch future fail the `Send` check.
    let queries: Vec<_> = types.keys().map(|t| products(pricing, region, t)).collect();
    let results: Vec<Result<Vec<String>, ProviderError>> = futures_util::stream::iter(queries)
        .buffered(PRICE_QUERIES_IN_FLIGHT)
        .collect()
        .await;
    for (items, instance_type) in results.into_iter().zip(types.keys()) {
        let call = format!("pricing GetProducts for {instance_type} in {region}");
        for (n, raw) in items?.iter().enumerate() {
            let item: PriceListItem =
                serde_json::from_str(raw).map_err(|e| ProviderError::Decode {
                    provider: PROVIDER.to_owned(),
                    location: format!("{call}, PriceList[{n}]"),
                    detail: e.to_string(),
                })?;
            collector.item(&item);
        }
    }
    Ok(collector.finish())
}

async fn products(
    pricing: &aws_sdk_pricing::Client,
    region: &str,
    instance_type: &str,
) -> Result<Vec<String>, ProviderError> {
    let call = format!("pricing GetProducts for {instance_type} in {region}");
    let filter = |field: &str, value: &str| {
        PriceFilter::builder()
            .r#type(FilterType::TermMatch)
            .field(field)
            .value(value)
            .build()
            .map_err(|e| ProviderError::Transport {
                provider: PROVIDER.to_owned(),
                url: call.clone(),
                detail: e.to_string(),
            })
    };
    let pages: Vec<_> = pricing
        .get_products()
        .service_code("AmazonEC2")
        .format_version("aws_v1")
        .filters(filter("regionCode", region)?)
        .filters(filter("instanceType", instance_type)?)
        .max_results(100)
        .into_paginator()
        .send()
        .collect()
        .await;
    let mut out = Vec::new();
    for page in pages {
        crate::progress::answered();
        out.extend(
            page.map_err(|e| sdk_error(&call, &e))?
                .price_list()
                .iter()
                .cloned(),
        );
    }
    Ok(out)
}

/// Linux spot prices since `since`. The API also returns the last change
/// before `since`, so the current price of every zone is always there; rows
/// come unsorted and across pages, and every one is kept (the store ignores
/// ones it has).
async fn spot_history(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
    types: &[&str],
    since: DateTime<Utc>,
    out: &mut Snapshot,
) -> Result<(), ProviderError> {
    let call = format!("ec2 DescribeSpotPriceHistory in {region}");
    for chunk in types.chunks(TYPES_PER_REQUEST) {
        let mut pages = ec2
            .describe_spot_price_history()
            .set_instance_types(Some(chunk.iter().map(|t| (*t).into()).collect()))
            .product_descriptions(LINUX)
            .start_time(AwsDateTime::from_secs(since.timestamp()))
            .max_results(1000)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            crate::progress::answered();
            let page = page.map_err(|e| sdk_error(&call, &e))?;
            for row in page.spot_price_history() {
                let description = row.product_description().map(|d| d.as_str());
                if let Some(other) = description.filter(|d| *d != LINUX) {
                    out.skip(format!("spot_product:{other}"));
                    continue;
                }
                let observation = (|| {
                    description?;
                    let ts = row.timestamp()?;
                    Some(SpotObservation {
                        region: region.to_owned(),
                        zone: row.availability_zone()?.to_owned(),
                        instance_type: row.instance_type()?.as_str().to_owned(),
                        usd_per_hour: row.spot_price()?.trim().parse().ok()?,
                        observed_at: DateTime::from_timestamp(ts.secs(), ts.subsec_nanos())?,
                    })
                })();
                match observation {
                    Some(o) => out.spot_observations.push(o),
                    None => {
                        return Err(ProviderError::Decode {
                            provider: PROVIDER.to_owned(),
                            location: call,
                            detail: format!(
                                "a spot price row lacks a field or has a bad price: {row:?}"
                            ),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// The region's available zones: name -> zone id (the mapping is per account).
async fn zones(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
) -> Result<HashMap<String, String>, ProviderError> {
    let call = format!("ec2 DescribeAvailabilityZones in {region}");
    let out = ec2
        .describe_availability_zones()
        .send()
        .await
        .map_err(|e| sdk_error(&call, &e))?;
    Ok(out
        .availability_zones()
        .iter()
        .filter(|z| z.state().is_some_and(|s| s.as_str() == "available"))
        .filter_map(|z| Some((z.zone_name()?.to_owned(), z.zone_id()?.to_owned())))
        .collect())
}

/// Where each type is offered: the region, and each available zone.
async fn offerings(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
    types: &[&str],
    zones: &HashMap<String, String>,
    out: &mut Snapshot,
) -> Result<(), ProviderError> {
    for location in [LocationType::Region, LocationType::AvailabilityZone] {
        let call = format!(
            "ec2 DescribeInstanceTypeOfferings ({}) in {region}",
            location.as_str()
        );
        for chunk in types.chunks(TYPES_PER_REQUEST) {
            let pages: Vec<_> = ec2
                .describe_instance_type_offerings()
                .location_type(location.clone())
                .filters(
                    Ec2Filter::builder()
                        .name("instance-type")
                        .set_values(Some(chunk.iter().map(|t| (*t).to_owned()).collect()))
                        .build(),
                )
                .max_results(1000)
                .into_paginator()
                .send()
                .collect()
                .await;
            let mut seen = BTreeSet::new();
            for page in pages {
                crate::progress::answered();
                let page = page.map_err(|e| sdk_error(&call, &e))?;
                for o in page.instance_type_offerings() {
                    let (Some(t), Some(at)) = (o.instance_type(), o.location()) else {
                        continue;
                    };
                    let zone = match location {
                        LocationType::Region => None,
                        _ if zones.contains_key(at) => Some(at.to_owned()),
                        _ => {
                            out.skip("offering:zone_not_available");
                            continue;
                        }
                    };
                    if seen.insert((t.as_str().to_owned(), zone.clone())) {
                        out.availability.push(AvailabilityRecord {
                            region: region.to_owned(),
                            zone,
                            instance_type: t.as_str().to_owned(),
                            signal: AvailabilitySignal::Offered,
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// Spot placement scores (1-10) per type and zone, for `capacity` instances of
/// one type. Scores name zones by id; the account's own mapping turns them back
/// into names.
async fn placement_scores(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
    types: &[&str],
    zones: &HashMap<String, String>,
    capacity: u32,
    out: &mut Snapshot,
) -> Result<(), ProviderError> {
    let by_id: HashMap<&str, &str> = zones
        .iter()
        .map(|(n, id)| (id.as_str(), n.as_str()))
        .collect();
    let call = format!("ec2 GetSpotPlacementScores in {region}");
    for t in types {
        let pages: Vec<_> = ec2
            .get_spot_placement_scores()
            .instance_types(*t)
            .target_capacity(i32::try_from(capacity).unwrap_or(i32::MAX))
            .single_availability_zone(true)
            .region_names(region)
            .into_paginator()
            .send()
            .collect()
            .await;
        for page in pages {
            crate::progress::answered();
            let page = page.map_err(|e| sdk_error(&call, &e))?;
            for s in page.spot_placement_scores() {
                let zone = s.availability_zone_id().and_then(|id| by_id.get(id));
                let score = s.score().and_then(|v| u8::try_from(v).ok());
                let (Some(zone), Some(score)) = (zone, score) else {
                    out.skip("placement_score:unknown_zone");
                    continue;
                };
                out.availability.push(AvailabilityRecord {
                    region: region.to_owned(),
                    zone: Some((*zone).to_owned()),
                    instance_type: (*t).to_owned(),
                    signal: AvailabilitySignal::PlacementScore(score),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::xml_is_complete;

    #[test]
    fn a_document_is_complete_when_its_root_is_closed() {
        assert!(xml_is_complete(
            "<?xml version=\"1.0\"?>\n<R xmlns=\"x\"><a/></R>\n"
        ));
        assert!(xml_is_complete("<R><nextToken/></R>"));
        assert!(!xml_is_complete(
            "<?xml version=\"1.0\"?><R><item><a>1</a></item>"
        ));
        assert!(!xml_is_complete("<R><item></item></R"));
        assert!(!xml_is_complete(""));
    }
}
