//! Vast.ai's marketplace (`POST {endpoint}/api/v0/bundles/`; a key is
//! optional). Offers are hosts, not instance types: the verified, rentable
//! ones are grouped per (GPU model, form factor, GPU count, country), and
//! each group's record is the exact median of its prices (`dph_total` on
//! demand, `min_bid` as spot). Without a `limit` the API answers 64 offers,
//! so one is always sent, and a full answer is warned about.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use crate::http::{HttpClient, RetryPolicy};
use crate::secret::Secret;
use crate::snapshot::{FormFactor, InstanceType, PriceKind, PriceRecord, Snapshot};
use crate::{FetchContext, Provider, ProviderError, gpu};

const PROVIDER: &str = "vast";
/// The environment variable holding the optional API key.
pub const API_KEY_ENV: &str = "GPUPLAN_VAST_API_KEY";
pub const DEFAULT_ENDPOINT: &str = "https://console.vast.ai";
/// Offers change by the minute; one request every 10 minutes is 144 a day.
pub const DEFAULT_SCHEDULE: &str = "0 */10 * * * *";
/// Offers asked for per sync: far more than the market lists.
pub const OFFER_LIMIT: usize = 10_000;

#[derive(Debug, Clone)]
pub struct VastConfig {
    /// Base URL; the adapter appends `/api/v0/bundles/`.
    pub endpoint: String,
    pub api_key: Option<Secret>,
    pub retry: RetryPolicy,
    /// Offers asked for; the answer is suspect when it holds exactly this many.
    pub limit: usize,
}

impl VastConfig {
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<VastProvider, ProviderError> {
        VastProvider::new(self)
    }
}

pub struct VastProvider {
    config: VastConfig,
    http: HttpClient,
}

impl VastProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: VastConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }
}

#[derive(Debug, Deserialize)]
struct Answer {
    offers: Vec<Offer>,
}

#[derive(Debug, Deserialize)]
struct Offer {
    num_gpus: u32,
    gpu_name: String,
    /// MB as the API says, MiB in practice.
    gpu_ram: Option<f64>,
    dph_total: f64,
    min_bid: Option<f64>,
    geolocation: Option<String>,
    verification: Option<String>,
    rentable: Option<bool>,
    rented: Option<bool>,
}

/// The exact median: the middle value, or the mean of the two middle ones.
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        f64::midpoint(values[n / 2 - 1], values[n / 2])
    })
}

/// The ISO code of a geolocation: after the last `", "`, or the whole value
/// when it is a code.
fn country(geolocation: &str) -> Option<String> {
    let code = geolocation
        .rsplit_once(", ")
        .map_or(geolocation, |(_, c)| c)
        .trim();
    (code.len() == 2 && code.chars().all(|c| c.is_ascii_alphabetic()))
        .then(|| code.to_ascii_uppercase())
}

#[async_trait]
impl Provider for VastProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER))]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let url = format!(
            "{}/api/v0/bundles/",
            self.config.endpoint.trim_end_matches('/')
        );
        let body = json!({
            "limit": self.config.limit,
            "type": "on-demand",
            "allocated_storage": 5,
        })
        .to_string();
        let key = self.config.api_key.clone();
        let bytes = self
            .http
            .send(&url, |c| {
                let r = c
                    .post(&url)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone());
                match &key {
                    Some(k) => r.bearer_auth(k.expose()),
                    None => r,
                }
            })
            .await
            .map_err(|e| e.with_auth_hint(API_KEY_ENV))?;
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: url.clone(),
            detail: e.to_string(),
        })?;
        if answer.offers.len() >= self.config.limit {
            tracing::warn!(
                provider = PROVIDER,
                offers = answer.offers.len(),
                limit = self.config.limit,
                "The answer holds as many offers as asked for: the market may have more, and the medians miss them."
            );
        }
        Ok(build_snapshot(answer.offers))
    }
}

/// A group's key: GPU model, form factor, GPUs per offer, country.
type Group = (String, Option<FormFactor>, u32, String);

/// A group's prices, and its model's memory.
#[derive(Default)]
struct Prices {
    on_demand: Vec<f64>,
    bids: Vec<f64>,
    memory_gib: Option<f64>,
}

fn build_snapshot(offers: Vec<Offer>) -> Snapshot {
    let mut snap = Snapshot::default();
    let mut groups: BTreeMap<Group, Prices> = BTreeMap::new();
    for o in offers {
        if o.verification.as_deref() != Some("verified") {
            snap.skip("unverified");
            continue;
        }
        if o.rentable != Some(true) || o.rented == Some(true) {
            snap.skip("not_rentable");
            continue;
        }
        let Some(country) = o.geolocation.as_deref().and_then(country) else {
            snap.skip("no_country");
            continue;
        };
        if o.num_gpus == 0 || !(o.dph_total.is_finite() && o.dph_total > 0.0) {
            snap.skip("no_price");
            continue;
        }
        let model = gpu::normalize(&o.gpu_name, o.gpu_ram.map(|mb| mb / 1024.0));
        if !model.known {
            tracing::warn!(provider = PROVIDER, gpu = %o.gpu_name, "GPU model is not in the normalization table; keeping it as written.");
        }
        let form = gpu::form_factor(&model.name, &o.gpu_name);
        let g = groups
            .entry((model.name, form, o.num_gpus, country))
            .or_insert_with(|| Prices {
                memory_gib: model.memory_gib,
                ..Prices::default()
            });
        g.on_demand.push(o.dph_total);
        if let Some(bid) = o.min_bid.filter(|b| b.is_finite() && *b > 0.0) {
            g.bids.push(bid);
        }
    }
    let mut types: BTreeMap<String, InstanceType> = BTreeMap::new();
    for ((model, form, n, country), mut prices) in groups {
        let instance_type = match form {
            Some(f) => format!("{n}x {model} {f}"),
            None => format!("{n}x {model}"),
        };
        let record = |kind: PriceKind, usd: f64| PriceRecord {
            region: country.clone(),
            zone: None,
            instance_type: instance_type.clone(),
            price_kind: kind,
            offering_class: None,
            usd_per_hour: usd,
            upfront_usd: 0.0,
            recurring_usd_per_hour: usd,
            source: None,
            available_regions: Vec::new(),
            max_instances: None,
            price_scope: crate::PriceScope::Instance,
            window: None,
        };
        if let Some(usd) = median(&mut prices.on_demand) {
            snap.prices.push(record(PriceKind::OnDemand, usd));
        }
        if let Some(usd) = median(&mut prices.bids) {
            snap.prices.push(record(PriceKind::Spot, usd));
        }
        types
            .entry(instance_type.clone())
            .or_insert_with(|| InstanceType {
                instance_type,
                gpu_model: model,
                gpu_count: f64::from(n),
                gpu_memory_gib: prices.memory_gib,
                vcpus: None,
                memory_gib: None,
                gpu_form_factor: form,
                mig_profile: None,
            });
    }
    snap.instance_types = types.into_values().collect();
    snap
}

/// `[providers.vast]` as written.
pub type Section = crate::config::EndpointSection;

/// The provider's config from its section, without its key, with each
/// problem noted in `p`.
pub fn config(
    section: &Section,
    retry: RetryPolicy,
    p: &mut crate::config::Problems,
) -> VastConfig {
    VastConfig {
        endpoint: section.endpoint(p, DEFAULT_ENDPOINT),
        api_key: None,
        retry,
        limit: OFFER_LIMIT,
    }
}

#[cfg(test)]
mod tests;
