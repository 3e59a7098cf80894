//! GCP Cloud Billing Catalog (Compute Engine service `6F81-5844-456A`), with an
//! API key from the environment, plus machine shapes from the Compute API when an
//! OAuth token and a project are configured (else from a built-in table).
//!
//! Quirks handled here (docs/providers.md §7): money is `units` (a string, may be
//! absent) + `nanos`/1e9; the latest `pricingInfo` wins; tiered rates take the
//! first non-zero tier; Virtual Workstation GPUs (GRID licence included) are
//! skipped. A SKU's kind comes from its description first and `usageType`
//! second ([`sku_kind`]): Dynamic Workload Scheduler and calendar-mode SKUs
//! say `OnDemand` too. One price per (part, kind, region): the first SKU keeps
//! it, a second is counted as a duplicate and never replaces it. GPUs are billed
//! apart from the VM, so a GPU machine type's price is composed:
//! vCPUs x core + GiB x RAM + GPUs x GPU, for each kind where all three exist.

mod section;
pub mod shapes;

pub use section::Section;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use async_trait::async_trait;
use reqwest::Url;
use serde::Deserialize;
use serde_json::Value;

use crate::http::{HttpClient, RetryPolicy};
use crate::secret::Secret;
use crate::snapshot::{
    AvailabilityRecord, AvailabilitySignal, InstanceType, PriceKind, PriceRecord, Snapshot, Term,
};
use crate::{FetchContext, Provider, ProviderError, RegionScope, gpu};

use shapes::Shape;

const PROVIDER: &str = "gcp";
const COMPUTE_SERVICE: &str = "6F81-5844-456A";
/// The environment variable holding the Cloud Billing API key.
pub const API_KEY_ENV: &str = "GPUPLAN_GCP_API_KEY";
/// The environment variable holding an optional OAuth token for the Compute API.
pub const TOKEN_ENV: &str = "GPUPLAN_GCP_TOKEN";
const MAX_PAGES: usize = 10_000;

#[derive(Debug, Clone)]
pub struct GcpConfig {
    /// Base URL; the adapter appends `/v1/services/6F81-5844-456A/skus`.
    pub billing_endpoint: String,
    /// Base URL; the adapter appends `/compute/v1/projects/{project}/aggregated/machineTypes`.
    pub compute_endpoint: String,
    /// Project for `machineTypes.aggregatedList`; used only with a token.
    pub project: Option<String>,
    /// Regions to keep (`us-central1`); empty keeps every region.
    pub regions: Vec<String>,
    pub api_key: Option<Secret>,
    pub token: Option<Secret>,
    pub retry: RetryPolicy,
}

impl GcpConfig {
    /// The provider this config describes.
    ///
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<GcpProvider, ProviderError> {
        GcpProvider::new(self)
    }
}

pub struct GcpProvider {
    config: GcpConfig,
    http: HttpClient,
}

