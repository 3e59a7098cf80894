//! RunPod's GraphQL catalogue (`POST {endpoint}/graphql`; a key is optional).
//!
//! Prices are per GPU-hour and multiplied out to pod sizes of 1, 2, 4 and 8
//! GPUs, on the secure and the community cloud. Savings plans are paid for
//! the whole term upfront, so they are prepaid kinds. Where a pod size can
//! be had comes from `lowestPrice` per data center (secure) or country
//! (community): one request per pod size and cloud, the locations as
//! aliases. RunPod removed interruptible pods; the spot fields it still
//! answers are never read. Errors come in an `errors` array, on HTTP 200
//! too, and are never an empty catalogue.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{HttpClient, RetryPolicy, Verdict};
use crate::secret::Secret;
use crate::snapshot::{InstanceType, PriceKind, PriceRecord, Snapshot, Term};
use crate::{FetchContext, Provider, ProviderError, gpu};

const PROVIDER: &str = "runpod";
/// The environment variable holding the optional API key.
pub const API_KEY_ENV: &str = "GPUPLAN_RUNPOD_API_KEY";
pub const DEFAULT_ENDPOINT: &str = "https://api.runpod.io";
/// Pod sizes gpuplan prices.
const POD_SIZES: [u32; 4] = [1, 2, 4, 8];

const CATALOGUE: &str = "query Catalogue { gpuTypes { id displayName memoryInGb secureCloud \
    communityCloud maxGpuCountSecureCloud maxGpuCountCommunityCloud minPodGpuCount securePrice \
    communityPrice oneWeekPrice oneMonthPrice threeMonthPrice sixMonthPrice oneYearPrice } \
    dataCenters { id listed } countryCodes }";

#[derive(Debug, Clone)]
pub struct RunpodConfig {
    /// Base URL; the adapter appends `/graphql`.
    pub endpoint: String,
    pub api_key: Option<Secret>,
    pub retry: RetryPolicy,
}

impl RunpodConfig {
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<RunpodProvider, ProviderError> {
        RunpodProvider::new(self)
    }
}

pub struct RunpodProvider {
    config: RunpodConfig,
    http: HttpClient,
}

