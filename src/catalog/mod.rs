//! Catalog queries for people and scripts: current prices as normalized records
//! with staleness, and spot price history with its statistics.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use gpuplan_providers::{Currency, PriceKind, PriceScope};
use serde::Serialize;

use crate::store::{
    CurrentPrice, PricePart, SpotPrice, SpotQuote, SpotSeriesFilter, SpotSeriesPoints, Store,
    StoreError,
};

pub mod sync;
mod windows;

pub use windows::{WindowRecord, windows};

/// When a source's data counts as stale: older than twice its sync interval.
#[derive(Debug, Clone)]
pub struct Freshness {
    pub last_good: BTreeMap<String, DateTime<Utc>>,
    /// Sync interval per source; sources not listed use `default_interval`.
    pub intervals: BTreeMap<String, Duration>,
    pub default_interval: Duration,
    pub now: DateTime<Utc>,
}

/// The interval assumed for a source without a configured schedule.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(3600);

impl Freshness {
    /// Freshness as of `now`, from the last good syncs already read.
    #[must_use]
    pub fn new(
        last_good: BTreeMap<String, DateTime<Utc>>,
        intervals: BTreeMap<String, Duration>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            last_good,
            intervals,
            default_interval: DEFAULT_SYNC_INTERVAL,
            now,
        }
    }

    /// Freshness as of `now`, reading the last good syncs from `store`.
    ///
    /// # Errors
    /// On a store error.
    pub fn read(
        store: &dyn Store,
        intervals: BTreeMap<String, Duration>,
        now: DateTime<Utc>,
    ) -> Result<Self, StoreError> {
        Ok(Self::new(store.last_good_syncs()?, intervals, now))
    }

    /// Every source scheduled or with a good sync, in order.
    #[must_use]
    pub fn sources(&self) -> Vec<String> {
        let mut names: Vec<String> = self.intervals.keys().cloned().collect();
        names.extend(self.last_good.keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// The sources whose data is stale now, in order: part of the key of any
    /// cached answer, since records carry their staleness.
    #[must_use]
    pub fn stale_sources(&self) -> Vec<String> {
        self.last_good
            .keys()
            .filter(|s| self.is_stale(s))
            .cloned()
            .collect()
    }

    /// Whether `source` is stale: it never synced well, or its last good sync is
    /// older than twice its interval.
    #[must_use]
    pub fn is_stale(&self, source: &str) -> bool {
        let Some(last) = self.last_good.get(source) else {
            return true;
        };
        let interval = self
            .intervals
            .get(source)
            .copied()
            .unwrap_or(self.default_interval);
        (self.now - *last).to_std().unwrap_or(Duration::ZERO) > interval * 2
    }
}

/// A short human age, as tables and pages show data age: `45s`, `12m`, `3h`, `2d`.
#[must_use]
pub fn age(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let secs = (now - then).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// The normalized catalog record (docs/catalog.md), plus the term's parts and the
/// capacity cap that the planner needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogRecord {
    pub provider: String,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub gpu_model: String,
    /// GPUs per instance, or the share of one GPU a slice rents (0.125).
    #[serde(serialize_with = "gpuplan_providers::gpu::serialize_count")]
    pub gpu_count: f64,
    /// Memory per GPU, or a slice's own.
    pub gpu_memory_gib: Option<f64>,
    /// `sxm`, `pcie` or `nvl` where the model is sold in several forms.
    pub gpu_form_factor: Option<String>,
    /// The MIG profile of a slice of an owned GPU (`1g.10gb`), from a price sheet.
    pub mig_profile: Option<String>,
    pub vcpus: Option<u32>,
    pub memory_gib: Option<f64>,
    pub price_kind: String,
    pub offering_class: Option<String>,
    /// The window a `capacity_block` offering reserves: its start and end,
    /// length in hours (minutes count) and instance count; null otherwise.
    pub window_start: Option<DateTime<Utc>>,
    pub window_end: Option<DateTime<Utc>>,
    pub window_hours: Option<f64>,
    pub instance_count: Option<u32>,
    /// The shortest and longest run the kind sells, in hours: flex-start
    /// runs at most 168, calendar mode 24 to 2160; null for other kinds.
    pub min_duration_hours: Option<f64>,
    pub max_duration_hours: Option<f64>,
    pub usd_per_hour: f64,
    pub usd_per_gpu_hour: f64,
    pub observed_at: Option<DateTime<Utc>>,
    pub fetched_at: Option<DateTime<Utc>>,
    pub source: Option<String>,
    pub available_regions: Vec<String>,
    pub stale: bool,
    pub upfront_usd: f64,
    pub recurring_usd_per_hour: f64,
    pub max_instances: Option<u32>,
    /// `instance`, or `gpu_only` for a price of GPUs alone that a plan never
    /// buys (see [`PriceScope`]).
    pub price_scope: String,
    /// The source's currency and the rate (its units per USD) that turned its
    /// price into `usd_per_hour`; `USD` and 1 for USD sources.
    pub currency: String,
    pub fx_rate: f64,
    /// Emissions of an instance-hour, kgCO2e, and what they rest on; null
    /// where the GPU's power or the region's grid intensity is unknown.
    pub kgco2e_per_hour: Option<f64>,
    pub carbon: Option<Carbon>,
    /// The prices in a currency the caller asked for, when one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub converted: Option<Converted>,
    /// The price per unit of work a caller asked for (see [`per_work`]).
    /// Boxed: it is most of a record's size and few records carry one, while
    /// the API keeps a whole market of records in memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_work: Option<Box<PerWork>>,
}

/// An offer's price per hour of a reference GPU's work on one workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerWork {
    pub workload: String,
    pub reference: String,
    /// This GPU's work per hour over the reference's; null when the
    /// workload has no figure for it.
    pub factor: Option<f64>,
    /// `usd_per_gpu_hour / factor`.
    pub usd_per_reference_gpu_hour: Option<f64>,
    /// From datasheet figures (`spec:<format>`), not a measurement.
    pub estimate: bool,
    /// The measured rows the factor divides, this GPU's and the reference's.
    pub row: Option<crate::facts::PerfRow>,
    pub reference_row: Option<crate::facts::PerfRow>,
}

