//! Writes, on PostgreSQL.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gpuplan_providers::{AvailabilityRecord, InstanceType, Scope, Snapshot, SpotObservation};

use super::{PgStore, PgTx, get};
use crate::store::write::{
    SeriesKey, SnapshotTx, StoredSeries, VersionValues, scope_name, write_snapshot,
};
use crate::store::{
    INTERRUPTED, NewPlan, StoreError, SuspiciousPrice, WriteStats, Writes, parse_ts, ts,
};

fn returned_id(rows: &[tokio_postgres::Row]) -> Result<i64, StoreError> {
    rows.first()
        .map(|r| get(r, 0))
        .unwrap_or_else(|| Err(StoreError::Corrupt("INSERT returned no id".to_owned())))
}

impl Writes for PgStore<'_> {
    fn begin_run(
        &self,
        source: &str,
        scope: Scope,
        started_at: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        returned_id(&self.query(
            "INSERT INTO sync_runs (source, started_at, status, scope, replica)
             VALUES ($1, $2, 'running', $3, $4) RETURNING id",
            &[
                &source,
                &ts(started_at),
                &scope_name(scope),
                &self.pool.replica,
            ],
        )?)
    }

    fn fail_run(
        &self,
        run_id: i64,
        finished_at: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        self.execute(
            "UPDATE sync_runs SET status = 'failed', finished_at = $2, error = $3
             WHERE id = $1 AND status = 'running'",
            &[&run_id, &ts(finished_at), &error],
        )?;
        Ok(())
    }

    fn save_plan(&self, plan: &NewPlan<'_>) -> Result<i64, StoreError> {
        // One statement, so the lease row's share lock lasts as long as the
        // insert: a scheduled plan is saved only while its duty is ours.
        let (duty, epoch) = self.fence.as_ref().map(|f| (&f.duty, f.epoch)).unzip();
        let rows = self.query(
            "INSERT INTO plans (created_at, name, inputs_hash, status, objective, problem_json, result_json)
             SELECT $1::text, $2::text, $3::text, $4::text, $5::float8, $6::text, $7::text
             WHERE $8::text IS NULL
                OR EXISTS (SELECT 1 FROM leases WHERE duty = $8 AND epoch = $9 FOR SHARE)
             RETURNING id",
            &[
                &ts(plan.created_at),
                &plan.name,
                &plan.inputs_hash,
                &plan.status,
                &plan.objective,
                &plan.problem_json,
                &plan.result_json,
                &duty,
                &epoch,
            ],
        )?;
        match (rows.is_empty(), &self.fence) {
            (true, Some(fence)) => Err(self.fenced(fence)),
            _ => returned_id(&rows),
        }
    }

    fn fail_interrupted_runs(
        &self,
        source: Option<(&str, Scope)>,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        let (source, scope) = source.map(|(s, sc)| (s, scope_name(sc))).unzip();
        let n = self.execute(
            "UPDATE sync_runs SET status = 'failed', finished_at = $1,
                 error = $4
             WHERE status = 'running' AND ($2::text IS NULL OR (source = $2 AND scope = $3))",
            &[&ts(now), &source, &scope, &INTERRUPTED],
        )?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
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
        let fence = self.fence.clone();
        self.transaction(|tx| {
            tx.check_fence(fence.as_ref())?;
            write_snapshot(
                tx,
                run_id,
                provider,
                (snapshot, suspicious),
                fetched_at,
                finished_at,
            )
        })
    }

    fn newest_spot_by_region(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        let rows = self.query(
            "SELECT region, max(observed_at) FROM spot_observations WHERE provider = $1 GROUP BY region",
            &[&provider],
        )?;
        let mut out = BTreeMap::new();
        for r in &rows {
            let at: String = get(r, 1)?;
            out.insert(get(r, 0)?, parse_ts(&at)?);
        }
        Ok(out)
    }

    fn source_versions(&self, provider: &str) -> Result<BTreeMap<String, String>, StoreError> {
        let rows = self.query(
            "SELECT part, version FROM source_versions WHERE provider = $1",
            &[&provider],
        )?;
        rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect()
    }

    fn last_good_price_count(&self, source: &str) -> Result<Option<i64>, StoreError> {
        self.query_opt(
            "SELECT prices_seen FROM sync_runs
             WHERE source = $1 AND status = 'ok' AND prices_seen > 0
             ORDER BY id DESC LIMIT 1",
            &[&source],
        )?
        .map(|r| get(&r, 0))
        .transpose()
    }
}

