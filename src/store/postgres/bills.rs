//! Billing aggregates on PostgreSQL: the shared statements of
//! `store::bills`, on a pooled connection or inside its transaction, with
//! loads fenced like every duty's writes.

use std::collections::BTreeMap;

use bytes::BytesMut;
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::{PgStore, PgTx, get};
use crate::bills::aggregate::PeriodData;
use crate::store::bills::{
    self, BillQuery, Bills, CommitmentRecord, CoverageRow, FileRecord, GpuCatalog, PeriodWrite,
    SpendRow, StoredLoad, UsageRow,
};
use crate::store::sql::{self, Arg, Db, Val};
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
            _ => get::<Option<String>>(row, i)?.into(),
        });
    }
    Ok(out)
}

/// Rows per INSERT: PostgreSQL binds at most 65535 parameters.
const INSERT_ROWS: usize = 1000;

/// Inserts rows a chunk per statement (see [`Db::insert_many`]).
fn insert_chunks(
    table: &str,
    columns: &[&str],
    shared: &[Arg<'_>],
    values: &[Arg<'_>],
    execute: impl Fn(&str, super::Params<'_>) -> Result<u64, StoreError>,
) -> Result<(), StoreError> {
    let width = columns.len().saturating_sub(shared.len()).max(1);
    for chunk in values.chunks(INSERT_ROWS * width) {
        let p: Vec<&(dyn ToSql + Sync)> = shared
            .iter()
            .chain(chunk)
            .map(|v| v as &(dyn ToSql + Sync))
            .collect();
        let sql = sql::insert_sql(table, columns, shared.len(), chunk.len() / width, '$');
        execute(&sql, &p)?;
    }
    Ok(())
}

impl Db for PgStore<'_> {
    fn exec(&self, sql: &str, p: &[Val]) -> Result<u64, StoreError> {
        self.execute(sql, &params(p))
    }

    fn rows(&self, sql: &str, p: &[Val]) -> Result<Vec<Vec<Val>>, StoreError> {
        self.query(sql, &params(p))?.iter().map(vals).collect()
    }

    fn insert_many(
        &self,
        table: &str,
        columns: &[&str],
        shared: &[Arg<'_>],
        values: &[Arg<'_>],
    ) -> Result<(), StoreError> {
        insert_chunks(table, columns, shared, values, |sql, p| {
            self.execute(sql, p)
        })
    }

    fn check_fence(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn month_of(&self, col: &str) -> String {
        month_of(col)
    }
}

fn month_of(col: &str) -> String {
    format!(
        "CAST(EXTRACT(EPOCH FROM date_trunc('month', to_timestamp({col}) AT TIME ZONE 'UTC')) AS BIGINT)"
    )
}

/// A transaction with the fence of the duty it writes for.
struct Fenced<'t, 'p, 'c> {
    tx: &'t PgTx<'p, 'c>,
    fence: Option<&'t Fence>,
}

impl Db for Fenced<'_, '_, '_> {
    fn exec(&self, sql: &str, p: &[Val]) -> Result<u64, StoreError> {
        self.tx.execute(sql, &params(p))
    }

    fn rows(&self, sql: &str, p: &[Val]) -> Result<Vec<Vec<Val>>, StoreError> {
        self.tx.query(sql, &params(p))?.iter().map(vals).collect()
    }

    fn insert_many(
        &self,
        table: &str,
        columns: &[&str],
        shared: &[Arg<'_>],
        values: &[Arg<'_>],
    ) -> Result<(), StoreError> {
        insert_chunks(table, columns, shared, values, |sql, p| {
            self.tx.execute(sql, p)
        })
    }

    fn check_fence(&self) -> Result<(), StoreError> {
        self.tx.check_fence(self.fence)
    }

    fn month_of(&self, col: &str) -> String {
        month_of(col)
    }
}

impl Bills for PgStore<'_> {
    fn bill_loads(&self, source: Option<&str>) -> Result<Vec<StoredLoad>, StoreError> {
        bills::loads(self, source)
    }

    fn bill_files(&self, source: &str) -> Result<BTreeMap<String, FileRecord>, StoreError> {
        bills::files(self, source)
    }

    fn write_bill_period(
        &mut self,
        source: &str,
        provider: &str,
        data: &PeriodData,
        state: &str,
        now: DateTime<Utc>,
    ) -> Result<PeriodWrite, StoreError> {
        let fence = self.fence.clone();
        self.transaction(|tx| {
            bills::write_period(
                &Fenced {
                    tx,
                    fence: fence.as_ref(),
                },
                source,
                provider,
                data,
                state,
                now,
            )
        })
    }

    fn record_bill_files(
        &mut self,
        source: &str,
        files: &[(String, FileRecord)],
        removed: &[String],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let fence = self.fence.clone();
        self.transaction(|tx| {
            bills::record_files(
                &Fenced {
                    tx,
                    fence: fence.as_ref(),
                },
                source,
                files,
                removed,
                now,
            )
        })
    }

    fn bill_usage(&self, q: &BillQuery) -> Result<Vec<UsageRow>, StoreError> {
        bills::usage(self, q)
    }

    fn bill_spend(&self, q: &BillQuery) -> Result<Vec<SpendRow>, StoreError> {
        bills::spend(self, q)
    }

    fn bill_commitments(
        &self,
        providers: &[String],
        since: i64,
        until: i64,
    ) -> Result<Vec<CommitmentRecord>, StoreError> {
        bills::commitments(self, providers, since, until)
    }

    fn bill_coverage(
        &self,
        providers: &[String],
        since: i64,
        until: i64,
    ) -> Result<Vec<CoverageRow>, StoreError> {
        bills::coverage(self, providers, since, until)
    }

    fn count_bill_periods_before(&self, before: &str) -> Result<u64, StoreError> {
        bills::count_periods_before(self, before)
    }

    fn prune_bill_periods_before(&mut self, before: &str) -> Result<u64, StoreError> {
        let fence = self.fence.clone();
        self.transaction(|tx| {
            bills::prune_periods_before(
                &Fenced {
                    tx,
                    fence: fence.as_ref(),
                },
                before,
            )
        })
    }

    fn bill_usage_span(&self) -> Result<Option<(i64, i64)>, StoreError> {
        bills::usage_span(self)
    }

    fn bill_spend_span(&self) -> Result<BTreeMap<String, (i64, i64)>, StoreError> {
        bills::spend_span(self)
    }

    fn bill_commitment_latest(
        &self,
    ) -> Result<Vec<crate::store::bills::LatestCommitmentHour>, StoreError> {
        bills::commitment_latest(self)
    }

    fn bill_commitment_days(
        &self,
        since: i64,
        until: i64,
    ) -> Result<Vec<crate::store::bills::CommitmentDay>, StoreError> {
        bills::commitment_days(self, since, until)
    }

    fn gpu_catalog(&self, provider: &str) -> Result<GpuCatalog, StoreError> {
        bills::gpu_catalog(self, provider)
    }
}
