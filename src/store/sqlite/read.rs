//! Reads, on SQLite.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use crate::store::read::{
    RUN_COLUMNS, RawRun, SUSPICIOUS_SINCE, finish_price, none_if_empty, parse_plan, probe_limit,
    within_limit,
};
use crate::store::write::scope_name;
use crate::store::{
    CurrentPrice, INTERRUPTED, LeaseRow, Reads, SavedPlan, SpotPoint, StoreError, SyncRun,
    parse_ts, ts,
};

/// Reads a row of the current-prices query by position (name lookups cost a
/// string search per column per row). Columns, in order: provider, region, zone,
/// instance_type, price_kind, offering_class, usd_per_hour, upfront_usd,
/// recurring_usd_per_hour, source, available_regions, max_instances,
/// observed_at, gpu_model, gpu_count, gpu_memory_gib, vcpus, memory_gib,
/// price_scope, currency, fx_rate, gpu_form_factor.
fn read_price(r: &Row<'_>) -> rusqlite::Result<(CurrentPrice, Option<String>, String)> {
    let price = CurrentPrice {
        provider: r.get(0)?,
        region: r.get(1)?,
        zone: none_if_empty(r.get(2)?),
        instance_type: r.get(3)?,
        price_kind: r.get(4)?,
        offering_class: none_if_empty(r.get(5)?),
        usd_per_hour: r.get(6)?,
        upfront_usd: r.get(7)?,
        recurring_usd_per_hour: r.get(8)?,
        source: r.get(9)?,
        available_regions: Vec::new(),
        max_instances: r.get(11)?,
        observed_at: None,
        gpu_model: r.get(13)?,
        gpu_count: r.get(14)?,
        gpu_memory_gib: r.get(15)?,
        vcpus: r.get(16)?,
        memory_gib: r.get(17)?,
        price_scope: r.get(18)?,
        currency: r.get(19)?,
        fx_rate: r.get(20)?,
        gpu_form_factor: r.get(21)?,
    };
    Ok((price, r.get(12)?, r.get(10)?))
}