/// Adds each record's price per reference-GPU-hour of `work`, and sorts
/// them by it (records without a figure last).
pub fn per_work(records: &mut [CatalogRecord], work: &crate::facts::Work<'_>) {
    for r in records.iter_mut() {
        let factor = work.factor(&r.gpu_model, r.gpu_form_factor.as_deref());
        r.per_work = Some(Box::new(match factor {
            Some(f) => PerWork {
                usd_per_reference_gpu_hour: Some(r.usd_per_gpu_hour / f.factor),
                factor: Some(f.factor),
                estimate: f.estimate,
                row: f.row,
                reference_row: f.reference_row,
                workload: f.workload,
                reference: f.reference,
            },
            None => PerWork {
                workload: work.workload().to_owned(),
                reference: work.reference(),
                factor: None,
                usd_per_reference_gpu_hour: None,
                estimate: work.is_estimate(),
                row: None,
                reference_row: None,
            },
        }));
    }
    let key = |r: &CatalogRecord| {
        r.per_work
            .as_ref()
            .and_then(|p| p.usd_per_reference_gpu_hour)
            .unwrap_or(f64::INFINITY)
    };
    records.sort_by(|a, b| key(a).total_cmp(&key(b)));
}

/// What an offer's kgCO2e per instance-hour rests on: GPUs x TDP x PUE x
/// the grid's intensity (docs/catalog.md, "Carbon").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Carbon {
    pub gpu_tdp_watts: f64,
    pub gpu_sources: &'static [String],
    /// 1.0 when the region's PUE is unknown (`pue_assumed`).
    pub pue: f64,
    pub pue_assumed: bool,
    pub pue_source: Option<&'static str>,
    pub grid_gco2e_per_kwh: f64,
    pub grid_source: &'static str,
    pub grid_year: i32,
}

/// The carbon of one instance-hour of `gpu_count` GPUs of `model` in
/// `provider`'s `region`, when the facts know the GPU's power and the
/// region's grid.
fn carbon(
    provider: &str,
    region: &str,
    model: &str,
    form: Option<&str>,
    gpu_count: f64,
) -> Option<(f64, Carbon)> {
    let facts = crate::facts::builtin().ok()?;
    let gpu = facts.gpu(model, form)?;
    let place = facts.region(provider, region)?;
    let (tdp, grid) = (gpu.tdp_watts?, place.grid_gco2e_per_kwh?);
    let basis = Carbon {
        gpu_tdp_watts: tdp,
        gpu_sources: &gpu.sources,
        pue: place.pue.unwrap_or(1.0),
        pue_assumed: place.pue.is_none(),
        pue_source: place.pue_source.as_deref(),
        grid_gco2e_per_kwh: grid,
        grid_source: place.carbon_source.as_deref()?,
        grid_year: place.carbon_year?,
    };
    let kg = gpu_count * tdp / 1000.0 * basis.pue * grid / 1000.0;
    Some((kg, basis))
}

/// A record's prices in another currency, at the configured rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Converted {
    pub currency: String,
    /// Units of `currency` per USD.
    pub per_usd: f64,
    pub per_hour: f64,
    pub per_gpu_hour: f64,
    pub upfront: f64,
    pub recurring_per_hour: f64,
}

/// Adds each record's prices in `currency` (at its configured rate), for
/// showing a catalog in one currency; the USD fields stay as they are.
pub fn convert(records: &mut [CatalogRecord], currency: &Currency) {
    for r in records {
        let to = |usd: f64| usd * currency.per_usd;
        r.converted = Some(Converted {
            currency: currency.code.clone(),
            per_usd: currency.per_usd,
            per_hour: to(r.usd_per_hour),
            per_gpu_hour: to(r.usd_per_gpu_hour),
            upfront: to(r.upfront_usd),
            recurring_per_hour: to(r.recurring_usd_per_hour),
        });
    }
}

/// The groups the overview and the metrics compare: on demand, spot, and
/// every committed or prepaid kind together.
pub const PRICE_GROUPS: [&str; 3] = ["on_demand", "spot", "committed"];

/// The group of [`PRICE_GROUPS`] a price kind belongs to.
#[must_use]
pub fn price_group(kind: &str) -> &'static str {
    match kind {
        "on_demand" => "on_demand",
        "spot" => "spot",
        _ => "committed",
    }
}

/// The cheapest record per (GPU model, price group), by USD per GPU-hour.
pub type Cheapest = BTreeMap<(String, &'static str), CatalogRecord>;

#[must_use]
pub fn cheapest<'a>(records: impl IntoIterator<Item = &'a CatalogRecord>) -> Cheapest {
    let mut out: Cheapest = BTreeMap::new();
    for r in records {
        if let Some(key) = cheaper(&out, r) {
            out.insert(key, r.clone());
        }
    }
    out
}

/// `r`'s key in `out` when it is cheaper than what `out` holds there (or
/// `out` holds nothing there).
fn cheaper(out: &Cheapest, r: &CatalogRecord) -> Option<(String, &'static str)> {
    let key = (r.gpu_model.clone(), price_group(&r.price_kind));
    out.get(&key)
        .is_none_or(|best| r.usd_per_gpu_hour < best.usd_per_gpu_hour)
        .then_some(key)
}

/// Which prices to list. Each list matches any of its values; empty lists match all.
#[derive(Debug, Clone, Default)]
pub struct PriceFilter {
    /// Catalog names (`H100-80GB`) or families (`H100` matches `H100-80GB` and
    /// `H100-94GB`, not `GH200`), case-insensitive.
    pub gpus: Vec<String>,
    /// Provider names; `file` matches every price sheet.
    pub providers: Vec<String>,
    pub regions: Vec<String>,
    pub kinds: Vec<PriceKind>,
    /// What the prices buy; empty matches both.
    pub scopes: Vec<PriceScope>,
    /// GPU form factors; empty matches every record, with or without one.
    pub form_factors: Vec<gpuplan_providers::FormFactor>,
    pub max_usd_per_gpu_hour: Option<f64>,
    /// ISO country codes (`DE`): offers in a region of one of them, or
    /// global offers available in one. A region whose country the facts do
    /// not know matches none.
    pub countries: Vec<String>,
}

