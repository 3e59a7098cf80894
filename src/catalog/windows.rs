//! Priced windows (Capacity Block offerings) over time: which appeared,
//! which vanished, and at what price.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{PriceFilter, per_gpu_hour};
use crate::store::{Store, StoreError, WindowOffering};

/// A priced window as the syncs saw it (docs/catalog.md, "Windows").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowRecord {
    /// `offered` while the provider lists it, `vanished` once a sync no
    /// longer did (sold, or its start passed).
    pub status: &'static str,
    pub provider: String,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub price_kind: String,
    pub gpu_model: String,
    #[serde(serialize_with = "gpuplan_providers::gpu::serialize_count")]
    pub gpu_count: f64,
    pub window_start: DateTime<Utc>,
    pub window_end: DateTime<Utc>,
    pub window_hours: f64,
    pub instance_count: u32,
    /// The whole fee, paid up front, when last offered.
    pub upfront_usd: f64,
    pub usd_per_hour: f64,
    pub usd_per_gpu_hour: f64,
    pub first_seen: DateTime<Utc>,
    pub vanished_at: Option<DateTime<Utc>>,
    /// How many prices it was offered at (more than one when repriced).
    pub prices: i64,
}

impl From<WindowOffering> for WindowRecord {
    fn from(o: WindowOffering) -> Self {
        Self {
            status: if o.vanished_at.is_some() {
                "vanished"
            } else {
                "offered"
            },
            usd_per_gpu_hour: per_gpu_hour(o.usd_per_hour, o.gpu_count),
            window_start: o.window.start,
            window_end: o.window.end,
            window_hours: o.window.hours(),
            instance_count: o.window.instance_count,
            provider: o.provider,
            region: o.region,
            zone: o.zone,
            instance_type: o.instance_type,
            price_kind: o.price_kind,
            gpu_model: o.gpu_model,
            gpu_count: o.gpu_count,
            upfront_usd: o.upfront_usd,
            usd_per_hour: o.usd_per_hour,
            first_seen: o.first_seen,
            vanished_at: o.vanished_at,
            prices: o.prices,
        }
    }
}

/// The windows offered now or that vanished since `since`, matching
/// `filter` (its GPUs, providers, regions, kinds and price cap) and at least
/// `min_hours` long; soonest window first.
///
/// # Errors
/// On a store error.
pub fn windows(
    store: &dyn Store,
    filter: &PriceFilter,
    since: DateTime<Utc>,
    min_hours: f64,
) -> Result<Vec<WindowRecord>, StoreError> {
    Ok(store
        .window_offerings(since)?
        .into_iter()
        .map(WindowRecord::from)
        .filter(|w| {
            filter.matches_type(&w.provider, &w.gpu_model)
                && (filter.regions.is_empty() || filter.regions.contains(&w.region))
                && (filter.kinds.is_empty()
                    || filter.kinds.iter().any(|k| k.to_string() == w.price_kind))
                && filter
                    .max_usd_per_gpu_hour
                    .is_none_or(|max| w.usd_per_gpu_hour <= max)
                && w.window_hours >= min_hours
        })
        .collect())
}
