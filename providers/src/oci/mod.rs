//! Oracle Cloud's public price list (no credentials): on-demand prices of the
//! GPU shapes, and spot (preemptible) where a shape can be preemptible.
//!
//! The list is one JSON answer with every part Oracle sells, priced per unit
//! of its metric; GPU rentals are priced per GPU-hour and are the same in
//! every commercial region. It names parts, not shapes, so the shapes and
//! their parts are a table here (docs/providers.md, "Oracle Cloud").
//!
//! Traps handled: parts are matched by `partNumber`, never by `displayName`
//! (names drift in prefix and spacing, and licence add-ons and
//! Cloud@Customer twins look like rentals); a table part whose name no longer
//! names its GPU fails the sync rather than price the wrong thing; a table
//! part missing from the list gives no record (absent is never zero).

mod section;

pub use section::Section;

use async_trait::async_trait;
use serde::Deserialize;

use crate::http::{HttpClient, RetryPolicy};
use crate::snapshot::{InstanceType, PriceKind, PriceRecord, PriceScope, Snapshot};
use crate::{FetchContext, Provider, ProviderError, RegionScope};

const PROVIDER: &str = "oci";
/// Where GPU rentals are priced: one price for every commercial region.
const REGION: &str = "global";
const GPU_HOUR: &str = "GPU Per Hour";
/// Oracle's preemptible capacity is half the on-demand price.
const PREEMPTIBLE_DISCOUNT: f64 = 0.5;

/// A shape gpuplan prices, and the part that prices its GPUs.
struct Shape {
    shape: &'static str,
    part: &'static str,
    /// The GPU as the part's name must still say it.
    gpu: &'static str,
    gpu_model: &'static str,
    gpu_memory_gib: f64,
    gpus: u32,
    preemptible: bool,
}

const SHAPES: &[Shape] = &[
    Shape {
        shape: "BM.GPU.H100.8",
        part: "B98415",
        gpu: "H100",
        gpu_model: "H100-80GB",
        gpu_memory_gib: 80.0,
        gpus: 8,
        preemptible: false,
    },
    Shape {
        shape: "BM.GPU.H200.8",
        part: "B110519",
        gpu: "H200",
        gpu_model: "H200-141GB",
        gpu_memory_gib: 141.0,
        gpus: 8,
        preemptible: false,
    },
    Shape {
        shape: "BM.GPU.A100-v2.8",
        part: "B95907",
        gpu: "A100",
        gpu_model: "A100-80GB",
        gpu_memory_gib: 80.0,
        gpus: 8,
        preemptible: true,
    },
    Shape {
        shape: "BM.GPU.L40S-NC.4",
        part: "B109479",
        gpu: "L40S",
        gpu_model: "L40S",
        gpu_memory_gib: 48.0,
        gpus: 4,
        preemptible: false,
    },
    Shape {
        shape: "BM.GPU.A10.4",
        part: "B95909",
        gpu: "A10",
        gpu_model: "A10",
        gpu_memory_gib: 24.0,
        gpus: 4,
        preemptible: true,
    },
    Shape {
        shape: "VM.GPU.A10.1",
        part: "B95909",
        gpu: "A10",
        gpu_model: "A10",
        gpu_memory_gib: 24.0,
        gpus: 1,
        preemptible: true,
    },
    Shape {
        shape: "VM.GPU.A10.2",
        part: "B95909",
        gpu: "A10",
        gpu_model: "A10",
        gpu_memory_gib: 24.0,
        gpus: 2,
        preemptible: true,
    },
];

#[derive(Debug, Clone)]
pub struct OciConfig {
    /// Base URL; the adapter appends the price list's path.
    pub endpoint: String,
    pub retry: RetryPolicy,
}

impl OciConfig {
    /// The provider this config describes.
    ///
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<OciProvider, ProviderError> {
        OciProvider::new(self)
    }
}

pub struct OciProvider {
    config: OciConfig,
    http: HttpClient,
}

impl OciProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: OciConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }

    fn url(&self) -> String {
        format!(
            "{}/pls/apex/cetools/api/v1/products/?currencyCode=USD",
            self.config.endpoint.trim_end_matches('/')
        )
    }
}

