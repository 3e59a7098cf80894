//! Writing sync runs and snapshots.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use gpuplan_providers::{
    AvailabilityRecord, Currency, InstanceType, PriceRecord, Scope, Snapshot, SpotObservation,
};
use serde::{Deserialize, Serialize};

use super::{StoreError, ts};

/// Why a stored price looks wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Suspicion {
    /// Below a tenth of the same price before this sync.
    BelowPrevious,
    /// Below a tenth of the catalog's median per GPU-hour for the same GPU
    /// model and price kind.
    BelowMedian,
}

/// A price a sync stored although it looks wrong: the second line of defence
/// behind the providers' own rules, for a trap nobody has seen yet. It is
/// kept with the run, reported by the sync and raised once by
/// `suspicious_price` alert rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuspiciousPrice {
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub gpu_model: String,
    pub price_kind: String,
    pub offering_class: Option<String>,
    pub price_scope: String,
    pub usd_per_hour: f64,
    pub usd_per_gpu_hour: f64,
    pub reason: Suspicion,
    /// What it was compared with: the previous USD per hour
    /// (`below_previous`) or the median USD per GPU-hour (`below_median`).
    pub reference_usd: f64,
}

impl std::fmt::Display for SuspiciousPrice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} in {}",
            self.instance_type,
            self.price_kind,
            self.zone.as_deref().unwrap_or(&self.region)
        )?;
        if let Some(class) = &self.offering_class {
            write!(f, " ({class})")?;
        }
        match self.reason {
            Suspicion::BelowPrevious => write!(
                f,
                " at {:.4} USD/h, was {:.4}",
                self.usd_per_hour, self.reference_usd
            ),
            Suspicion::BelowMedian => write!(
                f,
                " at {:.4} USD/GPU-h, the {} median is {:.4}",
                self.usd_per_gpu_hour, self.gpu_model, self.reference_usd
            ),
        }
    }
}

/// What writing one snapshot changed, for the sync summary and the run row.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WriteStats {
    pub instance_types: i64,
    pub prices_seen: i64,
    /// New price versions: new series and changed prices.
    pub prices_changed: i64,
    /// Prices the provider no longer lists, closed with a withdrawn version.
    pub prices_withdrawn: i64,
    pub spot_seen: i64,
    /// Observations not stored before.
    pub spot_added: i64,
    pub availability: i64,
    /// Regions the provider found unchanged since the last good sync: their
    /// stored prices stayed current and count in `prices_seen`.
    pub regions_unchanged: i64,
    pub skipped: BTreeMap<String, u64>,
    /// Prices stored although they look wrong.
    pub suspicious: Vec<SuspiciousPrice>,
}

/// A plan to save.
#[derive(Debug, Clone)]
pub struct NewPlan<'a> {
    pub created_at: DateTime<Utc>,
    pub name: &'a str,
    /// Hash of the problem document, to tell re-solves of the same inputs apart.
    pub inputs_hash: &'a str,
    pub status: &'a str,
    pub objective: Option<f64>,
    pub problem_json: &'a str,
    pub result_json: &'a str,
}

/// The identity of a price series, with '' for an absent zone / offering class.
pub(super) type SeriesKey = (String, String, String, String, String);

/// The values of a price version that, when any differs, make a new version.
#[derive(Debug, PartialEq)]
pub(super) struct VersionValues {
    pub(super) usd_per_hour: f64,
    pub(super) upfront_usd: f64,
    pub(super) recurring_usd_per_hour: f64,
    pub(super) source: Option<String>,
    pub(super) available_regions: String,
    pub(super) max_instances: Option<u32>,
    pub(super) currency: String,
    pub(super) fx_rate: f64,
}

impl VersionValues {
    pub(super) fn of(p: &PriceRecord, currency: &Currency) -> Self {
        Self {
            currency: currency.code.clone(),
            fx_rate: currency.per_usd,
            usd_per_hour: p.usd_per_hour,
            upfront_usd: p.upfront_usd,
            recurring_usd_per_hour: p.recurring_usd_per_hour,
            source: p.source.clone(),
            available_regions: serde_json::to_string(&p.available_regions)
                .unwrap_or_else(|_| "[]".to_owned()),
            max_instances: p.max_instances,
        }
    }
}

fn series_key(p: &PriceRecord) -> SeriesKey {
    (
        p.region.clone(),
        p.zone.clone().unwrap_or_default(),
        p.instance_type.clone(),
        p.price_kind.to_string(),
        p.offering_class
            .map(|c| c.as_str().to_owned())
            .unwrap_or_default(),
    )
}

