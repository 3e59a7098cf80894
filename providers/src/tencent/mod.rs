//! Tencent Cloud CVM through API 3.0 (docs/providers.md, "Tencent Cloud"):
//! per configured region, every zone's on-demand, spot and prepaid price of
//! each GPU type, with sold-out stock kept as availability.
//!
//! Traps handled: errors arrive as HTTP 200 with `Response.Error`, which is
//! read before anything else and never taken for an empty answer; prices may
//! be numbers or numeric strings; `Gpu` says 1 for a vGPU slice, so the card
//! count is `GpuCount`; dedicated-host charge types are priced 0 because the
//! host is billed, and are skipped.

mod section;
pub(crate) mod sign;
#[cfg(test)]
mod tests;
mod wire;

pub use section::Section;

use std::collections::BTreeMap;

use async_trait::async_trait;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use crate::http::{HttpClient, RetryPolicy, Verdict};
use crate::secret::Secret;
use crate::snapshot::{
    AvailabilityRecord, AvailabilitySignal, Currency, InstanceType, PriceKind, PriceRecord,
    PriceScope, Snapshot, Term,
};
use crate::{FetchContext, Provider, ProviderError, RegionScope, gpu};

const PROVIDER: &str = "tencent";
pub const SECRET_ID_ENV: &str = "GPUPLAN_TENCENT_SECRET_ID";
pub const SECRET_KEY_ENV: &str = "GPUPLAN_TENCENT_SECRET_KEY";
pub const DEFAULT_ENDPOINT: &str = "https://cvm.tencentcloudapi.com";
const VERSION: &str = "2017-03-12";

#[derive(Debug, Clone)]
pub struct TencentConfig {
    /// Base URL; the path stays `/` and the region goes in `X-TC-Region`.
    pub endpoint: String,
    /// Region ids (`ap-singapore`); at least one.
    pub regions: Vec<String>,
    pub secret_id: Option<Secret>,
    pub secret_key: Option<Secret>,
    /// The site's currency and the configured rate (USD for international).
    pub currency: Currency,
    pub retry: RetryPolicy,
}

impl TencentConfig {
    /// The provider this config describes.
    ///
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<TencentProvider, ProviderError> {
        TencentProvider::new(self)
    }
}

pub struct TencentProvider {
    config: TencentConfig,
    http: HttpClient,
    /// `host[:port]` of the endpoint, as the `host` header the signature covers.
    host: String,
}

