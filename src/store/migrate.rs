//! Embedded, append-only migrations tracked by `PRAGMA user_version`: version N
//! means the first N files of `migrations/` have been applied. Each runs in its
//! own transaction together with the version bump.

use rusqlite::Connection;

use super::StoreError;

const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_create_catalog",
        include_str!("../../migrations/0001_create_catalog.sql"),
    ),
    (
        "0002_create_plans_and_alerts",
        include_str!("../../migrations/0002_create_plans_and_alerts.sql"),
    ),
    (
        "0003_create_spot_series",
        include_str!("../../migrations/0003_create_spot_series.sql"),
    ),
    (
        "0004_add_alert_fired_at",
        include_str!("../../migrations/0004_add_alert_fired_at.sql"),
    ),
    (
        "0005_index_sync_runs_by_status",
        include_str!("../../migrations/0005_index_sync_runs_by_status.sql"),
    ),
    (
        "0006_add_sync_run_scope",
        include_str!("../../migrations/0006_add_sync_run_scope.sql"),
    ),
    (
        "0007_index_price_versions_by_run",
        include_str!("../../migrations/0007_index_price_versions_by_run.sql"),
    ),
    (
        "0008_create_source_versions",
        include_str!("../../migrations/0008_create_source_versions.sql"),
    ),
    (
        "0009_add_price_scope",
        include_str!("../../migrations/0009_add_price_scope.sql"),
    ),
];

pub(super) fn latest_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Applies the migrations between the database's version and `target`.
pub(super) fn run(conn: &mut Connection, path: &str, target: i64) -> Result<(), StoreError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if found > latest_version() {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found,
            known: latest_version(),
        });
    }
    for (index, (name, sql)) in MIGRATIONS.iter().enumerate().take(target as usize) {
        let version = index as i64 + 1;
        if version <= found {
            continue;
        }
        let fail = |source| StoreError::Migration {
            path: path.to_owned(),
            name,
            source,
        };
        let tx = conn.transaction().map_err(fail)?;
        tx.execute_batch(sql).map_err(fail)?;
        tx.pragma_update(None, "user_version", version)
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        tracing::info!(migration = name, path, "Applied migration.");
    }
    Ok(())
}
