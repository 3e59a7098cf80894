//! Alibaba Cloud ECS through its RPC API (docs/providers.md, "Alibaba
//! Cloud"): GPU instance types, zone availability, on-demand and prepaid
//! prices from `DescribePrice`, and spot price history.
//!
//! Traps handled: prices come from the order's `instanceType` line, never the
//! order total (which adds the system disk and bandwidth); throttling arrives
//! as HTTP 403 or 400 and is told apart by its `Code`; spot history is paged
//! by offset, unsorted, and read incrementally per region; regional calls go
//! to the endpoint `DescribeRegions` names, never one built by pattern.
//!
//! `DescribePrice` is one call per type, region and term, so calls run a few
//! at a time and a sync stops at its request budget instead of spending a
//! day's quota.

mod calls;
mod section;
pub(crate) mod sign;
#[cfg(test)]
mod tests;
mod wire;

pub use section::Section;

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use futures_util::{StreamExt, TryStreamExt, stream};

use crate::gpu;
use crate::http::{HttpClient, RetryPolicy};
use crate::secret::Secret;
use crate::snapshot::{
    AvailabilityRecord, AvailabilitySignal, Currency, InstanceType, PriceKind, PriceRecord,
    Snapshot, SpotObservation, Term,
};
use crate::{FetchContext, Provider, ProviderError, RegionScope};

use calls::{Answer, Session};

const PROVIDER: &str = "alibaba";
pub const ACCESS_KEY_ID_ENV: &str = "GPUPLAN_ALIBABA_ACCESS_KEY_ID";
pub const ACCESS_KEY_SECRET_ENV: &str = "GPUPLAN_ALIBABA_ACCESS_KEY_SECRET";

/// `DescribePrice`'s answer for a term the type is not sold on.
const PRICE_NOT_FOUND: &str = "PriceNotFound";
/// `DescribePrice`'s answer for a type not sold in the region.
const NOT_SOLD: &str = "InvalidInstanceType.ValueNotSupported";

/// The four price terms, each one `DescribePrice` call.
const TERMS: [(&str, u32, PriceKind); 4] = [
    ("Hour", 1, PriceKind::OnDemand),
    ("Month", 1, PriceKind::Prepaid(Term::OneMonth)),
    ("Year", 1, PriceKind::Prepaid(Term::OneYear)),
    ("Year", 3, PriceKind::Prepaid(Term::ThreeYears)),
];

#[derive(Debug, Clone)]
pub struct AlibabaConfig {
    /// A base URL every call goes to instead of Alibaba's own endpoints (a
    /// mirror, or a test server); `None` uses `ecs.aliyuncs.com` and each
    /// region's endpoint.
    pub endpoint: Option<String>,
    /// Region ids; none means every region of the account.
    pub regions: Vec<String>,
    /// Instance type names or `*` patterns; none selects every GPU type.
    pub instance_types: Vec<String>,
    pub access_key_id: Option<Secret>,
    pub access_key_secret: Option<Secret>,
    /// The site's currency and the configured rate (USD for international).
    pub currency: Currency,
    /// How far back the first sync of a region reads spot history (at most 30).
    pub spot_history_days: u32,
    /// Calls in flight at once.
    pub concurrency: usize,
    /// Most calls one sync may make, retries not counted.
    pub max_requests: u32,
    pub retry: RetryPolicy,
}

impl AlibabaConfig {
    /// The provider this config describes.
    ///
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<AlibabaProvider, ProviderError> {
        AlibabaProvider::new(self)
    }
}

pub struct AlibabaProvider {
    config: AlibabaConfig,
    http: HttpClient,
}

impl AlibabaProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: AlibabaConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }
}

