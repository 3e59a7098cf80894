//! Writing sync runs and snapshots.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use gpuplan_providers::{Currency, PriceRecord, Scope, Snapshot};
use rusqlite::{OptionalExtension, Transaction, params};
use serde::Serialize;

use super::{Store, StoreError, ts};

/// What writing one snapshot changed, for the sync summary and the run row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
type SeriesKey = (String, String, String, String, String);

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

impl Store {
    /// Records that a sync of `source` started; returns the run id.
    ///
    /// # Errors
    /// On a database error.
    pub fn begin_run(
        &self,
        source: &str,
        scope: Scope,
        started_at: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let scope = match scope {
            Scope::Full => "full",
            Scope::SpotHistory => "spot_history",
        };
        self.conn.execute(
            "INSERT INTO sync_runs (source, started_at, status, scope) VALUES (?1, ?2, 'running', ?3)",
            params![source, ts(started_at), scope],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Marks a run failed. Nothing else is touched: the source's data stays as the
    /// last good run left it.
    ///
    /// # Errors
    /// On a database error.
    pub fn fail_run(
        &self,
        run_id: i64,
        finished_at: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE sync_runs SET status = 'failed', finished_at = ?2, error = ?3 WHERE id = ?1",
            params![run_id, ts(finished_at), error],
        )?;
        Ok(())
    }

    /// Saves a solved plan; returns its id.
    ///
    /// # Errors
    /// On a database error.
    pub fn save_plan(&self, plan: &NewPlan<'_>) -> Result<i64, StoreError> {
        self.conn.execute(
            "INSERT INTO plans (created_at, name, inputs_hash, status, objective, problem_json, result_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                ts(plan.created_at),
                plan.name,
                plan.inputs_hash,
                plan.status,
                plan.objective,
                plan.problem_json,
                plan.result_json
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Marks runs still `running` as failed: their process stopped mid-sync, so
    /// their transaction never committed. Returns how many there were.
    ///
    /// # Errors
    /// On a database error.
    pub fn fail_interrupted_runs(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        Ok(self.conn.execute(
            "UPDATE sync_runs SET status = 'failed', finished_at = ?1,
                 error = 'interrupted: gpuplan stopped during this sync; nothing of it was stored'
             WHERE status = 'running'",
            [ts(now)],
        )?)
    }

    /// Writes `snapshot` as the complete current state of `provider` and marks the
    /// run good, all in one transaction: on any error nothing of it is stored.
    ///
    /// Prices get a new version only when a value changed; prices the provider no
    /// longer lists get a withdrawn version; spot observations are added once;
    /// availability is replaced. A [`Scope::SpotHistory`] snapshot only adds
    /// instance types and spot observations.
    ///
    /// # Errors
    /// On a database error (the transaction is rolled back).
    pub fn write_snapshot(
        &mut self,
        run_id: i64,
        provider: &str,
        snapshot: &Snapshot,
        fetched_at: DateTime<Utc>,
        finished_at: DateTime<Utc>,
    ) -> Result<WriteStats, StoreError> {
        let tx = self.conn.transaction()?;
        let mut stats = WriteStats {
            skipped: snapshot.skipped.clone(),
            ..WriteStats::default()
        };
        write_instance_types(&tx, run_id, provider, snapshot, &mut stats)?;
        write_spot(&tx, provider, snapshot, &mut stats)?;
        if snapshot.scope == Scope::Full {
            write_prices(&tx, run_id, provider, snapshot, fetched_at, &mut stats)?;
            write_availability(&tx, run_id, provider, snapshot, &mut stats)?;
            write_versions(&tx, provider, snapshot)?;
        }
        tx.execute(
            "UPDATE sync_runs SET status = 'ok', finished_at = ?2, instance_types = ?3,
                 prices_seen = ?4, prices_changed = ?5, prices_withdrawn = ?6, spot_seen = ?7,
                 spot_added = ?8, availability = ?9, skipped_json = ?10, error = NULL,
                 regions_unchanged = ?11
             WHERE id = ?1",
            params![
                run_id,
                ts(finished_at),
                stats.instance_types,
                stats.prices_seen,
                stats.prices_changed,
                stats.prices_withdrawn,
                stats.spot_seen,
                stats.spot_added,
                stats.availability,
                serde_json::to_string(&stats.skipped).unwrap_or_else(|_| "{}".to_owned()),
                stats.regions_unchanged,
            ],
        )?;
        tx.commit()?;
        Ok(stats)
    }
}

fn write_instance_types(
    tx: &Transaction<'_>,
    run_id: i64,
    provider: &str,
    snapshot: &Snapshot,
    stats: &mut WriteStats,
) -> Result<(), StoreError> {
    let mut upsert = tx.prepare(
        "INSERT INTO instance_types
             (provider, instance_type, gpu_model, gpu_count, gpu_memory_gib, vcpus, memory_gib, first_seen_run)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (provider, instance_type) DO UPDATE SET
             gpu_model = excluded.gpu_model, gpu_count = excluded.gpu_count,
             gpu_memory_gib = excluded.gpu_memory_gib, vcpus = excluded.vcpus,
             memory_gib = excluded.memory_gib",
    )?;
    for t in &snapshot.instance_types {
        upsert.execute(params![
            provider,
            t.instance_type,
            t.gpu_model,
            t.gpu_count,
            t.gpu_memory_gib,
            t.vcpus,
            t.memory_gib,
            run_id
        ])?;
        stats.instance_types += 1;
    }
    Ok(())
}

fn write_prices(
    tx: &Transaction<'_>,
    run_id: i64,
    provider: &str,
    snapshot: &Snapshot,
    fetched_at: DateTime<Utc>,
    stats: &mut WriteStats,
) -> Result<(), StoreError> {
    // The newest version of each of the provider's series: (series id, values or
    // None when withdrawn), and the series' price scope.
    let mut current: HashMap<SeriesKey, (i64, Option<VersionValues>)> = HashMap::new();
    let mut scopes: HashMap<i64, String> = HashMap::new();
    {
        let mut stmt = tx.prepare(
            "SELECT s.id, s.region, s.zone, s.instance_type, s.price_kind, s.offering_class,
                    v.withdrawn, v.usd_per_hour, v.upfront_usd, v.recurring_usd_per_hour,
                    v.source, v.available_regions, v.max_instances, s.price_scope,
                    v.currency, v.fx_rate
             FROM price_series s
             JOIN price_versions v
               ON v.id = (SELECT max(id) FROM price_versions WHERE series_id = s.id)
             WHERE s.provider = ?1",
        )?;
        let rows = stmt.query_map([provider], |r| {
            let key: SeriesKey = (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
            let withdrawn: bool = r.get(6)?;
            let values = if withdrawn {
                None
            } else {
                Some(VersionValues {
                    usd_per_hour: r.get(7)?,
                    upfront_usd: r.get(8)?,
                    recurring_usd_per_hour: r.get(9)?,
                    source: r.get(10)?,
                    available_regions: r.get(11)?,
                    max_instances: r.get(12)?,
                    currency: r.get(14)?,
                    fx_rate: r.get(15)?,
                })
            };
            Ok((key, (r.get::<_, i64>(0)?, values), r.get::<_, String>(13)?))
        })?;
        for row in rows {
            let (key, value, scope) = row?;
            scopes.insert(value.0, scope);
            current.insert(key, value);
        }
    }

    let valid_from = ts(fetched_at);
    let mut insert_series = tx.prepare(
        "INSERT INTO price_series (provider, region, zone, instance_type, price_kind, offering_class, price_scope)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    let mut set_scope = tx.prepare("UPDATE price_series SET price_scope = ?2 WHERE id = ?1")?;
    let mut insert_version = tx.prepare(
        "INSERT INTO price_versions (series_id, sync_run_id, valid_from, usd_per_hour, upfront_usd,
             recurring_usd_per_hour, source, available_regions, max_instances, currency, fx_rate)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
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
            set_scope.execute(params![id, scope])?;
        }
        let series_id = match existing {
            Some((_, Some(old))) if old == values => continue,
            Some((id, _)) => id,
            None => {
                insert_series
                    .execute(params![provider, key.0, key.1, key.2, key.3, key.4, scope])?;
                tx.last_insert_rowid()
            }
        };
        insert_version.execute(params![
            series_id,
            run_id,
            valid_from,
            values.usd_per_hour,
            values.upfront_usd,
            values.recurring_usd_per_hour,
            values.source,
            values.available_regions,
            values.max_instances,
            values.currency,
            values.fx_rate,
        ])?;
        stats.prices_changed += 1;
    }

    // Whatever is left was current before and is not listed any more, unless
    // its region is one the provider did not read again because it is unchanged.
    let mut withdraw = tx.prepare(
        "INSERT INTO price_versions (series_id, sync_run_id, valid_from, withdrawn) VALUES (?1, ?2, ?3, 1)",
    )?;
    stats.regions_unchanged = snapshot.unchanged_regions.len() as i64;
    for (key, (series_id, values)) in &current {
        if values.is_none() {
            continue;
        }
        if snapshot.unchanged_regions.contains(&key.0) {
            stats.prices_seen += 1;
        } else {
            withdraw.execute(params![series_id, run_id, valid_from])?;
            stats.prices_withdrawn += 1;
        }
    }
    Ok(())
}

/// Replaces the provider's stored source versions with the snapshot's.
fn write_versions(
    tx: &Transaction<'_>,
    provider: &str,
    snapshot: &Snapshot,
) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM source_versions WHERE provider = ?1",
        [provider],
    )?;
    let mut insert =
        tx.prepare("INSERT INTO source_versions (provider, part, version) VALUES (?1, ?2, ?3)")?;
    for (part, version) in &snapshot.versions {
        insert.execute(params![provider, part, version])?;
    }
    Ok(())
}

fn write_spot(
    tx: &Transaction<'_>,
    provider: &str,
    snapshot: &Snapshot,
    stats: &mut WriteStats,
) -> Result<(), StoreError> {
    let mut insert = tx.prepare(
        "INSERT OR IGNORE INTO spot_observations
             (provider, region, zone, instance_type, observed_at, usd_per_hour, fx_rate)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    let rate = (snapshot.currency.code != "USD").then_some(snapshot.currency.per_usd);
    let mut series = BTreeMap::new();
    for o in &snapshot.spot_observations {
        stats.spot_seen += 1;
        stats.spot_added += insert.execute(params![
            provider,
            o.region,
            o.zone,
            o.instance_type,
            ts(o.observed_at),
            o.usd_per_hour,
            rate
        ])? as i64;
        series.insert(
            (o.instance_type.as_str(), o.zone.as_str()),
            o.region.as_str(),
        );
    }
    let mut register = tx.prepare(
        "INSERT INTO spot_series (provider, instance_type, zone, region, currency) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (provider, instance_type, zone) DO UPDATE SET currency = excluded.currency",
    )?;
    for ((instance_type, zone), region) in series {
        register.execute(params![
            provider,
            instance_type,
            zone,
            region,
            snapshot.currency.code
        ])?;
    }
    Ok(())
}

fn write_availability(
    tx: &Transaction<'_>,
    run_id: i64,
    provider: &str,
    snapshot: &Snapshot,
    stats: &mut WriteStats,
) -> Result<(), StoreError> {
    tx.execute("DELETE FROM availability WHERE provider = ?1", [provider])?;
    let mut insert = tx.prepare(
        "INSERT INTO availability (provider, region, zone, instance_type, kind, value, sync_run_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (provider, region, zone, instance_type, kind) DO UPDATE SET value = excluded.value",
    )?;
    for a in &snapshot.availability {
        let (kind, value) = a.signal.to_kind_value();
        insert.execute(params![
            provider,
            a.region,
            a.zone.clone().unwrap_or_default(),
            a.instance_type,
            kind,
            value,
            run_id
        ])?;
        stats.availability += 1;
    }
    Ok(())
}

impl Store {
    /// The newest stored spot observation per region of `provider`, so a provider
    /// can ask its API only for newer history.
    ///
    /// # Errors
    /// On a database error or an unreadable timestamp.
    pub fn newest_spot_by_region(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT region, max(observed_at) FROM spot_observations WHERE provider = ?1 GROUP BY region",
        )?;
        let rows = stmt.query_map([provider], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (region, at) = row?;
            out.insert(region, super::parse_ts(&at)?);
        }
        Ok(out)
    }

    /// The source versions the last good full sync of `provider` read.
    ///
    /// # Errors
    /// On a database error.
    pub fn source_versions(&self, provider: &str) -> Result<BTreeMap<String, String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT part, version FROM source_versions WHERE provider = ?1")?;
        let rows = stmt.query_map([provider], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many prices the most recent good run of `source` that carried prices saw.
    ///
    /// # Errors
    /// On a database error.
    pub fn last_good_price_count(&self, source: &str) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT prices_seen FROM sync_runs
                 WHERE source = ?1 AND status = 'ok' AND prices_seen > 0
                 ORDER BY id DESC LIMIT 1",
                [source],
                |r| r.get(0),
            )
            .optional()?)
    }
}
