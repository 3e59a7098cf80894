//! What only the SQLite backend does: upgrading files older gpuplans left,
//! WAL, several processes opening one file.

use std::path::Path;

use super::SqliteStore;
use crate::store::migrations::latest_version;
use crate::store::{Reads, StoreError};

fn schema_version(store: &SqliteStore) -> i64 {
    store
        .conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

fn count(store: &SqliteStore, table: &str) -> i64 {
    store
        .conn
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// Opens a database stopped at an older schema version, as an older gpuplan left it.
fn open_at_version(path: &Path, version: i64) -> SqliteStore {
    SqliteStore::open_at_version(path, version).unwrap()
}

#[test]
fn a_new_database_gets_every_migration_and_reopens_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_version(&store), latest_version());
    let mode: String = store
        .conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = store
        .conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 1);
    drop(store);
    let again = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_version(&again), latest_version());
    assert_eq!(again.integrity_check().unwrap(), "ok");
}

#[test]
fn a_database_from_an_older_version_is_upgraded_in_place_keeping_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let old = open_at_version(&path, 1);
    assert_eq!(schema_version(&old), 1);
    // Rows as the first schema's writer left them.
    old.conn
        .execute_batch(
            "INSERT INTO sync_runs (id, source, started_at, finished_at, status, prices_seen)
                 VALUES (1, 'aws', '2027-01-15T08:00:00.000000Z', '2027-01-15T08:00:01.000000Z', 'ok', 1);
             INSERT INTO instance_types VALUES ('aws', 'p5.48xlarge', 'H100-80GB', 8, 80, 192, 2048, 1);
             INSERT INTO price_series (id, provider, region, instance_type, price_kind)
                 VALUES (1, 'aws', 'us-east-1', 'p5.48xlarge', 'on_demand');
             INSERT INTO price_versions (series_id, sync_run_id, valid_from, usd_per_hour, upfront_usd,
                 recurring_usd_per_hour) VALUES (1, 1, '2027-01-15T08:00:00.000000Z', 98.32, 0, 98.32);
             INSERT INTO spot_observations VALUES
                 ('aws', 'us-east-1', 'us-east-1a', 'p5.48xlarge', '2027-01-15T07:00:00.000000Z', 40.1),
                 ('aws', 'us-east-1', 'us-east-1a', 'p5.48xlarge', '2027-01-15T07:30:00.000000Z', 41.5);",
        )
        .unwrap();
    drop(old);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_version(&store), latest_version());
    assert_eq!(count(&store, "plans"), 0);
    // The spot series registry (migration 3) was filled from the old history.
    assert_eq!(count(&store, "spot_series"), 1);
    let current = store.current_prices().unwrap();
    assert_eq!(current.len(), 2);
    let spot = current.iter().find(|p| p.price_kind == "spot").unwrap();
    assert_eq!(spot.usd_per_hour, 41.5);
}

#[test]
fn processes_opening_one_fresh_file_at_once_migrate_it_once() {
    // The daemon and a CLI command often open a new catalog together; the one
    // that comes second must see the migrations done, not re-run CREATE TABLE.
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("race-{round}.db"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    SqliteStore::open(&path)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap().unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(schema_version(&store), latest_version());
    }
}

#[test]
fn a_database_from_a_newer_gpuplan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    let store = SqliteStore::open(&path).unwrap();
    store.conn.pragma_update(None, "user_version", 99).unwrap();
    drop(store);
    let err = SqliteStore::open(&path).err().unwrap();
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("future.db"));
}

#[test]
fn gcp_accelerator_prices_of_an_older_catalog_become_gpu_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let old = open_at_version(&path, 8);
    old.conn
        .execute_batch(
            "INSERT INTO sync_runs (id, source, started_at, status) VALUES (1, 'gcp', '2026-01-01T00:00:00.000000Z', 'ok');
             INSERT INTO instance_types (provider, instance_type, gpu_model, gpu_count, first_seen_run)
                 VALUES ('gcp', 'nvidia-l4', 'L4', 1, 1), ('gcp', 'g2-standard-4', 'L4', 1, 1);
             INSERT INTO price_series (provider, region, instance_type, price_kind)
                 VALUES ('gcp', 'us-central1', 'nvidia-l4', 'on_demand'),
                        ('gcp', 'us-central1', 'g2-standard-4', 'on_demand');",
        )
        .unwrap();
    drop(old);
    let store = SqliteStore::open(&path).unwrap();
    let scopes: Vec<(String, String)> = store
        .conn
        .prepare("SELECT instance_type, price_scope FROM price_series ORDER BY instance_type")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        scopes,
        [
            ("g2-standard-4".to_owned(), "instance".to_owned()),
            ("nvidia-l4".to_owned(), "gpu_only".to_owned())
        ]
    );
}

#[test]
fn gpu_counts_of_an_older_catalog_become_numbers_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let old = open_at_version(&path, 14);
    old.conn
        .execute_batch(
            "INSERT INTO sync_runs (id, source, started_at, status) VALUES (1, 'aws', '2026-01-01T00:00:00.000000Z', 'ok');
             INSERT INTO instance_types (provider, instance_type, gpu_model, gpu_count, gpu_memory_gib, vcpus, memory_gib, first_seen_run, gpu_form_factor)
                 VALUES ('aws', 'p5.48xlarge', 'H100-80GB', 8, 80.0, 192, 2048.0, 1, 'sxm');
             INSERT INTO price_series (provider, region, instance_type, price_kind)
                 VALUES ('aws', 'us-east-1', 'p5.48xlarge', 'on_demand');
             INSERT INTO price_versions (series_id, sync_run_id, valid_from, usd_per_hour, upfront_usd, recurring_usd_per_hour)
                 VALUES (1, 1, '2026-01-01T00:00:00.000000Z', 98.32, 0, 98.32);",
        )
        .unwrap();
    drop(old);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_version(&store), latest_version());
    let prices = store.current_prices().unwrap();
    assert_eq!(prices.len(), 1);
    let p = &prices[0];
    assert_eq!(
        (
            p.gpu_count,
            p.gpu_memory_gib,
            p.vcpus,
            p.gpu_form_factor.as_deref(),
            p.usd_per_hour
        ),
        (8.0, Some(80.0), Some(192), Some("sxm"), 98.32)
    );
    // The rebuilt table is still the one prices refer to, and takes slices.
    let orphan = store.conn.execute(
        "INSERT INTO price_series (provider, region, instance_type, price_kind)
         VALUES ('aws', 'us-east-1', 'g6f.large', 'on_demand')",
        [],
    );
    assert!(orphan.is_err(), "a price of an unknown type was accepted");
    store
        .conn
        .execute(
            "INSERT INTO instance_types (provider, instance_type, gpu_model, gpu_count, first_seen_run)
             VALUES ('aws', 'g6f.large', 'L4', 0.125, 1)",
            [],
        )
        .unwrap();
    let share: f64 = store
        .conn
        .query_row(
            "SELECT gpu_count FROM instance_types WHERE instance_type = 'g6f.large'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(share, 0.125);
}
