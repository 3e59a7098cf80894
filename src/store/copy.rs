//! `gpuplan store copy`: a whole SQLite catalog into an empty PostgreSQL one
//! (the move from one daemon to replicas), in one transaction on the target,
//! its tables then vacuumed and analyzed, and a checksum of current prices
//! read back from both sides.

use std::path::Path;

use rusqlite::types::Value;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio_postgres::types::{ToSql, Type};

use super::postgres::{PgPool, describe};
use super::{CurrentPrice, Pool, SqliteStore, Store, StoreError};

/// Every table of the catalog, parents before children. `leases` is left
/// out: it belongs to the replicas running on a catalog, not to its data; so
/// is `catalog_state`, the target's own marker for its readers' caches.
const TABLES: &[&str] = &[
    "sync_runs",
    "instance_types",
    "price_series",
    "price_versions",
    "spot_series",
    "spot_observations",
    "spot_recent",
    "availability",
    "source_versions",
    "plans",
    "alert_state",
    "alert_outbox",
    "bill_loads",
    "bill_restatements",
    "bill_corrections",
    "bill_usage_hours",
    "bill_usage_days",
    "bill_spend_days",
    "bill_commitments",
    "bill_commitment_hours",
    "bill_files",
];

/// Tables whose `id` PostgreSQL numbers from a sequence.
const WITH_IDS: &[&str] = &[
    "sync_runs",
    "price_series",
    "price_versions",
    "spot_series",
    "plans",
    "alert_outbox",
];

/// Rows sent per INSERT.
const BATCH: usize = 5000;

/// What a copy moved, and the checksums of current prices on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct CopyReport {
    /// Rows per table, in copy order.
    pub rows: Vec<(String, u64)>,
    pub current_prices: usize,
    pub source_checksum: String,
    pub target_checksum: String,
}

/// A SHA-256 over every current price, in a fixed order and text form, so
/// that two catalogs holding the same prices agree whichever backend.
///
/// # Errors
/// On a database error.
pub fn prices_checksum(store: &dyn Store) -> Result<(usize, String), StoreError> {
    let mut lines: Vec<String> = store.current_prices()?.iter().map(canonical).collect();
    lines.sort_unstable();
    let mut hash = Sha256::new();
    for line in &lines {
        hash.update(line.as_bytes());
        hash.update(b"\n");
    }
    Ok((lines.len(), hex::encode(hash.finalize())))
}

fn canonical(p: &CurrentPrice) -> String {
    format!(
        "{}|{}|{}|{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{}|{}|{}|{:?}|{}|{:?}|{:?}|{:?}|{:?}",
        p.provider,
        p.region,
        p.zone.as_deref().unwrap_or(""),
        p.instance_type,
        p.price_kind,
        p.offering_class.as_deref().unwrap_or(""),
        p.usd_per_hour,
        p.upfront_usd,
        p.recurring_usd_per_hour,
        p.observed_at,
        p.currency,
        p.fx_rate,
        p.price_scope,
        p.max_instances,
        p.available_regions.join(","),
        p.source,
        p.gpu_count,
        p.mig_profile,
        p.window,
    )
}

/// Copies the SQLite catalog at `from` into `to`, which must be a
/// PostgreSQL catalog with no data yet; then checks that both give the same
/// current prices.
///
/// # Errors
/// `Open`/`Migration` for the file, `Postgres` for the target,
/// `Corrupt` when the target holds data already or the checksums differ
/// (the copy is then rolled back or, for a checksum, reported as is).
pub fn copy_sqlite(from: &Path, to: &Pool) -> Result<CopyReport, StoreError> {
    let source = SqliteStore::open(from)?;
    let Some(pg) = to.postgres() else {
        return Err(StoreError::Corrupt(
            "the target of a copy must be a PostgreSQL catalog".to_owned(),
        ));
    };
    let rows = copy_tables(&source, pg)?;
    vacuum(pg)?;
    let (current_prices, source_checksum) = prices_checksum(&source)?;
    let (target_prices, target_checksum) = to.read(prices_checksum)?;
    if (current_prices, &source_checksum) != (target_prices, &target_checksum) {
        return Err(StoreError::Corrupt(format!(
            "after the copy the current prices differ: {current_prices} with checksum {source_checksum} in {}, {target_prices} with checksum {target_checksum} in {}",
            from.display(),
            pg.shown
        )));
    }
    Ok(CopyReport {
        rows,
        current_prices,
        source_checksum,
        target_checksum,
    })
}

