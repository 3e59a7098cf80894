//! Reading the catalog back: current prices, spot history and sync runs.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::sql::{self, Backend, Db, Val};
use super::write::scope_name;
use super::{INTERRUPTED, StoreError, WriteStats, from_micros, micros, parse_ts, ts};

/// A state of the catalog: what any data commit raises, and what only a
/// commit that may change list prices or instance types raises (see
/// [`Reads::catalog_generation`]).
///
/// A sync's commit raises `data` by one, and `spot` by one when it writes
/// spot observations; a spot write that may add an observation older than
/// its series' newest raises `data` once more. So while `data - spot` and
/// `list_prices` stay, every change was a spot write that only appended to
/// its series (see [`Generation::only_appended_since`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation {
    pub data: i64,
    pub list_prices: i64,
    /// Spot writes so far: each stamps the spot series it touched with its
    /// number (see [`Reads::spot_quotes_changed_after`]).
    pub spot: i64,
    /// Batches of spot history pruned so far; each raises `data` too.
    pub spot_prunes: i64,
    /// The latest cutoff spot history was pruned before, in microseconds
    /// since the epoch (0 before any prune): spot history from that time on
    /// is as it was before every prune so far.
    pub spot_pruned_before: i64,
}

impl Generation {
    /// Whether everything written between `earlier` and this state was spot
    /// observations newer than their series' newest, or prunes of spot
    /// history before `since`: a read of spot history from `since` in
    /// `earlier` is then this state's once the points of the series stamped
    /// since are added (see [`Reads::spot_points_appended`]).
    #[must_use]
    pub fn only_appended_since(&self, earlier: &Self, since: DateTime<Utc>) -> bool {
        let others = |g: &Self| g.data - g.spot - g.spot_prunes;
        self.list_prices == earlier.list_prices
            && others(self) == others(earlier)
            && self.spot >= earlier.spot
            && self.spot_prunes >= earlier.spot_prunes
            && (self.spot_prunes == earlier.spot_prunes || self.pruned_before(since))
    }

    /// Whether every prune of spot history so far was of what is older than
    /// `since`, leaving the history from `since` on as it was.
    #[must_use]
    pub fn pruned_before(&self, since: DateTime<Utc>) -> bool {
        self.spot_pruned_before <= micros(since)
    }
}

/// Which prices a read returns: list prices (every kind but spot history's),
/// spot history's newest observations, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PricePart {
    All,
    List,
    Spot,
}

/// A price as it stands now, joined with its instance type's specs.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentPrice {
    pub provider: String,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub gpu_model: String,
    /// GPUs per instance, or the share of one a slice rents.
    pub gpu_count: f64,
    /// Memory per GPU, or a slice's own.
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
    /// The MIG profile of a slice of an owned GPU (`1g.10gb`).
    pub mig_profile: Option<String>,
    /// The fixed window of a `capacity_block` price.
    pub window: Option<gpuplan_providers::Window>,
}

/// A spot series' newest price: what a spot write changes of a series'
/// current record.
#[derive(Debug, Clone, PartialEq)]
pub struct SpotQuote {
    pub provider: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub usd_per_hour: f64,
    pub observed_at: DateTime<Utc>,
    pub currency: String,
    pub fx_rate: f64,
}

/// A priced window (a Capacity Block offering) as the syncs saw it: when
/// it first appeared, when it vanished, and its price when last offered.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowOffering {
    pub provider: String,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub price_kind: String,
    pub gpu_model: String,
    pub gpu_count: f64,
    pub window: gpuplan_providers::Window,
    pub first_seen: DateTime<Utc>,
    /// When a sync stopped listing it; `None` while it is offered.
    pub vanished_at: Option<DateTime<Utc>>,
    pub usd_per_hour: f64,
    pub upfront_usd: f64,
    /// How many prices it was offered at (more than one when repriced).
    pub prices: i64,
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

/// A spot price and when it was observed, within its series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpotPrice {
    pub observed_at: DateTime<Utc>,
    pub usd_per_hour: f64,
}

/// One spot series (a zone of a provider's instance type) and its
/// observations in a window, oldest first: the series' names once, however
/// many observations a long window holds.
#[derive(Debug, Clone, PartialEq)]
pub struct SpotSeriesPoints {
    /// The series' id in the store it was read from.
    pub series_id: i64,
    pub provider: String,
    pub region: String,
    pub zone: String,
    pub instance_type: String,
    pub points: Vec<SpotPrice>,
}

