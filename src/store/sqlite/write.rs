//! Writes, on SQLite.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gpuplan_providers::{AvailabilityRecord, InstanceType, Scope, Snapshot, SpotObservation};
use rusqlite::{OptionalExtension, Transaction, params};

use super::SqliteStore;
use crate::store::write::{
    SeriesKey, SnapshotTx, StoredSeries, VersionValues, scope_name, write_snapshot,
};
use crate::store::{
    INTERRUPTED, NewPlan, StoreError, SuspiciousPrice, WriteStats, Writes, parse_ts, ts,
};

impl Writes for SqliteStore {
    fn begin_run(
        &self,
        source: &str,
        scope: Scope,
        started_at: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        self.conn.execute(
            "INSERT INTO sync_runs (source, started_at, status, scope) VALUES (?1, ?2, 'running', ?3)",
            params![source, ts(started_at), scope_name(scope)],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn fail_run(
        &self,
        run_id: i64,
        finished_at: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE sync_runs SET status = 'failed', finished_at = ?2, error = ?3
             WHERE id = ?1 AND status = 'running'",
            params![run_id, ts(finished_at), error],
        )?;
        Ok(())
    }

    fn save_plan(&self, plan: &NewPlan<'_>) -> Result<i64, StoreError> {
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

    fn fail_interrupted_runs(
        &self,
        source: Option<(&str, Scope)>,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        let (source, scope) = source.map(|(s, sc)| (s, scope_name(sc))).unzip();
        Ok(self.conn.execute(
            "UPDATE sync_runs SET status = 'failed', finished_at = ?1,
                 error = ?4
             WHERE status = 'running' AND (?2 IS NULL OR (source = ?2 AND scope = ?3))",
            params![ts(now), source, scope, INTERRUPTED],
        )?)
    }

    fn write_snapshot(
        &mut self,
        run_id: i64,
        provider: &str,
        snapshot: &Snapshot,
        suspicious: &[SuspiciousPrice],
        fetched_at: DateTime<Utc>,
        finished_at: DateTime<Utc>,
    ) -> Result<WriteStats, StoreError> {
        let tx = self.conn.transaction()?;
        let stats = write_snapshot(
            &mut SqliteTx(&tx),
            run_id,
            provider,
            (snapshot, suspicious),
            fetched_at,
            finished_at,
        )?;
        tx.commit()?;
        Ok(stats)
    }

    fn newest_spot_by_region(
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
            out.insert(region, parse_ts(&at)?);
        }
        Ok(out)
    }

    fn source_versions(&self, provider: &str) -> Result<BTreeMap<String, String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT part, version FROM source_versions WHERE provider = ?1")?;
        let rows = stmt.query_map([provider], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn last_good_price_count(&self, source: &str) -> Result<Option<i64>, StoreError> {
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

/// A snapshot's steps inside one SQLite transaction; statements are cached on
/// the connection, so each is prepared once however many rows it writes.
struct SqliteTx<'a>(&'a Transaction<'a>);

impl SnapshotTx for SqliteTx<'_> {
    fn upsert_instance_type(
        &mut self,
        run_id: i64,
        provider: &str,
        t: &InstanceType,
    ) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO instance_types
                     (provider, instance_type, gpu_model, gpu_count, gpu_memory_gib, vcpus, memory_gib, first_seen_run, gpu_form_factor)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (provider, instance_type) DO UPDATE SET
                     gpu_model = excluded.gpu_model, gpu_count = excluded.gpu_count,
                     gpu_memory_gib = excluded.gpu_memory_gib, vcpus = excluded.vcpus,
                     memory_gib = excluded.memory_gib, gpu_form_factor = excluded.gpu_form_factor",
            )?
            .execute(params![
                provider,
                t.instance_type,
                t.gpu_model,
                t.gpu_count,
                t.gpu_memory_gib,
                t.vcpus,
                t.memory_gib,
                run_id,
                t.gpu_form_factor.map(|f| f.as_str())
            ])?;
        Ok(())
    }

    fn insert_spot(
        &mut self,
        provider: &str,
        o: &SpotObservation,
        fx_rate: Option<f64>,
    ) -> Result<bool, StoreError> {
        let n = self
            .0
            .prepare_cached(
                "INSERT OR IGNORE INTO spot_observations
                     (provider, region, zone, instance_type, observed_at, usd_per_hour, fx_rate)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                provider,
                o.region,
                o.zone,
                o.instance_type,
                ts(o.observed_at),
                o.usd_per_hour,
                fx_rate
            ])?;
        Ok(n > 0)
    }