/// The steps of writing one snapshot, each inside the backend's open
/// transaction; [`write_snapshot`] decides what to write.
pub(super) trait SnapshotTx {
    fn upsert_instance_type(
        &mut self,
        run_id: i64,
        provider: &str,
        t: &InstanceType,
    ) -> Result<(), StoreError>;
    /// Adds an observation unless it is stored; whether it was new.
    fn insert_spot(
        &mut self,
        provider: &str,
        o: &SpotObservation,
        fx_rate: Option<f64>,
    ) -> Result<bool, StoreError>;
    fn register_spot_series(
        &mut self,
        provider: &str,
        key: (&str, &str),
        region: &str,
        currency: &str,
    ) -> Result<(), StoreError>;
    /// The newest version of each of the provider's series: its key, id,
    /// values (None when withdrawn) and price scope.
    fn current_versions(&mut self, provider: &str) -> Result<Vec<StoredSeries>, StoreError>;
    fn insert_series(
        &mut self,
        provider: &str,
        key: &SeriesKey,
        scope: &str,
    ) -> Result<i64, StoreError>;
    fn set_scope(&mut self, series_id: i64, scope: &str) -> Result<(), StoreError>;
    fn insert_version(
        &mut self,
        series_id: i64,
        run_id: i64,
        valid_from: &str,
        values: &VersionValues,
    ) -> Result<(), StoreError>;
    fn withdraw(&mut self, series_id: i64, run_id: i64, valid_from: &str)
    -> Result<(), StoreError>;
    fn replace_availability(
        &mut self,
        run_id: i64,
        provider: &str,
        items: &[AvailabilityRecord],
    ) -> Result<(), StoreError>;
    fn replace_versions(
        &mut self,
        provider: &str,
        versions: &BTreeMap<String, String>,
    ) -> Result<(), StoreError>;
    fn finish_run(
        &mut self,
        run_id: i64,
        finished_at: &str,
        stats: &WriteStats,
    ) -> Result<(), StoreError>;
}

pub(super) struct StoredSeries {
    pub(super) key: SeriesKey,
    pub(super) id: i64,
    pub(super) values: Option<VersionValues>,
    pub(super) scope: String,
}

/// Writes `snapshot` through `tx`: prices get a new version only when a value
/// changed; prices the provider no longer lists get a withdrawn version; spot
/// observations are added once; availability is replaced. A
/// [`Scope::SpotHistory`] snapshot only adds instance types and spot
/// observations. `suspicious` is recorded with the run. The caller commits.
pub(super) fn write_snapshot(
    tx: &mut dyn SnapshotTx,
    run_id: i64,
    provider: &str,
    (snapshot, suspicious): (&Snapshot, &[SuspiciousPrice]),
    fetched_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
) -> Result<WriteStats, StoreError> {
    let mut stats = WriteStats {
        skipped: snapshot.skipped.clone(),
        suspicious: suspicious.to_vec(),
        ..WriteStats::default()
    };
    for t in &snapshot.instance_types {
        tx.upsert_instance_type(run_id, provider, t)?;
        stats.instance_types += 1;
    }
    write_spot(tx, provider, snapshot, &mut stats)?;
    if snapshot.scope == Scope::Full {
        write_prices(tx, run_id, provider, snapshot, fetched_at, &mut stats)?;
        tx.replace_availability(run_id, provider, &snapshot.availability)?;
        stats.availability = snapshot.availability.len() as i64;
        tx.replace_versions(provider, &snapshot.versions)?;
    }
    tx.finish_run(run_id, &ts(finished_at), &stats)?;
    Ok(stats)
}

fn write_spot(
    tx: &mut dyn SnapshotTx,
    provider: &str,
    snapshot: &Snapshot,
    stats: &mut WriteStats,
) -> Result<(), StoreError> {
    let rate = (snapshot.currency.code != "USD").then_some(snapshot.currency.per_usd);
    let mut series = BTreeMap::new();
    for o in &snapshot.spot_observations {
        stats.spot_seen += 1;
        stats.spot_added += i64::from(tx.insert_spot(provider, o, rate)?);
        series.insert(
            (o.instance_type.as_str(), o.zone.as_str()),
            o.region.as_str(),
        );
    }
    for (key, region) in series {
        tx.register_spot_series(provider, key, region, &snapshot.currency.code)?;
    }
    Ok(())
}

