//! Embedded, append-only migrations tracked by `PRAGMA user_version`: version N
//! means the first N steps of `store::migrations` have been applied. Each runs in its
//! own transaction together with the version bump.

use rusqlite::{Connection, TransactionBehavior};

use crate::store::StoreError;

use crate::store::migrations::{SQLITE as MIGRATIONS, latest_version};

/// Applies the migrations between the database's version and `target`.
///
/// Several processes may open one fresh file at once (the daemon and a CLI
/// command, or two replicas' readers), so each step takes the write lock first
/// and reads the version under it: whoever comes second sees the step done
/// and skips it instead of re-running `CREATE TABLE`.
pub(super) fn run(conn: &mut Connection, path: &str, target: i64) -> Result<(), StoreError> {
    let target = target.min(latest_version());
    if version(conn, path)? >= target {
        // Up to date: no write lock, so a reader never waits on the daemon's writes.
        return Ok(());
    }
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| StoreError::Open {
                path: path.to_owned(),
                source,
            })?;
        let found = version(&tx, path)?;
        if found >= target {
            return Ok(());
        }
        let (name, sql) = MIGRATIONS[found as usize];
        let fail = |source| StoreError::Migration {
            path: path.to_owned(),
            name,
            source: Box::new(source),
        };
        tx.execute_batch(sql).map_err(fail)?;
        // Foreign keys are off while migrating, so that a step may rebuild a
        // table others refer to; each step must leave every reference whole.
        let broken: i64 = tx
            .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .map_err(fail)?;
        if broken > 0 {
            return Err(StoreError::Migration {
                path: path.to_owned(),
                name,
                source: format!("{broken} rows refer to rows that are gone").into(),
            });
        }
        tx.pragma_update(None, "user_version", found + 1)
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        tracing::info!(migration = name, path, "Applied migration.");
    }
}

/// The file's schema version; `TooNew` when a newer gpuplan wrote it.
fn version(conn: &Connection, path: &str) -> Result<i64, StoreError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if found > latest_version() {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found,
            known: latest_version(),
        });
    }
    Ok(found)
}
