//! Reading the catalog back: current prices, spot history and sync runs.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{StoreError, WriteStats, parse_ts};

/// A price as it stands now, joined with its instance type's specs.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentPrice {
    pub provider: String,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub gpu_model: String,
    pub gpu_count: u32,
    pub gpu_memory_gib: Option<f64>,
    pub vcpus: Option<u32>,
    pub memory_gib: Option<f64>,
    pub price_kind: String,
    pub offering_class: Option<String>,
    pub usd_per_hour: f64,
    pub upfront_usd: f64,
    pub recurring_usd_per_hour: f64,
    /// The provider's timestamp, for spot prices from observed history.
    pub observed_at: Option<DateTime<Utc>>,
    pub source: Option<String>,
    pub available_regions: Vec<String>,
    pub max_instances: Option<u32>,
    /// `instance`, or `gpu_only` for a price of GPUs alone.
    pub price_scope: String,
    /// The source's currency and the rate (its units per USD) that converted it.
    pub currency: String,
    pub fx_rate: f64,
    /// `sxm`, `pcie` or `nvl` where the model is sold in several forms.
    pub gpu_form_factor: Option<String>,
}

/// One stored spot observation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpotPoint {
    pub provider: String,
    pub region: String,
    pub zone: String,
    pub instance_type: String,
    pub observed_at: DateTime<Utc>,
    pub usd_per_hour: f64,
}

/// A plan as it was saved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SavedPlan {
    pub id: i64,
    pub created_at: DateTime<Utc>,
    pub name: Option<String>,
    pub inputs_hash: String,
    pub result: serde_json::Value,
}

/// One row of the sync run log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncRun {
    pub id: i64,
    pub source: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub status: String,
    /// `full`, or `spot_history` for a spot-only run.
    pub scope: String,
    /// What the run wrote (zero for a run that failed).
    #[serde(flatten)]
    pub stats: WriteStats,
    pub error: Option<String>,
}

/// A duty's lease as stored: who holds it and since when.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseRow {
    pub duty: String,
    pub epoch: i64,
    pub holder: String,
    pub taken_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
}

/// A sync_runs row before its text columns are parsed.
pub(super) struct RawRun {
    pub(super) id: i64,
    pub(super) source: String,
    pub(super) started: String,
    pub(super) finished: Option<String>,
    pub(super) status: String,
    pub(super) scope: String,
    pub(super) counts: [i64; 8],
    pub(super) skipped: String,
    pub(super) suspicious: String,
    pub(super) error: Option<String>,
}

/// The columns [`RawRun`] is read from, in its order.
pub(super) const RUN_COLUMNS: &str = "id, source, started_at, finished_at, status, instance_types,
    prices_seen, prices_changed, prices_withdrawn, spot_seen, spot_added, availability,
    skipped_json, error, scope, regions_unchanged, suspicious_json";

/// The condition of runs that stored suspicious prices and finished at or
/// after the first parameter (the partial index's own predicate).
pub(super) const SUSPICIOUS_SINCE: &str = "status = 'ok' AND suspicious_json <> '[]'";

pub(super) fn none_if_empty(s: String) -> Option<String> {
    if s.is_empty() { None } else { Some(s) }
}

impl RawRun {
    pub(super) fn parse(self) -> Result<SyncRun, StoreError> {
        let [
            instance_types,
            prices_seen,
            prices_changed,
            prices_withdrawn,
            spot_seen,
            spot_added,
            availability,
            regions_unchanged,
        ] = self.counts;
        Ok(SyncRun {
            id: self.id,
            source: self.source,
            started_at: parse_ts(&self.started)?,
            finished_at: self.finished.as_deref().map(parse_ts).transpose()?,
            status: self.status,
            scope: self.scope,
            stats: WriteStats {
                instance_types,
                prices_seen,
                prices_changed,
                prices_withdrawn,
                spot_seen,
                spot_added,
                availability,
                regions_unchanged,
                skipped: serde_json::from_str(&self.skipped).map_err(|e| {
                    StoreError::Corrupt(format!("skipped_json `{}`: {e}", self.skipped))
                })?,
                suspicious: serde_json::from_str(&self.suspicious).map_err(|e| {
                    StoreError::Corrupt(format!("suspicious_json of sync run {}: {e}", self.id))
                })?,
            },
            error: self.error,
        })
    }
}

/// A plans row before its text columns are parsed.
pub(super) fn parse_plan(
    id: i64,
    created: &str,
    name: Option<String>,
    inputs_hash: String,
    result: &str,
) -> Result<SavedPlan, StoreError> {
    Ok(SavedPlan {
        id,
        created_at: parse_ts(created)?,
        name,
        inputs_hash,
        result: serde_json::from_str(result)
            .map_err(|e| StoreError::Corrupt(format!("plan {id} result: {e}")))?,
    })
}

/// Fills in the text columns of a current-prices row.
pub(super) fn finish_price(
    mut price: CurrentPrice,
    observed_at: Option<&str>,
    regions: &str,
) -> Result<CurrentPrice, StoreError> {
    price.observed_at = observed_at.map(parse_ts).transpose()?;
    if regions != "[]" {
        price.available_regions = serde_json::from_str(regions)
            .map_err(|e| StoreError::Corrupt(format!("available_regions `{regions}`: {e}")))?;
    }
    Ok(price)
}

/// The row limit to ask the database for: one row past `limit` tells
/// "exactly at the limit" from "over it". `None` is no limit.
pub(super) fn probe_limit(limit: Option<usize>) -> Option<i64> {
    limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX - 1) + 1)
}

