//! Writing one sync's snapshot in its run's transaction: instance types,
//! spot observations, price versions where a value changed, withdrawals,
//! availability and source versions, and the run marked good.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use gpuplan_providers::{AvailabilityRecord, Currency, InstanceType, PriceRecord, Scope, Snapshot};
use serde::{Deserialize, Serialize};

use super::sql::{self, Arg, Db, Val, returned_id};
use super::{StoreError, micros, ts};

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

/// The identity of a price series, with '' for an absent zone, offering
/// class or window, and 0 for the instance count of no window.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    region: String,
    zone: String,
    instance_type: String,
    price_kind: String,
    offering_class: String,
    window_start: String,
    window_end: String,
    instance_count: i64,
}

/// The values of a price version that, when any differs, make a new version.
#[derive(Debug, PartialEq)]
struct VersionValues {
    usd_per_hour: f64,
    upfront_usd: f64,
    recurring_usd_per_hour: f64,
    source: Option<String>,
    available_regions: String,
    max_instances: Option<u32>,
    currency: String,
    fx_rate: f64,
}

impl VersionValues {
    fn of(p: &PriceRecord, currency: &Currency) -> Self {
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
    SeriesKey {
        region: p.region.clone(),
        zone: p.zone.clone().unwrap_or_default(),
        instance_type: p.instance_type.clone(),
        price_kind: p.price_kind.to_string(),
        offering_class: p
            .offering_class
            .map(|c| c.as_str().to_owned())
            .unwrap_or_default(),
        window_start: p.window.map(|w| ts(w.start)).unwrap_or_default(),
        window_end: p.window.map(|w| ts(w.end)).unwrap_or_default(),
        instance_count: p.window.map_or(0, |w| i64::from(w.instance_count)),
    }
}

/// The newest version of each of the provider's series: its key, id,
/// values (None when withdrawn) and price scope.
struct StoredSeries {
    key: SeriesKey,
    id: i64,
    values: Option<VersionValues>,
    scope: String,
}

/// The columns of a price version, as [`Versions`] binds them.
const VERSION_COLUMNS: [&str; 12] = [
    "series_id",
    "sync_run_id",
    "valid_from",
    "withdrawn",
    "usd_per_hour",
    "upfront_usd",
    "recurring_usd_per_hour",
    "source",
    "available_regions",
    "max_instances",
    "currency",
    "fx_rate",
];

/// A snapshot's new price versions, written together when the run
/// finishes: a sync that changes every price of a cloud writes tens of
/// thousands, and a statement each cost a round trip (PostgreSQL) or a
/// statement's own work (SQLite) per row. Rows keep their order, so ids
/// still rise in write order.
#[derive(Default)]
struct Versions {
    series: Vec<(i64, Option<VersionValues>)>,
}

impl Versions {
    fn write(&self, db: &dyn Db, run_id: i64, valid_from: &str) -> Result<(), StoreError> {
        let mut values = Vec::with_capacity(self.series.len() * VERSION_COLUMNS.len());
        for (series_id, v) in &self.series {
            let v = v.as_ref();
            values.extend([
                Arg::Int(*series_id),
                Arg::Int(run_id),
                Arg::Text(valid_from),
                Arg::Int(i64::from(v.is_none())),
                v.map(|v| v.usd_per_hour).into(),
                v.map(|v| v.upfront_usd).into(),
                v.map(|v| v.recurring_usd_per_hour).into(),
                v.and_then(|v| v.source.as_deref()).into(),
                Arg::Text(v.map_or("[]", |v| v.available_regions.as_str())),
                v.and_then(|v| v.max_instances).map(i64::from).into(),
                Arg::Text(v.map_or("USD", |v| v.currency.as_str())),
                Arg::Real(v.map_or(1.0, |v| v.fx_rate)),
            ]);
        }
        db.insert_many("price_versions", &VERSION_COLUMNS, &[], &values)
    }
}

/// Writes `snapshot` in `db`'s transaction: prices get a new version only
/// when a value changed; prices the provider no longer lists get a
/// withdrawn version; spot observations are added once; availability is
/// replaced. A [`Scope::SpotHistory`] snapshot only adds instance types and
/// spot observations. `suspicious` is recorded with the run. The caller
/// commits.
pub(super) fn write_snapshot(
    db: &dyn Db,
    run_id: i64,
    provider: &str,
    (snapshot, suspicious): (&Snapshot, &[SuspiciousPrice]),
    fetched_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
) -> Result<WriteStats, StoreError> {
    db.check_fence()?;
    let mut stats = WriteStats {
        skipped: snapshot.skipped.clone(),
        suspicious: suspicious.to_vec(),
        ..WriteStats::default()
    };
    let mut types_changed = false;
    for t in &snapshot.instance_types {
        types_changed |= upsert_instance_type(db, run_id, provider, t)?;
        stats.instance_types += 1;
    }
    write_spot(db, provider, snapshot, &mut stats)?;
    if snapshot.scope == Scope::Full {
        write_prices(db, run_id, provider, snapshot, fetched_at, &mut stats)?;
        replace_availability(db, run_id, provider, &snapshot.availability)?;
        stats.availability = snapshot.availability.len() as i64;
        replace_versions(db, provider, &snapshot.versions)?;
    }
    let list_prices = snapshot.scope == Scope::Full || types_changed;
    finish_run(db, run_id, &ts(finished_at), &stats, list_prices)?;
    Ok(stats)
}

fn upsert_instance_type(
    db: &dyn Db,
    run_id: i64,
    provider: &str,
    t: &InstanceType,
) -> Result<bool, StoreError> {
    // Only a changed row is updated, so that the answer says whether one was.
    let n = db.exec(
        "INSERT INTO instance_types
             (provider, instance_type, gpu_model, gpu_count, gpu_memory_gib, vcpus, memory_gib, first_seen_run,
              gpu_form_factor, mig_profile)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (provider, instance_type) DO UPDATE SET
             gpu_model = excluded.gpu_model, gpu_count = excluded.gpu_count,
             gpu_memory_gib = excluded.gpu_memory_gib, vcpus = excluded.vcpus,
             memory_gib = excluded.memory_gib, gpu_form_factor = excluded.gpu_form_factor,
             mig_profile = excluded.mig_profile
         WHERE instance_types.gpu_model IS DISTINCT FROM excluded.gpu_model
            OR instance_types.gpu_count IS DISTINCT FROM excluded.gpu_count
            OR instance_types.gpu_memory_gib IS DISTINCT FROM excluded.gpu_memory_gib
            OR instance_types.vcpus IS DISTINCT FROM excluded.vcpus
            OR instance_types.memory_gib IS DISTINCT FROM excluded.memory_gib
            OR instance_types.gpu_form_factor IS DISTINCT FROM excluded.gpu_form_factor
            OR instance_types.mig_profile IS DISTINCT FROM excluded.mig_profile",
        &[
            provider.into(),
            t.instance_type.as_str().into(),
            t.gpu_model.as_str().into(),
            t.gpu_count.into(),
            t.gpu_memory_gib.into(),
            t.vcpus.map(i64::from).into(),
            t.memory_gib.into(),
            run_id.into(),
            t.gpu_form_factor.map(|f| f.as_str()).into(),
            t.mig_profile.as_deref().into(),
        ],
    )?;
    Ok(n > 0)
}

/// Rows `spot_recent` keeps: each spot write moves what it holds beyond
/// this into the history, whole series at a time, going round the series.
/// A series' rows move together and write its last page of the history
/// once, so the more each series holds when it moves the less each row
/// costs; at this size the table is a few megabytes, and with a sync a
/// second of 10,000 series each series moves every 25 s.
pub(super) const RECENT_ROWS: i64 = 250_000;

/// Rows of one statement that writes observations older than their series'
/// newest, or series' newest observations (4 values each).
const OLDER_ROWS: usize = 250;
const NEWEST_ROWS: usize = 250;

/// `(series id, time, price, rate)` rows of a `VALUES` list, their
/// parameters numbered from `after + 1` on, typed for PostgreSQL (both
/// backends name the columns `column1` to `column4`).
fn spot_values(rows: usize, after: usize) -> String {
    (0..rows)
        .map(|i| {
            let p = after + i * 4;
            format!(
                "(CAST(${} AS BIGINT), CAST(${} AS BIGINT), CAST(${} AS DOUBLE PRECISION), CAST(${} AS DOUBLE PRECISION))",
                p + 1,
                p + 2,
                p + 3,
                p + 4
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn write_spot(
    db: &dyn Db,
    provider: &str,
    snapshot: &Snapshot,
    stats: &mut WriteStats,
) -> Result<(), StoreError> {
    if snapshot.spot_observations.is_empty() {
        return Ok(());
    }
    let series = spot_series_ids(db, provider, snapshot)?;
    let rate = (snapshot.currency.code != "USD").then_some(snapshot.currency.per_usd);
    // Newer than the series' newest: new, and newer than all of its history,
    // so it goes to `spot_recent` as it is (to the history on PostgreSQL,
    // see `into_history`). The series' newest itself is
    // stored already. Older: a backfill, or a source sending the prices in
    // force again; each row is checked where it belongs.
    let mut newer = Vec::with_capacity(snapshot.spot_observations.len() * 4);
    let mut older: Vec<Val> = Vec::new();
    // Each series' newest row of `newer`: its newest stored observation
    // after this write (of two at one time, the first is stored).
    let mut newest_now: HashMap<i64, (i64, f64)> = HashMap::new();
    let mut appends = true;
    for o in &snapshot.spot_observations {
        let (id, newest) = series[&(o.instance_type.as_str(), o.zone.as_str())];
        let at = micros(o.observed_at);
        match newest {
            Some(newest) if at == newest => {}
            Some(newest) if at < newest => {
                appends = false;
                older.extend([id.into(), at.into(), o.usd_per_hour.into(), rate.into()]);
            }
            _ => {
                newer.extend([
                    Arg::Int(id),
                    Arg::Int(at),
                    Arg::Real(o.usd_per_hour),
                    rate.into(),
                ]);
                let now = newest_now.entry(id).or_insert((at, o.usd_per_hour));
                if at > now.0 {
                    *now = (at, o.usd_per_hour);
                }
            }
        }
    }
    // On PostgreSQL a row costs its CPU more than its page: written into
    // spot_recent, moved and deleted, a new observation cost 55 to 71 µs
    // under the market bench's loads, against 48 written into the history.
    // spot_recent there only holds what a store copied from SQLite brought,
    // moved whole below.
    let into_history = db.dialect() == sql::Dialect::Postgres;
    let added = db.insert_rows(
        if into_history {
            "spot_observations"
        } else {
            "spot_recent"
        },
        &["series_id", "observed_at", "usd_per_hour", "fx_rate"],
        &[],
        &newer,
        true,
    )?;
    let (to_history, to_recent) = write_older_spot(db, &older)?;
    let recent_added =
        i64::try_from(if into_history { 0 } else { added } + to_recent).unwrap_or(i64::MAX);
    stats.spot_seen += snapshot.spot_observations.len() as i64;
    stats.spot_added += i64::try_from(added + to_recent + to_history).unwrap_or(i64::MAX);
    let state = db.rows(
        "UPDATE catalog_state SET spot_changes = spot_changes + 1,
                spot_recent_rows = spot_recent_rows + $1
         RETURNING spot_changes, spot_recent_rows, spot_merged_to",
        &[recent_added.into()],
    )?;
    let (change, recent_rows, moved_to) = match state.first().map(Vec::as_slice) {
        Some([change, rows, moved_to]) => (change.int()?, rows.int()?, moved_to.int()?),
        _ => return Err(StoreError::Corrupt("catalog_state has no row".to_owned())),
    };
    // Each series whose newest stored observation moved takes it, and this
    // write's number, for readers that re-read only what moved. Only a row
    // newer than the series' newest moves it (a backfill's rows are older,
    // and a source that sends every series' price in force each time, as
    // AWS's history does, sends it again at its time), so the new newest is
    // known here, without reading it back.
    let moved: Vec<Val> = newest_now
        .into_iter()
        .flat_map(|(id, (at, usd))| [id.into(), at.into(), usd.into(), rate.into()])
        .collect();
    for chunk in moved.chunks(NEWEST_ROWS * 4) {
        let mut params = Vec::with_capacity(chunk.len() + 1);
        params.push(change.into());
        params.extend_from_slice(chunk);
        db.exec(
            &format!(
                "UPDATE spot_series
                 SET last_observed_at = v.column2, last_usd_per_hour = v.column3,
                     last_fx_rate = v.column4, changed_in = $1
                 FROM (VALUES {}) AS v
                 WHERE spot_series.id = v.column1",
                spot_values(chunk.len() / 4, 1)
            ),
            &params,
        )?;
    }
    if !appends {
        // The stamps show only series whose newest moved, and this write may
        // have added a point before a series' newest: the catalog's state
        // moves once more, so that readers that extend their spot history by
        // the stamped series read it again (see `Generation`).
        sql::next_generation(db, false)?;
    }
    if into_history {
        // All of it, in this write's transaction: a row this write put in
        // the history may be newer than a recent one of its series.
        if recent_rows > 0 {
            move_recent_spot(db, 0, i64::MAX)?;
        }
    } else if recent_rows > RECENT_ROWS {
        move_recent_spot(db, moved_to, recent_rows - RECENT_ROWS)?;
    }
    Ok(())
}

/// Writes observations older than their series' newest, `(series id, time,
/// price, rate)` four values a row: to the history if it holds the series
/// at or after that time, else to `spot_recent` (which then holds only rows
/// newer than the series' history); a row already stored is skipped.
/// Answers the rows written to each.
fn write_older_spot(db: &dyn Db, rows: &[Val]) -> Result<(u64, u64), StoreError> {
    let mut written = [0, 0];
    for chunk in rows.chunks(OLDER_ROWS * 4) {
        let values = spot_values(chunk.len() / 4, 0);
        for (i, (table, history_after)) in [
            ("spot_observations", "EXISTS"),
            ("spot_recent", "NOT EXISTS"),
        ]
        .into_iter()
        .enumerate()
        {
            written[i] += db.exec(
                &format!(
                    "INSERT INTO {table} (series_id, observed_at, usd_per_hour, fx_rate)
                     SELECT v.column1, v.column2, v.column3, v.column4
                     FROM (VALUES {}) AS v
                     WHERE {history_after} (SELECT 1 FROM spot_observations h
                                            WHERE h.series_id = v.column1
                                              AND h.observed_at >= v.column2)
                     ON CONFLICT DO NOTHING",
                    values
                ),
                chunk,
            )?;
        }
    }
    Ok((written[0], written[1]))
}

/// Moves at least `rows` rows of `spot_recent` into the history, from the
/// series after `from` (where the last move stopped) on (as many as there
/// are; then the next move starts again from the first series), whole
/// series at a time so that every row left is newer than its series'
/// history. Readers see the same observations before and after.
fn move_recent_spot(db: &dyn Db, from: i64, rows: i64) -> Result<(), StoreError> {
    let _span = tracing::info_span!("move_recent_spot", rows).entered();
    // The series of the `rows`-th row from there: the move ends with it.
    let to = sql::first(
        db,
        "SELECT series_id FROM spot_recent WHERE series_id > $1
         ORDER BY series_id, observed_at LIMIT 1 OFFSET $2",
        &[from.into(), (rows - 1).max(0).into()],
    )?
    .map(|v| v.int())
    .transpose()?;
    let range = [from.into(), to.unwrap_or(i64::MAX).into()];
    db.exec(
        "INSERT INTO spot_observations (series_id, observed_at, usd_per_hour, fx_rate)
         SELECT series_id, observed_at, usd_per_hour, fx_rate FROM spot_recent
         WHERE series_id > $1 AND series_id <= $2
         ORDER BY series_id, observed_at
         ON CONFLICT DO NOTHING",
        &range,
    )?;
    let moved = db.exec(
        "DELETE FROM spot_recent WHERE series_id > $1 AND series_id <= $2",
        &range,
    )?;
    db.exec(
        "UPDATE catalog_state
         SET spot_recent_rows = spot_recent_rows - $1, spot_merged_to = $2",
        &[
            i64::try_from(moved).unwrap_or(i64::MAX).into(),
            to.unwrap_or(0).into(),
        ],
    )?;
    tracing::debug!(moved, "moved recent spot observations into the history");
    Ok(())
}

/// Spot series by (instance type, zone): the id and the newest stored
/// observation's time.
type SeriesIds<'a> = HashMap<(&'a str, &'a str), (i64, Option<i64>)>;

/// Every spot series `snapshot` observes, adding the series not stored yet.
fn spot_series_ids<'a>(
    db: &dyn Db,
    provider: &str,
    snapshot: &'a Snapshot,
) -> Result<SeriesIds<'a>, StoreError> {
    let mut stored: HashMap<(String, String), (i64, String, Option<i64>)> = HashMap::new();
    db.each_row(
        "SELECT instance_type, zone, id, currency, last_observed_at FROM spot_series
         WHERE provider = $1",
        &[provider.into()],
        &mut |r| {
            stored.insert(
                (r[0].take_text()?, r[1].take_text()?),
                (r[2].int()?, r[3].take_text()?, r[4].opt_int()?),
            );
            Ok(())
        },
    )?;
    let currency = snapshot.currency.code.as_str();
    let mut ids = HashMap::new();
    for o in &snapshot.spot_observations {
        let key = (o.instance_type.as_str(), o.zone.as_str());
        if ids.contains_key(&key) {
            continue;
        }
        let found = stored.get(&(o.instance_type.clone(), o.zone.clone()));
        let newest = found.and_then(|(_, _, at)| *at);
        let id = match found {
            Some((id, stored_currency, _)) if stored_currency == currency => *id,
            Some((id, _, _)) => {
                db.exec(
                    "UPDATE spot_series SET currency = $1 WHERE id = $2",
                    &[currency.into(), (*id).into()],
                )?;
                *id
            }
            None => returned_id(sql::first(
                db,
                "INSERT INTO spot_series (provider, instance_type, zone, region, currency)
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
                &[
                    provider.into(),
                    key.0.into(),
                    key.1.into(),
                    o.region.as_str().into(),
                    currency.into(),
                ],
            )?)?,
        };
        ids.insert(key, (id, newest));
    }
    Ok(ids)
}

fn current_versions(db: &dyn Db, provider: &str) -> Result<Vec<StoredSeries>, StoreError> {
    let rows = db.rows(
        "SELECT s.id, s.region, s.zone, s.instance_type, s.price_kind, s.offering_class,
                v.withdrawn, v.usd_per_hour, v.upfront_usd, v.recurring_usd_per_hour,
                v.source, v.available_regions, v.max_instances, s.price_scope,
                v.currency, v.fx_rate, s.window_start, s.window_end, s.instance_count
         FROM price_series s
         JOIN price_versions v
           ON v.id = (SELECT max(id) FROM price_versions WHERE series_id = s.id)
         WHERE s.provider = $1",
        &[provider.into()],
    )?;
    rows.into_iter()
        .map(|r| {
            let values = if r[6].int()? == 1 {
                None
            } else {
                Some(VersionValues {
                    usd_per_hour: r[7].real()?,
                    upfront_usd: r[8].real()?,
                    recurring_usd_per_hour: r[9].real()?,
                    source: r[10].opt_text()?,
                    available_regions: r[11].text()?,
                    max_instances: r[12]
                        .opt_int()?
                        .map(|n| {
                            u32::try_from(n).map_err(|_| {
                                StoreError::Corrupt(format!("max_instances {n} is out of range"))
                            })
                        })
                        .transpose()?,
                    currency: r[14].text()?,
                    fx_rate: r[15].real()?,
                })
            };
            Ok(StoredSeries {
                key: SeriesKey {
                    region: r[1].text()?,
                    zone: r[2].text()?,
                    instance_type: r[3].text()?,
                    price_kind: r[4].text()?,
                    offering_class: r[5].text()?,
                    window_start: r[16].text()?,
                    window_end: r[17].text()?,
                    instance_count: r[18].int()?,
                },
                id: r[0].int()?,
                values,
                scope: r[13].text()?,
            })
        })
        .collect()
}

fn write_prices(
    db: &dyn Db,
    run_id: i64,
    provider: &str,
    snapshot: &Snapshot,
    fetched_at: DateTime<Utc>,
    stats: &mut WriteStats,
) -> Result<(), StoreError> {
    let mut current: HashMap<SeriesKey, (i64, Option<VersionValues>)> = HashMap::new();
    let mut scopes: HashMap<i64, String> = HashMap::new();
    for s in current_versions(db, provider)? {
        scopes.insert(s.id, s.scope);
        current.insert(s.key, (s.id, s.values));
    }

    let mut versions = Versions::default();
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
            db.exec(
                "UPDATE price_series SET price_scope = $2 WHERE id = $1",
                &[(*id).into(), scope.into()],
            )?;
        }
        let series_id = match existing {
            Some((_, Some(old))) if old == values => continue,
            Some((id, _)) => id,
            None => insert_series(db, provider, &key, scope)?,
        };
        versions.series.push((series_id, Some(values)));
        stats.prices_changed += 1;
    }

    // Whatever is left was current before and is not listed any more, unless
    // its region is one the provider did not read again because it is unchanged.
    stats.regions_unchanged = snapshot.unchanged_regions.len() as i64;
    for (key, (series_id, values)) in &current {
        if values.is_none() {
            continue;
        }
        if snapshot.unchanged_regions.contains(&key.region) {
            stats.prices_seen += 1;
        } else {
            versions.series.push((*series_id, None));
            stats.prices_withdrawn += 1;
        }
    }
    versions.write(db, run_id, &ts(fetched_at))
}

fn insert_series(
    db: &dyn Db,
    provider: &str,
    key: &SeriesKey,
    scope: &str,
) -> Result<i64, StoreError> {
    returned_id(sql::first(
        db,
        "INSERT INTO price_series (provider, region, zone, instance_type, price_kind, offering_class, price_scope,
                                   window_start, window_end, instance_count)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
        &[
            provider.into(),
            key.region.as_str().into(),
            key.zone.as_str().into(),
            key.instance_type.as_str().into(),
            key.price_kind.as_str().into(),
            key.offering_class.as_str().into(),
            scope.into(),
            key.window_start.as_str().into(),
            key.window_end.as_str().into(),
            key.instance_count.into(),
        ],
    )?)
}

