//! Azure Retail Prices API (public, no credentials): on-demand, spot, 1/3-year
//! reservations and savings plans of the GPU VM sizes, Linux only.
//!
//! Quirks handled here (docs/providers.md §6): `NextPageLink` is followed verbatim
//! until null; a reservation row's price is the total for the term although its
//! unit says "1 Hour"; `Low Priority` is not spot; Windows and Dev/Test rows are
//! skipped and counted; when one meter appears several times the newest
//! `effectiveStartDate` that is not in the future wins.

mod section;
pub mod skus;

pub use section::Section;

use std::collections::{BTreeMap, BTreeSet, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};
use reqwest::Url;
use serde::Deserialize;

use crate::http::{HttpClient, RetryPolicy};
use crate::snapshot::{
    AvailabilityRecord, AvailabilitySignal, InstanceType, PriceKind, PriceRecord, Snapshot, Term,
};
use crate::{FetchContext, Provider, ProviderError, RegionScope};

const PROVIDER: &str = "azure";
const API_VERSION: &str = "2023-01-01-preview";
/// A chain longer than this is a server bug (a link that loops), not a catalog.
const MAX_PAGES: usize = 20_000;

#[derive(Debug, Clone)]
pub struct AzureConfig {
    /// Base URL; the adapter appends `/api/retail/prices`.
    pub endpoint: String,
    /// ARM region names (`eastus`); empty means every region.
    pub regions: Vec<String>,
    /// Regions fetched at the same time.
    pub concurrency: usize,
    pub retry: RetryPolicy,
}

impl AzureConfig {
    /// The provider this config describes.
    ///
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<AzureProvider, ProviderError> {
        AzureProvider::new(self)
    }
}

pub struct AzureProvider {
    config: AzureConfig,
    http: HttpClient,
}

impl AzureProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: AzureConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }

    fn first_url(&self, region: Option<&str>) -> Result<String, ProviderError> {
        let base = format!(
            "{}/api/retail/prices",
            self.config.endpoint.trim_end_matches('/')
        );
        let mut url = Url::parse(&base).map_err(|e| ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: base.clone(),
            detail: format!("not a URL: {e}"),
        })?;
        // Only N-series sizes and no Windows products: the rest of the VM catalog
        // is most of its rows and none of its GPUs.
        let mut filter =
            "serviceName eq 'Virtual Machines' and contains(armSkuName, 'Standard_N') \
                          and contains(productName, 'Windows') eq false"
                .to_owned();
        if let Some(region) = region {
            filter.push_str(&format!(" and armRegionName eq '{region}'"));
        }
        url.query_pairs_mut()
            .append_pair("api-version", API_VERSION)
            .append_pair("$filter", &filter);
        Ok(url.to_string())
    }

    async fn fetch_chain(&self, region: Option<&str>) -> Result<Vec<Item>, ProviderError> {
        let mut url = self.first_url(region)?;
        let mut seen = HashSet::new();
        let mut items = Vec::new();
        for _ in 0..MAX_PAGES {
            let body = self.http.get(&url).await?;
            let page: Page = serde_json::from_slice(&body).map_err(|e| ProviderError::Decode {
                provider: PROVIDER.to_owned(),
                location: url.clone(),
                detail: e.to_string(),
            })?;
            items.extend(page.items);
            match page.next_page_link {
                Some(next) if !next.is_empty() => {
                    if !seen.insert(next.clone()) {
                        return Err(ProviderError::Decode {
                            provider: PROVIDER.to_owned(),
                            location: url,
                            detail: format!("NextPageLink loops back to {next}"),
                        });
                    }
                    url = next;
                }
                _ => return Ok(items),
            }
        }
        Err(ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: url,
            detail: format!("more than {MAX_PAGES} pages"),
        })
    }
}

#[async_trait]
impl Provider for AzureProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::of_configured(&self.config.regions)
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER))]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let regions: Vec<Option<String>> = if self.config.regions.is_empty() {
            vec![None]
        } else {
            self.config.regions.iter().cloned().map(Some).collect()
        };
        let chains: Vec<Result<Vec<Item>, ProviderError>> = stream::iter(regions)
            .map(|region| async move { self.fetch_chain(region.as_deref()).await })
            .buffered(self.config.concurrency.max(1))
            .collect()
            .await;
        let mut items = Vec::new();
        for chain in chains {
            items.extend(chain?);
        }
        Ok(build_snapshot(items, Utc::now()))
    }
}