fn copy_tables(source: &SqliteStore, pg: &PgPool) -> Result<Vec<(String, u64)>, StoreError> {
    // One read transaction on the file: a daemon writing to it meanwhile
    // cannot make the copy see half a sync.
    let read = source.conn.unchecked_transaction()?;
    let mut conn = pg.connection()?;
    let tx = pg.block(conn.transaction()).map_err(|e| pg.error(&e))?;
    let mut counts = Vec::new();
    for table in TABLES {
        let columns = target_columns(pg, &tx, table)?;
        let has_rows: bool = pg
            .block(tx.query_one(&format!("SELECT EXISTS (SELECT 1 FROM {table})"), &[]))
            .map_err(|e| pg.error(&e))?
            .get(0);
        if has_rows {
            return Err(StoreError::Corrupt(format!(
                "{} already holds data (table {table}); copy only into an empty catalog",
                pg.shown
            )));
        }
        let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
        let insert = format!(
            "INSERT INTO {table} ({}) SELECT * FROM unnest({})",
            names.join(", "),
            columns
                .iter()
                .enumerate()
                .map(|(i, (_, t))| format!("${}::{}[]", i + 1, t.name()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut stmt = read.prepare(&format!("SELECT {} FROM {table}", names.join(", ")))?;
        let mut rows = stmt.query([])?;
        let mut batch: Vec<Column> = columns.iter().map(|(_, t)| Column::of(t)).collect();
        let mut n = 0u64;
        let mut pending = 0usize;
        while let Some(row) = rows.next()? {
            for (i, column) in batch.iter_mut().enumerate() {
                column.push(row.get::<_, Value>(i)?, table, &columns[i].0)?;
            }
            pending += 1;
            n += 1;
            if pending == BATCH {
                send(pg, &tx, &insert, &mut batch)?;
                pending = 0;
            }
        }
        if pending > 0 {
            send(pg, &tx, &insert, &mut batch)?;
        }
        if WITH_IDS.contains(table) {
            pg.block(tx.execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id'), coalesce(max(id), 0) + 1, false) FROM {table}"
                ),
                &[],
            ))
            .map_err(|e| pg.error(&e))?;
        }
        counts.push(((*table).to_owned(), n));
    }
    // The target's state marker moves, so that a daemon already on it does
    // not keep answering from what it read of the empty catalog; its count
    // of spot writes starts past the stamps the series came with, so that a
    // reader's next read of changed series is not all of them; and it counts
    // the recent spot observations it now holds.
    pg.block(tx.execute(
        "UPDATE catalog_state
         SET generation = generation + 1, list_generation = list_generation + 1,
             spot_changes = greatest(spot_changes,
                                     (SELECT coalesce(max(changed_in), 0) FROM spot_series)),
             spot_recent_rows = (SELECT count(*) FROM spot_recent)",
        &[],
    ))
    .map_err(|e| pg.error(&e))?;
    pg.block(tx.commit()).map_err(|e| pg.error(&e))?;
    read.finish()?;
    Ok(counts)
}

/// Vacuums and analyzes the copied tables. Filled in one transaction, they
/// have no statistics for the planner and no page marked all-visible, so
/// every index-only scan reads the table too, until autovacuum comes round:
/// on a catalog of tens of millions of observations that is many minutes in
/// which a daemon on the copy answers slowly and competes with the vacuum.
fn vacuum(pg: &PgPool) -> Result<(), StoreError> {
    let conn = pg.connection()?;
    pg.block(conn.batch_execute(&format!("VACUUM (ANALYZE) {}", TABLES.join(", "))))
        .map_err(|e| StoreError::Postgres {
            at: pg.shown.clone(),
            message: format!(
                "the copy is committed, but VACUUM (ANALYZE) of its tables failed (run it there by hand): {}",
                describe(&e)
            ),
        })
}

/// The target table's columns and their types, in table order.
fn target_columns(
    pg: &PgPool,
    tx: &deadpool_postgres::Transaction<'_>,
    table: &str,
) -> Result<Vec<(String, Type)>, StoreError> {
    // A query of every column gives their types.
    let rows = pg
        .block(tx.query(
            "SELECT column_name FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
            &[&table],
        ))
        .map_err(|e| pg.error(&e))?;
    let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let probe = pg
        .block(tx.prepare(&format!("SELECT {} FROM {table} LIMIT 0", names.join(", "))))
        .map_err(|e| pg.error(&e))?;
    Ok(names
        .into_iter()
        .zip(probe.columns().iter().map(|c| c.type_().clone()))
        .collect())
}

fn send(
    pg: &PgPool,
    tx: &deadpool_postgres::Transaction<'_>,
    insert: &str,
    batch: &mut [Column],
) -> Result<(), StoreError> {
    let params: Vec<&(dyn ToSql + Sync)> = batch.iter().map(Column::as_param).collect();
    pg.block(tx.execute(insert, &params))
        .map_err(|e| pg.error(&e))?;
    for column in batch {
        column.clear();
    }
    Ok(())
}

/// One column of a batch, typed as the target column is.
enum Column {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Text(Vec<Option<String>>),
}

impl Column {
    fn of(t: &Type) -> Self {
        if *t == Type::INT8 {
            Self::Int(Vec::new())
        } else if *t == Type::FLOAT8 {
            Self::Float(Vec::new())
        } else {
            Self::Text(Vec::new())
        }
    }

    fn push(&mut self, value: Value, table: &str, column: &str) -> Result<(), StoreError> {
        let mismatch = |v: &Value| {
            StoreError::Corrupt(format!(
                "{table}.{column} holds {v:?}, which the PostgreSQL column cannot take"
            ))
        };
        match (self, value) {
            (Self::Int(v), Value::Null) => v.push(None),
            (Self::Float(v), Value::Null) => v.push(None),
            (Self::Text(v), Value::Null) => v.push(None),
            (Self::Int(v), Value::Integer(i)) => v.push(Some(i)),
            (Self::Float(v), Value::Real(f)) => v.push(Some(f)),
            #[allow(clippy::cast_precision_loss)]
            (Self::Float(v), Value::Integer(i)) => v.push(Some(i as f64)),
            (Self::Text(v), Value::Text(s)) => v.push(Some(s)),
            (_, other) => return Err(mismatch(&other)),
        }
        Ok(())
    }

    fn as_param(&self) -> &(dyn ToSql + Sync) {
        match self {
            Self::Int(v) => v,
            Self::Float(v) => v,
            Self::Text(v) => v,
        }
    }

    fn clear(&mut self) {
        match self {
            Self::Int(v) => v.clear(),
            Self::Float(v) => v.clear(),
            Self::Text(v) => v.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_of_the_schema_is_copied_but_the_leases_and_the_state_marker() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("c.db")).unwrap();
        let mut stmt = store
            .conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            )
            .unwrap();
        let mut schema: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        schema.retain(|t| t != "leases" && t != "catalog_state");
        schema.sort();
        let mut copied: Vec<String> = TABLES.iter().map(|t| (*t).to_owned()).collect();
        copied.sort();
        assert_eq!(schema, copied);
    }
}