fn write_prices(
    tx: &mut dyn SnapshotTx,
    run_id: i64,
    provider: &str,
    snapshot: &Snapshot,
    fetched_at: DateTime<Utc>,
    stats: &mut WriteStats,
) -> Result<(), StoreError> {
    let mut current: HashMap<SeriesKey, (i64, Option<VersionValues>)> = HashMap::new();
    let mut scopes: HashMap<i64, String> = HashMap::new();
    for s in tx.current_versions(provider)? {
        scopes.insert(s.id, s.scope);
        current.insert(s.key, (s.id, s.values));
    }

    let valid_from = ts(fetched_at);
    for price in &snapshot.prices {
        stats.prices_seen += 1;
        let key = series_key(price);
        let values = VersionValues::of(price, &snapshot.currency);
        let scope = price.price_scope.as_str();
        let existing = current.remove(&key);
        // A scope is what the series prices, not a version: it is corrected in
        // place (a catalog from before scopes existed).
        if let Some((id, _)) = &existing
            && scopes.get(id).map(String::as_str) != Some(scope)
        {
            tx.set_scope(*id, scope)?;
        }
        let series_id = match existing {
            Some((_, Some(old))) if old == values => continue,
            Some((id, _)) => id,
            None => tx.insert_series(provider, &key, scope)?,
        };
        tx.insert_version(series_id, run_id, &valid_from, &values)?;
        stats.prices_changed += 1;
    }

    // Whatever is left was current before and is not listed any more, unless
    // its region is one the provider did not read again because it is unchanged.
    stats.regions_unchanged = snapshot.unchanged_regions.len() as i64;
    for (key, (series_id, values)) in &current {
        if values.is_none() {
            continue;
        }
        if snapshot.unchanged_regions.contains(&key.0) {
            stats.prices_seen += 1;
        } else {
            tx.withdraw(*series_id, run_id, &valid_from)?;
            stats.prices_withdrawn += 1;
        }
    }
    Ok(())
}

/// Recording syncs and plans.
pub trait Writes {
    /// Records that a sync of `source` started; returns the run id.
    ///
    /// # Errors
    /// On a database error.
    fn begin_run(
        &self,
        source: &str,
        scope: Scope,
        started_at: DateTime<Utc>,
    ) -> Result<i64, StoreError>;

    /// Marks a run failed. Nothing else is touched: the source's data stays as the
    /// last good run left it.
    ///
    /// # Errors
    /// On a database error.
    fn fail_run(
        &self,
        run_id: i64,
        finished_at: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError>;

    /// Saves a solved plan; returns its id.
    ///
    /// # Errors
    /// On a database error.
    fn save_plan(&self, plan: &NewPlan<'_>) -> Result<i64, StoreError>;

    /// Marks runs of `source` still `running` as failed (of every source when
    /// `None`): their process stopped mid-sync, so their transaction never
    /// committed. Returns how many there were.
    ///
    /// # Errors
    /// On a database error.
    fn fail_interrupted_runs(
        &self,
        source: Option<(&str, Scope)>,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError>;

    /// Writes `snapshot` as the complete current state of `provider` and marks
    /// the run good with the prices the sync found `suspicious`, all in one
    /// transaction: on any error nothing of it is stored (see
    /// [`write_snapshot`] for what is written).
    ///
    /// # Errors
    /// On a database error (the transaction is rolled back).
    fn write_snapshot(
        &mut self,
        run_id: i64,
        provider: &str,
        snapshot: &Snapshot,
        suspicious: &[SuspiciousPrice],
        fetched_at: DateTime<Utc>,
        finished_at: DateTime<Utc>,
    ) -> Result<WriteStats, StoreError>;

    /// The newest stored spot observation per region of `provider`, so a provider
    /// can ask its API only for newer history.
    ///
    /// # Errors
    /// On a database error or an unreadable timestamp.
    fn newest_spot_by_region(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError>;

    /// The source versions the last good full sync of `provider` read.
    ///
    /// # Errors
    /// On a database error.
    fn source_versions(&self, provider: &str) -> Result<BTreeMap<String, String>, StoreError>;

    /// How many prices the most recent good run of `source` that carried prices saw.
    ///
    /// # Errors
    /// On a database error.
    fn last_good_price_count(&self, source: &str) -> Result<Option<i64>, StoreError>;
}

pub(super) fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Full => "full",
        Scope::SpotHistory => "spot_history",
    }
}