impl SnapshotTx for PgTx<'_, '_> {
    fn upsert_instance_type(
        &mut self,
        run_id: i64,
        provider: &str,
        t: &InstanceType,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO instance_types
                 (provider, instance_type, gpu_model, gpu_count, gpu_memory_gib, vcpus, memory_gib, first_seen_run, gpu_form_factor)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (provider, instance_type) DO UPDATE SET
                 gpu_model = excluded.gpu_model, gpu_count = excluded.gpu_count,
                 gpu_memory_gib = excluded.gpu_memory_gib, vcpus = excluded.vcpus,
                 memory_gib = excluded.memory_gib, gpu_form_factor = excluded.gpu_form_factor",
            &[
                &provider,
                &t.instance_type,
                &t.gpu_model,
                &i64::from(t.gpu_count),
                &t.gpu_memory_gib,
                &t.vcpus.map(i64::from),
                &t.memory_gib,
                &run_id,
                &t.gpu_form_factor.map(|f| f.as_str()),
            ],
        )?;
        Ok(())
    }

    fn insert_spot(
        &mut self,
        provider: &str,
        o: &SpotObservation,
        fx_rate: Option<f64>,
    ) -> Result<bool, StoreError> {
        let n = self.execute(
            "INSERT INTO spot_observations
                 (provider, region, zone, instance_type, observed_at, usd_per_hour, fx_rate)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
            &[
                &provider,
                &o.region,
                &o.zone,
                &o.instance_type,
                &ts(o.observed_at),
                &o.usd_per_hour,
                &fx_rate,
            ],
        )?;
        Ok(n > 0)
    }

    fn register_spot_series(
        &mut self,
        provider: &str,
        (instance_type, zone): (&str, &str),
        region: &str,
        currency: &str,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO spot_series (provider, instance_type, zone, region, currency) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (provider, instance_type, zone) DO UPDATE SET currency = excluded.currency",
            &[&provider, &instance_type, &zone, &region, &currency],
        )?;
        Ok(())
    }

    fn current_versions(&mut self, provider: &str) -> Result<Vec<StoredSeries>, StoreError> {
        let rows = self.query(
            "SELECT s.id, s.region, s.zone, s.instance_type, s.price_kind, s.offering_class,
                    v.withdrawn, v.usd_per_hour, v.upfront_usd, v.recurring_usd_per_hour,
                    v.source, v.available_regions, v.max_instances, s.price_scope,
                    v.currency, v.fx_rate
             FROM price_series s
             JOIN price_versions v
               ON v.id = (SELECT max(id) FROM price_versions WHERE series_id = s.id)
             WHERE s.provider = $1",
            &[&provider],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let withdrawn: i64 = get(r, 6)?;
            let values = if withdrawn == 1 {
                None
            } else {
                Some(VersionValues {
                    usd_per_hour: get::<Option<f64>>(r, 7)?.unwrap_or(0.0),
                    upfront_usd: get::<Option<f64>>(r, 8)?.unwrap_or(0.0),
                    recurring_usd_per_hour: get::<Option<f64>>(r, 9)?.unwrap_or(0.0),
                    source: get(r, 10)?,
                    available_regions: get(r, 11)?,
                    max_instances: super::narrow(get(r, 12)?, "max_instances")?,
                    currency: get(r, 14)?,
                    fx_rate: get(r, 15)?,
                })
            };
            out.push(StoredSeries {
                key: (get(r, 1)?, get(r, 2)?, get(r, 3)?, get(r, 4)?, get(r, 5)?),
                id: get(r, 0)?,
                values,
                scope: get(r, 13)?,
            });
        }
        Ok(out)
    }

    fn insert_series(
        &mut self,
        provider: &str,
        key: &SeriesKey,
        scope: &str,
    ) -> Result<i64, StoreError> {
        returned_id(&self.query(
            "INSERT INTO price_series (provider, region, zone, instance_type, price_kind, offering_class, price_scope)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
            &[&provider, &key.0, &key.1, &key.2, &key.3, &key.4, &scope],
        )?)
    }

    fn set_scope(&mut self, series_id: i64, scope: &str) -> Result<(), StoreError> {
        self.execute(
            "UPDATE price_series SET price_scope = $2 WHERE id = $1",
            &[&series_id, &scope],
        )?;
        Ok(())
    }

    fn insert_version(
        &mut self,
        series_id: i64,
        run_id: i64,
        valid_from: &str,
        v: &VersionValues,
    ) -> Result<(), StoreError> {
        self.versions.push(series_id, run_id, valid_from, Some(v));
        Ok(())
    }

    fn withdraw(
        &mut self,
        series_id: i64,
        run_id: i64,
        valid_from: &str,
    ) -> Result<(), StoreError> {
        self.versions.push(series_id, run_id, valid_from, None);
        Ok(())
    }

    fn replace_availability(
        &mut self,
        run_id: i64,
        provider: &str,
        items: &[AvailabilityRecord],
    ) -> Result<(), StoreError> {
        self.execute("DELETE FROM availability WHERE provider = $1", &[&provider])?;
        for a in items {
            let (kind, value) = a.signal.to_kind_value();
            self.execute(
                "INSERT INTO availability (provider, region, zone, instance_type, kind, value, sync_run_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (provider, region, zone, instance_type, kind) DO UPDATE SET value = excluded.value",
                &[
                    &provider,
                    &a.region,
                    &a.zone.as_deref().unwrap_or_default(),
                    &a.instance_type,
                    &kind,
                    &value,
                    &run_id,
                ],
            )?;
        }
        Ok(())
    }

    fn replace_versions(
        &mut self,
        provider: &str,
        versions: &BTreeMap<String, String>,
    ) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM source_versions WHERE provider = $1",
            &[&provider],
        )?;
        for (part, version) in versions {
            self.execute(
                "INSERT INTO source_versions (provider, part, version) VALUES ($1, $2, $3)",
                &[&provider, part, version],
            )?;
        }
        Ok(())
    }

    fn finish_run(
        &mut self,
        run_id: i64,
        finished_at: &str,
        stats: &WriteStats,
    ) -> Result<(), StoreError> {
        self.flush_versions()?;
        let skipped = serde_json::to_string(&stats.skipped).unwrap_or_else(|_| "{}".to_owned());
        let suspicious =
            serde_json::to_string(&stats.suspicious).unwrap_or_else(|_| "[]".to_owned());
        let n = self.execute(
            "UPDATE sync_runs SET status = 'ok', finished_at = $2, instance_types = $3,
                 prices_seen = $4, prices_changed = $5, prices_withdrawn = $6, spot_seen = $7,
                 spot_added = $8, availability = $9, skipped_json = $10, error = NULL,
                 regions_unchanged = $11, suspicious_json = $12
             WHERE id = $1 AND status = 'running'",
            &[
                &run_id,
                &finished_at,
                &stats.instance_types,
                &stats.prices_seen,
                &stats.prices_changed,
                &stats.prices_withdrawn,
                &stats.spot_seen,
                &stats.spot_added,
                &stats.availability,
                &skipped,
                &stats.regions_unchanged,
                &suspicious,
            ],
        )?;
        if n == 0 {
            return Err(StoreError::RunClosed { run_id });
        }
        Ok(())
    }
}