/// The spot series of one instance type, in one provider, region or zone
/// when they are given.
#[derive(Debug, Clone, Copy)]
pub struct SpotSeriesFilter<'a> {
    pub instance_type: &'a str,
    pub provider: Option<&'a str>,
    pub region: Option<&'a str>,
    pub zone: Option<&'a str>,
}

impl SpotSeriesFilter<'_> {
    /// Its values, as `$1` to `$4` of [`SPOT_SERIES_MATCHING`].
    fn params(&self) -> [Val; 4] {
        [
            self.instance_type.into(),
            self.provider.into(),
            self.region.into(),
            self.zone.into(),
        ]
    }
}

/// The spot series a [`SpotSeriesFilter`] names: id and names.
const SPOT_SERIES_MATCHING: &str =
    "SELECT id, provider, region, zone, instance_type FROM spot_series
     WHERE instance_type = $1
       AND (CAST($2 AS TEXT) IS NULL OR provider = $2)
       AND (CAST($3 AS TEXT) IS NULL OR region = $3)
       AND (CAST($4 AS TEXT) IS NULL OR zone = $4)";

/// More series than [`Reads::spot_points_appended`] names in one statement:
/// past it, a caller reads the window again.
const APPENDED_SERIES_MAX: usize = 4000;

/// The conditions that make `o` the observation of series `series` in force
/// `before` a time (`"< $5"`, `"<= $3"`): `[o` in `spot_recent`, `o` in
/// `spot_observations]`, to be joined as two arms of a `UNION ALL`. Every
/// row of `spot_recent` is newer than its series' history, so the one in
/// force is the newest before the time there if it holds one, else the
/// history's; each arm is one seek.
fn spot_in_force(series: &str, before: &str) -> [String; 2] {
    let newest = |table: &str| {
        format!(
            "o.series_id = {series}
             AND o.observed_at = (SELECT max(observed_at) FROM {table}
                                  WHERE series_id = {series} AND observed_at {before})"
        )
    };
    [
        newest("spot_recent"),
        format!(
            "{} AND NOT EXISTS (SELECT 1 FROM spot_recent
                                WHERE series_id = {series} AND observed_at {before})",
            newest("spot_observations")
        ),
    ]
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

/// The columns [`run`] reads, in its order.
const RUN_COLUMNS: &str = "id, source, started_at, finished_at, status, instance_types,
    prices_seen, prices_changed, prices_withdrawn, spot_seen, spot_added, availability,
    skipped_json, error, scope, regions_unchanged, suspicious_json";

/// The condition of runs that stored suspicious prices (the partial index's
/// own predicate).
const SUSPICIOUS: &str = "status = 'ok' AND suspicious_json <> '[]'";

fn none_if_empty(s: String) -> Option<String> {
    if s.is_empty() { None } else { Some(s) }
}

/// A count or size stored as BIGINT, as the smaller type gpuplan uses.
fn narrow<T: TryFrom<i64>>(v: &Val, what: &str) -> Result<Option<T>, StoreError> {
    v.opt_int()?
        .map(|n| {
            T::try_from(n).map_err(|_| StoreError::Corrupt(format!("{what} {n} is out of range")))
        })
        .transpose()
}

fn run(r: &[Val]) -> Result<SyncRun, StoreError> {
    let id = r[0].int()?;
    let skipped = r[12].text()?;
    Ok(SyncRun {
        id,
        source: r[1].text()?,
        started_at: parse_ts(r[2].as_str()?)?,
        finished_at: r[3].opt_str()?.map(parse_ts).transpose()?,
        status: r[4].text()?,
        scope: r[14].text()?,
        stats: WriteStats {
            instance_types: r[5].int()?,
            prices_seen: r[6].int()?,
            prices_changed: r[7].int()?,
            prices_withdrawn: r[8].int()?,
            spot_seen: r[9].int()?,
            spot_added: r[10].int()?,
            availability: r[11].int()?,
            regions_unchanged: r[15].int()?,
            skipped: serde_json::from_str(&skipped)
                .map_err(|e| StoreError::Corrupt(format!("skipped_json `{skipped}`: {e}")))?,
            suspicious: serde_json::from_str(&r[16].text()?).map_err(|e| {
                StoreError::Corrupt(format!("suspicious_json of sync run {id}: {e}"))
            })?,
        },
        error: r[13].opt_text()?,
    })
}

/// A plans row: id, created_at, name, inputs_hash, result_json.
fn plan(r: &[Val]) -> Result<SavedPlan, StoreError> {
    let id = r[0].int()?;
    Ok(SavedPlan {
        id,
        created_at: parse_ts(r[1].as_str()?)?,
        name: r[2].opt_text()?,
        inputs_hash: r[3].text()?,
        result: serde_json::from_str(&r[4].text()?)
            .map_err(|e| StoreError::Corrupt(format!("plan {id} result: {e}")))?,
    })
}