fn any(list: &[String], f: &dyn Fn(&str) -> bool) -> bool {
    list.is_empty() || list.iter().any(|v| f(v))
}

impl PriceFilter {
    fn matches_type(&self, provider: &str, gpu_model: &str) -> bool {
        any(&self.gpus, &|g| gpu_matches(gpu_model, g))
            && any(&self.providers, &|p| {
                provider == p || (p == "file" && provider.starts_with("file:"))
            })
    }

    /// Whether the filter asks for nothing in particular: every price.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        // Every field named, so that a new one cannot be forgotten here.
        let Self {
            gpus,
            providers,
            regions,
            kinds,
            scopes,
            form_factors,
            max_usd_per_gpu_hour,
            countries,
        } = self;
        gpus.is_empty()
            && providers.is_empty()
            && regions.is_empty()
            && kinds.is_empty()
            && scopes.is_empty()
            && form_factors.is_empty()
            && max_usd_per_gpu_hour.is_none()
            && countries.is_empty()
    }

    /// Whether `r` is one of the prices asked for.
    #[must_use]
    pub fn matches(&self, r: &CatalogRecord) -> bool {
        self.matches_type(&r.provider, &r.gpu_model)
            && any(&self.regions, &|reg| {
                r.region == reg || r.available_regions.iter().any(|a| a == reg)
            })
            && (self.kinds.is_empty() || self.kinds.iter().any(|k| k.as_str() == r.price_kind))
            && (self.scopes.is_empty() || self.scopes.iter().any(|s| s.as_str() == r.price_scope))
            && (self.form_factors.is_empty()
                || self
                    .form_factors
                    .iter()
                    .any(|f| r.gpu_form_factor.as_deref() == Some(f.as_str())))
            && self
                .max_usd_per_gpu_hour
                .is_none_or(|max| r.usd_per_gpu_hour <= max)
            && (self.countries.is_empty()
                || std::iter::once(&r.region)
                    .chain(&r.available_regions)
                    .any(|region| self.in_countries(&r.provider, region)))
    }

    fn in_countries(&self, provider: &str, region: &str) -> bool {
        crate::facts::builtin()
            .ok()
            .and_then(|f| f.region(provider, region)?.country.as_deref())
            .is_some_and(|c| self.countries.iter().any(|w| w.eq_ignore_ascii_case(c)))
    }
}

pub use gpuplan_providers::gpu::matches as gpu_matches;

/// Current prices matching `filter`, cheapest per GPU-hour first (ties broken by
/// provider, region, zone, instance type and kind, so output is stable).
///
/// # Errors
/// On a store error.
pub fn prices(
    store: &dyn Store,
    fresh: &Freshness,
    filter: &PriceFilter,
) -> Result<Vec<CatalogRecord>, StoreError> {
    prices_at(store, fresh, filter, None)
}

/// [`prices`] as they stood at `at` (now, when `None`).
///
/// # Errors
/// On a store error.
pub fn prices_at(
    store: &dyn Store,
    fresh: &Freshness,
    filter: &PriceFilter,
    at: Option<DateTime<Utc>>,
) -> Result<Vec<CatalogRecord>, StoreError> {
    let found = price_part_at(store, fresh, filter, at, PricePart::All)?;
    // Sorted by position: a record is hundreds of bytes, and moving them
    // was most of a large answer's sort.
    let mut order: Vec<usize> = (0..found.len()).collect();
    order.sort_by(|&i, &j| catalog_order(&found[i], &found[j]));
    let mut slots: Vec<Option<CatalogRecord>> = found.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// The catalog's order: cheapest per GPU-hour first, ties broken by
/// provider, region, zone, instance type and kind, then by what still tells
/// offers apart (a Capacity Block's window, the scope, the provider's id),
/// so the order does not depend on how the records were read.
#[must_use]
pub fn catalog_order(a: &CatalogRecord, b: &CatalogRecord) -> std::cmp::Ordering {
    a.usd_per_gpu_hour
        .total_cmp(&b.usd_per_gpu_hour)
        .then_with(|| a.provider.cmp(&b.provider))
        .then_with(|| a.region.cmp(&b.region))
        .then_with(|| a.zone.cmp(&b.zone))
        .then_with(|| a.instance_type.cmp(&b.instance_type))
        .then_with(|| a.price_kind.cmp(&b.price_kind))
        .then_with(|| a.offering_class.cmp(&b.offering_class))
        .then_with(|| a.window_start.cmp(&b.window_start))
        .then_with(|| a.window_end.cmp(&b.window_end))
        .then_with(|| a.price_scope.cmp(&b.price_scope))
        .then_with(|| a.source.cmp(&b.source))
}

/// One part of [`prices_at`] (list prices, or spot history's newest
/// observations), in no particular order: the dashboard keeps list prices
/// while only spot prices change.
///
/// # Errors
/// On a store error.
pub fn price_part_at(
    store: &dyn Store,
    fresh: &Freshness,
    filter: &PriceFilter,
    at: Option<DateTime<Utc>>,
    part: PricePart,
) -> Result<Vec<CatalogRecord>, StoreError> {
    let types = types_matching(store, filter)?;
    Ok(store
        .price_part_as_of(types.as_deref(), at, part)?
        .into_iter()
        .map(|p| record(p, fresh))
        .filter(|r| filter.matches(r))
        .collect())
}

/// [`cheapest`] of the prices matching `filter` as they stood at `at`,
/// each record dropped once compared: a whole market's records are never
/// held at once.
///
/// # Errors
/// On a store error.
pub fn cheapest_as_of(
    store: &dyn Store,
    fresh: &Freshness,
    filter: &PriceFilter,
    at: DateTime<Utc>,
) -> Result<Cheapest, StoreError> {
    let types = types_matching(store, filter)?;
    let mut out = Cheapest::new();
    store.each_price_as_of(types.as_deref(), Some(at), PricePart::All, &mut |p| {
        let r = record(p, fresh);
        if filter.matches(&r)
            && let Some(key) = cheaper(&out, &r)
        {
            out.insert(key, r);
        }
        Ok(())
    })?;
    Ok(out)
}

/// The instance types `filter` can match, when it names GPUs or providers
/// (attributes of the type): a query narrowed to them costs what matches.
fn types_matching(
    store: &dyn Store,
    filter: &PriceFilter,
) -> Result<Option<Vec<(String, String)>>, StoreError> {
    if filter.gpus.is_empty() && filter.providers.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        store
            .instance_type_names()?
            .into_iter()
            .filter(|(provider, _, gpu)| filter.matches_type(provider, gpu))
            .map(|(provider, instance_type, _)| (provider, instance_type))
            .collect(),
    ))
}

