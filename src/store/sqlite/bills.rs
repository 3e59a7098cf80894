//! Billing aggregates on SQLite: the shared statements of `store::bills`,
//! run on this connection (or its open transaction).

use chrono::{DateTime, Utc};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql, params_from_iter};

use super::SqliteStore;
use crate::bills::aggregate::PeriodData;
use crate::store::StoreError;
use crate::store::bills::{
    self, Arg, BillQuery, Bills, CommitmentRecord, CoverageRow, Db, FileRecord, GpuCatalog,
    PeriodWrite, SpendRow, StoredLoad, UsageRow, Val,
};

fn value(a: Arg<'_>) -> ValueRef<'_> {
    match a {
        Arg::Null => ValueRef::Null,
        Arg::Int(n) => ValueRef::Integer(n),
        Arg::Real(f) => ValueRef::Real(f),
        Arg::Text(s) => ValueRef::Text(s.as_bytes()),
    }
}

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(value(*self)))
    }
}

impl ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(value(self.into())))
    }
}

/// The shared SQL writes `$1`; SQLite numbers parameters by first
/// appearance for that form, so it is run as `?1`, which SQLite numbers
/// as written.
fn numbered(sql: &str) -> String {
    sql.replace('$', "?")
}

struct SqliteDb<'c>(&'c Connection);

impl Db for SqliteDb<'_> {
    fn exec(&self, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
        let n = self
            .0
            .prepare_cached(&numbered(sql))?
            .execute(params_from_iter(params))?;
        Ok(n as u64)
    }

    fn rows(&self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError> {
        let mut stmt = self.0.prepare_cached(&numbered(sql))?;
        let n = stmt.column_count();
        let mut rows = stmt.query(params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(match r.get_ref(i)? {
                    ValueRef::Null => Val::Null,
                    ValueRef::Integer(v) => Val::Int(v),
                    ValueRef::Real(v) => Val::Real(v),
                    ValueRef::Text(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(_) => {
                        return Err(StoreError::Corrupt("unexpected blob".to_owned()));
                    }
                });
            }
            out.push(row);
        }
        Ok(out)
    }

    fn insert_many(
        &self,
        table: &str,
        columns: &[&str],
        values: &[Arg<'_>],
    ) -> Result<(), StoreError> {
        // Many rows a statement: a period's hourly usage is hundreds of
        // thousands of rows, and each statement's own work (bind, step,
        // reset) cost as much as the row it inserted.
        let per = (MAX_INSERT_VALUES / columns.len().max(1)).clamp(1, MAX_INSERT_ROWS);
        let sql = |n: usize| {
            let row = format!(
                "({})",
                (0..columns.len())
                    .map(|_| "?")
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            format!(
                "INSERT INTO {table} ({}) VALUES {}",
                columns.join(", "),
                vec![row; n].join(", ")
            )
        };
        let full = sql(per);
        for chunk in values.chunks(per * columns.len().max(1)) {
            let rows = chunk.len() / columns.len().max(1);
            let mut stmt = if rows == per {
                self.0.prepare_cached(&full)?
            } else {
                self.0.prepare_cached(&sql(rows))?
            };
            stmt.execute(params_from_iter(chunk))?;
        }
        Ok(())
    }

    fn check_fence(&self) -> Result<(), StoreError> {
        // One SQLite daemon holds every duty itself.
        Ok(())
    }

    fn month_of(&self, col: &str) -> String {
        format!("CAST(strftime('%s', {col}, 'unixepoch', 'start of month') AS INTEGER)")
    }
}

/// Rows one `INSERT` of `insert_many` takes, and the bound values it may
/// hold (SQLite allows 32,766).
const MAX_INSERT_ROWS: usize = 128;
const MAX_INSERT_VALUES: usize = 4096;

impl Bills for SqliteStore {
    fn bill_loads(&self, source: Option<&str>) -> Result<Vec<StoredLoad>, StoreError> {
        bills::loads(&SqliteDb(&self.conn), source)
    }

    fn bill_files(
        &self,
        source: &str,
    ) -> Result<std::collections::BTreeMap<String, FileRecord>, StoreError> {
        bills::files(&SqliteDb(&self.conn), source)
    }

    fn write_bill_period(
        &mut self,
        source: &str,
        provider: &str,
        data: &PeriodData,
        state: &str,
        now: DateTime<Utc>,
    ) -> Result<PeriodWrite, StoreError> {
        let tx = self.conn.transaction()?;
        let out = bills::write_period(&SqliteDb(&tx), source, provider, data, state, now)?;
        tx.commit()?;
        Ok(out)
    }

    fn record_bill_files(
        &mut self,
        source: &str,
        files: &[(String, FileRecord)],
        removed: &[String],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        bills::record_files(&SqliteDb(&tx), source, files, removed, now)?;
        tx.commit()?;
        Ok(())
    }

    fn bill_usage(&self, q: &BillQuery) -> Result<Vec<UsageRow>, StoreError> {
        bills::usage(&SqliteDb(&self.conn), q)
    }

    fn bill_spend(&self, q: &BillQuery) -> Result<Vec<SpendRow>, StoreError> {
        bills::spend(&SqliteDb(&self.conn), q)
    }

    fn bill_commitments(
        &self,
        providers: &[String],
        since: i64,
        until: i64,
    ) -> Result<Vec<CommitmentRecord>, StoreError> {
        bills::commitments(&SqliteDb(&self.conn), providers, since, until)
    }

    fn bill_coverage(
        &self,
        providers: &[String],
        since: i64,
        until: i64,
    ) -> Result<Vec<CoverageRow>, StoreError> {
        bills::coverage(&SqliteDb(&self.conn), providers, since, until)
    }

    fn count_bill_periods_before(&self, before: &str) -> Result<u64, StoreError> {
        bills::count_periods_before(&SqliteDb(&self.conn), before)
    }

    fn prune_bill_periods_before(&mut self, before: &str) -> Result<u64, StoreError> {
        let tx = self.conn.transaction()?;
        let n = bills::prune_periods_before(&SqliteDb(&tx), before)?;
        tx.commit()?;
        Ok(n)
    }

    fn bill_usage_span(&self) -> Result<Option<(i64, i64)>, StoreError> {
        bills::usage_span(&SqliteDb(&self.conn))
    }

    fn bill_spend_span(
        &self,
    ) -> Result<std::collections::BTreeMap<String, (i64, i64)>, StoreError> {
        bills::spend_span(&SqliteDb(&self.conn))
    }

    fn bill_commitment_latest(
        &self,
    ) -> Result<Vec<crate::store::bills::LatestCommitmentHour>, StoreError> {
        bills::commitment_latest(&SqliteDb(&self.conn))
    }

    fn bill_commitment_days(
        &self,
        since: i64,
        until: i64,
    ) -> Result<Vec<crate::store::bills::CommitmentDay>, StoreError> {
        bills::commitment_days(&SqliteDb(&self.conn), since, until)
    }

    fn gpu_catalog(&self, provider: &str) -> Result<GpuCatalog, StoreError> {
        bills::gpu_catalog(&SqliteDb(&self.conn), provider)
    }
}
