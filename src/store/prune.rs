//! Retention: what old rows may go, deleted a bounded batch at a time so that
//! one prune never holds the write lock for long (readers are never blocked in
//! WAL mode, but a sync waits for the writer).
//!
//! Whatever the settings, these stay:
//! - the current version of every price series, and the version in force at
//!   the cutoff (a version goes only once a newer one was in force before it);
//! - of every spot pool, the newest observation before the cutoff (the price
//!   in force when the window opens) and everything after it, so the newest
//!   observation of every pool is never pruned;
//! - the newest good run of every source and scope, and every run a stored row
//!   still refers to; runs still going;
//! - the newest saved plan of every name (the next plan is compared with it);
//! - alert messages not yet delivered;
//! - billing periods of the cutoff's month and later (a period goes whole).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::sql::{self, Backend, Val};
use super::{Pool, StoreError, micros, ts};

/// Rows deleted per transaction: small enough that a sync waiting for the
/// writer waits milliseconds, not seconds.
pub const BATCH: usize = 2000;

/// How long each kind of history is kept; `None` keeps it forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    pub spot_history: Option<Duration>,
    pub price_history: Option<Duration>,
    pub sync_runs: Option<Duration>,
    pub plans: Option<Duration>,
    pub delivered_alerts: Option<Duration>,
    /// Billing periods (all their aggregates) ending before this long ago.
    pub bills: Option<Duration>,
}

impl Default for Retention {
    fn default() -> Self {
        let days = |d: u64| Some(Duration::from_secs(d * 86_400));
        Self {
            spot_history: days(365),
            price_history: days(365),
            sync_runs: days(90),
            plans: days(365),
            delivered_alerts: days(90),
            bills: days(1095),
        }
    }
}

/// What can be pruned, each with the SQL that names its prunable rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prunable {
    SpotObservations,
    /// Spot observations not yet moved into the history.
    SpotRecent,
    PriceVersions,
    SyncRuns,
    Plans,
    AlertMessages,
}

impl Prunable {
    pub const ALL: [Self; 6] = [
        Self::SpotObservations,
        Self::SpotRecent,
        Self::PriceVersions,
        Self::SyncRuns,
        Self::Plans,
        Self::AlertMessages,
    ];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::SpotObservations => "spot_observations",
            Self::SpotRecent => "spot_recent",
            Self::PriceVersions => "price_versions",
            Self::SyncRuns => "sync_runs",
            Self::Plans => "plans",
            Self::AlertMessages => "alert_messages",
        }
    }

    /// This kind's setting in `r`.
    #[must_use]
    pub fn keep(self, r: &Retention) -> Option<Duration> {
        match self {
            Self::SpotObservations | Self::SpotRecent => r.spot_history,
            Self::PriceVersions => r.price_history,
            Self::SyncRuns => r.sync_runs,
            Self::Plans => r.plans,
            Self::AlertMessages => r.delivered_alerts,
        }
    }

    /// Spot observations are pruned series by series, each batch going on
    /// from the series where the one before stopped.
    fn by_series(self) -> bool {
        matches!(self, Self::SpotObservations | Self::SpotRecent)
    }

    /// The cutoff as this kind's rows keep their time: spot observations in
    /// microseconds, the others as text.
    fn cutoff(self, t: DateTime<Utc>) -> Val {
        if self.by_series() {
            micros(t).into()
        } else {
            ts(t).into()
        }
    }

    /// Rows deleted per transaction. A spot batch first seeks every series
    /// (most of which have nothing more to go), so it takes more rows for
    /// that cost.
    #[must_use]
    pub fn batch(self) -> usize {
        if self.by_series() { BATCH * 10 } else { BATCH }
    }

    /// The table, the key that identifies a row, and a query of the keys of
    /// prunable rows older than `$1` (spot observations: of series `$2` on). The same text runs on both backends;
    /// SQLite reads `$1` as a parameter too.
    pub(super) fn sql(self) -> (&'static str, &'static str, &'static str) {
        match self {
            // Series by series from series `$2` on (where the batch before
            // stopped): the newest observation before the cutoff is one seek
            // (in `spot_recent`, else in the history, all of whose rows are
            // older), and what is older than it one range of the series'
            // index, so a batch's cost follows the rows it deletes, not the
            // series before it nor the history it keeps (CROSS JOIN: SQLite
            // would rather scan every observation).
            Self::SpotObservations => (
                "spot_observations",
                "(series_id, observed_at)",
                "SELECT o.series_id, o.observed_at
                 FROM spot_series s
                 CROSS JOIN spot_observations o
                 WHERE s.id >= $2 AND o.series_id = s.id
                   AND o.observed_at < coalesce(
                       (SELECT max(p.observed_at) FROM spot_recent p
                        WHERE p.series_id = s.id AND p.observed_at < $1),
                       (SELECT max(p.observed_at) FROM spot_observations p
                        WHERE p.series_id = s.id AND p.observed_at < $1))
                 ORDER BY s.id",
            ),
            // Rows of `spot_recent` are newer than the series' history: when
            // the observation in force at the cutoff is one of them, what is
            // older than it there goes too.
            Self::SpotRecent => (
                "spot_recent",
                "(series_id, observed_at)",
                "SELECT o.series_id, o.observed_at
                 FROM spot_series s
                 CROSS JOIN spot_recent o
                 WHERE s.id >= $2 AND o.series_id = s.id
                   AND o.observed_at < (
                       SELECT max(p.observed_at) FROM spot_recent p
                       WHERE p.series_id = s.id AND p.observed_at < $1)
                 ORDER BY s.id",
            ),
            Self::PriceVersions => (
                "price_versions",
                "id",
                "SELECT v.id FROM price_versions v
                 WHERE v.valid_from < $1
                   AND EXISTS (
                       SELECT 1 FROM price_versions w
                       WHERE w.series_id = v.series_id AND w.id > v.id AND w.valid_from < $1)",
            ),
            Self::SyncRuns => (
                "sync_runs",
                "id",
                "SELECT r.id FROM sync_runs r
                 WHERE r.status <> 'running' AND coalesce(r.finished_at, r.started_at) < $1
                   AND r.id NOT IN (SELECT max(id) FROM sync_runs WHERE status = 'ok' GROUP BY source, scope)
                   AND NOT EXISTS (SELECT 1 FROM price_versions v WHERE v.sync_run_id = r.id)
                   AND NOT EXISTS (SELECT 1 FROM instance_types t WHERE t.first_seen_run = r.id)
                   AND NOT EXISTS (SELECT 1 FROM availability a WHERE a.sync_run_id = r.id)",
            ),
            Self::Plans => (
                "plans",
                "id",
                "SELECT p.id FROM plans p
                 WHERE p.created_at < $1
                   AND p.id < (SELECT max(q.id) FROM plans q WHERE q.name IS NOT DISTINCT FROM p.name)",
            ),
            Self::AlertMessages => (
                "alert_outbox",
                "id",
                "SELECT id FROM alert_outbox WHERE delivered_at IS NOT NULL AND delivered_at < $1",
            ),
        }
    }
}