/// The current spot records of the series spot writes numbered past `after`
/// touched (see [`Reads::spot_quotes_changed_after`](crate::store::Reads)):
/// the record `kept` holds of a series with its new price, or, for a series
/// it does not hold, the series read whole. Only the price and when it was
/// observed come back for a series already held: its instance type's facts
/// cannot have changed while [`Generation::list_prices`](crate::store::Generation)
/// stood still, and they are most of a record.
///
/// # Errors
/// On a store error.
pub fn spot_changed_after<'k>(
    store: &dyn Store,
    fresh: &Freshness,
    after: i64,
    kept: impl Fn(&SpotQuote) -> Option<&'k CatalogRecord>,
) -> Result<Vec<CatalogRecord>, StoreError> {
    let quotes = store.spot_quotes_changed_after(after)?;
    let mut changed = Vec::with_capacity(quotes.len());
    let mut unknown = BTreeSet::new();
    for q in quotes {
        match kept(&q) {
            Some(r) => changed.push(requoted(r, q, fresh)),
            None => {
                unknown.insert((q.provider, q.zone, q.instance_type));
            }
        }
    }
    if !unknown.is_empty() {
        let types: BTreeSet<(String, String)> = unknown
            .iter()
            .map(|(provider, _, instance_type)| (provider.clone(), instance_type.clone()))
            .collect();
        let types: Vec<_> = types.into_iter().collect();
        store.each_price_as_of(Some(&types), None, PricePart::Spot, &mut |p| {
            if unknown.contains(&(p.provider.clone(), p.zone.clone(), p.instance_type.clone())) {
                changed.push(record(p, fresh));
            }
            Ok(())
        })?;
    }
    Ok(changed)
}

/// `kept`, a series' current spot record, at the series' new price.
fn requoted(kept: &CatalogRecord, q: SpotQuote, fresh: &Freshness) -> CatalogRecord {
    CatalogRecord {
        usd_per_hour: q.usd_per_hour,
        recurring_usd_per_hour: q.usd_per_hour,
        usd_per_gpu_hour: per_gpu_hour(q.usd_per_hour, kept.gpu_count),
        observed_at: Some(q.observed_at),
        currency: q.currency,
        fx_rate: q.fx_rate,
        stale: fresh.is_stale(&kept.provider),
        fetched_at: fresh.last_good.get(&kept.provider).copied(),
        converted: None,
        per_work: None,
        ..kept.clone()
    }
}

impl CatalogRecord {
    /// The GPU memory an instance has in all: its GPUs' together, or a
    /// slice's own.
    #[must_use]
    pub fn instance_gpu_memory_gib(&self) -> Option<f64> {
        self.gpu_memory_gib.map(|m| {
            if self.gpu_count < 1.0 {
                m
            } else {
                m * self.gpu_count
            }
        })
    }
}

/// An instance-hour's price per GPU-hour: a slice's is that of the whole
/// GPU it is a share of.
fn per_gpu_hour(usd_per_hour: f64, gpu_count: f64) -> f64 {
    if gpu_count > 0.0 {
        usd_per_hour / gpu_count
    } else {
        usd_per_hour
    }
}

fn record(p: CurrentPrice, fresh: &Freshness) -> CatalogRecord {
    let usd_per_gpu_hour = per_gpu_hour(p.usd_per_hour, p.gpu_count);
    let (kgco2e_per_hour, carbon) = match carbon(
        &p.provider,
        &p.region,
        &p.gpu_model,
        p.gpu_form_factor.as_deref(),
        p.gpu_count,
    ) {
        Some((kg, basis)) => (Some(kg), Some(basis)),
        None => (None, None),
    };
    let (min_duration_hours, max_duration_hours) = p
        .price_kind
        .parse::<PriceKind>()
        .map_or((None, None), PriceKind::duration_hours);
    CatalogRecord {
        window_start: p.window.map(|w| w.start),
        window_end: p.window.map(|w| w.end),
        window_hours: p.window.map(|w| w.hours()),
        instance_count: p.window.map(|w| w.instance_count),
        min_duration_hours,
        max_duration_hours,
        stale: fresh.is_stale(&p.provider),
        fetched_at: fresh.last_good.get(&p.provider).copied(),
        usd_per_gpu_hour,
        provider: p.provider,
        region: p.region,
        zone: p.zone,
        instance_type: p.instance_type,
        gpu_model: p.gpu_model,
        gpu_count: p.gpu_count,
        gpu_memory_gib: p.gpu_memory_gib,
        gpu_form_factor: p.gpu_form_factor,
        mig_profile: p.mig_profile,
        vcpus: p.vcpus,
        memory_gib: p.memory_gib,
        price_kind: p.price_kind,
        offering_class: p.offering_class,
        usd_per_hour: p.usd_per_hour,
        observed_at: p.observed_at,
        source: p.source,
        available_regions: p.available_regions,
        upfront_usd: p.upfront_usd,
        recurring_usd_per_hour: p.recurring_usd_per_hour,
        max_instances: p.max_instances,
        price_scope: p.price_scope,
        currency: p.currency,
        fx_rate: p.fx_rate,
        kgco2e_per_hour,
        carbon,
        converted: None,
        per_work: None,
    }
}

/// Time-weighted statistics of a spot price over a window.
///
/// A spot price is reported when it changes and holds until the next report, so
/// each observation weighs as long as it was in force within the window; a
/// price that held for six days counts six days, a one-hour blip one hour.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpotStats {
    pub observations: usize,
    pub min: f64,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpotSeries {
    pub provider: String,
    pub region: String,
    pub zone: String,
    pub instance_type: String,
    /// The provider's last good sync is older than twice its interval.
    pub stale: bool,
    pub stats: SpotStats,
    pub points: Vec<SpotPrice>,
}