/// A row of the current-prices query. Columns, in order: provider, region,
/// zone, instance_type, price_kind, offering_class, usd_per_hour,
/// upfront_usd, recurring_usd_per_hour, source, available_regions,
/// max_instances, observed_at, gpu_model, gpu_count, gpu_memory_gib, vcpus,
/// memory_gib, price_scope, currency, fx_rate, gpu_form_factor, mig_profile,
/// window_start, window_end, instance_count.
fn price(r: &mut [Val]) -> Result<CurrentPrice, StoreError> {
    let regions = r[10].take_text()?;
    Ok(CurrentPrice {
        provider: r[0].take_text()?,
        region: r[1].take_text()?,
        zone: none_if_empty(r[2].take_text()?),
        instance_type: r[3].take_text()?,
        price_kind: r[4].take_text()?,
        offering_class: none_if_empty(r[5].take_text()?),
        usd_per_hour: r[6].real()?,
        upfront_usd: r[7].real()?,
        recurring_usd_per_hour: r[8].real()?,
        source: r[9].take_opt_text()?,
        available_regions: if regions == "[]" {
            Vec::new()
        } else {
            serde_json::from_str(&regions)
                .map_err(|e| StoreError::Corrupt(format!("available_regions `{regions}`: {e}")))?
        },
        max_instances: narrow(&r[11], "max_instances")?,
        observed_at: r[12].opt_int()?.map(from_micros).transpose()?,
        gpu_model: r[13].take_text()?,
        gpu_count: r[14].real()?,
        gpu_memory_gib: r[15].opt_real()?,
        vcpus: narrow(&r[16], "vcpus")?,
        memory_gib: r[17].opt_real()?,
        price_scope: r[18].take_text()?,
        currency: r[19].take_text()?,
        fx_rate: r[20].real()?,
        gpu_form_factor: r[21].take_opt_text()?,
        mig_profile: r[22].take_opt_text()?,
        window: match (r[23].as_str()?, r[24].as_str()?) {
            ("", _) | (_, "") => None,
            (start, end) => Some(gpuplan_providers::Window {
                start: parse_ts(start)?,
                end: parse_ts(end)?,
                instance_count: narrow(&r[25], "instance_count")?.unwrap_or(0),
            }),
        },
    })
}