/// A GPU type as the catalog describes it, or why it is skipped.
fn describe(info: &wire::InstanceTypeInfo) -> Result<InstanceType, &'static str> {
    let spec = info.gpu_spec.trim();
    let amount = info.gpu_amount.unwrap_or(0.0);
    if amount <= 0.0 || spec.is_empty() {
        return Err("no_gpu");
    }
    // vGPU slices say so in the spec, whatever GPUAmount (1) says:
    // `NVIDIA A10*1/12` is a twelfth of an A10, `NVIDIA T4/4` a quarter of a T4.
    let (spec, count) = match spec.split_once('*').or_else(|| spec.split_once('/')) {
        Some((card, share)) => {
            let share = if share.contains('/') {
                gpu::parse_count(share)
            } else {
                gpu::parse_count(&format!("1/{share}"))
            };
            match share {
                Ok(s) if s <= 1.0 => (card.trim(), s),
                _ => return Err("unreadable_gpu_spec"),
            }
        }
        None if amount.fract() == 0.0 => (spec, amount),
        None => return Err("unreadable_gpu_spec"),
    };
    let name = spec
        .strip_prefix("NVIDIA ")
        .or_else(|| spec.strip_prefix("AMD "))
        .unwrap_or(spec);
    // GPUMemorySize is the slice's: the card's decides between model sizes.
    let card_memory = info
        .gpu_memory_size
        .map(|m| if count < 1.0 { m / count } else { m });
    let model = gpu::normalize(name, card_memory);
    if !model.known {
        tracing::warn!(provider = PROVIDER, instance_type = %info.instance_type_id, gpu = %spec, "GPU model is not in the normalization table; keeping it as written.");
    }
    Ok(InstanceType {
        gpu_form_factor: gpu::form_factor(&model.name, spec),
        instance_type: info.instance_type_id.clone(),
        gpu_model: model.name,
        gpu_count: count,
        gpu_memory_gib: gpu::share_memory(model.memory_gib, count),
        vcpus: info.cpu_core_count,
        memory_gib: info.memory_size,
        mig_profile: None,
    })
}

/// What one region gave.
#[derive(Default)]
struct RegionPart {
    prices: Vec<PriceRecord>,
    spot: Vec<SpotObservation>,
    availability: Vec<AvailabilityRecord>,
    skipped: Vec<&'static str>,
}

impl AlibabaProvider {
    /// The access key pair, or an `Auth` error naming the variables to set.
    fn keys(&self) -> Result<(&Secret, &Secret), ProviderError> {
        match (&self.config.access_key_id, &self.config.access_key_secret) {
            (Some(id), Some(secret)) => Ok((id, secret)),
            _ => Err(ProviderError::Auth {
                provider: PROVIDER.to_owned(),
                url: calls::base(&self.config, None),
                detail: format!(
                    "no access key: set {ACCESS_KEY_ID_ENV} and {ACCESS_KEY_SECRET_ENV}"
                ),
            }),
        }
    }

