//! Reads, on PostgreSQL: the same queries as SQLite's, in PostgreSQL's
//! dialect (typed parameters, `DISTINCT ON` for the newest row per group,
//! arrays for a list of keys).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tokio_postgres::Row;

use super::{PgStore, get, narrow};
use crate::store::read::{
    RUN_COLUMNS, RawRun, SUSPICIOUS_SINCE, finish_price, none_if_empty, parse_plan, probe_limit,
    within_limit,
};
use crate::store::write::scope_name;
use crate::store::{
    CurrentPrice, INTERRUPTED, LeaseRow, Reads, SavedPlan, SpotPoint, StoreError, SyncRun,
    parse_ts, ts,
};

/// A row of the current-prices query, columns as in SQLite's `read_price`.
fn read_price(r: &Row) -> Result<CurrentPrice, StoreError> {
    let price = CurrentPrice {
        provider: get(r, 0)?,
        region: get(r, 1)?,
        zone: none_if_empty(get(r, 2)?),
        instance_type: get(r, 3)?,
        price_kind: get(r, 4)?,
        offering_class: none_if_empty(get(r, 5)?),
        usd_per_hour: get(r, 6)?,
        upfront_usd: get(r, 7)?,
        recurring_usd_per_hour: get(r, 8)?,
        source: get(r, 9)?,
        available_regions: Vec::new(),
        max_instances: narrow(get(r, 11)?, "max_instances")?,
        observed_at: None,
        gpu_model: get(r, 13)?,
        gpu_count: narrow(Some(get(r, 14)?), "gpu_count")?.unwrap_or(0),
        gpu_memory_gib: get(r, 15)?,
        vcpus: narrow(get(r, 16)?, "vcpus")?,
        memory_gib: get(r, 17)?,
        price_scope: get(r, 18)?,
        currency: get(r, 19)?,
        fx_rate: get(r, 20)?,
        gpu_form_factor: get(r, 21)?,
    };
    let observed: Option<String> = get(r, 12)?;
    let regions: String = get(r, 10)?;
    finish_price(price, observed.as_deref(), &regions)
}

