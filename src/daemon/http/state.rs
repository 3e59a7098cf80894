//! What the HTTP API and the dashboard share: the handlers' state, the
//! catalog cache, reads off the async runtime and the token comparison. Both
//! import from here (and the error answer and query parameters from their
//! own files); neither imports the other, and `http` puts their routes
//! together.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use chrono::Utc;
use gpuplan_providers::secret::Secret;
use gpuplan_providers::{PriceKind, PriceScope};
use tokio::sync::Notify;

use crate::catalog::{self, Freshness, PriceFilter};
use crate::config::FxRates;
use crate::daemon::metrics::Metrics;
use crate::plan::PlanService;
use crate::store::{Generation, Pool, PricePart, StoreError};

use super::error::ApiError;
use super::params::Params;

/// What the handlers share.
pub struct AppState {
    pub pool: Arc<Pool>,
    pub metrics: Arc<Metrics>,
    /// Per source: the trigger that makes it sync now.
    pub triggers: BTreeMap<String, Arc<Notify>>,
    /// Per source: its sync interval, for staleness.
    pub intervals: BTreeMap<String, Duration>,
    pub token: Option<Secret>,
    /// Whether the listener is on loopback: then `Host` must name loopback.
    pub loopback: bool,
    pub cache: Mutex<CatalogCache>,
    /// Plans are made here, on its capped solver pool.
    pub planning: Arc<PlanService>,
    /// Rates for showing prices in another currency.
    pub fx: FxRates,
    /// The alert rules, for the dashboard to list.
    pub rules: Vec<crate::alerts::rules::Rule>,
    /// This replica's duties, for `GET /v1/cluster`.
    pub cluster: Arc<crate::daemon::duties::Cluster>,
    /// Grace days of each bill source, for the state of its periods.
    pub bill_grace: BTreeMap<String, u32>,
    /// Budgets, bill sources and allocation, for `/v1/budgets` and `/v1/spend`.
    pub bills: crate::bills::budgets::BillsSetup,
}

