//! The second line of defence behind the providers' own rules: a sync that
//! brings a price far below what it was, or far below what the catalog
//! charges for the same GPU, stores it (a real price cut must not be lost)
//! but reports it, for the trap nobody has seen yet. Capacity Block fee rows
//! read as on-demand prices ($32.77 an hour becoming $0.032) are the shape of
//! defect this catches.
//!
//! A price is suspicious when it is below [`SHARE`] of
//! - its own series' current price (`below_previous`), or
//! - when it is new or changed, the median USD per GPU-hour of the catalog
//!   before the sync for the same GPU model and price kind (`below_median`).
//!   The sync's own prices are not part of it: a family poisoned in every
//!   region at once would otherwise be its own reference.
//!
//! Unchanged prices are not judged again, so each is reported once.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use gpuplan_providers::{PriceKind, PriceScope, Snapshot};

use crate::store::{Store, StoreError, Suspicion, SuspiciousPrice};

/// The share of its reference below which a price is suspicious.
pub const SHARE: f64 = 0.1;

/// (region, zone, instance type, price kind, offering class, window): one price.
type Key = (
    String,
    Option<String>,
    String,
    String,
    Option<String>,
    Option<gpuplan_providers::Window>,
);

/// What one source's new prices are judged against: the catalog before the
/// sync.
#[derive(Debug, Default)]
pub struct Baseline {
    /// The source's current prices (USD per hour), with the time of the
    /// observation for spot prices read from history.
    previous: HashMap<Key, (f64, Option<DateTime<Utc>>)>,
    /// The source's instance types: GPU model and count, for spot
    /// observations of a snapshot that does not describe its types.
    types: HashMap<String, (String, f64)>,
    /// The median USD per GPU-hour of every current price, by (GPU model,
    /// price kind).
    medians: HashMap<(String, String), f64>,
}

/// The instance types a snapshot prices, with the GPU model it gives each
/// (none for a spot-only snapshot that does not describe its types): what
/// [`Baseline::read`] narrows the catalog to.
#[derive(Debug, Default)]
pub struct Priced(BTreeMap<String, Option<String>>);

impl Priced {
    #[must_use]
    pub fn of(snapshot: &Snapshot) -> Self {
        let described: HashMap<&str, &str> = snapshot
            .instance_types
            .iter()
            .map(|t| (t.instance_type.as_str(), t.gpu_model.as_str()))
            .collect();
        let types = snapshot
            .prices
            .iter()
            .map(|p| &p.instance_type)
            .chain(snapshot.spot_observations.iter().map(|o| &o.instance_type));
        Self(
            types
                .map(|t| {
                    (
                        t.clone(),
                        described.get(t.as_str()).map(|m| (*m).to_owned()),
                    )
                })
                .collect(),
        )
    }
}

impl Baseline {
    /// The catalog as it stands, for a sync of `source` that brings the
    /// prices of `priced`: only the current prices of the GPU models those
    /// are of are read (every source's, for the medians), and nothing when
    /// the sync brings no price.
    ///
    /// # Errors
    /// On a store error.
    pub fn read(store: &dyn Store, source: &str, priced: &Priced) -> Result<Self, StoreError> {
        let mut baseline = Self::default();
        if priced.0.is_empty() {
            return Ok(baseline);
        }
        let names = store.instance_type_names()?;
        let own: HashMap<&str, &str> = names
            .iter()
            .filter(|(p, _, _)| p == source)
            .map(|(_, t, m)| (t.as_str(), m.as_str()))
            .collect();
        let models: HashSet<&str> = priced
            .0
            .iter()
            .filter_map(|(t, model)| model.as_deref().or_else(|| own.get(t.as_str()).copied()))
            .collect();
        let types: Vec<(String, String)> = names
            .iter()
            .filter(|(_, _, m)| models.contains(m.as_str()))
            .map(|(p, t, _)| (p.clone(), t.clone()))
            .collect();
        let mut per_gpu: HashMap<(String, String), Vec<f64>> = HashMap::new();
        for p in store.prices_as_of(Some(&types), None)? {
            if let Some(v) = per_gpu_hour(p.usd_per_hour, p.gpu_count) {
                per_gpu
                    .entry((p.gpu_model.clone(), p.price_kind.clone()))
                    .or_default()
                    .push(v);
            }
            if p.provider == source {
                baseline
                    .types
                    .insert(p.instance_type.clone(), (p.gpu_model.clone(), p.gpu_count));
                baseline.previous.insert(
                    (
                        p.region,
                        p.zone,
                        p.instance_type,
                        p.price_kind,
                        p.offering_class,
                        p.window,
                    ),
                    (p.usd_per_hour, p.observed_at),
                );
            }
        }
        baseline.medians = per_gpu.into_iter().map(|(k, v)| (k, median(v))).collect();
        Ok(baseline)
    }
}

/// The middle value; for an even count, the mean of the two middle values.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}

