//! Writing sync runs and snapshots.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gpuplan_providers::{Scope, Snapshot};

use super::snapshot::{SuspiciousPrice, WriteStats, write_snapshot};
use super::sql::{self, Backend, Db, returned_id};
use super::{Fence, INTERRUPTED, StoreError, from_micros, ts};

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
    /// [`write_snapshot`](super::snapshot::write_snapshot) for what is written).
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

impl<B: Backend> Writes for B {
    fn begin_run(
        &self,
        source: &str,
        scope: Scope,
        started_at: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        returned_id(self.on_conn(|db| {
            sql::first(
                db,
                "INSERT INTO sync_runs (source, started_at, status, scope, replica)
                 VALUES ($1, $2, 'running', $3, $4) RETURNING id",
                &[
                    source.into(),
                    ts(started_at).into(),
                    scope_name(scope).into(),
                    self.replica().into(),
                ],
            )
        })?)
    }

    fn fail_run(
        &self,
        run_id: i64,
        finished_at: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        self.on_conn(|db| {
            db.exec(
                "UPDATE sync_runs SET status = 'failed', finished_at = $2, error = $3
                 WHERE id = $1 AND status = 'running'",
                &[run_id.into(), ts(finished_at).into(), error.into()],
            )
        })?;
        Ok(())
    }

    fn save_plan(&self, plan: &NewPlan<'_>) -> Result<i64, StoreError> {
        // One statement, so the lease row's share lock lasts as long as the
        // insert: a scheduled plan is saved only while its duty is ours.
        let fence = self.fence();
        let id = self.on_conn(|db| {
            sql::first(
                db,
                &format!(
                    "INSERT INTO plans (created_at, name, inputs_hash, status, objective, problem_json, result_json)
                     SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST($3 AS TEXT), CAST($4 AS TEXT),
                            CAST($5 AS DOUBLE PRECISION), CAST($6 AS TEXT), CAST($7 AS TEXT)
                     WHERE CAST($8 AS TEXT) IS NULL
                        OR EXISTS (SELECT 1 FROM leases WHERE duty = $8 AND epoch = $9{})
                     RETURNING id",
                    db.dialect().for_share()
                ),
                &[
                    ts(plan.created_at).into(),
                    plan.name.into(),
                    plan.inputs_hash.into(),
                    plan.status.into(),
                    plan.objective.into(),
                    plan.problem_json.into(),
                    plan.result_json.into(),
                    fence.map(|f| f.duty.as_str()).into(),
                    fence.map(|f| f.epoch).into(),
                ],
            )
        })?;
        match (id, fence) {
            (None, Some(fence)) => Err(self.on_conn(|db| fenced(db, fence))?),
            (id, _) => returned_id(id),
        }
    }

    fn fail_interrupted_runs(
        &self,
        source: Option<(&str, Scope)>,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        let (source, scope) = source.map(|(s, sc)| (s, scope_name(sc))).unzip();
        let n = self.on_conn(|db| {
            db.exec(
                "UPDATE sync_runs SET status = 'failed', finished_at = $1, error = $4
                 WHERE status = 'running' AND (CAST($2 AS TEXT) IS NULL OR (source = $2 AND scope = $3))",
                &[ts(now).into(), source.into(), scope.into(), INTERRUPTED.into()],
            )
        })?;
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
        self.in_transaction(|db| {
            write_snapshot(
                db,
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
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT region, max(last_observed_at) FROM spot_series
                 WHERE provider = $1 AND last_observed_at IS NOT NULL GROUP BY region",
                &[provider.into()],
            )
        })?;
        rows.iter()
            .map(|r| Ok((r[0].text()?, from_micros(r[1].int()?)?)))
            .collect()
    }

    fn source_versions(&self, provider: &str) -> Result<BTreeMap<String, String>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT part, version FROM source_versions WHERE provider = $1",
                &[provider.into()],
            )
        })?;
        rows.iter()
            .map(|r| Ok((r[0].text()?, r[1].text()?)))
            .collect()
    }

    fn last_good_price_count(&self, source: &str) -> Result<Option<i64>, StoreError> {
        let n = self.on_conn(|db| {
            sql::first(
                db,
                "SELECT prices_seen FROM sync_runs
                 WHERE source = $1 AND status = 'ok' AND prices_seen > 0
                 ORDER BY id DESC LIMIT 1",
                &[source.into()],
            )
        })?;
        n.map(|n| n.int()).transpose()
    }
}

/// The `Fenced` error of a write refused for `fence`, naming the epoch that
/// holds the duty now.
fn fenced(db: &dyn Db, fence: &Fence) -> Result<StoreError, StoreError> {
    let current = sql::first(
        db,
        "SELECT epoch FROM leases WHERE duty = $1",
        &[fence.duty.as_str().into()],
    )?;
    Ok(StoreError::Fenced {
        duty: fence.duty.clone(),
        held: fence.epoch,
        current: current.map_or(Ok(0), |v| v.int())?,
    })
}