/// The largest request body read: a problem with the most offers and the
/// longest horizon the optimizer takes fits in well under this.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Compares a presented token with ours in time independent of where they differ.
pub(crate) fn token_matches(given: &str, token: &Secret) -> bool {
    constant_time_eq(given.as_bytes(), token.expose().as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What the API remembers between requests for one state of the catalog, which
/// [`crate::store::Store::catalog_generation`] identifies exactly, whichever
/// process wrote it.
#[derive(Default)]
pub struct CatalogCache {
    generation: Option<Generation>,
    last_good: BTreeMap<String, chrono::DateTime<Utc>>,
    /// Encoded `/v1/prices` answers by query and by which sources are stale
    /// (staleness changes with time alone).
    pub(crate) prices: HashMap<RecordsKey, Bytes>,
    /// List-price records the dashboard asked for, by the same kind of key:
    /// kept while only spot prices change.
    list: HashMap<RecordsKey, Arc<Vec<catalog::CatalogRecord>>>,
    /// Spot records the dashboard asked for.
    spot: HashMap<RecordsKey, Arc<Vec<catalog::CatalogRecord>>>,
    cached_bytes: usize,
}

/// A question (a query string, say) and the sources stale when it was asked.
type RecordsKey = (String, Vec<String>);

/// What one cached record is counted as against the budget.
const RECORD_BYTES: usize = 600;

impl CatalogCache {
    /// Forgets what `generation` makes out of date: everything when list
    /// prices moved, else the answers and spot records.
    fn follow(&mut self, generation: Generation) {
        let list_moved = self
            .generation
            .is_none_or(|g| g.list_prices != generation.list_prices);
        self.prices.clear();
        self.spot.clear();
        if list_moved {
            self.list.clear();
        }
        self.cached_bytes = self.list.values().map(|r| r.len() * RECORD_BYTES).sum();
        self.generation = Some(generation);
    }

    /// Makes room for `bytes` more, forgetting everything when the budget
    /// would be passed.
    pub(crate) fn reserve(&mut self, bytes: usize) {
        if self.cached_bytes + bytes > CACHE_BUDGET_BYTES {
            self.prices.clear();
            self.list.clear();
            self.spot.clear();
            self.cached_bytes = 0;
        }
        self.cached_bytes += bytes;
    }
}

/// Records the dashboard asked for: list prices and spot prices, each as
/// read for its own state of the catalog.
pub(crate) struct Records {
    list: Arc<Vec<catalog::CatalogRecord>>,
    spot: Arc<Vec<catalog::CatalogRecord>>,
}

impl Records {
    pub(crate) fn iter(&self) -> impl Iterator<Item = &catalog::CatalogRecord> {
        self.list.iter().chain(self.spot.iter())
    }
}

/// Records the dashboard computed with `compute` (called with the part of
/// the prices it is to read), from the cache while that part is unchanged.
/// `key` names the question (a query string, say); which sources are stale
/// is added to it, as their records say so.
///
/// # Errors
/// What `compute` fails with.
pub(crate) fn cached_records(
    fresh: &Freshness,
    state: &AppState,
    key: String,
    compute: impl Fn(PricePart) -> Result<Vec<catalog::CatalogRecord>, StoreError>,
) -> Result<Records, StoreError> {
    let key = (key, fresh.stale_sources());
    let part = |part: PricePart| -> Result<Arc<Vec<catalog::CatalogRecord>>, StoreError> {
        let hit = {
            let cache = lock(&state.cache);
            match part {
                PricePart::List => cache.list.get(&key).cloned(),
                _ => cache.spot.get(&key).cloned(),
            }
        };
        if let Some(hit) = hit {
            return Ok(hit);
        }
        let records = Arc::new(compute(part)?);
        let mut cache = lock(&state.cache);
        cache.reserve(records.len() * RECORD_BYTES);
        let kept = match part {
            PricePart::List => &mut cache.list,
            _ => &mut cache.spot,
        };
        kept.insert(key.clone(), records.clone());
        Ok(records)
    };
    Ok(Records {
        list: part(PricePart::List)?,
        spot: part(PricePart::Spot)?,
    })
}

/// The cheapest instance price per (GPU model, price group) now, or `back`
/// before now. Only those records are cached, per catalog state (and, for a
/// time before now, per minute): the overview and each scrape of `/metrics`
/// read the whole catalog once at most, its list prices only when they
/// changed.
///
/// # Errors
/// On a store error.
pub(crate) fn cheapest_at(
    store: &dyn crate::store::Store,
    fresh: &Freshness,
    state: &AppState,
    back: Option<chrono::Duration>,
) -> Result<catalog::Cheapest, StoreError> {
    let filter = catalog::PriceFilter {
        scopes: vec![gpuplan_providers::PriceScope::Instance],
        ..catalog::PriceFilter::default()
    };
    let key = match back {
        None => "cheapest:now".to_owned(),
        Some(b) => format!("cheapest:{}:{}", fresh.now.timestamp() / 60, b.num_hours()),
    };
    let kept = cached_records(fresh, state, key, |part| {
        let at = back.map(|b| fresh.now - b);
        let records = catalog::price_part_at(store, fresh, &filter, at, part)?;
        Ok(catalog::cheapest(&records).into_values().collect())
    })?;
    Ok(catalog::cheapest(kept.iter()))
}

/// Bytes of cached answers kept at most, so distinct queries cannot grow
/// memory. Room for the records of a whole-market catalog (about 120,000
/// offers) beside the answers asked meanwhile: with less, the dashboard's
/// unfiltered table and every other entry evict each other.
const CACHE_BUDGET_BYTES: usize = 96 << 20;

/// Runs a store read off the async runtime, with the catalog's freshness.
pub(crate) async fn read<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&dyn crate::store::Store, Freshness, &AppState) -> Result<T, StoreError>
    + Send
    + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        state.pool.read(|store| {
            let generation = store.catalog_generation()?;
            let last_good = {
                let mut cache = lock(&state.cache);
                if cache.generation != Some(generation) {
                    cache.last_good = store.last_good_syncs()?;
                    cache.follow(generation);
                }
                cache.last_good.clone()
            };
            let fresh = Freshness::new(last_good, state.intervals.clone(), Utc::now());
            f(store, fresh, &state)
        })
    })
    .await
    .map_err(|e| ApiError::internal(&e))?
    .map_err(ApiError::from)
}

pub(crate) fn lock(m: &Mutex<CatalogCache>) -> std::sync::MutexGuard<'_, CatalogCache> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The query parameters that filter prices, as `/v1/prices` and the
/// dashboard's price table take them.
pub(crate) const PRICE_FILTERS: &[&str] = &[
    "gpu",
    "provider",
    "region",
    "kind",
    "scope",
    "form_factor",
    "max_usd_per_gpu_hour",
    "country",
];

/// The filter [`PRICE_FILTERS`] describe.
///
/// # Errors
/// A 400 naming the parameter that is malformed.
pub(crate) fn price_filter(p: &Params) -> Result<PriceFilter, ApiError> {
    let scopes = p
        .all("scope")
        .iter()
        .map(|s| {
            s.parse::<PriceScope>()
                .map_err(|e| ApiError::bad_parameter("scope", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let kinds = p
        .all("kind")
        .iter()
        .map(|k| {
            k.parse::<PriceKind>()
                .map_err(|e| ApiError::bad_parameter("kind", e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let form_factors = p
        .all("form_factor")
        .iter()
        .map(|f| {
            f.parse::<gpuplan_providers::FormFactor>()
                .map_err(|e| ApiError::bad_parameter("form_factor", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let max = p.parsed::<f64>("max_usd_per_gpu_hour", "a price in USD")?;
    if max.is_some_and(|m| !m.is_finite() || m < 0.0) {
        return Err(ApiError::bad_parameter(
            "max_usd_per_gpu_hour",
            "must be a number >= 0",
        ));
    }
    Ok(PriceFilter {
        gpus: p.all("gpu"),
        providers: p.all("provider"),
        regions: p.all("region"),
        kinds,
        scopes,
        form_factors,
        max_usd_per_gpu_hour: max,
        countries: p.all("country"),
    })
}