fn replace_availability(
    db: &dyn Db,
    run_id: i64,
    provider: &str,
    items: &[AvailabilityRecord],
) -> Result<(), StoreError> {
    db.exec(
        "DELETE FROM availability WHERE provider = $1",
        &[provider.into()],
    )?;
    for a in items {
        let (kind, value) = a.signal.to_kind_value();
        db.exec(
            "INSERT INTO availability (provider, region, zone, instance_type, kind, value, sync_run_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (provider, region, zone, instance_type, kind) DO UPDATE SET value = excluded.value",
            &[
                provider.into(),
                a.region.as_str().into(),
                a.zone.as_deref().unwrap_or_default().into(),
                a.instance_type.as_str().into(),
                kind.into(),
                value.into(),
                run_id.into(),
            ],
        )?;
    }
    Ok(())
}

fn replace_versions(
    db: &dyn Db,
    provider: &str,
    versions: &BTreeMap<String, String>,
) -> Result<(), StoreError> {
    db.exec(
        "DELETE FROM source_versions WHERE provider = $1",
        &[provider.into()],
    )?;
    for (part, version) in versions {
        db.exec(
            "INSERT INTO source_versions (provider, part, version) VALUES ($1, $2, $3)",
            &[
                provider.into(),
                part.as_str().into(),
                version.as_str().into(),
            ],
        )?;
    }
    Ok(())
}