/// The row limit to ask the database for: one row past `limit` tells
/// "exactly at the limit" from "over it".
fn probe_limit(limit: Option<usize>) -> i64 {
    limit.map_or(i64::MAX, |l| {
        i64::try_from(l).unwrap_or(i64::MAX - 1).saturating_add(1)
    })
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
    ) -> Result<Vec<CurrentPrice>, StoreError> {
        self.price_part_as_of(types, at, PricePart::All)
    }

    /// [`Reads::prices_as_of`] of one part of the prices.
    ///
    /// # Errors
    /// On a database error or a stored value that does not parse.
    fn price_part_as_of(
        &self,
        types: Option<&[(String, String)]>,
        at: Option<DateTime<Utc>>,
        part: PricePart,
    ) -> Result<Vec<CurrentPrice>, StoreError> {
        let mut prices = Vec::new();
        self.each_price_as_of(types, at, part, &mut |p| {
            prices.push(p);
            Ok(())
        })?;
        Ok(prices)
    }

    /// [`Reads::price_part_as_of`] a price at a time, each given to `each`:
    /// a caller that reduces them (the cheapest per GPU) never holds them
    /// all.
    ///
    /// # Errors
    /// On a database error, a stored value that does not parse, or what
    /// `each` fails with.
    fn each_price_as_of(
        &self,
        types: Option<&[(String, String)]>,
        at: Option<DateTime<Utc>>,
        part: PricePart,
        each: &mut dyn FnMut(CurrentPrice) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// The newest price of each spot series a spot write numbered past
    /// `after` (a [`Generation::spot`] read before) touched: with what was read
    /// then, every current spot price. Only the series' own columns: a spot
    /// write changes no instance type without moving
    /// [`Generation::list_prices`], so a reader that kept the rest of a
    /// series' record needs only these.
    ///
    /// # Errors
    /// On a database error or a stored value that does not parse.
    fn spot_quotes_changed_after(&self, after: i64) -> Result<Vec<SpotQuote>, StoreError>;

    /// Spot observations of one instance type since `since`, plus the last
    /// observation before `since` (the price in force when the window
    /// opened), series by series in (provider, zone) order, oldest first in
    /// each; series with no observation left out.
    ///
    /// # Errors
    /// On a database error or an unreadable timestamp; `TooLarge` past
    /// `limit` observations.
    fn spot_series_history(
        &self,
        series: &SpotSeriesFilter<'_>,
        since: DateTime<Utc>,
        limit: Option<usize>,
    ) -> Result<Vec<SpotSeriesPoints>, StoreError>;

    /// What spot writes numbered past `changed_after` (a [`Generation::spot`]
    /// read before a read of spot history) appended to the series `series`
    /// names: of each series they stamped, its points after `newest[id]`,
    /// the newest point that read holds of it, oldest first. `None` when a
    /// series they stamped is not in `newest` (new since that read) or they
    /// stamped more than a few thousand: read the window again.
    ///
    /// Exact only while the catalog [`Generation::only_appended_since`] that
    /// read: a point written before a series' newest is not stamped.
    ///
    /// # Errors
    /// On a database error or an unreadable timestamp.
    fn spot_points_appended(
        &self,
        series: &SpotSeriesFilter<'_>,
        changed_after: i64,
        newest: &HashMap<i64, DateTime<Utc>>,
    ) -> Result<Option<HashMap<i64, Vec<SpotPrice>>>, StoreError>;

    /// [`Reads::spot_series_history`] as one observation after another.
    ///
    /// # Errors
    /// As [`Reads::spot_series_history`].
    fn spot_history(
        &self,
        instance_type: &str,
        provider: Option<&str>,
        region: Option<&str>,
        zone: Option<&str>,
        since: DateTime<Utc>,
        limit: Option<usize>,
    ) -> Result<Vec<SpotPoint>, StoreError> {
        let filter = SpotSeriesFilter {
            instance_type,
            provider,
            region,
            zone,
        };
        let series = self.spot_series_history(&filter, since, limit)?;
        Ok(series
            .iter()
            .flat_map(|s| {
                s.points.iter().map(|p| SpotPoint {
                    provider: s.provider.clone(),
                    region: s.region.clone(),
                    zone: s.zone.clone(),
                    instance_type: s.instance_type.clone(),
                    observed_at: p.observed_at,
                    usd_per_hour: p.usd_per_hour,
                })
            })
            .collect())
    }

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

    /// A marker of the catalog's state. Every data commit (a run marked `ok`)
    /// and every prune batch that deletes raises it in the same transaction,
    /// so it changes exactly when data does, whichever process or replica
    /// wrote it and in whatever order concurrent runs finish. Its
    /// `list_prices` part moves only with full syncs, syncs that change an
    /// instance type, and prunes of list-price history.
    ///
    /// # Errors
    /// On a database error.
    fn catalog_generation(&self) -> Result<Generation, StoreError>;

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

    /// Every priced window still offered or that vanished at `since` or
    /// later, oldest window first.
    ///
    /// # Errors
    /// On a database error or a stored value that does not parse.
    fn window_offerings(&self, since: DateTime<Utc>) -> Result<Vec<WindowOffering>, StoreError>;
}

impl<B: Backend> Reads for B {
    fn window_offerings(&self, since: DateTime<Utc>) -> Result<Vec<WindowOffering>, StoreError> {
        self.on_conn(|db| {
            let mut out = Vec::new();
            db.each_row(
                "SELECT s.provider, s.region, s.zone, s.instance_type, s.price_kind,
                        t.gpu_model, t.gpu_count, s.window_start, s.window_end, s.instance_count,
                        (SELECT min(valid_from) FROM price_versions WHERE series_id = s.id),
                        last.withdrawn, last.valid_from, offered.usd_per_hour, offered.upfront_usd,
                        (SELECT count(*) FROM price_versions WHERE series_id = s.id AND withdrawn = 0)
                 FROM price_series s
                 JOIN price_versions last
                   ON last.id = (SELECT max(id) FROM price_versions WHERE series_id = s.id)
                 JOIN price_versions offered
                   ON offered.id = (SELECT max(id) FROM price_versions
                                    WHERE series_id = s.id AND withdrawn = 0)
                 JOIN instance_types t
                   ON t.provider = s.provider AND t.instance_type = s.instance_type
                 WHERE s.window_start <> '' AND (last.withdrawn = 0 OR last.valid_from >= $1)
                 ORDER BY s.window_start, s.window_end, s.provider, s.region, s.zone,
                          s.instance_type, s.instance_count",
                &[ts(since).into()],
                &mut |r| {
                    let withdrawn = r[11].int()? != 0;
                    out.push(WindowOffering {
                        provider: r[0].take_text()?,
                        region: r[1].take_text()?,
                        zone: none_if_empty(r[2].take_text()?),
                        instance_type: r[3].take_text()?,
                        price_kind: r[4].take_text()?,
                        gpu_model: r[5].take_text()?,
                        gpu_count: r[6].real()?,
                        window: gpuplan_providers::Window {
                            start: parse_ts(r[7].as_str()?)?,
                            end: parse_ts(r[8].as_str()?)?,
                            instance_count: narrow(&r[9], "instance_count")?.unwrap_or(0),
                        },
                        first_seen: parse_ts(r[10].as_str()?)?,
                        vanished_at: if withdrawn {
                            Some(parse_ts(r[12].as_str()?)?)
                        } else {
                            None
                        },
                        usd_per_hour: r[13].real()?,
                        upfront_usd: r[14].real()?,
                        prices: r[15].int()?,
                    });
                    Ok(())
                },
            )?;
            Ok(out)
        })
    }