impl GcpProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: GcpConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }

    fn decode<T: serde::de::DeserializeOwned>(
        location: &str,
        body: &[u8],
    ) -> Result<T, ProviderError> {
        serde_json::from_slice(body).map_err(|e| ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: location.to_owned(),
            detail: e.to_string(),
        })
    }

    fn url(base: &str, path: &str, query: &[(&str, &str)]) -> Result<Url, ProviderError> {
        let full = format!("{}{path}", base.trim_end_matches('/'));
        let mut url = Url::parse(&full).map_err(|e| ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: full.clone(),
            detail: format!("not a URL: {e}"),
        })?;
        for (k, v) in query {
            url.query_pairs_mut().append_pair(k, v);
        }
        Ok(url)
    }

    /// Follows `nextPageToken` until it is empty or absent.
    async fn paged<P: PageOf + serde::de::DeserializeOwned>(
        &self,
        first: Url,
        bearer: Option<&Secret>,
        auth_hint: &str,
    ) -> Result<Vec<P::Item>, ProviderError> {
        let mut items = Vec::new();
        let mut token = String::new();
        let mut seen = HashSet::new();
        for _ in 0..MAX_PAGES {
            let mut url = first.clone();
            if !token.is_empty() {
                url.query_pairs_mut().append_pair("pageToken", &token);
            }
            let url = url.to_string();
            let body = self
                .http
                .send(&url, |c| {
                    let req = c.get(&url);
                    match bearer {
                        Some(t) => req.bearer_auth(t.expose()),
                        None => req,
                    }
                })
                .await
                .map_err(|e| e.with_auth_hint(auth_hint))?;
            let page: P = Self::decode(&crate::http::redact_url(&url), &body)?;
            let next = page.next_token();
            items.extend(page.into_items());
            match next {
                Some(next) if !next.is_empty() => {
                    if !seen.insert(next.clone()) {
                        return Err(ProviderError::Decode {
                            provider: PROVIDER.to_owned(),
                            location: crate::http::redact_url(&url),
                            detail: format!("nextPageToken `{next}` repeats"),
                        });
                    }
                    token = next;
                }
                _ => return Ok(items),
            }
        }
        Err(ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: crate::http::redact_url(first.as_str()),
            detail: format!("more than {MAX_PAGES} pages"),
        })
    }

    async fn machine_shapes(&self) -> Result<Option<Vec<(Shape, String)>>, ProviderError> {
        let (Some(token), Some(project)) = (&self.config.token, &self.config.project) else {
            return Ok(None);
        };
        let url = Self::url(
            &self.config.compute_endpoint,
            &format!("/compute/v1/projects/{project}/aggregated/machineTypes"),
            &[("maxResults", "500"), ("returnPartialSuccess", "true")],
        )?;
        let lists: Vec<MachineTypeList> = self
            .paged::<MachineTypePage>(url, Some(token), TOKEN_ENV)
            .await?;
        let mut out = Vec::new();
        for machine in lists.into_iter().flat_map(|l| l.machine_types) {
            let Some(acc) = machine.accelerators.first() else {
                continue;
            };
            out.push((
                Shape {
                    vcpus: machine.guest_cpus,
                    memory_gib: machine.memory_mb / 1024.0,
                    accelerator: acc.guest_accelerator_type.clone(),
                    accelerator_count: acc.guest_accelerator_count,
                    name: machine.name,
                },
                machine.zone,
            ));
        }
        Ok(Some(out))
    }
}

#[async_trait]
impl Provider for GcpProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::of_configured(&self.config.regions)
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER))]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let Some(key) = &self.config.api_key else {
            return Err(ProviderError::Auth {
                provider: PROVIDER.to_owned(),
                url: self.config.billing_endpoint.clone(),
                detail: format!("no API key for the Cloud Billing Catalog: set {API_KEY_ENV}"),
            });
        };
        let url = Self::url(
            &self.config.billing_endpoint,
            &format!("/v1/services/{COMPUTE_SERVICE}/skus"),
            &[("key", key.expose()), ("pageSize", "5000")],
        )?;
        let skus = self.paged::<SkuPage>(url, None, API_KEY_ENV).await?;
        let shapes = self.machine_shapes().await?;
        Ok(build_snapshot(&skus, shapes, &self.config.regions))
    }
}