/// What one batch deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub deleted: usize,
    /// Where the next batch of spot observations starts: the last series
    /// this one deleted from (the other kinds find their rows by index and
    /// start over each batch).
    pub next_series: i64,
}

/// Rows pruned (or, in a dry run, prunable) by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneCounts {
    pub spot_observations: u64,
    pub spot_recent: u64,
    pub price_versions: u64,
    pub sync_runs: u64,
    pub plans: u64,
    pub alert_messages: u64,
    /// Whole billing periods, with every aggregate of theirs.
    pub bill_periods: u64,
}

impl PruneCounts {
    fn slot(&mut self, kind: Prunable) -> &mut u64 {
        match kind {
            Prunable::SpotObservations => &mut self.spot_observations,
            Prunable::SpotRecent => &mut self.spot_recent,
            Prunable::PriceVersions => &mut self.price_versions,
            Prunable::SyncRuns => &mut self.sync_runs,
            Prunable::Plans => &mut self.plans,
            Prunable::AlertMessages => &mut self.alert_messages,
        }
    }

    pub fn add(&mut self, kind: Prunable, n: u64) {
        *self.slot(kind) += n;
    }

    #[must_use]
    pub fn get(&self, kind: Prunable) -> u64 {
        *self.clone().slot(kind)
    }

    #[must_use]
    pub fn total(&self) -> u64 {
        self.spot_observations
            + self.spot_recent
            + self.price_versions
            + self.sync_runs
            + self.plans
            + self.alert_messages
            + self.bill_periods
    }
}

impl Prunable {
    /// Counts what may go; `$1` is the cutoff.
    pub(super) fn count_sql(self) -> String {
        let (_, _, candidates) = self.sql();
        format!("SELECT count(*) FROM ({candidates}) AS c")
    }

    /// Deletes one batch of at most the last parameter's rows. Spot
    /// observations answer the series of each row deleted.
    pub(super) fn delete_sql(self) -> String {
        let (table, key, candidates) = self.sql();
        if self.by_series() {
            format!(
                "DELETE FROM {table} WHERE {key} IN ({candidates} LIMIT $3) RETURNING series_id"
            )
        } else {
            format!("DELETE FROM {table} WHERE {key} IN ({candidates} LIMIT $2)")
        }
    }

    /// The parameters of [`Prunable::sql`]: the cutoff, the series spot
    /// observations start from, then `more`.
    fn params(self, cutoff: DateTime<Utc>, from_series: i64, more: &[Val]) -> Vec<Val> {
        let mut params = vec![self.cutoff(cutoff)];
        if self.by_series() {
            params.push(from_series.into());
        }
        params.extend_from_slice(more);
        params
    }
}

