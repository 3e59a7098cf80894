//! Billing aggregates on SQLite: the shared statements of `store::bills`,
//! run on this connection (or its open transaction).

use chrono::{DateTime, Utc};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql, params_from_iter};

use super::SqliteStore;
use crate::bills::aggregate::PeriodData;
use crate::store::StoreError;
use crate::store::bills::{
    self, BillQuery, Bills, CommitmentRecord, CoverageRow, FileRecord, GpuCatalog, PeriodWrite,
    SpendRow, StoredLoad, UsageRow,
};
use crate::store::sql::{self, Arg, Db, Val};

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
        shared: &[Arg<'_>],
        values: &[Arg<'_>],
    ) -> Result<(), StoreError> {
        // Many rows a statement: a period's hourly usage is tens of
        // thousands of rows, and each statement's own work (bind, step,
        // reset) cost as much as the row it inserted.
        let width = columns.len().saturating_sub(shared.len()).max(1);
        let per = (MAX_INSERT_VALUES / width).clamp(1, MAX_INSERT_ROWS);
        let sql = |rows| sql::insert_sql(table, columns, shared.len(), rows, '?');
        let mut full = None;
        for chunk in values.chunks(per * width) {
            let rows = chunk.len() / width;
            let params = params_from_iter(shared.iter().chain(chunk));
            if rows == per {
                // One statement for every full chunk, prepared once.
                let stmt = match &mut full {
                    Some(stmt) => stmt,
                    None => full.insert(self.0.prepare(&sql(per))?),
                };
                stmt.execute(params)?;
            } else {
                self.0.prepare(&sql(rows))?.execute(params)?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_many_binds_the_shared_columns_in_every_row_across_full_and_partial_chunks() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a TEXT, b INTEGER, c TEXT, d REAL)")
            .unwrap();
        // Two columns a row past the shared ones: 128 rows a statement, so
        // 300 rows are two full statements and one of 44.
        let names: Vec<String> = (0..300).map(|i| format!("row{i}")).collect();
        let values: Vec<Arg<'_>> = names
            .iter()
            .zip(0..)
            .flat_map(|(n, i)| [Arg::from(n.as_str()), Arg::from(f64::from(i) / 2.0)])
            .collect();
        let shared = [Arg::from("shared"), Arg::from(7)];
        SqliteDb(&conn)
            .insert_many("t", &["a", "b", "c", "d"], &shared, &values)
            .unwrap();
        let mut stmt = conn
            .prepare("SELECT a, b, c, d FROM t ORDER BY rowid")
            .unwrap();
        let rows: Vec<(String, i64, String, f64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), 300);
        for (i, (a, b, c, d)) in rows.into_iter().enumerate() {
            assert_eq!((a.as_str(), b), ("shared", 7));
            assert_eq!(c, format!("row{i}"));
            assert!((d - i as f64 / 2.0).abs() < 1e-12, "row {i}: {d}");
        }
    }

    #[test]
    fn insert_sql_numbers_the_shared_parameters_first_in_every_row() {
        assert_eq!(
            sql::insert_sql("t", &["a", "b", "c", "d"], 1, 2, '$'),
            "INSERT INTO t (a, b, c, d) VALUES ($1, $2, $3, $4), ($1, $5, $6, $7)"
        );
    }
}