impl Reads for PgStore<'_> {
    fn prices_as_of(
        &self,
        types: Option<&[(String, String)]>,
        at: Option<DateTime<Utc>>,
    ) -> Result<Vec<CurrentPrice>, StoreError> {
        let (providers, names): (Option<Vec<&str>>, Option<Vec<&str>>) = types
            .map(|t| t.iter().map(|(p, n)| (p.as_str(), n.as_str())).unzip())
            .unzip();
        let at = at.map(ts);
        let rows = self.query(
            "SELECT s.provider, s.region, s.zone, s.instance_type, s.price_kind, s.offering_class,
                    v.usd_per_hour, v.upfront_usd, v.recurring_usd_per_hour, v.source,
                    v.available_regions, v.max_instances, NULL::text AS observed_at,
                    t.gpu_model, t.gpu_count, t.gpu_memory_gib, t.vcpus, t.memory_gib,
                    s.price_scope, v.currency, v.fx_rate, t.gpu_form_factor
             FROM price_series s
             JOIN price_versions v
               ON v.id = (SELECT max(id) FROM price_versions
                          WHERE series_id = s.id AND ($3::text IS NULL OR valid_from <= $3))
             JOIN instance_types t
               ON t.provider = s.provider AND t.instance_type = s.instance_type
             WHERE v.withdrawn = 0
               AND ($1::text[] IS NULL OR (s.provider, s.instance_type) IN
                    (SELECT * FROM unnest($1::text[], $2::text[])))
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
                                     AND zone = ss.zone AND ($3::text IS NULL OR observed_at <= $3))
             JOIN instance_types t
               ON t.provider = ss.provider AND t.instance_type = ss.instance_type
             WHERE $1::text[] IS NULL OR (ss.provider, ss.instance_type) IN
                   (SELECT * FROM unnest($1::text[], $2::text[]))",
            &[&providers, &names, &at],
        )?;
        rows.iter().map(read_price).collect()
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
        let rows = self.query(
            "WITH matching AS (
                 SELECT * FROM spot_observations
                 WHERE instance_type = $1
                   AND ($2::text IS NULL OR provider = $2)
                   AND ($3::text IS NULL OR region = $3)
                   AND ($4::text IS NULL OR zone = $4)
             ),
             opening AS (
                 SELECT DISTINCT ON (provider, zone)
                        provider, region, zone, instance_type, observed_at, usd_per_hour
                 FROM matching WHERE observed_at < $5
                 ORDER BY provider, zone, observed_at DESC
             )
             SELECT provider, region, zone, instance_type, observed_at, usd_per_hour FROM opening
             UNION ALL
             SELECT provider, region, zone, instance_type, observed_at, usd_per_hour
             FROM matching WHERE observed_at >= $5
             ORDER BY provider, zone, observed_at
             LIMIT $6",
            &[
                &instance_type,
                &provider,
                &region,
                &zone,
                &ts(since),
                &probe_limit(limit),
            ],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let at: String = get(r, 4)?;
            out.push(SpotPoint {
                provider: get(r, 0)?,
                region: get(r, 1)?,
                zone: get(r, 2)?,
                instance_type: get(r, 3)?,
                observed_at: parse_ts(&at)?,
                usd_per_hour: get(r, 5)?,
            });
        }
        within_limit(out, limit)
    }

    fn current_price_counts(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, BTreeMap<String, i64>>, StoreError> {
        let rows = self.query(
            "SELECT s.region, s.instance_type, count(*) FROM price_series s
             JOIN price_versions v
               ON v.id = (SELECT max(id) FROM price_versions WHERE series_id = s.id)
             WHERE s.provider = $1 AND v.withdrawn = 0
             GROUP BY s.region, s.instance_type",
            &[&provider],
        )?;
        let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for r in &rows {
            out.entry(get(r, 0)?)
                .or_default()
                .insert(get(r, 1)?, get(r, 2)?);
        }
        Ok(out)
    }

    fn availability_of(
        &self,
        kind: &str,
    ) -> Result<BTreeMap<(String, String, String), f64>, StoreError> {
        let rows = self.query(
            "SELECT provider, region, instance_type, value FROM availability WHERE kind = $1 AND zone = ''",
            &[&kind],
        )?;
        rows.iter()
            .map(|r| Ok(((get(r, 0)?, get(r, 1)?, get(r, 2)?), get(r, 3)?)))
            .collect()
    }

    fn instance_type_names(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = self.query(
            "SELECT provider, instance_type, gpu_model FROM instance_types",
            &[],
        )?;
        rows.iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?, get(r, 2)?)))
            .collect()
    }

    fn saved_plan(
        &self,
        id: Option<i64>,
        name: Option<&str>,
    ) -> Result<Option<SavedPlan>, StoreError> {
        let row = self.query_opt(
            "SELECT id, created_at, name, inputs_hash, result_json FROM plans
             WHERE ($1::bigint IS NULL OR id = $1) AND ($2::text IS NULL OR name = $2)
             ORDER BY id DESC LIMIT 1",
            &[&id, &name],
        )?;
        row.map(|r| {
            let created: String = get(&r, 1)?;
            let result: String = get(&r, 4)?;
            parse_plan(get(&r, 0)?, &created, get(&r, 2)?, get(&r, 3)?, &result)
        })
        .transpose()
    }

    fn saved_plan_problem(&self, id: i64) -> Result<Option<serde_json::Value>, StoreError> {
        let row = self.query_opt("SELECT problem_json FROM plans WHERE id = $1", &[&id])?;
        row.map(|r| {
            let text: String = get(&r, 0)?;
            serde_json::from_str(&text)
                .map_err(|e| StoreError::Corrupt(format!("plan {id} problem: {e}")))
        })
        .transpose()
    }

    fn previous_plan_id(&self, id: i64, name: &str) -> Result<Option<i64>, StoreError> {
        let row = self.query_opt(
            "SELECT max(id) FROM plans WHERE name = $1 AND id < $2",
            &[&name, &id],
        )?;
        row.map_or(Ok(None), |r| get(&r, 0))
    }

    fn catalog_generation(&self) -> Result<(i64, Option<i64>), StoreError> {
        let rows = self.query(
            "SELECT count(*), max(id) FROM sync_runs WHERE status = 'ok'",
            &[],
        )?;
        let r = rows
            .first()
            .ok_or_else(|| StoreError::Corrupt("count(*) returned no row".to_owned()))?;
        Ok((get(r, 0)?, get(r, 1)?))
    }

    fn last_good_syncs(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        let rows = self.query(
            "SELECT source, max(finished_at) FROM sync_runs
             WHERE status = 'ok' AND scope = 'full' GROUP BY source",
            &[],
        )?;
        let mut out = BTreeMap::new();
        for r in &rows {
            let at: String = get(r, 1)?;
            out.insert(get(r, 0)?, parse_ts(&at)?);
        }
        Ok(out)
    }

    fn sync_done_since(
        &self,
        source: &str,
        scope: gpuplan_providers::Scope,
        since: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let row = self.query_opt(
            "SELECT EXISTS (SELECT 1 FROM sync_runs
                 WHERE source = $1 AND scope = $2 AND started_at >= $3 AND status <> 'running'
                   AND (error IS NULL OR error <> $4))",
            &[&source, &scope_name(scope), &ts(since), &INTERRUPTED],
        )?;
        row.map_or(Ok(false), |r| get(&r, 0))
    }

    fn leases(&self) -> Result<Vec<LeaseRow>, StoreError> {
        let rows = self.query(
            "SELECT duty, epoch, holder, taken_at, heartbeat_at FROM leases ORDER BY duty",
            &[],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let (taken, beat): (String, String) = (get(r, 3)?, get(r, 4)?);
            out.push(LeaseRow {
                duty: get(r, 0)?,
                epoch: get(r, 1)?,
                holder: get(r, 2)?,
                taken_at: parse_ts(&taken)?,
                heartbeat_at: parse_ts(&beat)?,
            });
        }
        Ok(out)
    }

    fn sync_runs(&self, limit: u32) -> Result<Vec<SyncRun>, StoreError> {
        self.runs(
            &format!("SELECT {RUN_COLUMNS} FROM sync_runs ORDER BY id DESC LIMIT $1"),
            &i64::from(limit),
        )
    }

    fn suspicious_runs(&self, since: DateTime<Utc>) -> Result<Vec<SyncRun>, StoreError> {
        self.runs(
            &format!(
                "SELECT {RUN_COLUMNS} FROM sync_runs
                 WHERE {SUSPICIOUS_SINCE} AND finished_at >= $1 ORDER BY id"
            ),
            &ts(since),
        )
    }
}

impl PgStore<'_> {
    /// The runs `sql` selects ([`RUN_COLUMNS`], one parameter).
    fn runs(
        &self,
        sql: &str,
        param: &(dyn tokio_postgres::types::ToSql + Sync),
    ) -> Result<Vec<SyncRun>, StoreError> {
        let rows = self.query(sql, &[param])?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(
                RawRun {
                    id: get(r, 0)?,
                    source: get(r, 1)?,
                    started: get(r, 2)?,
                    finished: get(r, 3)?,
                    status: get(r, 4)?,
                    counts: [
                        get(r, 5)?,
                        get(r, 6)?,
                        get(r, 7)?,
                        get(r, 8)?,
                        get(r, 9)?,
                        get(r, 10)?,
                        get(r, 11)?,
                        get(r, 15)?,
                    ],
                    skipped: get(r, 12)?,
                    error: get(r, 13)?,
                    scope: get(r, 14)?,
                    suspicious: get(r, 16)?,
                }
                .parse()?,
            );
        }
        Ok(out)
    }
}