impl RunpodProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: RunpodConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }

    fn url(&self) -> String {
        format!("{}/graphql", self.config.endpoint.trim_end_matches('/'))
    }

    /// Runs one GraphQL query; `data` of the answer, or the `errors` it gave.
    async fn query(&self, query: &str) -> Result<Value, ProviderError> {
        let url = self.url();
        let body = json!({ "query": query }).to_string();
        let key = self.config.api_key.clone();
        let judge = |status: reqwest::StatusCode, bytes: &[u8]| -> Verdict {
            let doc: Option<Value> = serde_json::from_slice(bytes).ok();
            match doc.as_ref().and_then(|d| d.get("errors")) {
                Some(Value::Array(errors)) if !errors.is_empty() => {
                    if status.as_u16() == 429 || status.is_server_error() {
                        return Verdict::ByStatus;
                    }
                    let messages: Vec<String> = errors
                        .iter()
                        .map(|e| {
                            e.get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("an error without a message")
                                .to_owned()
                        })
                        .collect();
                    let detail = format!("GraphQL errors: {}", messages.join("; "));
                    if status.as_u16() == 401 || status.as_u16() == 403 {
                        Verdict::Fail(ProviderError::Auth {
                            provider: PROVIDER.to_owned(),
                            url: url.clone(),
                            detail: format!("{detail} (check {API_KEY_ENV})"),
                        })
                    } else {
                        Verdict::Fail(ProviderError::Decode {
                            provider: PROVIDER.to_owned(),
                            location: url.clone(),
                            detail,
                        })
                    }
                }
                _ if status.is_success() => Verdict::Done,
                _ => Verdict::ByStatus,
            }
        };
        let bytes = self
            .http
            .send_judged(
                &url,
                |c| {
                    let r = c
                        .post(&url)
                        .header(reqwest::header::CONTENT_TYPE, "application/json")
                        .body(body.clone());
                    match &key {
                        Some(k) => r.bearer_auth(k.expose()),
                        None => r,
                    }
                },
                &judge,
            )
            .await?;
        let doc: Value = serde_json::from_slice(&bytes).map_err(|e| self.decode(e.to_string()))?;
        doc.get("data")
            .filter(|d| d.is_object())
            .cloned()
            .ok_or_else(|| self.decode("the answer has no `data` object".to_owned()))
    }

    fn decode(&self, detail: String) -> ProviderError {
        ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: self.url(),
            detail,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Catalogue {
    gpu_types: Vec<GpuType>,
    data_centers: Vec<DataCenter>,
    country_codes: Vec<Option<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GpuType {
    id: String,
    display_name: String,
    memory_in_gb: Option<f64>,
    secure_cloud: Option<bool>,
    community_cloud: Option<bool>,
    max_gpu_count_secure_cloud: Option<u32>,
    max_gpu_count_community_cloud: Option<u32>,
    min_pod_gpu_count: Option<u32>,
    secure_price: Option<f64>,
    community_price: Option<f64>,
    one_week_price: Option<f64>,
    one_month_price: Option<f64>,
    three_month_price: Option<f64>,
    six_month_price: Option<f64>,
    one_year_price: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct DataCenter {
    id: String,
    listed: Option<bool>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cloud {
    Secure,
    Community,
}

impl Cloud {
    fn name(self) -> &'static str {
        match self {
            Self::Secure => "secure",
            Self::Community => "community",
        }
    }
}

impl GpuType {
    /// The per-GPU price on `cloud`, where the type is offered there.
    fn price(&self, cloud: Cloud) -> Option<f64> {
        let (flag, price) = match cloud {
            Cloud::Secure => (self.secure_cloud, self.secure_price),
            Cloud::Community => (self.community_cloud, self.community_price),
        };
        price.filter(|p| flag == Some(true) && p.is_finite() && *p > 0.0)
    }

    /// The pod sizes offered on `cloud`.
    fn sizes(&self, cloud: Cloud) -> Vec<u32> {
        let max = match cloud {
            Cloud::Secure => self.max_gpu_count_secure_cloud,
            Cloud::Community => self.max_gpu_count_community_cloud,
        }
        .unwrap_or(0);
        let min = self.min_pod_gpu_count.unwrap_or(1);
        POD_SIZES
            .into_iter()
            .filter(|n| *n >= min && *n <= max)
            .collect()
    }
}

/// A GraphQL string literal.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The stock query of one pod size on one cloud: every location an alias.
fn stock_query(n: u32, cloud: Cloud, locations: &[String]) -> String {
    let fields: Vec<String> = locations
        .iter()
        .enumerate()
        .map(|(i, loc)| {
            let place = match cloud {
                Cloud::Secure => format!("secureCloud: true, dataCenterId: {}", quoted(loc)),
                Cloud::Community => format!("secureCloud: false, countryCode: {}", quoted(loc)),
            };
            format!(
                "l{i}: gpuTypes {{ id lowestPrice(input: {{gpuCount: {n}, {place}}}) {{ stockStatus uninterruptablePrice }} }}"
            )
        })
        .collect();
    format!("query Stock {{ {} }}", fields.join(" "))
}

/// Which gpu type ids have stock, per location alias of a stock answer.
fn stocked(
    data: &Value,
    locations: &[String],
) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (i, loc) in locations.iter().enumerate() {
        let Some(types) = data.get(format!("l{i}")).and_then(Value::as_array) else {
            return Err(format!("the stock answer has no `l{i}` list for {loc}"));
        };
        for t in types {
            let id = t
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a gpuType of `l{i}` has no id"))?;
            let status = t.get("lowestPrice").and_then(|p| p.get("stockStatus"));
            if status.is_some_and(|s| !s.is_null()) {
                out.entry(id.to_owned()).or_default().insert(loc.clone());
            }
        }
    }
    Ok(out)
}

#[async_trait]
impl Provider for RunpodProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER))]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let data = self.query(CATALOGUE).await?;
        let catalogue: Catalogue =
            serde_json::from_value(data).map_err(|e| self.decode(e.to_string()))?;
        let centers: Vec<String> = {
            let mut c: Vec<String> = catalogue
                .data_centers
                .iter()
                .filter(|d| d.listed == Some(true))
                .map(|d| d.id.clone())
                .collect();
            c.sort();
            c.dedup();
            c
        };
        let countries: Vec<String> = {
            let mut c: Vec<String> = catalogue.country_codes.iter().flatten().cloned().collect();
            c.sort();
            c.dedup();
            c
        };
        // Where each (type, size, cloud) has stock.
        let mut stock: BTreeMap<(String, u32, Cloud), Vec<String>> = BTreeMap::new();
        for cloud in [Cloud::Secure, Cloud::Community] {
            let locations = match cloud {
                Cloud::Secure => &centers,
                Cloud::Community => &countries,
            };
            let wanted = catalogue
                .gpu_types
                .iter()
                .any(|t| t.price(cloud).is_some() && !t.sizes(cloud).is_empty());
            if locations.is_empty() || !wanted {
                continue;
            }
            for n in POD_SIZES {
                let data = self.query(&stock_query(n, cloud, locations)).await?;
                for (id, places) in stocked(&data, locations).map_err(|e| self.decode(e))? {
                    stock.insert((id, n, cloud), places.into_iter().collect());
                }
            }
        }
        Ok(build_snapshot(&catalogue.gpu_types, &stock))
    }
}