/// The price of a whole-GPU hour: a slice's is that of the GPU it shares.
fn per_gpu_hour(usd_per_hour: f64, gpu_count: f64) -> Option<f64> {
    let v = usd_per_hour / if gpu_count > 0.0 { gpu_count } else { 1.0 };
    (v.is_finite() && v > 0.0).then_some(v)
}

/// One price of the snapshot, as it will stand in the catalog.
struct Candidate {
    key: Key,
    usd_per_hour: f64,
    observed_at: Option<DateTime<Utc>>,
    gpu_model: String,
    gpu_count: f64,
    price_scope: PriceScope,
}

/// The prices of `snapshot` that look wrong against `baseline`.
#[must_use]
pub fn find(baseline: &Baseline, snapshot: &Snapshot) -> Vec<SuspiciousPrice> {
    let mut out = Vec::new();
    for c in candidates(baseline, snapshot) {
        let previous = baseline.previous.get(&c.key);
        let changed = match previous {
            None => true,
            // A spot price is new only when it was observed after the stored one.
            Some((_, Some(stored_at))) => c.observed_at.is_some_and(|at| at > *stored_at),
            Some((usd, None)) => (usd - c.usd_per_hour).abs() > 1e-9 * usd.abs().max(1.0),
        };
        if !changed {
            continue;
        }
        let Some(per_gpu) = per_gpu_hour(c.usd_per_hour, c.gpu_count) else {
            continue;
        };
        let verdict = match previous {
            Some((usd, _)) if c.usd_per_hour < SHARE * usd => {
                Some((Suspicion::BelowPrevious, *usd))
            }
            _ => baseline
                .medians
                .get(&(c.gpu_model.clone(), c.key.3.clone()))
                .filter(|median| per_gpu < SHARE * **median)
                .map(|median| (Suspicion::BelowMedian, *median)),
        };
        if let Some((reason, reference_usd)) = verdict {
            let (region, zone, instance_type, price_kind, offering_class, _) = c.key;
            out.push(SuspiciousPrice {
                region,
                zone,
                instance_type,
                gpu_model: c.gpu_model,
                price_kind,
                offering_class,
                price_scope: c.price_scope.as_str().to_owned(),
                usd_per_hour: c.usd_per_hour,
                usd_per_gpu_hour: per_gpu,
                reason,
                reference_usd,
            });
        }
    }
    out
}

/// The snapshot's prices: its list prices, and the newest observation of
/// each spot series it brings.
fn candidates(baseline: &Baseline, snapshot: &Snapshot) -> Vec<Candidate> {
    let described: HashMap<&str, (&str, f64)> = snapshot
        .instance_types
        .iter()
        .map(|t| {
            (
                t.instance_type.as_str(),
                (t.gpu_model.as_str(), t.gpu_count),
            )
        })
        .collect();
    let gpu = |instance_type: &str| {
        described
            .get(instance_type)
            .map(|(m, n)| ((*m).to_owned(), *n))
            .or_else(|| baseline.types.get(instance_type).cloned())
    };
    let mut out = Vec::new();
    for p in &snapshot.prices {
        let Some((gpu_model, gpu_count)) = gpu(&p.instance_type) else {
            continue;
        };
        out.push(Candidate {
            key: (
                p.region.clone(),
                p.zone.clone(),
                p.instance_type.clone(),
                p.price_kind.to_string(),
                p.offering_class.map(|c| c.as_str().to_owned()),
                p.window,
            ),
            usd_per_hour: p.usd_per_hour,
            observed_at: None,
            gpu_model,
            gpu_count,
            price_scope: p.price_scope,
        });
    }
    let mut newest = BTreeMap::new();
    for o in &snapshot.spot_observations {
        let slot = newest
            .entry((&o.region, &o.zone, &o.instance_type))
            .or_insert(o);
        if o.observed_at > slot.observed_at {
            *slot = o;
        }
    }
    for o in newest.into_values() {
        let Some((gpu_model, gpu_count)) = gpu(&o.instance_type) else {
            continue;
        };
        out.push(Candidate {
            key: (
                o.region.clone(),
                Some(o.zone.clone()),
                o.instance_type.clone(),
                PriceKind::Spot.to_string(),
                None,
                None,
            ),
            usd_per_hour: o.usd_per_hour,
            observed_at: Some(o.observed_at),
            gpu_model,
            gpu_count,
            price_scope: PriceScope::Instance,
        });
    }
    out
}

/// Takes every price and spot observation of zero out of `snapshot`, counted
/// as `zero_price`: no price is stored at 0, whatever a provider answered.
/// Returns how many it took.
pub fn drop_zero_prices(snapshot: &mut Snapshot) -> u64 {
    let before = snapshot.prices.len() + snapshot.spot_observations.len();
    snapshot.prices.retain(|p| p.usd_per_hour != 0.0);
    snapshot.spot_observations.retain(|o| o.usd_per_hour != 0.0);
    let dropped = (before - snapshot.prices.len() - snapshot.spot_observations.len()) as u64;
    if dropped > 0 {
        *snapshot.skipped.entry("zero_price".to_owned()).or_insert(0) += dropped;
    }
    dropped
}

#[cfg(test)]
mod tests;