impl Reads for SqliteStore {
    fn prices_as_of(
        &self,
        types: Option<&[(String, String)]>,
        at: Option<DateTime<Utc>>,
    ) -> Result<Vec<CurrentPrice>, StoreError> {
        let keys = types
            .map(|t| serde_json::to_string(t).map_err(|e| StoreError::Corrupt(e.to_string())))
            .transpose()?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT s.provider, s.region, s.zone, s.instance_type, s.price_kind, s.offering_class,
                    v.usd_per_hour, v.upfront_usd, v.recurring_usd_per_hour, v.source,
                    v.available_regions, v.max_instances, NULL AS observed_at,
                    t.gpu_model, t.gpu_count, t.gpu_memory_gib, t.vcpus, t.memory_gib,
                    s.price_scope, v.currency, v.fx_rate, t.gpu_form_factor
             FROM price_series s
             JOIN price_versions v
               ON v.id = (SELECT max(id) FROM price_versions
                          WHERE series_id = s.id AND (?2 IS NULL OR valid_from <= ?2))
             JOIN instance_types t
               ON t.provider = s.provider AND t.instance_type = s.instance_type
             WHERE v.withdrawn = 0
               AND (?1 IS NULL OR (s.provider, s.instance_type) IN
                    (SELECT value ->> 0, value ->> 1 FROM json_each(?1)))
             UNION ALL
             SELECT ss.provider, ss.region, ss.zone, ss.instance_type, 'spot', '',
                    o.usd_per_hour, 0.0, o.usd_per_hour, NULL, '[]', NULL, o.observed_at,
                    t.gpu_model, t.gpu_count, t.gpu_memory_gib, t.vcpus, t.memory_gib,
                    'instance', ss.currency, coalesce(o.fx_rate, 1.0), t.gpu_form_factor
             FROM spot_series ss
             JOIN spot_observations o
               ON o.provider = ss.provider AND o.instance_type = ss.instance_type AND o.zone = ss.zone
              AND o.observed_at = (SELECT max(observed_at) FROM spot_observations
                                   WHERE provider = ss.provider AND instance_type = ss.instance_type
                                     AND zone = ss.zone AND (?2 IS NULL OR observed_at <= ?2))
             JOIN instance_types t
               ON t.provider = ss.provider AND t.instance_type = ss.instance_type
             WHERE ?1 IS NULL OR (ss.provider, ss.instance_type) IN
                   (SELECT value ->> 0, value ->> 1 FROM json_each(?1))",
        )?;
        let rows = stmt.query_map(params![keys, at.map(ts)], read_price)?;
        let mut out = Vec::new();
        for row in rows {
            let (price, observed_at, regions) = row?;
            out.push(finish_price(price, observed_at.as_deref(), &regions)?);
        }
        Ok(out)
    }

    fn spot_history(
        &self,
        instance_type: &str,
        provider: Option<&str>,
        region: Option<&str>,
        zone: Option<&str>,
        since: DateTime<Utc>,
        limit: Option<usize>,
    ) -> Result<Vec<SpotPoint>, StoreError> {
        let mut stmt = self.conn.prepare(
            "WITH matching AS (
                 SELECT * FROM spot_observations
                 WHERE instance_type = ?1
                   AND (?2 IS NULL OR provider = ?2)
                   AND (?3 IS NULL OR region = ?3)
                   AND (?4 IS NULL OR zone = ?4)
             ),
             opening AS (
                 SELECT provider, region, zone, instance_type, max(observed_at) AS observed_at, usd_per_hour
                 FROM matching WHERE observed_at < ?5
                 GROUP BY provider, zone
             )
             SELECT provider, region, zone, instance_type, observed_at, usd_per_hour FROM opening
             UNION ALL
             SELECT provider, region, zone, instance_type, observed_at, usd_per_hour
             FROM matching WHERE observed_at >= ?5
             ORDER BY provider, zone, observed_at
             LIMIT ?6",
        )?;
        let sql_limit = probe_limit(limit).unwrap_or(-1);
        let rows = stmt.query_map(
            params![instance_type, provider, region, zone, ts(since), sql_limit],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, f64>(5)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for row in rows {
            let (provider, region, zone, instance_type, at, usd_per_hour) = row?;
            out.push(SpotPoint {
                provider,
                region,
                zone,
                instance_type,
                observed_at: parse_ts(&at)?,
                usd_per_hour,
            });
        }
        within_limit(out, limit)
    }

    fn current_price_counts(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, BTreeMap<String, i64>>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT s.region, s.instance_type, count(*) FROM price_series s
             JOIN price_versions v
               ON v.id = (SELECT max(id) FROM price_versions WHERE series_id = s.id)
             WHERE s.provider = ?1 AND v.withdrawn = 0
             GROUP BY s.region, s.instance_type",
        )?;
        let rows = stmt.query_map([provider], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for row in rows {
            let (region, instance_type, n) = row?;
            out.entry(region).or_default().insert(instance_type, n);
        }
        Ok(out)
    }

    fn availability_of(
        &self,
        kind: &str,
    ) -> Result<BTreeMap<(String, String, String), f64>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT provider, region, instance_type, value FROM availability WHERE kind = ?1 AND zone = ''",
        )?;
        let rows = stmt.query_map([kind], |r| {
            Ok(((r.get(0)?, r.get(1)?, r.get(2)?), r.get(3)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn instance_type_names(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT provider, instance_type, gpu_model FROM instance_types")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn saved_plan(
        &self,
        id: Option<i64>,
        name: Option<&str>,
    ) -> Result<Option<SavedPlan>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, created_at, name, inputs_hash, result_json FROM plans
             WHERE (?1 IS NULL OR id = ?1) AND (?2 IS NULL OR name = ?2)
             ORDER BY id DESC LIMIT 1",
        )?;
        let row = stmt
            .query_row(params![id, name], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })
            .optional()?;
        row.map(|(id, created, name, hash, result)| parse_plan(id, &created, name, hash, &result))
            .transpose()
    }

    fn saved_plan_problem(&self, id: i64) -> Result<Option<serde_json::Value>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT problem_json FROM plans WHERE id = ?1")?;
        let text: Option<String> = stmt.query_row([id], |r| r.get(0)).optional()?;
        text.map(|t| {
            serde_json::from_str(&t)
                .map_err(|e| StoreError::Corrupt(format!("plan {id} problem: {e}")))
        })
        .transpose()
    }

    fn previous_plan_id(&self, id: i64, name: &str) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT max(id) FROM plans WHERE name = ?1 AND id < ?2")?
            .query_row(params![name, id], |r| r.get(0))?)
    }

    fn catalog_generation(&self) -> Result<(i64, Option<i64>), StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT count(*), max(id) FROM sync_runs WHERE status = 'ok'")?;
        Ok(stmt.query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?)
    }

    fn last_good_syncs(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT source, max(finished_at) FROM sync_runs
             WHERE status = 'ok' AND scope = 'full' GROUP BY source",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (source, at) = row?;
            out.insert(source, parse_ts(&at)?);
        }
        Ok(out)
    }

    fn sync_done_since(
        &self,
        source: &str,
        scope: gpuplan_providers::Scope,
        since: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM sync_runs
                 WHERE source = ?1 AND scope = ?2 AND started_at >= ?3 AND status <> 'running'
                   AND (error IS NULL OR error <> ?4))",
            )?
            .query_row(
                params![source, scope_name(scope), ts(since), INTERRUPTED],
                |r| r.get(0),
            )?)
    }

    fn leases(&self) -> Result<Vec<LeaseRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT duty, epoch, holder, taken_at, heartbeat_at FROM leases ORDER BY duty",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (duty, epoch, holder, taken, beat) = row?;
            out.push(LeaseRow {
                duty,
                epoch,
                holder,
                taken_at: parse_ts(&taken)?,
                heartbeat_at: parse_ts(&beat)?,
            });
        }
        Ok(out)
    }

    fn sync_runs(&self, limit: u32) -> Result<Vec<SyncRun>, StoreError> {
        self.runs(
            &format!("SELECT {RUN_COLUMNS} FROM sync_runs ORDER BY id DESC LIMIT ?1"),
            &i64::from(limit),
        )
    }

    fn suspicious_runs(&self, since: DateTime<Utc>) -> Result<Vec<SyncRun>, StoreError> {
        self.runs(
            &format!(
                "SELECT {RUN_COLUMNS} FROM sync_runs
                 WHERE {SUSPICIOUS_SINCE} AND finished_at >= ?1 ORDER BY id"
            ),
            &ts(since),
        )
    }
}

impl SqliteStore {
    /// The runs `sql` selects ([`RUN_COLUMNS`], one parameter).
    fn runs(&self, sql: &str, param: &dyn rusqlite::ToSql) -> Result<Vec<SyncRun>, StoreError> {
        let mut stmt = self.conn.prepare(sql)?;
        let rows = stmt.query_map([param], |r| {
            Ok(RawRun {
                id: r.get(0)?,
                source: r.get(1)?,
                started: r.get(2)?,
                finished: r.get(3)?,
                status: r.get(4)?,
                counts: [
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                    r.get(10)?,
                    r.get(11)?,
                    r.get(15)?,
                ],
                skipped: r.get(12)?,
                error: r.get(13)?,
                scope: r.get(14)?,
                suspicious: r.get(16)?,
            })
        })?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row?.parse()?);
        }
        Ok(out)
    }
}