    fn each_price_as_of(
        &self,
        types: Option<&[(String, String)]>,
        at: Option<DateTime<Utc>>,
        part: PricePart,
        each: &mut dyn FnMut(CurrentPrice) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        read_prices(self, types, at, part, each)
    }

    fn spot_quotes_changed_after(&self, after: i64) -> Result<Vec<SpotQuote>, StoreError> {
        self.on_conn(|db| {
            let mut quotes = Vec::new();
            db.each_row(
                "SELECT provider, zone, instance_type, last_usd_per_hour,
                        last_observed_at, currency, coalesce(last_fx_rate, 1.0)
                 FROM spot_series
                 WHERE changed_in > $1 AND last_observed_at IS NOT NULL",
                &[after.into()],
                &mut |r| {
                    quotes.push(SpotQuote {
                        provider: r[0].take_text()?,
                        zone: none_if_empty(r[1].take_text()?),
                        instance_type: r[2].take_text()?,
                        usd_per_hour: r[3].real()?,
                        observed_at: from_micros(r[4].int()?)?,
                        currency: r[5].take_text()?,
                        fx_rate: r[6].real()?,
                    });
                    Ok(())
                },
            )?;
            Ok(quotes)
        })
    }

    fn spot_series_history(
        &self,
        matching: &SpotSeriesFilter<'_>,
        since: DateTime<Utc>,
        limit: Option<usize>,
    ) -> Result<Vec<SpotSeriesPoints>, StoreError> {
        const MATCHING: &str = SPOT_SERIES_MATCHING;
        let filter = matching.params();
        let mut series = Vec::new();
        let mut at: HashMap<i64, usize> = HashMap::new();
        let mut observations = 0usize;
        self.on_conn(|db| {
            db.each_row(MATCHING, &filter, &mut |r| {
                let series_id = r[0].int()?;
                at.insert(series_id, series.len());
                series.push(SpotSeriesPoints {
                    series_id,
                    provider: r[1].take_text()?,
                    region: r[2].take_text()?,
                    zone: r[3].take_text()?,
                    instance_type: r[4].take_text()?,
                    points: Vec::new(),
                });
                Ok(())
            })?;
            // Per series: the observation in force when the window opens (one
            // seek: the newest of `spot_recent` before it, else the
            // history's), then the window (one range of each table's index).
            // Only the series' id comes back with each row: its names are
            // read once above, and the rows are put in order here, by number.
            let mut params = filter.to_vec();
            params.extend([micros(since).into(), probe_limit(limit).into()]);
            let [recent, history] = spot_in_force("m.id", "< $5");
            db.each_row(
                &format!(
                    "WITH matching AS ({MATCHING})
                     SELECT m.id, o.observed_at, o.usd_per_hour
                     FROM matching m JOIN spot_recent o ON {recent}
                     UNION ALL
                     SELECT m.id, o.observed_at, o.usd_per_hour
                     FROM matching m JOIN spot_observations o ON {history}
                     UNION ALL
                     SELECT m.id, o.observed_at, o.usd_per_hour
                     FROM matching m
                     JOIN spot_observations o ON o.series_id = m.id AND o.observed_at >= $5
                     UNION ALL
                     SELECT m.id, o.observed_at, o.usd_per_hour
                     FROM matching m
                     JOIN spot_recent o ON o.series_id = m.id AND o.observed_at >= $5
                     LIMIT $6"
                ),
                &params,
                &mut |r| {
                    observations += 1;
                    // A series written after the names were read waits for
                    // the next request.
                    if let Some(&i) = at.get(&r[0].int()?) {
                        series[i].points.push(SpotPrice {
                            observed_at: from_micros(r[1].int()?)?,
                            usd_per_hour: r[2].real()?,
                        });
                    }
                    Ok(())
                },
            )
        })?;
        if let Some(limit) = limit.filter(|&l| observations > l) {
            return Err(StoreError::TooLarge {
                what: "spot observations",
                limit,
            });
        }
        series.retain(|s| !s.points.is_empty());
        series.sort_by(|a, b| (&a.provider, &a.zone).cmp(&(&b.provider, &b.zone)));
        for s in &mut series {
            s.points.sort_by_key(|p| p.observed_at);
        }
        Ok(series)
    }