impl TencentProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built or the endpoint is
    /// not a URL with a host.
    pub fn new(config: TencentConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        let url = reqwest::Url::parse(&config.endpoint).ok();
        let host = url
            .as_ref()
            .and_then(|u| {
                u.host_str().map(|h| match u.port() {
                    Some(port) => format!("{h}:{port}"),
                    None => h.to_owned(),
                })
            })
            .ok_or_else(|| ProviderError::Transport {
                provider: PROVIDER.to_owned(),
                url: config.endpoint.clone(),
                detail: "the endpoint is not a URL with a host".to_owned(),
            })?;
        Ok(Self { config, http, host })
    }

    fn keys(&self) -> Result<(&Secret, &Secret), ProviderError> {
        match (&self.config.secret_id, &self.config.secret_key) {
            (Some(id), Some(key)) => Ok((id, key)),
            _ => Err(ProviderError::Auth {
                provider: PROVIDER.to_owned(),
                url: self.config.endpoint.clone(),
                detail: format!("no API key: set {SECRET_ID_ENV} and {SECRET_KEY_ENV}"),
            }),
        }
    }

    /// One signed call of `action` in `region`.
    async fn call<T: DeserializeOwned>(
        &self,
        action: &str,
        region: &str,
        body: &serde_json::Value,
    ) -> Result<T, ProviderError> {
        let (id, key) = self.keys()?;
        let url = format!("{}/", self.config.endpoint.trim_end_matches('/'));
        let shown = format!("{url} ({action} in {region})");
        // The body is hashed into the signature: these exact bytes are sent.
        let body = body.to_string();
        let judge = |status: StatusCode, bytes: &[u8]| judge(&shown, status, bytes);
        let answer = self
            .http
            .send_judged(
                &shown,
                |c| {
                    let timestamp = chrono::Utc::now().timestamp();
                    c.post(&url)
                        .header("content-type", sign::CONTENT_TYPE)
                        .header("x-tc-action", action)
                        .header("x-tc-version", VERSION)
                        .header("x-tc-region", region)
                        .header("x-tc-timestamp", timestamp.to_string())
                        .header(
                            "authorization",
                            sign::authorization(
                                id.expose(),
                                key.expose(),
                                &self.host,
                                &body,
                                timestamp,
                            ),
                        )
                        .body(body.clone())
                },
                &judge,
            )
            .await
            .map_err(|e| e.with_auth_hint(&format!("{SECRET_ID_ENV} and {SECRET_KEY_ENV}")))?;
        serde_json::from_slice::<wire::Envelope<T>>(&answer)
            .map(|e| e.response)
            .map_err(|e| ProviderError::Decode {
                provider: PROVIDER.to_owned(),
                location: shown,
                detail: e.to_string(),
            })
    }

    /// Every record of one region.
    async fn region(&self, region: &str, snap: &mut Snapshot) -> Result<(), ProviderError> {
        let filters = serde_json::json!({"Filters": [{
            "Name": "instance-charge-type",
            "Values": ["POSTPAID_BY_HOUR", "SPOTPAID", "PREPAID"],
        }]});
        let quotas: wire::ZoneInstanceConfigInfos = self
            .call("DescribeZoneInstanceConfigInfos", region, &filters)
            .await?;
        let configs: wire::InstanceTypeConfigs = self
            .call(
                "DescribeInstanceTypeConfigs",
                region,
                &serde_json::json!({}),
            )
            .await?;
        let gpus: BTreeMap<&str, &wire::TypeConfig> = configs
            .instance_type_config_set
            .iter()
            .map(|c| (c.instance_type.as_str(), c))
            .collect();
        // (zone, type) -> whether any charge type sells it now.
        let mut stock: BTreeMap<(String, String), bool> = BTreeMap::new();
        for quota in &quotas.instance_type_quota_set {
            let Some(instance_type) =
                self.describe(quota, gpus.get(quota.instance_type.as_str()), snap)
            else {
                continue;
            };
            let records = self.records(region, quota, snap);
            if records.is_empty() {
                continue;
            }
            snap.prices.extend(records);
            let selling = stock
                .entry((quota.zone.clone(), quota.instance_type.clone()))
                .or_insert(false);
            *selling |= quota.status == "SELL";
            if !snap
                .instance_types
                .iter()
                .any(|t| t.instance_type == instance_type.instance_type)
            {
                snap.instance_types.push(instance_type);
            }
        }
        for ((zone, instance_type), selling) in stock {
            for signal in [
                AvailabilitySignal::Offered,
                AvailabilitySignal::CapacityAvailable(selling),
            ] {
                snap.availability.push(AvailabilityRecord {
                    region: region.to_owned(),
                    zone: Some(zone.clone()),
                    instance_type: instance_type.clone(),
                    signal,
                });
            }
        }
        Ok(())
    }

    /// The quota item's GPU type (a slice when GpuCount is below 1), or
    /// `None` (counted) when it has no GPU or its charge type is not priced here.
    fn describe(
        &self,
        quota: &wire::Quota,
        config: Option<&&wire::TypeConfig>,
        snap: &mut Snapshot,
    ) -> Option<InstanceType> {
        if !matches!(
            quota.instance_charge_type.as_str(),
            "POSTPAID_BY_HOUR" | "SPOTPAID" | "PREPAID"
        ) {
            snap.skip("charge_type_unsupported");
            return None;
        }
        let count = quota.gpu_count.unwrap_or(0.0);
        if count <= 0.0 {
            snap.skip("no_gpu");
            return None;
        }
        let Some(config) = config.filter(|c| !c.gpu_type.trim().is_empty()) else {
            tracing::warn!(provider = PROVIDER, instance_type = %quota.instance_type, "No GPU type in DescribeInstanceTypeConfigs; skipping.");
            snap.skip("no_gpu_type");
            return None;
        };
        let spec = config.gpu_type.trim();
        let name = spec.strip_prefix("NVIDIA ").unwrap_or(spec);
        // GpuCount (0.25, 0.5) is the share of a slice, whose GpuMemory is
        // the slice's: the card's decides between model sizes.
        let card_memory = config
            .gpu_memory
            .map(|m| if count < 1.0 { m / count } else { m });
        let model = gpu::normalize(name, card_memory);
        if !model.known {
            tracing::warn!(provider = PROVIDER, instance_type = %quota.instance_type, gpu = %spec, "GPU model is not in the normalization table; keeping it as written.");
        }
        Some(InstanceType {
            gpu_form_factor: gpu::form_factor(&model.name, spec),
            instance_type: quota.instance_type.clone(),
            gpu_model: model.name,
            gpu_count: count,
            gpu_memory_gib: gpu::share_memory(model.memory_gib, count),
            vcpus: quota.cpu,
            memory_gib: quota.memory,
            mig_profile: None,
        })
    }

    /// The item's prices in USD; a missing price is skipped, never zero.
    fn records(&self, region: &str, quota: &wire::Quota, snap: &mut Snapshot) -> Vec<PriceRecord> {
        let price = quota.price.as_ref();
        let terms: Vec<(PriceKind, Option<f64>)> = match quota.instance_charge_type.as_str() {
            "POSTPAID_BY_HOUR" => vec![(
                PriceKind::OnDemand,
                price.and_then(|p| p.unit_price_discount),
            )],
            "SPOTPAID" => vec![(PriceKind::Spot, price.and_then(|p| p.unit_price_discount))],
            _ => vec![
                (
                    PriceKind::Prepaid(Term::OneMonth),
                    price.and_then(|p| p.discount_price),
                ),
                (
                    PriceKind::Prepaid(Term::OneYear),
                    price.and_then(|p| p.discount_price_one_year),
                ),
                (
                    PriceKind::Prepaid(Term::ThreeYears),
                    price.and_then(|p| p.discount_price_three_year),
                ),
            ],
        };
        let mut out = Vec::new();
        for (kind, amount) in terms {
            let Some(amount) = amount.filter(|a| a.is_finite() && *a > 0.0) else {
                if amount == Some(0.0) {
                    snap.skip("zero_price");
                } else if kind.term().is_none() {
                    snap.skip("no_price");
                }
                continue;
            };
            let usd = self.config.currency.to_usd(amount);
            let (usd_per_hour, upfront_usd, recurring) = match kind.term_hours() {
                Some(hours) => (usd / hours, usd, 0.0),
                None => (usd, 0.0, usd),
            };
            out.push(PriceRecord {
                region: region.to_owned(),
                zone: Some(quota.zone.clone()),
                instance_type: quota.instance_type.clone(),
                price_kind: kind,
                offering_class: None,
                usd_per_hour,
                upfront_usd,
                recurring_usd_per_hour: recurring,
                source: Some(quota.instance_charge_type.clone()),
                available_regions: Vec::new(),
                max_instances: None,
                price_scope: PriceScope::Instance,
                window: None,
            });
        }
        out
    }
}