    fn register_spot_series(
        &mut self,
        provider: &str,
        (instance_type, zone): (&str, &str),
        region: &str,
        currency: &str,
    ) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO spot_series (provider, instance_type, zone, region, currency) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (provider, instance_type, zone) DO UPDATE SET currency = excluded.currency",
            )?
            .execute(params![provider, instance_type, zone, region, currency])?;
        Ok(())
    }

    fn current_versions(&mut self, provider: &str) -> Result<Vec<StoredSeries>, StoreError> {
        let mut stmt = self.0.prepare(
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
            Ok(StoredSeries {
                key: (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?),
                id: r.get(0)?,
                values,
                scope: r.get(13)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn insert_series(
        &mut self,
        provider: &str,
        key: &SeriesKey,
        scope: &str,
    ) -> Result<i64, StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO price_series (provider, region, zone, instance_type, price_kind, offering_class, price_scope)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![provider, key.0, key.1, key.2, key.3, key.4, scope])?;
        Ok(self.0.last_insert_rowid())
    }

    fn set_scope(&mut self, series_id: i64, scope: &str) -> Result<(), StoreError> {
        self.0
            .prepare_cached("UPDATE price_series SET price_scope = ?2 WHERE id = ?1")?
            .execute(params![series_id, scope])?;
        Ok(())
    }

    fn insert_version(
        &mut self,
        series_id: i64,
        run_id: i64,
        valid_from: &str,
        v: &VersionValues,
    ) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO price_versions (series_id, sync_run_id, valid_from, usd_per_hour, upfront_usd,
                     recurring_usd_per_hour, source, available_regions, max_instances, currency, fx_rate)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                series_id,
                run_id,
                valid_from,
                v.usd_per_hour,
                v.upfront_usd,
                v.recurring_usd_per_hour,
                v.source,
                v.available_regions,
                v.max_instances,
                v.currency,
                v.fx_rate,
            ])?;
        Ok(())
    }

    fn withdraw(
        &mut self,
        series_id: i64,
        run_id: i64,
        valid_from: &str,
    ) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO price_versions (series_id, sync_run_id, valid_from, withdrawn) VALUES (?1, ?2, ?3, 1)",
            )?
            .execute(params![series_id, run_id, valid_from])?;
        Ok(())
    }

    fn replace_availability(
        &mut self,
        run_id: i64,
        provider: &str,
        items: &[AvailabilityRecord],
    ) -> Result<(), StoreError> {
        self.0
            .execute("DELETE FROM availability WHERE provider = ?1", [provider])?;
        let mut insert = self.0.prepare_cached(
            "INSERT INTO availability (provider, region, zone, instance_type, kind, value, sync_run_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (provider, region, zone, instance_type, kind) DO UPDATE SET value = excluded.value",
        )?;
        for a in items {
            let (kind, value) = a.signal.to_kind_value();
            insert.execute(params![
                provider,
                a.region,
                a.zone.as_deref().unwrap_or_default(),
                a.instance_type,
                kind,
                value,
                run_id
            ])?;
        }
        Ok(())
    }

    fn replace_versions(
        &mut self,
        provider: &str,
        versions: &BTreeMap<String, String>,
    ) -> Result<(), StoreError> {
        self.0.execute(
            "DELETE FROM source_versions WHERE provider = ?1",
            [provider],
        )?;
        let mut insert = self.0.prepare_cached(
            "INSERT INTO source_versions (provider, part, version) VALUES (?1, ?2, ?3)",
        )?;
        for (part, version) in versions {
            insert.execute(params![provider, part, version])?;
        }
        Ok(())
    }

    fn finish_run(
        &mut self,
        run_id: i64,
        finished_at: &str,
        stats: &WriteStats,
    ) -> Result<(), StoreError> {
        let n = self.0.execute(
            "UPDATE sync_runs SET status = 'ok', finished_at = ?2, instance_types = ?3,
                 prices_seen = ?4, prices_changed = ?5, prices_withdrawn = ?6, spot_seen = ?7,
                 spot_added = ?8, availability = ?9, skipped_json = ?10, error = NULL,
                 regions_unchanged = ?11, suspicious_json = ?12
             WHERE id = ?1 AND status = 'running'",
            params![
                run_id,
                finished_at,
                stats.instance_types,
                stats.prices_seen,
                stats.prices_changed,
                stats.prices_withdrawn,
                stats.spot_seen,
                stats.spot_added,
                stats.availability,
                serde_json::to_string(&stats.skipped).unwrap_or_else(|_| "{}".to_owned()),
                stats.regions_unchanged,
                serde_json::to_string(&stats.suspicious).unwrap_or_else(|_| "[]".to_owned()),
            ],
        )?;
        if n == 0 {
            return Err(StoreError::RunClosed { run_id });
        }
        Ok(())
    }
}