/// Retention, one kind of row at a time.
pub trait Prune {
    /// How many rows of `kind` older than `cutoff` a prune would delete.
    ///
    /// # Errors
    /// On a database error.
    fn count_prunable(&self, kind: Prunable, cutoff: DateTime<Utc>) -> Result<u64, StoreError>;

    /// Deletes up to `batch` prunable rows of `kind` older than `cutoff`, in
    /// one transaction, spot observations from series `from_series` on;
    /// answers how many went (fewer than `batch`: done) and where the next
    /// batch starts.
    ///
    /// # Errors
    /// On a database error (nothing of the batch is deleted).
    fn prune_batch(
        &mut self,
        kind: Prunable,
        cutoff: DateTime<Utc>,
        batch: usize,
        from_series: i64,
    ) -> Result<Batch, StoreError>;
}

impl<B: Backend> Prune for B {
    fn count_prunable(&self, kind: Prunable, cutoff: DateTime<Utc>) -> Result<u64, StoreError> {
        let params = kind.params(cutoff, i64::MIN, &[]);
        let n = self.on_conn(|db| sql::first(db, &kind.count_sql(), &params))?;
        Ok(n.map_or(Ok(0), |n| n.int())?.try_into().unwrap_or(0))
    }

    fn prune_batch(
        &mut self,
        kind: Prunable,
        cutoff: DateTime<Utc>,
        batch: usize,
        from_series: i64,
    ) -> Result<Batch, StoreError> {
        let size = i64::try_from(batch).unwrap_or(i64::MAX);
        let params = kind.params(cutoff, from_series, &[size.into()]);
        self.in_transaction(|db| {
            let mut done = Batch {
                deleted: 0,
                next_series: from_series,
            };
            if kind.by_series() {
                db.each_row(&kind.delete_sql(), &params, &mut |row| {
                    done.deleted += 1;
                    done.next_series = done.next_series.max(row[0].int()?);
                    Ok(())
                })?;
            } else {
                let n = db.exec(&kind.delete_sql(), &params)?;
                done.deleted = usize::try_from(n).unwrap_or(usize::MAX);
            }
            if done.deleted == 0 {
                return Ok(done);
            }
            sql::next_generation(db, kind == Prunable::PriceVersions)?;
            if kind.by_series() {
                // Readers keep the spot history they read from the cutoff on.
                db.exec(
                    "UPDATE catalog_state
                     SET spot_prunes = spot_prunes + 1,
                         spot_pruned_before = CASE WHEN spot_pruned_before < $1
                                              THEN $1 ELSE spot_pruned_before END",
                    &[micros(cutoff).into()],
                )?;
            }
            if kind == Prunable::SpotRecent {
                // The count that decides how much of it each spot write moves.
                db.exec(
                    "UPDATE catalog_state SET spot_recent_rows = spot_recent_rows - $1",
                    &[i64::try_from(done.deleted).unwrap_or(i64::MAX).into()],
                )?;
            }
            Ok(done)
        })
    }
}

/// Prunes everything `retention` allows as of `now`, [`BATCH`] rows per
/// transaction, taking the writer for each batch only; with `dry_run`, only
/// counts.
///
/// # Errors
/// On a database error; batches already committed stay pruned.
pub fn prune(
    pool: &Pool,
    retention: &Retention,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<PruneCounts, StoreError> {
    let mut counts = PruneCounts::default();
    for kind in Prunable::ALL {
        let Some(cutoff) = kind
            .keep(retention)
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .and_then(|d| now.checked_sub_signed(d))
        else {
            continue;
        };
        if dry_run {
            counts.add(kind, pool.read(|s| s.count_prunable(kind, cutoff))?);
            continue;
        }
        let mut from_series = i64::MIN;
        loop {
            let done = pool.write(|s| s.prune_batch(kind, cutoff, kind.batch(), from_series))?;
            counts.add(kind, done.deleted as u64);
            if done.deleted < kind.batch() {
                break;
            }
            from_series = done.next_series;
            // Let a waiting sync take the writer between batches.
            std::thread::yield_now();
        }
    }
    // Billing periods go whole: every period of a month before the cutoff's.
    if let Some(cutoff) = retention
        .bills
        .and_then(|d| chrono::Duration::from_std(d).ok())
        .and_then(|d| now.checked_sub_signed(d))
    {
        let before = cutoff.format("%Y-%m").to_string();
        counts.bill_periods = if dry_run {
            pool.read(|s| s.count_bill_periods_before(&before))?
        } else {
            pool.write(|s| s.prune_bill_periods_before(&before))?
        };
    }
    Ok(counts)
}