#[derive(Debug, Deserialize)]
struct Page {
    #[serde(rename = "Items")]
    items: Vec<Item>,
    #[serde(rename = "NextPageLink")]
    next_page_link: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    currency_code: String,
    retail_price: f64,
    arm_region_name: String,
    #[serde(default)]
    arm_sku_name: String,
    sku_name: String,
    meter_name: String,
    meter_id: String,
    product_name: String,
    #[serde(rename = "type")]
    kind: String,
    unit_of_measure: String,
    effective_start_date: Option<DateTime<Utc>>,
    reservation_term: Option<String>,
    #[serde(default)]
    savings_plan: Vec<SavingsPlan>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavingsPlan {
    retail_price: f64,
    term: String,
}

fn term(text: &str) -> Option<Term> {
    match text {
        "1 Year" => Some(Term::OneYear),
        "3 Years" => Some(Term::ThreeYears),
        _ => None,
    }
}

/// One candidate record and the date that decides between duplicates.
struct Candidate {
    price: PriceRecord,
    effective: Option<DateTime<Utc>>,
}

/// Classifies rows, keeps the newest row per price, and adds GPU specs.
fn build_snapshot(items: Vec<Item>, now: DateTime<Utc>) -> Snapshot {
    let mut snap = Snapshot::default();
    let mut best: BTreeMap<(String, String, PriceKind), Candidate> = BTreeMap::new();
    let mut types: BTreeMap<String, InstanceType> = BTreeMap::new();
    let mut unknown: BTreeSet<String> = BTreeSet::new();
    let mut offered: BTreeSet<(String, String)> = BTreeSet::new();

    for item in items {
        let Some(candidates) = classify(&item, &mut snap) else {
            continue;
        };
        if item.effective_start_date.is_some_and(|d| d > now) {
            snap.skip("effective_in_future");
            continue;
        }
        let instance = instance_type(&item.arm_sku_name, &mut unknown);
        types
            .entry(instance.instance_type.clone())
            .or_insert(instance);
        for price in candidates {
            if price.price_kind == PriceKind::OnDemand {
                offered.insert((price.region.clone(), price.instance_type.clone()));
            }
            let key = (
                price.region.clone(),
                price.instance_type.clone(),
                price.price_kind,
            );
            let candidate = Candidate {
                price,
                effective: item.effective_start_date,
            };
            match best.get(&key) {
                Some(old) if old.effective >= candidate.effective => snap.skip("superseded"),
                Some(_) => {
                    snap.skip("superseded");
                    best.insert(key, candidate);
                }
                None => {
                    best.insert(key, candidate);
                }
            }
        }
    }
    for sku in &unknown {
        tracing::warn!(provider = PROVIDER, sku = %sku, "GPU VM size is not in the Azure GPU table; stored with its name and an unknown GPU.");
    }
    snap.prices = best.into_values().map(|c| c.price).collect();
    snap.instance_types = types.into_values().collect();
    snap.availability = offered
        .into_iter()
        .map(|(region, instance_type)| AvailabilityRecord {
            region,
            zone: None,
            instance_type,
            signal: AvailabilitySignal::Offered,
        })
        .collect();
    snap
}

/// The records one row yields, or `None` (counted as skipped) when it yields none.
fn classify(item: &Item, snap: &mut Snapshot) -> Option<Vec<PriceRecord>> {
    if item.arm_sku_name.is_empty() {
        snap.skip("no_arm_sku_name");
        return None;
    }
    if !skus::is_gpu_family(&item.arm_sku_name) {
        snap.skip("not_gpu");
        return None;
    }
    if item.product_name.contains("Windows") {
        snap.skip("os:windows");
        return None;
    }
    if item.kind == "DevTestConsumption" {
        snap.skip("devtest");
        return None;
    }
    let named = |word: &str| item.sku_name.contains(word) || item.meter_name.contains(word);
    if named("Low Priority") {
        snap.skip("low_priority");
        return None;
    }
    if item.currency_code != "USD" {
        snap.skip(format!("currency:{}", item.currency_code));
        return None;
    }
    if !item.retail_price.is_finite() || item.retail_price < 0.0 {
        snap.skip("bad_price");
        return None;
    }
    // A $0 row is a placeholder; it must not win the newest-date choice
    // between duplicates either.
    if item.retail_price == 0.0 {
        snap.skip("zero_price");
        return None;
    }
    let record = |kind: PriceKind, upfront: f64, recurring: f64| PriceRecord {
        region: item.arm_region_name.clone(),
        zone: None,
        instance_type: item.arm_sku_name.clone(),
        price_kind: kind,
        offering_class: None,
        usd_per_hour: PriceRecord::effective_hourly(kind, upfront, recurring),
        upfront_usd: upfront,
        recurring_usd_per_hour: recurring,
        source: Some(item.meter_id.clone()),
        available_regions: Vec::new(),
        max_instances: None,
        price_scope: crate::PriceScope::Instance,
        window: None,
    };
    match item.kind.as_str() {
        "Reservation" => {
            let Some(t) = item.reservation_term.as_deref().and_then(term) else {
                snap.skip(format!(
                    "reservation_term:{}",
                    item.reservation_term.as_deref().unwrap_or("missing")
                ));
                return None;
            };
            // The price is the whole term's, paid upfront, whatever the unit says.
            Some(vec![record(PriceKind::Reserved(t), item.retail_price, 0.0)])
        }
        "Consumption" => {
            if item.unit_of_measure != "1 Hour" {
                snap.skip(format!("unit:{}", item.unit_of_measure));
                return None;
            }
            if named("Spot") {
                return Some(vec![record(PriceKind::Spot, 0.0, item.retail_price)]);
            }
            let mut out = vec![record(PriceKind::OnDemand, 0.0, item.retail_price)];
            for plan in &item.savings_plan {
                match term(&plan.term) {
                    Some(_) if plan.retail_price == 0.0 => snap.skip("zero_price"),
                    Some(t) if plan.retail_price.is_finite() && plan.retail_price > 0.0 => {
                        out.push(record(PriceKind::SavingsPlan(t), 0.0, plan.retail_price));
                    }
                    _ => snap.skip(format!("savings_plan_term:{}", plan.term)),
                }
            }
            Some(out)
        }
        other => {
            snap.skip(format!("type:{other}"));
            None
        }
    }
}

/// Azure's N-series by their family: ND sizes are HGX boards (SXM modules),
/// NC sizes PCIe cards, and the NC H100 v5's H100 NVL is its own model.
fn form_factor(sku: &str, model: &str) -> Option<crate::FormFactor> {
    let named = if sku.starts_with("Standard_ND") {
        "sxm"
    } else if sku.starts_with("Standard_NC") {
        "pcie"
    } else {
        ""
    };
    crate::gpu::form_factor(model, named)
}

fn instance_type(sku: &str, unknown: &mut BTreeSet<String>) -> InstanceType {
    match skus::lookup(sku) {
        Some(spec) => InstanceType {
            instance_type: sku.to_owned(),
            gpu_model: spec.gpu_model.to_owned(),
            gpu_count: spec.gpus,
            gpu_memory_gib: crate::gpu::share_memory(
                crate::gpu::normalize(spec.gpu_model, None).memory_gib,
                spec.gpus,
            ),
            gpu_form_factor: form_factor(sku, spec.gpu_model),
            vcpus: Some(spec.vcpus),
            memory_gib: Some(spec.memory_gib),
            mig_profile: None,
        },
        None => {
            unknown.insert(sku.to_owned());
            InstanceType {
                instance_type: sku.to_owned(),
                gpu_model: format!("unknown ({sku})"),
                gpu_count: 1.0,
                gpu_memory_gib: None,
                gpu_form_factor: None,
                vcpus: None,
                memory_gib: None,
                mig_profile: None,
            }
        }
    }
}

#[cfg(test)]
mod tests;
