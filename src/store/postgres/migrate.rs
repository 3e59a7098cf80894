//! Migrations on PostgreSQL: the same steps as SQLite's, tracked in
//! `gpuplan_schema`. Replicas starting together serialize on an advisory
//! lock held for each step's transaction, so each step runs once.

use deadpool_postgres::Object;

use super::PgPool;
use crate::store::StoreError;
use crate::store::migrations::{POSTGRES as MIGRATIONS, latest_version};

/// The advisory lock key migrations take (any constant no duty uses).
const MIGRATION_LOCK: i64 = 0x6770_7570_6c61_6e00;

pub(super) fn run(pool: &PgPool, conn: &mut Object) -> Result<(), StoreError> {
    let fail = |e: &tokio_postgres::Error| pool.error(e);
    loop {
        let tx = pool.block(conn.transaction()).map_err(|e| fail(&e))?;
        // Under the lock, so that replicas starting together on an empty
        // database do not race to create the version table either.
        pool.block(tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]))
            .map_err(|e| fail(&e))?;
        pool.block(
            tx.batch_execute("CREATE TABLE IF NOT EXISTS gpuplan_schema (version BIGINT NOT NULL)"),
        )
        .map_err(|e| fail(&e))?;
        let found: i64 = pool
            .block(tx.query_opt("SELECT version FROM gpuplan_schema", &[]))
            .map_err(|e| fail(&e))?
            .map_or(0, |r| r.get(0));
        if found > latest_version() {
            return Err(StoreError::TooNew {
                path: pool.shown.clone(),
                found,
                known: latest_version(),
            });
        }
        if found == latest_version() {
            return Ok(());
        }
        let (name, sql) = MIGRATIONS[usize::try_from(found).unwrap_or(0)];
        let step = |e: tokio_postgres::Error| StoreError::Migration {
            path: pool.shown.clone(),
            name,
            source: Box::new(pool.error(&e)),
        };
        pool.block(tx.batch_execute(sql)).map_err(step)?;
        pool.block(tx.execute("DELETE FROM gpuplan_schema", &[]))
            .map_err(step)?;
        pool.block(tx.execute(
            "INSERT INTO gpuplan_schema (version) VALUES ($1)",
            &[&(found + 1)],
        ))
        .map_err(step)?;
        pool.block(tx.commit()).map_err(step)?;
        tracing::info!(migration = name, store = %pool.shown, "Applied migration.");
    }
}