fn finish_run(
    db: &dyn Db,
    run_id: i64,
    finished_at: &str,
    stats: &WriteStats,
    list_prices: bool,
) -> Result<(), StoreError> {
    let n = db.exec(
        "UPDATE sync_runs SET status = 'ok', finished_at = $2, instance_types = $3,
             prices_seen = $4, prices_changed = $5, prices_withdrawn = $6, spot_seen = $7,
             spot_added = $8, availability = $9, skipped_json = $10, error = NULL,
             regions_unchanged = $11, suspicious_json = $12
         WHERE id = $1 AND status = 'running'",
        &[
            run_id.into(),
            finished_at.into(),
            stats.instance_types.into(),
            stats.prices_seen.into(),
            stats.prices_changed.into(),
            stats.prices_withdrawn.into(),
            stats.spot_seen.into(),
            stats.spot_added.into(),
            stats.availability.into(),
            serde_json::to_string(&stats.skipped)
                .unwrap_or_else(|_| "{}".to_owned())
                .into(),
            stats.regions_unchanged.into(),
            serde_json::to_string(&stats.suspicious)
                .unwrap_or_else(|_| "[]".to_owned())
                .into(),
        ],
    )?;
    if n == 0 {
        return Err(StoreError::RunClosed { run_id });
    }
    sql::next_generation(db, list_prices)
}