    fn spot_points_appended(
        &self,
        series: &SpotSeriesFilter<'_>,
        changed_after: i64,
        newest: &HashMap<i64, DateTime<Utc>>,
    ) -> Result<Option<HashMap<i64, Vec<SpotPrice>>>, StoreError> {
        if newest.len() > APPENDED_SERIES_MAX {
            return Ok(None);
        }
        // One statement, so one state of the catalog: a stamped series the
        // read did not hold comes back once without a point (then nothing
        // else matters), the others with their points after the newest read
        // (one range of the series' index each).
        let mut params = series.params().to_vec();
        params.push(changed_after.into());
        let mut read = Vec::with_capacity(newest.len().max(1));
        for (id, at) in newest {
            read.push(format!(
                "(CAST(${} AS BIGINT), CAST(${} AS BIGINT))",
                params.len() + 1,
                params.len() + 2
            ));
            params.extend([(*id).into(), micros(*at).into()]);
        }
        if read.is_empty() {
            read.push("(CAST(NULL AS BIGINT), CAST(NULL AS BIGINT))".to_owned());
        }
        let sql = format!(
            "WITH stamped AS ({SPOT_SERIES_MATCHING} AND changed_in > $5),
                  newest (series_id, observed_at) AS (VALUES {})
             SELECT t.id, NULL, NULL FROM stamped t
             WHERE NOT EXISTS (SELECT 1 FROM newest n WHERE n.series_id = t.id)
             UNION ALL
             SELECT t.id, o.observed_at, o.usd_per_hour
             FROM stamped t
             JOIN newest n ON n.series_id = t.id
             JOIN spot_observations o ON o.series_id = t.id AND o.observed_at > n.observed_at
             UNION ALL
             SELECT t.id, o.observed_at, o.usd_per_hour
             FROM stamped t
             JOIN newest n ON n.series_id = t.id
             JOIN spot_recent o ON o.series_id = t.id AND o.observed_at > n.observed_at",
            read.join(", ")
        );
        let mut appended: HashMap<i64, Vec<SpotPrice>> = HashMap::new();
        let mut unknown = false;
        self.on_conn(|db| {
            db.each_row(&sql, &params, &mut |r| {
                let Some(at) = r[1].opt_int()? else {
                    unknown = true;
                    return Ok(());
                };
                appended.entry(r[0].int()?).or_default().push(SpotPrice {
                    observed_at: from_micros(at)?,
                    usd_per_hour: r[2].real()?,
                });
                Ok(())
            })
        })?;
        if unknown || appended.len() > APPENDED_SERIES_MAX {
            return Ok(None);
        }
        for points in appended.values_mut() {
            points.sort_by_key(|p| p.observed_at);
        }
        Ok(Some(appended))
    }

