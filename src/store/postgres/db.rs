//! How the shared statements of `store::sql` run on PostgreSQL: on a
//! pooled connection or inside its transaction, with a duty's writes
//! fenced. Parameters bind to the type the server infers for them.

use bytes::BytesMut;
use tokio_postgres::Row;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::{PgStore, PgTx, get};
use crate::store::sql::{self, Arg, Backend, Db, Dialect, Val};
use crate::store::{Fence, StoreError};

impl ToSql for Arg<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Self::Null => Ok(IsNull::Yes),
            Self::Int(n) => match *ty {
                Type::INT4 => i32::try_from(n)?.to_sql(ty, out),
                #[allow(clippy::cast_precision_loss)]
                Type::FLOAT8 => (n as f64).to_sql(ty, out),
                _ => n.to_sql(ty, out),
            },
            Self::Real(f) => f.to_sql(ty, out),
            Self::Text(s) => s.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl ToSql for Val {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Arg::from(self).to_sql(ty, out)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn params(vals: &[Val]) -> Vec<&(dyn ToSql + Sync)> {
    vals.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

fn vals(row: &Row) -> Result<Vec<Val>, StoreError> {
    let mut out = Vec::with_capacity(row.len());
    for (i, col) in row.columns().iter().enumerate() {
        out.push(match *col.type_() {
            Type::INT8 => get::<Option<i64>>(row, i)?.into(),
            Type::INT4 => get::<Option<i32>>(row, i)?.map(i64::from).into(),
            Type::FLOAT8 => get::<Option<f64>>(row, i)?.into(),
            Type::FLOAT4 => get::<Option<f32>>(row, i)?.map(f64::from).into(),
            Type::BOOL => get::<Option<bool>>(row, i)?.map(i64::from).into(),
            _ => get::<Option<String>>(row, i)?.into(),
        });
    }
    Ok(out)
}

/// Rows per INSERT: PostgreSQL binds at most 65535 parameters.
const INSERT_ROWS: usize = 1000;

/// A pooled connection or an open transaction, as the shared statements
/// see it.
enum PgDb<'a, 'p, 'c> {
    Conn(&'a PgStore<'p>),
    /// A transaction with the fence of the duty it writes for.
    Tx {
        tx: &'a PgTx<'p, 'c>,
        fence: Option<&'a Fence>,
    },
}

impl PgDb<'_, '_, '_> {
    fn query(&self, sql: &str, p: super::Params<'_>) -> Result<Vec<Row>, StoreError> {
        match self {
            Self::Conn(store) => store.query(sql, p),
            Self::Tx { tx, .. } => tx.query(sql, p),
        }
    }

    fn execute(&self, sql: &str, p: super::Params<'_>) -> Result<u64, StoreError> {
        match self {
            Self::Conn(store) => store.execute(sql, p),
            Self::Tx { tx, .. } => tx.execute(sql, p),
        }
    }
}

impl Db for PgDb<'_, '_, '_> {
    fn exec(&self, sql: &str, p: &[Val]) -> Result<u64, StoreError> {
        self.execute(sql, &params(p))
    }

    fn each_row(
        &self,
        sql: &str,
        p: &[Val],
        each: &mut dyn FnMut(&mut [Val]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        for row in self.query(sql, &params(p))? {
            each(&mut vals(&row)?)?;
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
        let width = columns.len().saturating_sub(shared.len()).max(1);
        let mut inserted = 0;
        for chunk in values.chunks(INSERT_ROWS * width) {
            let p: Vec<&(dyn ToSql + Sync)> = shared
                .iter()
                .chain(chunk)
                .map(|v| v as &(dyn ToSql + Sync))
                .collect();
            let sql = sql::insert_sql(
                table,
                columns,
                shared.len(),
                chunk.len() / width,
                '$',
                skip_existing,
            );
            inserted += self.execute(&sql, &p)?;
        }
        Ok(inserted)
    }

    fn check_fence(&self) -> Result<(), StoreError> {
        match self {
            Self::Conn(_) => Ok(()),
            Self::Tx { tx, fence } => tx.check_fence(*fence),
        }
    }

    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }
}

impl Backend for PgStore<'_> {
    fn on_conn<T>(
        &self,
        f: impl FnOnce(&dyn Db) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        f(&PgDb::Conn(self))
    }

    fn in_transaction<T>(
        &mut self,
        f: impl FnOnce(&dyn Db) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let fence = self.fence.clone();
        self.transaction(|tx| {
            f(&PgDb::Tx {
                tx,
                fence: fence.as_ref(),
            })
        })
    }

    fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    fn replica(&self) -> Option<&str> {
        Some(&self.pool.replica)
    }
}
