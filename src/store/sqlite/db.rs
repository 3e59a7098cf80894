//! How the shared statements of `store::sql` run on SQLite: on this
//! connection or its open transaction, each statement prepared once.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql, params_from_iter};

use super::SqliteStore;
use crate::store::sql::{self, Arg, Backend, Db, Dialect, Val};
use crate::store::{Fence, StoreError};

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

    fn each_row(
        &self,
        sql: &str,
        params: &[Val],
        each: &mut dyn FnMut(&mut [Val]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut stmt = self.0.prepare_cached(&numbered(sql))?;
        let n = stmt.column_count();
        let mut rows = stmt.query(params_from_iter(params))?;
        let mut row = Vec::with_capacity(n);
        while let Some(r) = rows.next()? {
            row.clear();
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
            each(&mut row)?;
        }
        Ok(())
    }

    fn insert_rows(
        &self,
        table: &str,
        columns: &[&str],
        shared: &[Arg<'_>],
        values: &[Arg<'_>],
        skip_existing: bool,
    ) -> Result<u64, StoreError> {
        // Many rows a statement: a period's hourly usage is tens of
        // thousands of rows, and each statement's own work (bind, step,
        // reset) cost as much as the row it inserted.
        let width = columns.len().saturating_sub(shared.len()).max(1);
        let per = (MAX_INSERT_VALUES / width).clamp(1, MAX_INSERT_ROWS);
        let sql = |rows| sql::insert_sql(table, columns, shared.len(), rows, '?', skip_existing);
        let mut full = None;
        let mut inserted = 0;
        for chunk in values.chunks(per * width) {
            let rows = chunk.len() / width;
            let params = params_from_iter(shared.iter().chain(chunk));
            if rows == per {
                // One statement for every full chunk, prepared once.
                let stmt = match &mut full {
                    Some(stmt) => stmt,
                    None => full.insert(self.0.prepare(&sql(per))?),
                };
                inserted += stmt.execute(params)?;
            } else {
                inserted += self.0.prepare(&sql(rows))?.execute(params)?;
            }
        }
        Ok(inserted as u64)
    }

    fn check_fence(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }
}

/// Rows one `INSERT` of `insert_many` takes, and the bound values it may
/// hold (SQLite allows 32,766).
const MAX_INSERT_ROWS: usize = 128;
const MAX_INSERT_VALUES: usize = 4096;

impl Backend for SqliteStore {
    fn on_conn<T>(
        &self,
        f: impl FnOnce(&dyn Db) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        f(&SqliteDb(&self.conn))
    }

    fn in_transaction<T>(
        &mut self,
        f: impl FnOnce(&dyn Db) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let tx = self.conn.transaction()?;
        let out = f(&SqliteDb(&tx))?;
        tx.commit()?;
        Ok(out)
    }

    fn fence(&self) -> Option<&Fence> {
        // One SQLite daemon holds every duty itself.
        None
    }

    fn replica(&self) -> Option<&str> {
        None
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
            sql::insert_sql("t", &["a", "b", "c", "d"], 1, 2, '$', false),
            "INSERT INTO t (a, b, c, d) VALUES ($1, $2, $3, $4), ($1, $5, $6, $7)"
        );
    }
}