    fn current_price_counts(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, BTreeMap<String, i64>>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT s.region, s.instance_type, count(*) FROM price_series s
                 JOIN price_versions v
                   ON v.id = (SELECT max(id) FROM price_versions WHERE series_id = s.id)
                 WHERE s.provider = $1 AND v.withdrawn = 0
                 GROUP BY s.region, s.instance_type",
                &[provider.into()],
            )
        })?;
        let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for r in &rows {
            out.entry(r[0].text()?)
                .or_default()
                .insert(r[1].text()?, r[2].int()?);
        }
        Ok(out)
    }

    fn availability_of(
        &self,
        kind: &str,
    ) -> Result<BTreeMap<(String, String, String), f64>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT provider, region, instance_type, value FROM availability
                 WHERE kind = $1 AND zone = ''",
                &[kind.into()],
            )
        })?;
        rows.iter()
            .map(|r| Ok(((r[0].text()?, r[1].text()?, r[2].text()?), r[3].real()?)))
            .collect()
    }

    fn instance_type_names(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT provider, instance_type, gpu_model FROM instance_types",
                &[],
            )
        })?;
        rows.iter()
            .map(|r| Ok((r[0].text()?, r[1].text()?, r[2].text()?)))
            .collect()
    }

    fn saved_plan(
        &self,
        id: Option<i64>,
        name: Option<&str>,
    ) -> Result<Option<SavedPlan>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT id, created_at, name, inputs_hash, result_json FROM plans
                 WHERE (CAST($1 AS BIGINT) IS NULL OR id = $1)
                   AND (CAST($2 AS TEXT) IS NULL OR name = $2)
                 ORDER BY id DESC LIMIT 1",
                &[id.into(), name.into()],
            )
        })?;
        rows.first().map(|r| plan(r)).transpose()
    }

    fn saved_plan_problem(&self, id: i64) -> Result<Option<serde_json::Value>, StoreError> {
        let text = self.on_conn(|db| {
            sql::first(
                db,
                "SELECT problem_json FROM plans WHERE id = $1",
                &[id.into()],
            )
        })?;
        text.map(|t| {
            serde_json::from_str(&t.text()?)
                .map_err(|e| StoreError::Corrupt(format!("plan {id} problem: {e}")))
        })
        .transpose()
    }

    fn previous_plan_id(&self, id: i64, name: &str) -> Result<Option<i64>, StoreError> {
        let prev = self.on_conn(|db| {
            sql::first(
                db,
                "SELECT max(id) FROM plans WHERE name = $1 AND id < $2",
                &[name.into(), id.into()],
            )
        })?;
        prev.map_or(Ok(None), |v| v.opt_int())
    }

    fn catalog_generation(&self) -> Result<Generation, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT generation, list_generation, spot_changes, spot_prunes, spot_pruned_before
                 FROM catalog_state",
                &[],
            )
        })?;
        let r = rows
            .first()
            .ok_or_else(|| StoreError::Corrupt("catalog_state has no row".to_owned()))?;
        Ok(Generation {
            data: r[0].int()?,
            list_prices: r[1].int()?,
            spot: r[2].int()?,
            spot_prunes: r[3].int()?,
            spot_pruned_before: r[4].int()?,
        })
    }

    fn last_good_syncs(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                &format!(
                    "{} SELECT s.source, (
                         SELECT r.finished_at FROM sync_runs r
                         WHERE r.source = s.source AND r.scope = 'full' AND r.status = 'ok'
                           AND r.finished_at IS NOT NULL
                         ORDER BY r.finished_at DESC LIMIT 1)
                     FROM sources s WHERE s.source IS NOT NULL",
                    sql::SOURCES
                ),
                &[],
            )
        })?;
        let mut good = BTreeMap::new();
        for r in &rows {
            if let Some(t) = r[1].opt_text()? {
                good.insert(r[0].text()?, parse_ts(&t)?);
            }
        }
        Ok(good)
    }

    fn sync_done_since(
        &self,
        source: &str,
        scope: gpuplan_providers::Scope,
        since: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = self.on_conn(|db| {
            sql::first(
                db,
                "SELECT EXISTS (SELECT 1 FROM sync_runs
                 WHERE source = $1 AND scope = $2 AND started_at >= $3 AND status <> 'running'
                   AND (error IS NULL OR error <> $4))",
                &[
                    source.into(),
                    scope_name(scope).into(),
                    ts(since).into(),
                    INTERRUPTED.into(),
                ],
            )
        })?;
        Ok(done.map_or(Ok(0), |v| v.int())? != 0)
    }

    fn leases(&self) -> Result<Vec<LeaseRow>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT duty, epoch, holder, taken_at, heartbeat_at FROM leases ORDER BY duty",
                &[],
            )
        })?;
        rows.iter()
            .map(|r| {
                Ok(LeaseRow {
                    duty: r[0].text()?,
                    epoch: r[1].int()?,
                    holder: r[2].text()?,
                    taken_at: parse_ts(r[3].as_str()?)?,
                    heartbeat_at: parse_ts(r[4].as_str()?)?,
                })
            })
            .collect()
    }

    fn sync_runs(&self, limit: u32) -> Result<Vec<SyncRun>, StoreError> {
        self.on_conn(|db| {
            runs(
                db,
                &format!("SELECT {RUN_COLUMNS} FROM sync_runs ORDER BY id DESC LIMIT $1"),
                i64::from(limit).into(),
            )
        })
    }

    fn suspicious_runs(&self, since: DateTime<Utc>) -> Result<Vec<SyncRun>, StoreError> {
        self.on_conn(|db| {
            runs(
                db,
                &format!(
                    "SELECT {RUN_COLUMNS} FROM sync_runs
                     WHERE {SUSPICIOUS} AND finished_at >= $1 ORDER BY id"
                ),
                ts(since).into(),
            )
        })
    }
}