/// A page of a `nextPageToken`-paged list.
trait PageOf {
    type Item;
    fn next_token(&self) -> Option<String>;
    fn into_items(self) -> Vec<Self::Item>;
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SkuPage {
    #[serde(default)]
    skus: Vec<Sku>,
    next_page_token: Option<String>,
}

impl PageOf for SkuPage {
    type Item = Sku;
    fn next_token(&self) -> Option<String> {
        self.next_page_token.clone()
    }
    fn into_items(self) -> Vec<Sku> {
        self.skus
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MachineTypePage {
    #[serde(default)]
    items: BTreeMap<String, MachineTypeList>,
    next_page_token: Option<String>,
}

impl PageOf for MachineTypePage {
    type Item = MachineTypeList;
    fn next_token(&self) -> Option<String> {
        self.next_page_token.clone()
    }
    fn into_items(self) -> Vec<MachineTypeList> {
        self.items.into_values().collect()
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MachineTypeList {
    #[serde(default)]
    machine_types: Vec<MachineType>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MachineType {
    name: String,
    guest_cpus: u32,
    memory_mb: f64,
    zone: String,
    #[serde(default)]
    accelerators: Vec<Accelerator>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Accelerator {
    guest_accelerator_type: String,
    guest_accelerator_count: u32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Sku {
    sku_id: String,
    description: String,
    category: Category,
    #[serde(default)]
    service_regions: Vec<String>,
    #[serde(default)]
    pricing_info: Vec<PricingInfo>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Category {
    resource_family: String,
    resource_group: String,
    usage_type: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PricingInfo {
    pricing_expression: PricingExpression,
    effective_time: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PricingExpression {
    usage_unit: String,
    #[serde(default)]
    tiered_rates: Vec<TieredRate>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TieredRate {
    unit_price: Money,
}

/// `google.type.Money`: `units` is an int64, which proto3 JSON writes as a string
/// and may omit when zero; `nanos` is billionths.
#[derive(Debug, Deserialize)]
struct Money {
    #[serde(default)]
    units: Option<Value>,
    #[serde(default)]
    nanos: Option<i64>,
    #[serde(default, rename = "currencyCode")]
    currency_code: Option<String>,
}

impl Money {
    fn usd(&self) -> Option<f64> {
        if self.currency_code.as_deref().is_some_and(|c| c != "USD") {
            return None;
        }
        let units = match &self.units {
            None | Some(Value::Null) => 0.0,
            Some(Value::String(s)) => s.parse::<i64>().ok()? as f64,
            Some(Value::Number(n)) => n.as_i64()? as f64,
            Some(_) => return None,
        };
        Some(units + self.nanos.unwrap_or(0) as f64 / 1e9)
    }
}

/// The price of a SKU now: latest pricing info, first non-zero tier, and its
/// unit; or the reason it has none (`no_price`, or `zero_price` when every
/// tier is free).
fn current_price(sku: &Sku) -> Result<(f64, &str), &'static str> {
    // Compared as times: fractional seconds vary in length, so the text of
    // `...:00Z` sorts after `...:00.5Z`.
    let at = |i: &PricingInfo| {
        i.effective_time
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    let info = sku
        .pricing_info
        .iter()
        .max_by_key(|i| at(i))
        .ok_or("no_price")?;
    let unit = info.pricing_expression.usage_unit.as_str();
    let prices: Vec<f64> = info
        .pricing_expression
        .tiered_rates
        .iter()
        .map(|r| r.unit_price.usd())
        .collect::<Option<_>>()
        .ok_or("no_price")?;
    if prices.is_empty() {
        return Err("no_price");
    }
    prices
        .into_iter()
        .find(|p| *p > 0.0)
        .map(|p| (p, unit))
        .ok_or("zero_price")
}

/// What a SKU sells, or why it is not read. The description decides first,
/// because the Dynamic Workload Scheduler's flex-start ("DWS Defined
/// Duration", "DWS Flex Start") and calendar-mode ("... in Calendar Mode")
/// SKUs carry `usageType` `OnDemand` at about 45% and 30% off: read by
/// `usageType` alone, whichever came later would become the on-demand price.
/// They are purchase kinds of their own; "Reserved ..." SKUs that are not
/// calendar mode are commitment placeholders, often priced 0.
fn sku_kind(description: &str, usage_type: &str) -> Result<PriceKind, String> {
    let d = description.trim();
    // Anywhere and in any case: "... attached to DWS Flex Start VMs" is as
    // much flex-start as "DWS Flex Start ...", and at 45% off it would pass
    // for an on-demand price.
    let lower = d.to_ascii_lowercase();
    if lower.contains("dws defined duration") || lower.contains("dws flex start") {
        return Ok(PriceKind::FlexStart);
    }
    if lower.contains("calendar mode") {
        return Ok(PriceKind::Calendar);
    }
    if d.starts_with("Reserved ") {
        return Err("reservation_placeholder".to_owned());
    }
    match usage_type {
        "OnDemand" => Ok(PriceKind::OnDemand),
        "Preemptible" => Ok(PriceKind::Spot),
        "Commit1Yr" => Ok(PriceKind::Commit(Term::OneYear)),
        "Commit3Yr" => Ok(PriceKind::Commit(Term::ThreeYears)),
        other => Err(format!("usage_type:{other}")),
    }
}

/// The part of a description that names the thing priced, without the usage
/// wording around it: `Commitment v1: Nvidia Tesla A100 GPU running in Americas
/// for 1 Year` -> `Nvidia Tesla A100 GPU running in Americas for 1 Year`.
fn strip_usage_words(description: &str) -> &str {
    let d = description.trim();
    let d = d.strip_prefix("Commitment v1:").unwrap_or(d).trim();
    let d = d.strip_prefix("DWS Defined Duration").unwrap_or(d).trim();
    let d = d.strip_prefix("DWS Flex Start").unwrap_or(d).trim();
    d.strip_prefix("Spot Preemptible").unwrap_or(d).trim()
}

/// The GPU named by a GPU SKU description, as the description spells it
/// (`Tesla A100`, `H100 80GB Mega`, `B200`).
fn gpu_name(description: &str) -> String {
    let d = strip_usage_words(description);
    let end = [" GPU", " (", " running in", " attached", " in "]
        .iter()
        .filter_map(|m| d.find(m))
        .min()
        .unwrap_or(d.len());
    let name = &d[..end];
    // "A4 Nvidia B200": the machine family comes before the vendor.
    name.find("Nvidia ")
        .map_or(name, |i| &name[i + "Nvidia ".len()..])
        .trim()
        .to_owned()
}

/// Compute Engine's accelerator id for a GPU as billing descriptions name it.
fn accelerator_id(name: &str) -> String {
    match name {
        "Tesla A100 80GB" | "A100 80GB" => "nvidia-a100-80gb".to_owned(),
        "H100 80GB Mega" => "nvidia-h100-mega-80gb".to_owned(),
        other => format!("nvidia-{}", other.to_ascii_lowercase().replace(' ', "-")),
    }
}

/// Core or RAM price of a machine family: `A2 Instance Core running in Americas`,
/// `Commitment v1: A2 Ram in Americas for 1 Year`.
fn component(description: &str) -> Option<(String, Part)> {
    let d = strip_usage_words(description);
    let mut words = d.split_whitespace();
    let family = words.next()?.to_owned();
    let part = match (words.next()?, words.next()) {
        ("Instance", Some("Core")) | ("Cpu" | "Core", _) => Part::Core,
        ("Instance", Some("Ram")) | ("Ram", _) => Part::Ram,
        _ => return None,
    };
    Some((family, part))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Core,
    Ram,
}

fn build_snapshot(
    skus: &[Sku],
    shapes: Option<Vec<(Shape, String)>>,
    wanted: &[String],
) -> Snapshot {
    let mut snap = Snapshot::default();
    let keep = |region: &str| wanted.is_empty() || wanted.iter().any(|w| w == region);
    // (accelerator id, kind, region) -> (price, sku id); and the GPU's catalog model.
    let mut gpus: BTreeMap<(String, PriceKind, String), (f64, String)> = BTreeMap::new();
    let mut models: BTreeMap<String, gpu::GpuModel> = BTreeMap::new();
    // (family, part, kind, region) -> (price per vCPU-hour or GiB-hour, sku id).
    let mut parts: BTreeMap<(String, Part, PriceKind, String), (f64, String)> = BTreeMap::new();

    for sku in skus {
        if sku.category.resource_family != "Compute" {
            snap.skip(format!("family:{}", sku.category.resource_family));
            continue;
        }
        let kind = match sku_kind(&sku.description, &sku.category.usage_type) {
            Ok(kind) => kind,
            Err(reason) => {
                snap.skip(reason);
                continue;
            }
        };
        let excluded = ["Sole Tenancy", "Custom", "Premium", "Reserved"];
        if sku.category.resource_group == "GPU" {
            if sku.description.contains("Virtual Workstation") {
                snap.skip("virtual_workstation");
                continue;
            }
            let (usd, unit) = match current_price(sku) {
                Ok(price) => price,
                Err(reason) => {
                    snap.skip(reason);
                    continue;
                }
            };
            if unit != "h" {
                snap.skip(format!("unit:{unit}"));
                continue;
            }
            let name = gpu_name(&sku.description);
            let id = accelerator_id(&name);
            models
                .entry(id.clone())
                .or_insert_with(|| gpu::normalize(&name, None));
            for region in sku.service_regions.iter().filter(|r| keep(r)) {
                match gpus.entry((id.clone(), kind, region.clone())) {
                    Entry::Vacant(e) => {
                        e.insert((usd, sku.sku_id.clone()));
                    }
                    Entry::Occupied(e) => duplicate(&mut snap, &sku.sku_id, &e.get().1, region),
                }
            }
        } else if let Some((family, part)) = component(&sku.description)
            .filter(|_| !excluded.iter().any(|w| sku.description.contains(w)))
        {
            let (usd, unit) = match current_price(sku) {
                Ok(price) => price,
                Err(reason) => {
                    snap.skip(reason);
                    continue;
                }
            };
            let expected = if part == Part::Core { "h" } else { "GiBy.h" };
            if unit != expected {
                snap.skip(format!("unit:{unit}"));
                continue;
            }
            for region in sku.service_regions.iter().filter(|r| keep(r)) {
                match parts.entry((family.clone(), part, kind, region.clone())) {
                    Entry::Vacant(e) => {
                        e.insert((usd, sku.sku_id.clone()));
                    }
                    Entry::Occupied(e) => duplicate(&mut snap, &sku.sku_id, &e.get().1, region),
                }
            }
        } else {
            snap.skip("not_gpu");
        }
    }

    for ((id, kind, region), (usd, sku_id)) in &gpus {
        snap.prices.push(PriceRecord {
            region: region.clone(),
            zone: None,
            instance_type: id.clone(),
            price_kind: *kind,
            offering_class: None,
            usd_per_hour: *usd,
            upfront_usd: 0.0,
            recurring_usd_per_hour: *usd,
            source: Some(sku_id.clone()),
            available_regions: Vec::new(),
            max_instances: None,
            price_scope: crate::PriceScope::GpuOnly,
            window: None,
        });
    }
    for (id, model) in &models {
        if !model.known {
            tracing::warn!(provider = PROVIDER, accelerator = %id, "GPU model is not in the normalization table; keeping it as written.");
        }
        snap.instance_types.push(InstanceType {
            instance_type: id.clone(),
            gpu_model: model.name.clone(),
            gpu_count: 1.0,
            gpu_memory_gib: model.memory_gib,
            // GCP attaches its A100s and H100s as the SXM modules of a2 and a3.
            gpu_form_factor: gpu::form_factor(&model.name, "sxm"),
            vcpus: None,
            memory_gib: None,
            mig_profile: None,
        });
    }
    add_machine_types(&mut snap, shapes, &gpus, &parts, &keep);
    snap
}

/// A second SKU for a price already taken: counted and logged, never a
/// replacement, so no rule depends on which of the two came first.
fn duplicate(snap: &mut Snapshot, sku: &str, kept: &str, region: &str) {
    tracing::warn!(
        provider = PROVIDER,
        sku,
        kept,
        region,
        "Two SKUs give the same price; keeping the first."
    );
    snap.skip("duplicate");
}

/// Composite prices of GPU machine types in each region that offers them.
fn add_machine_types(
    snap: &mut Snapshot,
    shapes: Option<Vec<(Shape, String)>>,
    gpus: &BTreeMap<(String, PriceKind, String), (f64, String)>,
    parts: &BTreeMap<(String, Part, PriceKind, String), (f64, String)>,
    keep: &dyn Fn(&str) -> bool,
) {
    // Shape -> regions offering it: from the Compute API's zones, or, with the
    // built-in table, every region where its GPU is priced.
    let mut offered: BTreeMap<String, (Shape, BTreeSet<String>)> = BTreeMap::new();
    match shapes {
        Some(listed) => {
            for (shape, zone) in listed {
                let region = zone
                    .rsplit_once('-')
                    .map_or(zone.as_str(), |(r, _)| r)
                    .to_owned();
                if !keep(&region) {
                    continue;
                }
                snap.availability.push(AvailabilityRecord {
                    region: region.clone(),
                    zone: Some(zone.clone()),
                    instance_type: shape.name.clone(),
                    signal: AvailabilitySignal::Offered,
                });
                offered
                    .entry(shape.name.clone())
                    .or_insert_with(|| (shape, BTreeSet::new()))
                    .1
                    .insert(region);
            }
        }
        None => {
            for shape in shapes::builtin() {
                let regions = gpus
                    .keys()
                    .filter(|(id, _, _)| *id == shape.accelerator)
                    .map(|(_, _, r)| r.clone())
                    .collect();
                offered.insert(shape.name.clone(), (shape, regions));
            }
        }
    }
    let kinds = [
        PriceKind::OnDemand,
        PriceKind::Spot,
        PriceKind::Commit(Term::OneYear),
        PriceKind::Commit(Term::ThreeYears),
        // Flex-start sells cores and RAM too; calendar mode sells GPUs alone.
        PriceKind::FlexStart,
    ];
    for (name, (shape, regions)) in offered {
        let family = shapes::family(&name);
        let mut priced = false;
        for region in &regions {
            for kind in kinds {
                let core = parts.get(&(family.clone(), Part::Core, kind, region.clone()));
                let ram = parts.get(&(family.clone(), Part::Ram, kind, region.clone()));
                let gpu = gpus.get(&(shape.accelerator.clone(), kind, region.clone()));
                let (Some((core, _)), Some((ram, _)), Some((gpu, _))) = (core, ram, gpu) else {
                    continue;
                };
                let usd = f64::from(shape.vcpus) * core
                    + shape.memory_gib * ram
                    + f64::from(shape.accelerator_count) * gpu;
                snap.prices.push(PriceRecord {
                    region: region.clone(),
                    zone: None,
                    instance_type: name.clone(),
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
                });
                priced = true;
            }
        }
        if priced {
            let model = gpu::normalize(&shape.accelerator, None);
            snap.instance_types.push(InstanceType {
                gpu_form_factor: gpu::form_factor(&model.name, "sxm"),
                instance_type: name,
                gpu_model: model.name,
                gpu_count: f64::from(shape.accelerator_count),
                gpu_memory_gib: model.memory_gib,
                vcpus: Some(shape.vcpus),
                memory_gib: Some(shape.memory_gib),
                mig_profile: None,
            });
        }
    }
}

#[cfg(test)]
mod tests;