    /// One region: which GPU types its zones list, their prices, and new spot
    /// history since `since`.
    async fn region(
        &self,
        session: &Session<'_>,
        region: &wire::Region,
        types: &BTreeMap<String, InstanceType>,
        since: DateTime<Utc>,
    ) -> Result<RegionPart, ProviderError> {
        let mut part = RegionPart::default();
        let zones = session.available_resource(region).await?;
        let mut offered: Vec<String> = Vec::new();
        for (instance_type, statuses) in &zones {
            if !types.contains_key(instance_type) {
                continue;
            }
            offered.push(instance_type.clone());
            for (zone, status) in statuses {
                for signal in [
                    AvailabilitySignal::Offered,
                    AvailabilitySignal::CapacityAvailable(status == "Available"),
                ] {
                    part.availability.push(AvailabilityRecord {
                        region: region.region_id.clone(),
                        zone: Some(zone.clone()),
                        instance_type: instance_type.clone(),
                        signal,
                    });
                }
            }
        }
        // Owned names: futures that borrow the list trip the compiler's
        // lifetime inference inside `async_trait`.
        let priced: Vec<(Vec<PriceRecord>, Vec<&'static str>)> = stream::iter(offered.clone())
            .map(|t| self.prices(session, region, t))
            .buffer_unordered(self.config.concurrency)
            .try_collect()
            .await?;
        for (prices, skipped) in priced {
            part.prices.extend(prices);
            part.skipped.extend(skipped);
        }
        let spot: Vec<Vec<SpotObservation>> = stream::iter(offered)
            .map(|t| self.spot_history(session, region, t, since))
            .buffer_unordered(self.config.concurrency)
            .try_collect()
            .await?;
        part.spot = spot.into_iter().flatten().collect();
        Ok(part)
    }

    /// The type's price for each term: the on-demand call first, so a type
    /// not sold in the region costs one call, not four.
    async fn prices(
        &self,
        session: &Session<'_>,
        region: &wire::Region,
        instance_type: String,
    ) -> Result<(Vec<PriceRecord>, Vec<&'static str>), ProviderError> {
        let mut prices = Vec::new();
        let mut skipped = Vec::new();
        for (unit, period, kind) in TERMS {
            let answer = session
                .describe_price(region, &instance_type, unit, period)
                .await?;
            let total = match answer {
                Answer::Refused(code) if code == NOT_SOLD => {
                    skipped.push("not_sold_in_region");
                    break;
                }
                Answer::Refused(_) => {
                    skipped.push("price_not_found");
                    continue;
                }
                Answer::Ok(price) if price <= 0.0 => {
                    skipped.push("zero_price");
                    continue;
                }
                Answer::Ok(price) => self.config.currency.to_usd(price),
            };
            let (usd_per_hour, upfront_usd, recurring) = match kind.term_hours() {
                Some(hours) => (total / hours, total, 0.0),
                None => (total, 0.0, total),
            };
            prices.push(PriceRecord {
                region: region.region_id.clone(),
                zone: None,
                instance_type: instance_type.clone(),
                price_kind: kind,
                offering_class: None,
                usd_per_hour,
                upfront_usd,
                recurring_usd_per_hour: recurring,
                source: Some(format!("DescribePrice {unit}/{period}")),
                available_regions: Vec::new(),
                max_instances: None,
                price_scope: crate::PriceScope::Instance,
                window: None,
            });
        }
        Ok((prices, skipped))
    }

    /// Every spot observation of the type since `since`, in every zone.
    async fn spot_history(
        &self,
        session: &Session<'_>,
        region: &wire::Region,
        instance_type: String,
        since: DateTime<Utc>,
    ) -> Result<Vec<SpotObservation>, ProviderError> {
        let rows = session
            .spot_price_history(region, &instance_type, since)
            .await?;
        rows.into_iter()
            .map(|row| {
                let observed_at = DateTime::parse_from_rfc3339(&row.timestamp)
                    .map_err(|e| {
                        session.decode_error(
                            "DescribeSpotPriceHistory",
                            Some(region),
                            format!("Timestamp `{}`: {e}", row.timestamp),
                        )
                    })?
                    .with_timezone(&Utc);
                Ok(SpotObservation {
                    region: region.region_id.clone(),
                    zone: row.zone_id,
                    instance_type: row.instance_type,
                    usd_per_hour: self.config.currency.to_usd(row.spot_price),
                    observed_at,
                })
            })
            .collect()
    }

    /// Where a region's spot history starts: after its newest stored
    /// observation, or `spot_history_days` back, and never more than the
    /// 30 days the API keeps.
    fn since(&self, ctx: &FetchContext, region: &str, now: DateTime<Utc>) -> DateTime<Utc> {
        let oldest = now - ChronoDuration::days(30);
        ctx.newest_spot_by_region
            .get(region)
            .copied()
            .unwrap_or_else(|| now - ChronoDuration::days(i64::from(self.config.spot_history_days)))
            .max(oldest)
    }
}

#[async_trait]
impl Provider for AlibabaProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::of_configured(&self.config.regions)
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER, requests))]
    async fn fetch(&self, ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let (id, secret) = self.keys()?;
        let session = Session::new(&self.config, &self.http, id, secret);
        let regions = session.regions().await?;
        let mut snap = Snapshot {
            currency: self.config.currency.clone(),
            ..Snapshot::default()
        };
        let mut types = BTreeMap::new();
        for info in session.instance_types().await? {
            match describe(&info) {
                Ok(t) if crate::config::selected(&self.config.instance_types, &t.instance_type) => {
                    types.insert(t.instance_type.clone(), t);
                }
                Ok(_) => snap.skip("not_selected"),
                Err(reason) => snap.skip(reason),
            }
        }
        let now = Utc::now();
        for region in &regions {
            let since = self.since(ctx, &region.region_id, now);
            let part = self.region(&session, region, &types, since).await?;
            snap.prices.extend(part.prices);
            snap.spot_observations.extend(part.spot);
            snap.availability.extend(part.availability);
            for reason in part.skipped {
                snap.skip(reason);
            }
        }
        snap.instance_types = types
            .into_values()
            .filter(|t| {
                snap.availability
                    .iter()
                    .any(|a| a.instance_type == t.instance_type)
            })
            .collect();
        let requests = session.requests();
        tracing::Span::current().record("requests", requests);
        tracing::info!(
            provider = PROVIDER,
            requests,
            "Alibaba sync made its calls."
        );
        Ok(snap)
    }
}