/// The runs `sql` selects ([`RUN_COLUMNS`], one parameter).
fn runs(db: &dyn Db, sql: &str, param: Val) -> Result<Vec<SyncRun>, StoreError> {
    db.rows(sql, &[param])?.iter().map(|r| run(r)).collect()
}

/// Prices as of `at` (now, when `None`) of one part, each given to `each`.
fn read_prices<B: Backend>(
    b: &B,
    types: Option<&[(String, String)]>,
    at: Option<DateTime<Utc>>,
    part: PricePart,
    each: &mut dyn FnMut(CurrentPrice) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let keys = types
        .map(|t| serde_json::to_string(t).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()?;
    // Now, a series' newest observation is on the series; at an earlier
    // time it is one seek (see `spot_in_force`). CROSS JOIN keeps SQLite
    // from scanning every observation instead, testing each.
    let spot = if at.is_none() {
        "SELECT ss.provider, ss.region, ss.zone, ss.instance_type, ss.last_usd_per_hour AS usd,
                ss.last_observed_at AS observed_at, ss.currency, ss.last_fx_rate AS fx_rate
         FROM spot_series ss
         WHERE ss.last_observed_at IS NOT NULL AND CAST($3 AS BIGINT) IS NULL"
            .to_owned()
    } else {
        let columns = "ss.provider, ss.region, ss.zone, ss.instance_type, o.usd_per_hour AS usd,
                       o.observed_at, ss.currency, o.fx_rate";
        let [recent, history] = spot_in_force("ss.id", "<= $3");
        format!(
            "SELECT {columns} FROM spot_series ss CROSS JOIN spot_recent o WHERE {recent}
             UNION ALL
             SELECT {columns} FROM spot_series ss CROSS JOIN spot_observations o WHERE {history}"
        )
    };
    b.on_conn(|db| {
        // Written out only when there are types, so that no `OR` keeps
        // the planners from the series' index by type.
        let of_types = |alias: &str| {
            if keys.is_some() {
                format!(
                    "({alias}.provider, {alias}.instance_type) IN ({})",
                    db.dialect().json_pairs("$1")
                )
            } else {
                "CAST($1 AS TEXT) IS NULL".to_owned()
            }
        };
        let (list_types, spot_types) = (of_types("s"), of_types("sp"));
        db.each_row(
            &format!(
                "SELECT s.provider, s.region, s.zone, s.instance_type, s.price_kind, s.offering_class,
                        v.usd_per_hour, v.upfront_usd, v.recurring_usd_per_hour, v.source,
                        v.available_regions, v.max_instances, CAST(NULL AS BIGINT) AS observed_at,
                        t.gpu_model, t.gpu_count, t.gpu_memory_gib, t.vcpus, t.memory_gib,
                        s.price_scope, v.currency, v.fx_rate, t.gpu_form_factor, t.mig_profile,
                        s.window_start, s.window_end, s.instance_count
                 FROM price_series s
                 JOIN price_versions v
                   ON v.id = (SELECT max(id) FROM price_versions
                              WHERE series_id = s.id AND (CAST($2 AS TEXT) IS NULL OR valid_from <= $2))
                 JOIN instance_types t
                   ON t.provider = s.provider AND t.instance_type = s.instance_type
                 WHERE v.withdrawn = 0 AND {list_types} AND CAST($4 AS BIGINT) = 1
                 UNION ALL
                 SELECT sp.provider, sp.region, sp.zone, sp.instance_type, 'spot', '',
                        sp.usd, 0.0, sp.usd, NULL, '[]', NULL, sp.observed_at,
                        t.gpu_model, t.gpu_count, t.gpu_memory_gib, t.vcpus, t.memory_gib,
                        'instance', sp.currency, coalesce(sp.fx_rate, 1.0), t.gpu_form_factor, t.mig_profile,
                        '', '', 0
                 FROM ({spot}) AS sp
                 JOIN instance_types t
                   ON t.provider = sp.provider AND t.instance_type = sp.instance_type
                 WHERE {spot_types} AND CAST($5 AS BIGINT) = 1"
            ),
            // A part left out is a condition on a parameter alone, which
            // both planners test once, before reading a row.
            &[
                keys.into(),
                at.map(ts).into(),
                at.map(micros).into(),
                i64::from(part != PricePart::Spot).into(),
                i64::from(part != PricePart::List).into(),
            ],
            &mut |r| each(price(r)?),
        )
    })
}