#[async_trait]
impl Provider for OciProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::All
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER))]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let url = self.url();
        let body = self.http.get(&url).await?;
        let list: PriceList = serde_json::from_slice(&body).map_err(|e| ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: url.clone(),
            detail: e.to_string(),
        })?;
        build_snapshot(&list.items).map_err(|detail| ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: url,
            detail,
        })
    }
}

#[derive(Debug, Deserialize)]
struct PriceList {
    items: Vec<Item>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    part_number: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    metric_name: String,
    #[serde(default)]
    currency_code_localizations: Vec<Localization>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Localization {
    currency_code: String,
    #[serde(default)]
    prices: Vec<Price>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Price {
    model: String,
    value: f64,
    range_min: Option<f64>,
}

/// Whether `name`, split into words, has `gpu` as one of them (`A10` is not
/// a word of `A100`).
fn names(name: &str, gpu: &str) -> bool {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| word.eq_ignore_ascii_case(gpu))
}

/// The part's pay-as-you-go USD price per GPU-hour (the first tier when tiered).
fn gpu_hour_price(item: &Item) -> Option<f64> {
    item.currency_code_localizations
        .iter()
        .find(|l| l.currency_code == "USD")?
        .prices
        .iter()
        .filter(|p| p.model == "PAY_AS_YOU_GO" && p.value.is_finite() && p.value > 0.0)
        .min_by(|a, b| {
            a.range_min
                .unwrap_or(0.0)
                .total_cmp(&b.range_min.unwrap_or(0.0))
        })
        .map(|p| p.value)
}

/// Records of every table shape whose part the list prices; every other
/// item is counted by why it was skipped.
fn build_snapshot(items: &[Item]) -> Result<Snapshot, String> {
    let mut snap = Snapshot::default();
    for item in items {
        if SHAPES.iter().any(|s| s.part == item.part_number) {
            continue;
        }
        let reason = if item.metric_name != GPU_HOUR {
            "not_gpu_hour"
        } else if ["license", "licence", "enterprise"]
            .iter()
            .any(|w| item.display_name.to_ascii_lowercase().contains(w))
        {
            "license"
        } else {
            "unmapped_part"
        };
        snap.skip(reason);
    }
    for shape in SHAPES {
        let Some(item) = items.iter().find(|i| i.part_number == shape.part) else {
            tracing::warn!(
                provider = PROVIDER,
                part = shape.part,
                shape = shape.shape,
                "The price list has no such part; the shape gets no price."
            );
            continue;
        };
        if !names(&item.display_name, shape.gpu) {
            return Err(format!(
                "part {} is now `{}`, which does not name {}; the shape table needs a look",
                shape.part, item.display_name, shape.gpu
            ));
        }
        let Some(per_gpu) = gpu_hour_price(item) else {
            tracing::warn!(
                provider = PROVIDER,
                part = shape.part,
                "The part has no USD pay-as-you-go price; the shape gets no price."
            );
            continue;
        };
        snap.instance_types.push(InstanceType {
            instance_type: shape.shape.to_owned(),
            gpu_model: shape.gpu_model.to_owned(),
            gpu_count: f64::from(shape.gpus),
            gpu_memory_gib: Some(shape.gpu_memory_gib),
            // OCI's A100, H100, H200 and V100 shapes are HGX boards.
            gpu_form_factor: crate::gpu::form_factor(shape.gpu_model, "sxm"),
            vcpus: None,
            memory_gib: None,
            mig_profile: None,
        });
        let on_demand = per_gpu * f64::from(shape.gpus);
        let record = |kind: PriceKind, usd_per_hour: f64| PriceRecord {
            region: REGION.to_owned(),
            zone: None,
            instance_type: shape.shape.to_owned(),
            price_kind: kind,
            offering_class: None,
            usd_per_hour,
            upfront_usd: 0.0,
            recurring_usd_per_hour: usd_per_hour,
            source: Some(shape.part.to_owned()),
            available_regions: Vec::new(),
            max_instances: None,
            price_scope: PriceScope::Instance,
            window: None,
        };
        snap.prices.push(record(PriceKind::OnDemand, on_demand));
        if shape.preemptible {
            snap.prices
                .push(record(PriceKind::Spot, on_demand * PREEMPTIBLE_DISCOUNT));
        }
    }
    if snap.prices.is_empty() {
        return Err("the price list prices none of the GPU shapes' parts".to_owned());
    }
    Ok(snap)
}

#[cfg(test)]
mod tests;