/// Reads `Response.Error` before anything else: an error is never an empty
/// answer. Rate limits and internal errors are retried; an answer that is
/// not the API's goes by its status.
fn judge(shown: &str, status: StatusCode, body: &[u8]) -> Verdict {
    let fail_http = |detail: String| ProviderError::Http {
        provider: PROVIDER.to_owned(),
        url: shown.to_owned(),
        status: status.as_u16(),
        body: detail,
    };
    let error = match serde_json::from_slice::<wire::Envelope<wire::MaybeError>>(body) {
        Ok(envelope) => envelope.response.error,
        Err(e) if status.is_success() => {
            return Verdict::Fail(ProviderError::Decode {
                provider: PROVIDER.to_owned(),
                location: shown.to_owned(),
                detail: format!("not a `Response` answer: {e}"),
            });
        }
        Err(_) => None,
    };
    let Some(wire::ApiError { code, message }) = error else {
        return Verdict::ByStatus;
    };
    let message: String = message.chars().take(300).collect();
    if code.starts_with("RequestLimitExceeded") {
        Verdict::Retry(ProviderError::RateLimited {
            provider: PROVIDER.to_owned(),
            url: format!("{shown}: {code}"),
            retry_after: None,
        })
    } else if code.starts_with("InternalError") || status.is_server_error() {
        Verdict::Retry(fail_http(format!("{code}: {message}")))
    } else if code.starts_with("AuthFailure") {
        Verdict::Fail(ProviderError::Auth {
            provider: PROVIDER.to_owned(),
            url: shown.to_owned(),
            detail: format!("{code}: {message}"),
        })
    } else {
        Verdict::Fail(fail_http(format!("{code}: {message}")))
    }
}

#[async_trait]
impl Provider for TencentProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::of_configured(&self.config.regions)
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER))]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        self.keys()?;
        let mut snap = Snapshot {
            currency: self.config.currency.clone(),
            ..Snapshot::default()
        };
        for region in &self.config.regions {
            self.region(region, &mut snap).await?;
        }
        Ok(snap)
    }
}