/// A series as the API has always sent it: each point names its provider,
/// region, zone and instance type, which the series holds once.
impl Serialize for SpotSeries {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = s.serialize_struct("SpotSeries", 6)?;
        out.serialize_field("provider", &self.provider)?;
        out.serialize_field("region", &self.region)?;
        out.serialize_field("zone", &self.zone)?;
        out.serialize_field("stale", &self.stale)?;
        out.serialize_field("stats", &self.stats)?;
        out.serialize_field("points", &SeriesPoints(self))?;
        out.end()
    }
}

struct SeriesPoints<'a>(&'a SpotSeries);

impl Serialize for SeriesPoints<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.points())
    }
}

/// One observation of a series, with the series' names.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpotPointOf<'a> {
    pub provider: &'a str,
    pub region: &'a str,
    pub zone: &'a str,
    pub instance_type: &'a str,
    #[serde(serialize_with = "rfc3339")]
    pub observed_at: DateTime<Utc>,
    pub usd_per_hour: f64,
}

/// A time as chrono writes it (RFC 3339 in UTC, `Z`, the fraction in 0, 3, 6
/// or 9 digits), written at once: a month of spot history in every region
/// holds tens of thousands of them, and chrono hands them over a character
/// at a time. Years outside 0 to 9999 and leap seconds go to chrono.
fn rfc3339<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    use chrono::{Datelike, Timelike};
    let (year, nano) = (t.year(), t.nanosecond());
    let (Ok(year @ 0..=9999), 0..=999_999_999) = (u32::try_from(year), nano) else {
        return t.serialize(s);
    };
    let mut buf = *b"0000-00-00T00:00:00.000000000Z";
    let mut two = |at: usize, v: u32| {
        buf[at] = b'0' + (v / 10) as u8;
        buf[at + 1] = b'0' + (v % 10) as u8;
    };
    two(0, year / 100);
    two(2, year % 100);
    two(5, t.month());
    two(8, t.day());
    two(11, t.hour());
    two(14, t.minute());
    two(17, t.second());
    let digits = match nano {
        0 => 0,
        n if n % 1_000_000 == 0 => 3,
        n if n % 1_000 == 0 => 6,
        _ => 9,
    };
    let mut len = 19;
    if digits > 0 {
        let mut v = nano / 10u32.pow(9 - digits);
        for i in (0..digits as usize).rev() {
            buf[20 + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        len += 1 + digits as usize;
    }
    buf[len] = b'Z';
    let text = std::str::from_utf8(&buf[..=len]).map_err(serde::ser::Error::custom)?;
    s.serialize_str(text)
}

impl SpotSeries {
    /// Each observation with the series' names, oldest first.
    pub fn points(&self) -> impl Iterator<Item = SpotPointOf<'_>> {
        self.points.iter().map(|p| SpotPointOf {
            provider: &self.provider,
            region: &self.region,
            zone: &self.zone,
            instance_type: &self.instance_type,
            observed_at: p.observed_at,
            usd_per_hour: p.usd_per_hour,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpotHistory {
    pub instance_type: String,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    /// Over every zone together: a random zone-hour of the window.
    pub stats: Option<SpotStats>,
    pub series: Vec<SpotSeries>,
}

/// What spot history to read.
#[derive(Debug, Clone)]
pub struct SpotQuery {
    pub instance_type: String,
    pub provider: Option<String>,
    pub region: Option<String>,
    pub zone: Option<String>,
    pub since: DateTime<Utc>,
    /// Refuse (`StoreError::TooLarge`) rather than answer with more
    /// observations than this.
    pub max_observations: Option<usize>,
}

/// What spot writes numbered past `changed_after` appended to the series
/// `q` asks for, after the newest point of each that an earlier read holds
/// (see [`Store::spot_points_appended`]); `None`: read the window again.
///
/// # Errors
/// On a store error.
pub fn spot_series_appended(
    store: &dyn Store,
    q: &SpotQuery,
    changed_after: i64,
    newest: &HashMap<i64, DateTime<Utc>>,
) -> Result<Option<HashMap<i64, Vec<SpotPrice>>>, StoreError> {
    store.spot_points_appended(&q.series(), changed_after, newest)
}

impl SpotQuery {
    /// The series it asks for.
    #[must_use]
    pub fn series(&self) -> SpotSeriesFilter<'_> {
        SpotSeriesFilter {
            instance_type: &self.instance_type,
            provider: self.provider.as_deref(),
            region: self.region.as_deref(),
            zone: self.zone.as_deref(),
        }
    }
}

/// The most spot observations one answer to a person or script holds
/// (`/v1/spot-history`, `gpuplan spot-history`): about 20 MiB of JSON.
pub const MAX_SPOT_OBSERVATIONS: usize = 200_000;

/// Spot history of one instance type per zone, with statistics per zone and overall.
///
/// # Errors
/// On a store error.
pub fn spot_history(
    store: &dyn Store,
    q: &SpotQuery,
    fresh: &Freshness,
) -> Result<SpotHistory, StoreError> {
    Ok(spot_history_of(spot_series(store, q)?, q, fresh))
}

/// The series `q` asks for, with their points since `q.since` and the one in
/// force then, as the store reads them.
///
/// # Errors
/// On a store error; `TooLarge` past `q.max_observations`.
pub fn spot_series(store: &dyn Store, q: &SpotQuery) -> Result<Vec<SpotSeriesPoints>, StoreError> {
    store.spot_series_history(&q.series(), q.since, q.max_observations)
}

/// [`spot_history`] of series already read: each with its points since
/// `q.since` and the one in force then, as [`spot_series`] returns them. A
/// series without a point is left out.
#[must_use]
pub fn spot_history_of(
    read: Vec<SpotSeriesPoints>,
    q: &SpotQuery,
    fresh: &Freshness,
) -> SpotHistory {
    let windows: Vec<&[SpotPrice]> = read.iter().map(|s| s.points.as_slice()).collect();
    let (each, overall) =
        window_stats(&windows, by_price(&windows).into_iter(), q.since, fresh.now);
    let series = read
        .into_iter()
        .zip(each)
        .filter_map(|(s, stats)| {
            Some(SpotSeries {
                stale: fresh.is_stale(&s.provider),
                stats: stats?,
                provider: s.provider,
                region: s.region,
                zone: s.zone,
                instance_type: s.instance_type,
                points: s.points,
            })
        })
        .collect();
    SpotHistory {
        instance_type: q.instance_type.clone(),
        since: q.since,
        until: fresh.now,
        stats: overall,
        series,
    }
}

/// Every point of `windows` (each a series' points sorted by time) as
/// (window, point), in order of price; ties stay in window then time order,
/// as a stable sort of all the points one after another leaves them.
#[must_use]
pub fn by_price(windows: &[&[SpotPrice]]) -> Vec<(usize, usize)> {
    let mut order: Vec<(usize, usize)> = windows
        .iter()
        .enumerate()
        .flat_map(|(w, points)| (0..points.len()).map(move |i| (w, i)))
        .collect();
    order.sort_by(|a, b| {
        windows[a.0][a.1]
            .usd_per_hour
            .total_cmp(&windows[b.0][b.1].usd_per_hour)
    });
    order
}

/// The statistics spot history answers over [since, now] for `windows` (each
/// a series' points sorted by time, from the one in force at `since`): each
/// window's (`None` for one without a point) and all of theirs together.
/// `by_price` is what [`by_price`] answers for them: an order kept with a
/// read serves every later window of it without sorting again.
pub fn window_stats(
    windows: &[&[SpotPrice]],
    by_price: impl Iterator<Item = (usize, usize)>,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (Vec<Option<SpotStats>>, Option<SpotStats>) {
    let each: Vec<Vec<(f64, f64)>> = windows.iter().map(|w| segments(w, since, now)).collect();
    let mut starts = Vec::with_capacity(windows.len());
    let mut points = 0;
    for w in windows {
        starts.push(points);
        points += w.len();
    }
    let mut each_order: Vec<Vec<usize>> = windows
        .iter()
        .map(|w| Vec::with_capacity(w.len()))
        .collect();
    let mut all_order = Vec::with_capacity(points);
    for (w, i) in by_price {
        each_order[w].push(i);
        all_order.push(starts[w] + i);
    }
    let all = each.concat();
    let stats_of_each = each
        .iter()
        .zip(each_order)
        .map(|(segments, order)| stats_in(segments, order, segments.len()))
        .collect();
    (stats_of_each, stats_in(&all, all_order, points))
}

/// (price, seconds in force within [since, now]) for each point of one zone,
/// points sorted by time.
fn segments(points: &[SpotPrice], since: DateTime<Utc>, now: DateTime<Utc>) -> Vec<(f64, f64)> {
    points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let start = p.observed_at.max(since);
            let end = points
                .get(i + 1)
                .map_or(now, |next| next.observed_at)
                .max(start);
            (p.usd_per_hour, (end - start).as_seconds_f64())
        })
        .collect()
}

/// The statistics of `segments`, `by_price` their positions sorted by price
/// (ties in position order).
fn stats_in(
    segments: &[(f64, f64)],
    by_price: Vec<usize>,
    observations: usize,
) -> Option<SpotStats> {
    if segments.is_empty() {
        return None;
    }
    // A window of zero length (every point at `now`) weighs points equally;
    // otherwise a point that was never in force within it weighs nothing.
    let timed = segments.iter().map(|s| s.1).sum::<f64>() > 0.0;
    let weighted = |s: &(f64, f64)| match timed {
        true => (s.1 > 0.0).then_some(*s),
        false => Some((s.0, 1.0)),
    };
    let total: f64 = segments.iter().filter_map(weighted).map(|s| s.1).sum();
    let sorted: Vec<(f64, f64)> = by_price
        .into_iter()
        .filter_map(|i| weighted(&segments[i]))
        .collect();
    let quantile = |q: f64| {
        let mut acc = 0.0;
        for (price, w) in &sorted {
            acc += w;
            if acc >= q * total - 1e-9 {
                return *price;
            }
        }
        sorted[sorted.len() - 1].0
    };
    Some(SpotStats {
        observations,
        min: sorted[0].0,
        p50: quantile(0.5),
        p95: quantile(0.95),
        max: sorted[sorted.len() - 1].0,
        mean: segments
            .iter()
            .filter_map(weighted)
            .map(|(p, w)| p * w)
            .sum::<f64>()
            / total,
    })
}

/// The furthest back a window may reach: ten years, more than any provider
/// keeps, and small enough that no date arithmetic on it can overflow.
pub const MAX_WINDOW_DAYS: i64 = 3650;

/// A duration back from now (`7d` / `36h` / `90m` / `2w`), at most
/// [`MAX_WINDOW_DAYS`]; `None` when `s` is not written as one.
fn duration_back(s: &str) -> Option<Result<chrono::Duration, String>> {
    let units: BTreeMap<char, u64> =
        BTreeMap::from([('m', 60), ('h', 3600), ('d', 86400), ('w', 604_800)]);
    let unit = s.chars().last().and_then(|c| units.get(&c))?;
    let digits = &s[..s.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Checked in plain seconds first: chrono's own constructor panics past
    // its range.
    Some(
        digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(*unit))
            .and_then(|secs| i64::try_from(secs).ok())
            .filter(|secs| *secs <= MAX_WINDOW_DAYS * 86_400)
            .map(chrono::Duration::seconds)
            .ok_or_else(|| out_of_range(s)),
    )
}

fn out_of_range(s: &str) -> String {
    format!("`{s}` is out of range: a window reaches back between 0 and {MAX_WINDOW_DAYS} days")
}

/// A window start: `7d` / `36h` / `90m` / `2w` back from `now`, a date, or an
/// RFC 3339 time, at most [`MAX_WINDOW_DAYS`] back and not after `now`.
///
/// # Errors
/// A message naming the text that is none of these, or is out of range.
pub fn parse_since(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    if let Some(back) = duration_back(s) {
        return Ok(now - back?);
    }
    let at = if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        t.with_timezone(&Utc)
    } else if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
    } else {
        return Err(format!(
            "`{s}` is not a duration (7d, 36h, 90m, 2w), a date (2026-11-01) or an RFC 3339 time"
        ));
    };
    if at > now || now - at > chrono::Duration::days(MAX_WINDOW_DAYS) {
        return Err(out_of_range(s));
    }
    Ok(at)
}