/// Price versions of one snapshot, column by column, written with one
/// statement when the run finishes instead of one round trip each (a sync
/// that changes every price of a cloud writes tens of thousands).
#[derive(Default)]
pub(super) struct VersionBatch {
    series_id: Vec<i64>,
    run_id: Vec<i64>,
    valid_from: Vec<String>,
    withdrawn: Vec<i64>,
    usd_per_hour: Vec<Option<f64>>,
    upfront_usd: Vec<Option<f64>>,
    recurring_usd_per_hour: Vec<Option<f64>>,
    source: Vec<Option<String>>,
    available_regions: Vec<String>,
    max_instances: Vec<Option<i64>>,
    currency: Vec<String>,
    fx_rate: Vec<f64>,
}

impl VersionBatch {
    /// A version with `values`, or a withdrawal (`None`: the columns a
    /// withdrawn row leaves at their defaults).
    fn push(
        &mut self,
        series_id: i64,
        run_id: i64,
        valid_from: &str,
        values: Option<&VersionValues>,
    ) {
        self.series_id.push(series_id);
        self.run_id.push(run_id);
        self.valid_from.push(valid_from.to_owned());
        self.withdrawn.push(i64::from(values.is_none()));
        self.usd_per_hour.push(values.map(|v| v.usd_per_hour));
        self.upfront_usd.push(values.map(|v| v.upfront_usd));
        self.recurring_usd_per_hour
            .push(values.map(|v| v.recurring_usd_per_hour));
        self.source.push(values.and_then(|v| v.source.clone()));
        self.available_regions
            .push(values.map_or_else(|| "[]".to_owned(), |v| v.available_regions.clone()));
        self.max_instances
            .push(values.and_then(|v| v.max_instances.map(i64::from)));
        self.currency
            .push(values.map_or_else(|| "USD".to_owned(), |v| v.currency.clone()));
        self.fx_rate.push(values.map_or(1.0, |v| v.fx_rate));
    }
}

impl PgTx<'_, '_> {
    fn flush_versions(&mut self) -> Result<(), StoreError> {
        let b = std::mem::take(&mut self.versions);
        if b.series_id.is_empty() {
            return Ok(());
        }
        // unnest keeps the rows in order, so ids still rise in write order.
        self.execute(
            "INSERT INTO price_versions (series_id, sync_run_id, valid_from, withdrawn, usd_per_hour,
                 upfront_usd, recurring_usd_per_hour, source, available_regions, max_instances,
                 currency, fx_rate)
             SELECT * FROM unnest($1::int8[], $2::int8[], $3::text[], $4::int8[], $5::float8[],
                 $6::float8[], $7::float8[], $8::text[], $9::text[], $10::int8[], $11::text[],
                 $12::float8[])",
            &[
                &b.series_id,
                &b.run_id,
                &b.valid_from,
                &b.withdrawn,
                &b.usd_per_hour,
                &b.upfront_usd,
                &b.recurring_usd_per_hour,
                &b.source,
                &b.available_regions,
                &b.max_instances,
                &b.currency,
                &b.fx_rate,
            ],
        )?;
        Ok(())
    }
}