/// Refuses an answer that came back longer than `limit`.
pub(super) fn within_limit(
    points: Vec<SpotPoint>,
    limit: Option<usize>,
) -> Result<Vec<SpotPoint>, StoreError> {
    match limit {
        Some(limit) if points.len() > limit => Err(StoreError::TooLarge {
            what: "spot observations",
            limit,
        }),
        _ => Ok(points),
    }
}

/// Reading the catalog back.
pub trait Reads {
    /// Every current price: the newest non-withdrawn version of each series, plus
    /// for spot history the newest observation per (provider, instance type, zone).
    /// Both are one index lookup per series, however long the history.
    ///
    /// # Errors
    /// On a database error or a stored value that does not parse.
    fn current_prices(&self) -> Result<Vec<CurrentPrice>, StoreError> {
        self.prices_as_of(None, None)
    }

    /// [`Reads::current_prices`] of only the given (provider, instance type)
    /// pairs, when given; the work is then proportional to what matches.
    ///
    /// # Errors
    /// On a database error or a stored value that does not parse.
    fn current_prices_of(
        &self,
        types: Option<&[(String, String)]>,
    ) -> Result<Vec<CurrentPrice>, StoreError> {
        self.prices_as_of(types, None)
    }

    /// The prices as they stood at `at` (now, when `None`): the newest
    /// version of each series from then, and the newest spot observation up
    /// to then. Used to show how prices moved.
    ///
    /// # Errors
    /// On a database error or a stored value that does not parse.
    fn prices_as_of(
        &self,
        types: Option<&[(String, String)]>,
        at: Option<DateTime<Utc>>,
    ) -> Result<Vec<CurrentPrice>, StoreError>;

    /// Spot observations of one instance type since `since`, oldest first per
    /// zone, plus the last observation before `since` in each zone (the price
    /// that was in force when the window opened).
    ///
    /// # Errors
    /// On a database error or an unreadable timestamp; `TooLarge` past `limit`.
    fn spot_history(
        &self,
        instance_type: &str,
        provider: Option<&str>,
        region: Option<&str>,
        zone: Option<&str>,
        since: DateTime<Utc>,
        limit: Option<usize>,
    ) -> Result<Vec<SpotPoint>, StoreError>;

    /// How many current (not withdrawn) list prices `provider` has, by region
    /// and instance type.
    ///
    /// # Errors
    /// On a database error.
    fn current_price_counts(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, BTreeMap<String, i64>>, StoreError>;

    /// Availability values of one kind (`interruption_bucket`, ...) by
    /// (provider, region, instance type); zone-level values are not included.
    ///
    /// # Errors
    /// On a database error.
    fn availability_of(
        &self,
        kind: &str,
    ) -> Result<BTreeMap<(String, String, String), f64>, StoreError>;

    /// Every instance type: (provider, instance type, GPU model).
    ///
    /// # Errors
    /// On a database error.
    fn instance_type_names(&self) -> Result<Vec<(String, String, String)>, StoreError>;

    /// A saved plan by id, or the newest one (of `name`, when given).
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn saved_plan(
        &self,
        id: Option<i64>,
        name: Option<&str>,
    ) -> Result<Option<SavedPlan>, StoreError>;

    /// The problem a saved plan solved, as it was stored.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn saved_plan_problem(&self, id: i64) -> Result<Option<serde_json::Value>, StoreError>;

    /// The id of the plan of the same name saved just before plan `id`.
    ///
    /// # Errors
    /// On a database error.
    fn previous_plan_id(&self, id: i64, name: &str) -> Result<Option<i64>, StoreError>;

    /// The plan of the same name saved just before plan `id`.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn previous_plan(&self, id: i64, name: &str) -> Result<Option<SavedPlan>, StoreError> {
        match self.previous_plan_id(id, name)? {
            Some(prev) => self.saved_plan(Some(prev), None),
            None => Ok(None),
        }
    }

    /// A marker of the catalog's state: (good runs, newest good run id). Every
    /// data commit marks one more run `ok` in the same transaction, so the count
    /// changes exactly when data does, whichever process or replica wrote it
    /// and in whatever order concurrent runs finish (the newest id alone would
    /// miss an older run finishing last).
    ///
    /// # Errors
    /// On a database error.
    fn catalog_generation(&self) -> Result<(i64, Option<i64>), StoreError>;

    /// When each source last synced successfully and completely (spot-only
    /// runs refresh no list price).
    ///
    /// # Errors
    /// On a database error or an unreadable timestamp.
    fn last_good_syncs(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError>;

    /// Whether a run of `source` and `scope` that started at or after `since`
    /// has ended, other than by being interrupted: the sync of that slot is
    /// done, whichever replica did it.
    ///
    /// # Errors
    /// On a database error.
    fn sync_done_since(
        &self,
        source: &str,
        scope: gpuplan_providers::Scope,
        since: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Every duty's lease, by duty.
    ///
    /// # Errors
    /// On a database error or an unreadable timestamp.
    fn leases(&self) -> Result<Vec<LeaseRow>, StoreError>;

    /// The newest `limit` sync runs, newest first.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn sync_runs(&self, limit: u32) -> Result<Vec<SyncRun>, StoreError>;

    /// The good runs that finished at or after `since` and stored suspicious
    /// prices, oldest first.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn suspicious_runs(&self, since: DateTime<Utc>) -> Result<Vec<SyncRun>, StoreError>;
}