fn build_snapshot(
    types: &[GpuType],
    stock: &BTreeMap<(String, u32, Cloud), Vec<String>>,
) -> Snapshot {
    let mut snap = Snapshot::default();
    for t in types {
        let mut model = gpu::normalize(&t.display_name, t.memory_in_gb);
        if !model.known {
            model = gpu::normalize(&t.id, t.memory_in_gb);
        }
        if !model.known {
            tracing::warn!(provider = PROVIDER, gpu = %t.id, "GPU model is not in the normalization table; keeping it as written.");
        }
        let form = gpu::form_factor(&model.name, &format!("{} {}", t.id, t.display_name));
        let mut offered = false;
        for cloud in [Cloud::Secure, Cloud::Community] {
            let Some(per_gpu) = t.price(cloud) else {
                continue;
            };
            for n in t.sizes(cloud) {
                offered = true;
                let instance_type = format!("{n}x {} ({})", t.id, cloud.name());
                let regions = stock
                    .get(&(t.id.clone(), n, cloud))
                    .cloned()
                    .unwrap_or_default();
                let record = |kind: PriceKind, usd: f64| {
                    let upfront = kind.term_hours().map_or(0.0, |h| usd * h);
                    PriceRecord {
                        region: "global".to_owned(),
                        zone: None,
                        instance_type: instance_type.clone(),
                        price_kind: kind,
                        offering_class: None,
                        usd_per_hour: usd,
                        upfront_usd: upfront,
                        recurring_usd_per_hour: if upfront > 0.0 { 0.0 } else { usd },
                        source: Some(t.id.clone()),
                        available_regions: regions.clone(),
                        max_instances: None,
                        price_scope: crate::PriceScope::Instance,
                        window: None,
                    }
                };
                let f = f64::from(n);
                snap.prices.push(record(PriceKind::OnDemand, per_gpu * f));
                if cloud == Cloud::Secure {
                    for (term, rate) in [
                        (Term::OneWeek, t.one_week_price),
                        (Term::OneMonth, t.one_month_price),
                        (Term::ThreeMonths, t.three_month_price),
                        (Term::SixMonths, t.six_month_price),
                        (Term::OneYear, t.one_year_price),
                    ] {
                        if let Some(rate) = rate.filter(|r| r.is_finite() && *r > 0.0) {
                            snap.prices.push(record(PriceKind::Prepaid(term), rate * f));
                        }
                    }
                }
                snap.instance_types.push(InstanceType {
                    instance_type,
                    gpu_model: model.name.clone(),
                    gpu_count: f64::from(n),
                    gpu_memory_gib: model.memory_gib,
                    vcpus: None,
                    memory_gib: None,
                    gpu_form_factor: form,
                    mig_profile: None,
                });
            }
        }
        if !offered {
            snap.skip("not_offered");
        }
    }
    snap
}

/// `[providers.runpod]` as written.
pub type Section = crate::config::EndpointSection;

/// The provider's config from its section, without its key, with each
/// problem noted in `p`.
pub fn config(
    section: &Section,
    retry: RetryPolicy,
    p: &mut crate::config::Problems,
) -> RunpodConfig {
    RunpodConfig {
        endpoint: section.endpoint(p, DEFAULT_ENDPOINT),
        api_key: None,
        retry,
    }
}

#[cfg(test)]
mod tests;