/// The length of the window from `s` (anything [`parse_since`] reads) to now:
/// the spot window of a plan, given as a flag or an API field.
///
/// # Errors
/// As [`parse_since`].
pub fn window_since(s: &str) -> Result<Duration, String> {
    let now = Utc::now();
    parse_since(s, now).map(|since| (now - since).to_std().unwrap_or_default())
}

/// A window's length, `7d` / `36h` / `90m` / `2w` only (config files, where a
/// date would go stale), in the same range as [`parse_since`].
///
/// # Errors
/// A message naming the text.
pub fn parse_window(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let back = duration_back(s)
        .ok_or_else(|| format!("`{s}` is not a duration like 7d, 36h, 90m or 2w"))??;
    Ok(back.to_std().unwrap_or_default())
}

/// An on-demand offer of 8 GPUs, for tests of what reads records.
#[cfg(test)]
pub(crate) fn test_record(provider: &str, gpu_model: &str, usd_per_hour: f64) -> CatalogRecord {
    CatalogRecord {
        provider: provider.to_owned(),
        region: "region-0".to_owned(),
        zone: None,
        instance_type: format!("{provider}-8x"),
        gpu_model: gpu_model.to_owned(),
        gpu_count: 8.0,
        gpu_memory_gib: Some(80.0),
        gpu_form_factor: None,
        mig_profile: None,
        vcpus: None,
        memory_gib: None,
        price_kind: "on_demand".to_owned(),
        offering_class: None,
        window_start: None,
        window_end: None,
        window_hours: None,
        instance_count: None,
        min_duration_hours: None,
        max_duration_hours: None,
        usd_per_hour,
        usd_per_gpu_hour: usd_per_hour / 8.0,
        observed_at: None,
        fetched_at: None,
        source: None,
        available_regions: Vec::new(),
        stale: false,
        upfront_usd: 0.0,
        recurring_usd_per_hour: usd_per_hour,
        max_instances: None,
        price_scope: "instance".to_owned(),
        currency: "USD".to_owned(),
        fx_rate: 1.0,
        carbon: None,
        kgco2e_per_hour: None,
        converted: None,
        per_work: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cheapest_at_a_time_are_those_of_every_price_then() {
        use crate::store::test_support::{TestDb, at, snapshot, sync};
        let db = TestDb::sqlite();
        let pool = db.pool(0);
        sync(&pool, &snapshot(3, 2.0), 0);
        sync(&pool, &snapshot(3, 1.0), 5);
        pool.read(|store| {
            let fresh = Freshness::read(store, BTreeMap::new(), at(9))?;
            let every = PriceFilter::default();
            for hour in [3, 6] {
                let then = cheapest_as_of(store, &fresh, &every, at(hour))?;
                let records = price_part_at(store, &fresh, &every, Some(at(hour)), PricePart::All)?;
                assert_eq!(then, cheapest(&records), "at hour {hour}");
                let on_demand = &then[&("L4".to_owned(), "on_demand")];
                assert_eq!(on_demand.usd_per_hour, if hour == 3 { 2.0 } else { 1.0 });
                assert!(then.contains_key(&("L4".to_owned(), "committed")));
            }
            let h100 = PriceFilter {
                gpus: vec!["H100".into()],
                ..PriceFilter::default()
            };
            assert!(cheapest_as_of(store, &fresh, &h100, at(6))?.is_empty());
            let on_demand = PriceFilter {
                kinds: vec![PriceKind::OnDemand],
                ..PriceFilter::default()
            };
            let only = cheapest_as_of(store, &fresh, &on_demand, at(6))?;
            assert_eq!(
                only.keys().collect::<Vec<_>>(),
                [&("L4".to_owned(), "on_demand")]
            );
            Ok::<_, StoreError>(())
        })
        .unwrap();
    }

    proptest::proptest! {
        /// Outside input (`since`, `--since`, `spot_window`): a value in range or
        /// an error quoting the text, never a panic.
        #[test]
        fn any_since_text_is_a_window_or_an_error_naming_it(
            text in "\\PC{0,24}",
            n in proptest::num::u64::ANY,
            unit in "[mhdwx ]",
        ) {
            let now = at(0);
            for s in [text.clone(), format!("{n}{unit}")] {
                match parse_since(&s, now) {
                    Ok(t) => proptest::prop_assert!(
                        t <= now && now - t <= chrono::Duration::days(MAX_WINDOW_DAYS)
                    ),
                    Err(e) => proptest::prop_assert!(e.contains(s.trim()), "{e}"),
                }
            }
        }
    }

    fn at(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).unwrap()
    }

    fn stats(segments: &[(f64, f64)], observations: usize) -> Option<SpotStats> {
        let mut order: Vec<usize> = (0..segments.len()).collect();
        order.sort_by(|&a, &b| segments[a].0.total_cmp(&segments[b].0));
        stats_in(segments, order, observations)
    }

    #[test]
    fn spot_stats_weigh_each_price_by_how_long_it_held() {
        // 1.0 for 20 hours, then a 2-hour spike at 9.0, then 1.0 again for 2 hours.
        let segs = vec![
            (1.0, 20.0 * 3600.0),
            (9.0, 2.0 * 3600.0),
            (1.0, 2.0 * 3600.0),
        ];
        let s = stats(&segs, 3).unwrap();
        assert_eq!((s.min, s.p50, s.max), (1.0, 1.0, 9.0));
        assert_eq!(s.p95, 9.0);
        assert!((s.mean - (22.0 + 18.0) / 24.0).abs() < 1e-12);
    }

    #[test]
    fn the_price_in_force_when_the_window_opens_counts_from_the_window_start() {
        let p = |h, usd| SpotPrice {
            observed_at: at(h),
            usd_per_hour: usd,
        };
        let segs = segments(&[p(-100, 2.0), p(10, 4.0)], at(0), at(20));
        assert_eq!(segs, vec![(2.0, 10.0 * 3600.0), (4.0, 10.0 * 3600.0)]);
    }

    #[test]
    fn each_point_of_a_series_is_sent_with_the_names_of_its_series() {
        let series = SpotSeries {
            provider: "aws".into(),
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "p5.48xlarge".into(),
            stale: false,
            stats: stats(&[(2.5, 1.0)], 1).unwrap(),
            points: vec![SpotPrice {
                observed_at: DateTime::from_timestamp(1_800_000_000, 123_456_000).unwrap(),
                usd_per_hour: 2.5,
            }],
        };
        assert_eq!(
            serde_json::to_value(&series).unwrap(),
            serde_json::json!({
                "provider": "aws", "region": "us-east-1", "zone": "us-east-1a", "stale": false,
                "stats": {"observations": 1, "min": 2.5, "p50": 2.5, "p95": 2.5, "max": 2.5, "mean": 2.5},
                "points": [{
                    "provider": "aws", "region": "us-east-1", "zone": "us-east-1a",
                    "instance_type": "p5.48xlarge",
                    "observed_at": "2027-01-15T08:00:00.123456Z", "usd_per_hour": 2.5
                }]
            })
        );
    }

    #[test]
    fn times_are_written_as_chrono_writes_them() {
        #[derive(Serialize)]
        struct Fast(#[serde(serialize_with = "rfc3339")] DateTime<Utc>);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (first, last) = (-62_167_219_200_i64, 253_402_300_799_i64);
        let mut cases: Vec<DateTime<Utc>> = [first, -1, 0, 1, last, last + 1, first - 1]
            .iter()
            .map(|&secs| DateTime::from_timestamp(secs, 0).unwrap())
            .collect();
        for i in 0..200_000u64 {
            let secs = first + (next() % (last - first + 1) as u64) as i64;
            let nanos = match i % 4 {
                0 => 0,
                1 => (next() % 1000) as u32 * 1_000_000,
                2 => (next() % 1_000_000) as u32 * 1_000,
                _ => (next() % 1_000_000_000) as u32,
            };
            cases.push(DateTime::from_timestamp(secs, nanos).unwrap());
        }
        // A leap second, which chrono writes as the next second's 60th.
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .unwrap()
            .and_hms_nano_opt(23, 59, 59, 1_500_000_000)
            .unwrap()
            .and_utc();
        cases.push(leap);
        for t in cases {
            assert_eq!(
                serde_json::to_string(&Fast(t)).unwrap(),
                serde_json::to_string(&t).unwrap(),
                "{t:?}"
            );
        }
    }

    #[test]
    fn since_accepts_durations_dates_and_times() {
        let now = DateTime::parse_from_rfc3339("2026-11-29T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            parse_since("7d", now).unwrap(),
            now - chrono::Duration::days(7)
        );
        assert_eq!(
            parse_since("90m", now).unwrap(),
            now - chrono::Duration::minutes(90)
        );
        assert_eq!(
            parse_since("2026-11-01", now).unwrap().to_rfc3339(),
            "2026-11-01T00:00:00+00:00"
        );
        assert_eq!(
            parse_since("2026-11-28T06:00:00Z", now).unwrap(),
            now - chrono::Duration::hours(30)
        );
        assert!(
            parse_since("last week", now)
                .unwrap_err()
                .contains("last week")
        );
        assert!(parse_since("-3d", now).is_err());
        // Found by an attacker: this used to panic in the date arithmetic.
        for huge in [
            "100000000000d",
            "18446744073709551615w",
            "3651d",
            "1999-01-01",
            "2027-01-01",
        ] {
            let err = parse_since(huge, now).unwrap_err();
            assert!(err.contains("out of range") && err.contains(huge), "{err}");
        }
        assert_eq!(
            parse_since("3650d", now).unwrap(),
            now - chrono::Duration::days(3650)
        );
    }

    #[test]
    fn only_a_filter_that_asks_for_nothing_is_empty() {
        assert!(PriceFilter::default().is_empty());
        let one = |f: fn(&mut PriceFilter)| {
            let mut filter = PriceFilter::default();
            f(&mut filter);
            filter.is_empty()
        };
        assert!(!one(|f| f.gpus.push("H100".into())));
        assert!(!one(|f| f.providers.push("aws".into())));
        assert!(!one(|f| f.regions.push("us-east-1".into())));
        assert!(!one(|f| f.kinds.push(PriceKind::Spot)));
        assert!(!one(|f| f.scopes.push(PriceScope::Instance)));
        assert!(!one(|f| f
            .form_factors
            .push(gpuplan_providers::FormFactor::Sxm)));
        assert!(!one(|f| f.max_usd_per_gpu_hour = Some(1e9)));
        assert!(!one(|f| f.countries.push("DE".into())));
    }

    #[test]
    fn gpu_filters_match_exact_names_and_families() {
        assert!(gpu_matches("H100-80GB", "h100"));
        assert!(gpu_matches("H100-80GB", "H100-80GB"));
        assert!(!gpu_matches("GH200-96GB", "H100"));
        assert!(!gpu_matches("A10G", "A10"));
        assert!(!gpu_matches("A100-40GB", "A10"));
        assert!(gpu_matches("A10", "a10"));
        assert!(gpu_matches("H100-80GB", " h100-80gb "));
        assert!(!gpu_matches("H100", "H100-80GB"));
        assert!(!gpu_matches("H100-80GB", ""));
        assert!(!gpu_matches("Ä100-80GB", "ä100"), "only ASCII folds");
        assert!(gpu_matches("Ä100-80GB", "Ä100"));
    }

    #[test]
    fn a_source_is_stale_after_twice_its_interval_or_when_it_never_synced() {
        let fresh = Freshness {
            last_good: BTreeMap::from([("a".to_owned(), at(0)), ("b".to_owned(), at(0))]),
            intervals: BTreeMap::from([("a".to_owned(), Duration::from_secs(3600))]),
            default_interval: Duration::from_secs(6 * 3600),
            now: at(3),
        };
        assert!(fresh.is_stale("a"));
        assert!(!fresh.is_stale("b"));
        assert!(fresh.is_stale("never"));
    }
}
