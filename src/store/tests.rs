use gpuplan_providers::{AvailabilityRecord, AvailabilitySignal, Scope};
use tempfile::TempDir;

use super::test_support::{
    at, conn, count, last_good_run_id, open_at_version, schema_version, snapshot,
};
use super::*;

fn temp_store() -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("catalog.db")).unwrap();
    (dir, store)
}

fn sync(store: &mut Store, snap: &gpuplan_providers::Snapshot, hour: i64) -> WriteStats {
    let run = store
        .begin_run("aws", gpuplan_providers::Scope::Full, at(hour))
        .unwrap();
    store
        .write_snapshot(run, "aws", snap, at(hour), at(hour))
        .unwrap()
}

#[test]
fn a_new_database_gets_every_migration_and_reopens_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let store = Store::open(&path).unwrap();
    assert_eq!(schema_version(&store), migrate::latest_version());
    let mode: String = conn(&store)
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = conn(&store)
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 1);
    drop(store);
    let again = Store::open(&path).unwrap();
    assert_eq!(schema_version(&again), migrate::latest_version());
    assert_eq!(again.integrity_check().unwrap(), "ok");
}

#[test]
fn a_database_from_an_older_version_is_upgraded_in_place_keeping_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let old = open_at_version(&path, 1);
    assert_eq!(schema_version(&old), 1);
    // Rows as the first schema's writer left them.
    conn(&old)
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

    let store = Store::open(&path).unwrap();
    assert_eq!(schema_version(&store), migrate::latest_version());
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
                    Store::open(&path).map(|_| ()).map_err(|e| e.to_string())
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap().unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(schema_version(&store), migrate::latest_version());
    }
}

#[test]
fn a_database_from_a_newer_gpuplan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    let store = Store::open(&path).unwrap();
    conn(&store)
        .pragma_update(None, "user_version", 99)
        .unwrap();
    drop(store);
    let err = Store::open(&path).err().unwrap();
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("future.db"));
}

#[test]
fn the_same_snapshot_twice_adds_no_rows_and_no_versions() {
    let (_dir, mut store) = temp_store();
    let snap = snapshot(5, 1.0);
    let first = sync(&mut store, &snap, 0);
    assert_eq!(first.prices_changed, 10);
    assert_eq!(first.spot_added, 2);
    let versions = count(&store, "price_versions");
    let series = count(&store, "price_series");

    let second = sync(&mut store, &snap, 1);
    assert_eq!(
        (
            second.prices_seen,
            second.prices_changed,
            second.prices_withdrawn
        ),
        (10, 0, 0)
    );
    assert_eq!((second.spot_seen, second.spot_added), (2, 0));
    assert_eq!(count(&store, "price_versions"), versions);
    assert_eq!(count(&store, "price_series"), series);
    assert_eq!(count(&store, "spot_observations"), 2);
}

#[test]
fn a_changed_price_adds_exactly_one_version_and_becomes_current() {
    let (_dir, mut store) = temp_store();
    let mut snap = snapshot(5, 1.0);
    sync(&mut store, &snap, 0);
    let versions = count(&store, "price_versions");

    snap.prices[4].usd_per_hour = 9.5;
    snap.prices[4].recurring_usd_per_hour = 9.5;
    let stats = sync(&mut store, &snap, 1);
    assert_eq!(stats.prices_changed, 1);
    assert_eq!(count(&store, "price_versions"), versions + 1);

    let current = store.current_prices().unwrap();
    let changed = current
        .iter()
        .find(|p| p.instance_type == "gpu2.xlarge" && p.price_kind == "on_demand")
        .unwrap();
    assert_eq!(changed.usd_per_hour, 9.5);
    let history: i64 = conn(&store)
        .query_row(
            "SELECT count(*) FROM price_versions v JOIN price_series s ON s.id = v.series_id
             WHERE s.instance_type = 'gpu2.xlarge' AND s.price_kind = 'on_demand'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(history, 2);
}

#[test]
fn a_price_no_longer_listed_is_withdrawn_and_can_come_back() {
    let (_dir, mut store) = temp_store();
    let full = snapshot(3, 1.0);
    sync(&mut store, &full, 0);
    let mut fewer = full.clone();
    fewer.prices.retain(|p| p.instance_type != "gpu1.xlarge");
    let stats = sync(&mut store, &fewer, 1);
    assert_eq!(stats.prices_withdrawn, 2);
    assert!(
        store
            .current_prices()
            .unwrap()
            .iter()
            .all(|p| p.instance_type != "gpu1.xlarge")
    );

    let back = sync(&mut store, &full, 2);
    assert_eq!(back.prices_changed, 2);
    assert_eq!(store.current_prices().unwrap().len(), 3 * 2 + 1);
}

#[test]
fn a_spot_history_snapshot_leaves_prices_and_availability_alone() {
    let (_dir, mut store) = temp_store();
    let mut full = snapshot(3, 1.0);
    full.availability.push(AvailabilityRecord {
        region: "us-east-1".into(),
        zone: None,
        instance_type: "gpu0.xlarge".into(),
        signal: AvailabilitySignal::InterruptionBucket(2),
    });
    sync(&mut store, &full, 0);
    let mut spot_only = snapshot(1, 6.0);
    spot_only.scope = Scope::SpotHistory;
    spot_only.prices.clear();
    for o in &mut spot_only.spot_observations {
        o.observed_at += chrono::Duration::hours(2);
    }
    let stats = sync(&mut store, &spot_only, 1);
    assert_eq!((stats.spot_added, stats.prices_withdrawn), (2, 0));
    assert_eq!(count(&store, "availability"), 1);
    // Three list prices x 2 kinds, plus the newest spot observation.
    let current = store.current_prices().unwrap();
    assert_eq!(current.len(), 7);
    let spot = current.iter().find(|p| p.price_kind == "spot").unwrap();
    assert_eq!(spot.usd_per_hour, 3.0);
    assert_eq!(spot.observed_at, Some(at(3)));
}

#[test]
fn an_error_half_way_through_a_snapshot_stores_none_of_it() {
    let (_dir, mut store) = temp_store();
    sync(&mut store, &snapshot(10, 1.0), 0);
    let before = store.current_prices().unwrap();
    let versions = count(&store, "price_versions");

    // New prices for every type, but one in the second half violates the schema.
    let mut bad = snapshot(10, 2.0);
    bad.prices[15].upfront_usd = -1.0;
    let run = store
        .begin_run("aws", gpuplan_providers::Scope::Full, at(1))
        .unwrap();
    let err = store
        .write_snapshot(run, "aws", &bad, at(1), at(1))
        .unwrap_err();
    assert!(matches!(err, StoreError::Db(_)), "{err}");

    assert_eq!(store.current_prices().unwrap(), before);
    assert_eq!(count(&store, "price_versions"), versions);
    let status: String = conn(&store)
        .query_row("SELECT status FROM sync_runs WHERE id = ?1", [run], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(status, "running");
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn spot_history_includes_the_price_in_force_at_the_window_start() {
    let (_dir, mut store) = temp_store();
    sync(&mut store, &snapshot(1, 3.0), 0);
    let points = store
        .spot_history(
            "gpu0.xlarge",
            None,
            None,
            None,
            at(0) + chrono::Duration::minutes(30),
            None,
        )
        .unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0].observed_at, at(0));
    let none = store
        .spot_history("gpu9.xlarge", None, None, None, at(0), None)
        .unwrap();
    assert!(none.is_empty());
    // A bounded read answers up to its limit and refuses past it.
    let since = at(0) + chrono::Duration::minutes(30);
    let read = |limit| store.spot_history("gpu0.xlarge", None, None, None, since, Some(limit));
    assert_eq!(read(2).unwrap().len(), 2);
    assert!(matches!(
        read(1),
        Err(StoreError::TooLarge { limit: 1, .. })
    ));
}

#[test]
fn sync_runs_record_counts_and_failures() {
    let (_dir, mut store) = temp_store();
    sync(&mut store, &snapshot(2, 1.0), 0);
    let failed = store
        .begin_run("aws", gpuplan_providers::Scope::Full, at(1))
        .unwrap();
    store.fail_run(failed, at(1), "aws: HTTP 500").unwrap();
    let runs = store.sync_runs(10).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].status, "failed");
    assert_eq!(runs[0].error.as_deref(), Some("aws: HTTP 500"));
    assert_eq!(
        (runs[1].status.as_str(), runs[1].stats.prices_seen),
        ("ok", 4)
    );
    assert_eq!(last_good_run_id(&store, "aws"), Some(runs[1].id));
    assert_eq!(store.last_good_syncs().unwrap().get("aws"), Some(&at(0)));
}

#[test]
fn the_catalog_generation_changes_when_an_older_run_finishes_last() {
    let (_dir, mut store) = temp_store();
    let early = store
        .begin_run("azure", gpuplan_providers::Scope::Full, at(0))
        .unwrap();
    let late = store
        .begin_run("file:x", gpuplan_providers::Scope::Full, at(0))
        .unwrap();
    store
        .write_snapshot(late, "file:x", &snapshot(1, 1.0), at(0), at(0))
        .unwrap();
    let after_late = store.catalog_generation().unwrap();
    store
        .write_snapshot(early, "azure", &snapshot(1, 2.0), at(0), at(1))
        .unwrap();
    assert_ne!(store.catalog_generation().unwrap(), after_late);
}

/// A catalog with a year and more of history: prices at days 0, 10 and 400,
/// spot observations along the way, a failed run, plans and alert messages.
fn aged_store() -> (TempDir, Store) {
    let (dir, mut store) = temp_store();
    for (day, base, spot_hours) in [
        (0, 1.0, vec![0, 1]),
        (10, 2.0, vec![240, 241]),
        (400, 3.0, vec![9600]),
    ] {
        let mut snap = snapshot(2, base);
        snap.spot_observations = spot_hours
            .into_iter()
            .map(|h| gpuplan_providers::SpotObservation {
                region: "us-east-1".into(),
                zone: "us-east-1a".into(),
                instance_type: "gpu0.xlarge".into(),
                usd_per_hour: 0.5 + h as f64 / 1e4,
                observed_at: at(h),
            })
            .collect();
        sync(&mut store, &snap, day * 24);
    }
    let failed = store.begin_run("aws", Scope::Full, at(24)).unwrap();
    store.fail_run(failed, at(25), "HTTP 503").unwrap();
    for (name, day) in [("a", 0), ("a", 5), ("b", 0), ("a", 400)] {
        conn(&store)
            .execute(
                "INSERT INTO plans (created_at, name, inputs_hash, status, problem_json, result_json)
                 VALUES (?1, ?2, 'h', 'optimal', '{}', '{}')",
                rusqlite::params![ts(at(day * 24)), name],
            )
            .unwrap();
    }
    for (key, created, delivered) in [
        ("old", 0, Some(1)),
        ("pending", 0, None),
        ("recent", 399, Some(399)),
    ] {
        conn(&store)
            .execute(
                "INSERT INTO alert_outbox (idempotency_key, rule, channel, payload_json, created_at, next_attempt_at, delivered_at)
                 VALUES (?1, 'r', 'c', '{}', ?2, ?2, ?3)",
                rusqlite::params![key, ts(at(created * 24)), delivered.map(|d: i64| ts(at(d * 24)))],
            )
            .unwrap();
    }
    (dir, store)
}

#[test]
fn pruning_deletes_old_history_in_batches_and_keeps_what_is_current() {
    let (dir, store) = aged_store();
    let path = dir.path().join("catalog.db");
    let current = store.current_prices().unwrap();
    drop(store);
    let pool = Pool::open(&path, 1).unwrap();
    let now = at(401 * 24);
    let retention = Retention::default();
    let expected = PruneCounts {
        // Spot at hours 0, 1 and 240; 241 was in force at the cutoff.
        spot_observations: 3,
        // Day 0's four versions were superseded on day 10, before the cutoff.
        price_versions: 4,
        // The failed run; day 0's run still names the instance types it found.
        sync_runs: 1,
        // Plan "a" of days 0 and 5; "b" is the newest of its name.
        plans: 2,
        // Delivered on day 1; the undelivered one stays.
        alert_messages: 1,
    };
    assert_eq!(prune(&pool, &retention, now, true).unwrap(), expected);
    assert_eq!(prune(&pool, &retention, now, false).unwrap(), expected);
    assert_eq!(prune(&pool, &retention, now, false).unwrap().total(), 0);
    pool.read(|s| {
        assert_eq!(s.current_prices().unwrap(), current);
        let pending: i64 = conn(s)
            .query_row(
                "SELECT count(*) FROM alert_outbox WHERE delivered_at IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(pending, 1);
        assert_eq!(s.integrity_check().unwrap(), "ok");
    });

    // Whatever the settings: a second of history, long after the last sync.
    let second = Some(std::time::Duration::from_secs(1));
    let harsh = Retention {
        spot_history: second,
        price_history: second,
        sync_runs: second,
        plans: second,
        delivered_alerts: second,
    };
    prune(&pool, &harsh, at(100_000), false).unwrap();
    pool.read(|s| {
        assert_eq!(s.current_prices().unwrap(), current);
        let points = s
            .spot_history("gpu0.xlarge", None, None, None, at(0), None)
            .unwrap();
        assert_eq!(points.len(), 1, "the newest observation of the pool stays");
        assert_eq!(points[0].observed_at, at(9600));
        assert_eq!(count(s, "plans"), 2, "the newest plan of each name stays");
        assert!(last_good_run_id(s, "aws").is_some());
        assert_eq!(s.last_good_syncs().unwrap()["aws"], at(9600));
    });
}

#[test]
fn a_large_prune_goes_in_batches() {
    let (dir, mut store) = temp_store();
    let mut snap = snapshot(1, 1.0);
    snap.spot_observations = (0..prune::BATCH as i64 * 2 + 10)
        .map(|m| gpuplan_providers::SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: 1.0,
            observed_at: at(0) + chrono::Duration::minutes(m),
        })
        .collect();
    sync(&mut store, &snap, 0);
    let cutoff = at(1000);
    assert_eq!(
        store
            .prune_batch(Prunable::SpotObservations, cutoff, prune::BATCH)
            .unwrap(),
        prune::BATCH
    );
    drop(store);
    let pool = Pool::open(&dir.path().join("catalog.db"), 0).unwrap();
    let retention = Retention {
        spot_history: Some(std::time::Duration::from_secs(3600)),
        ..Retention::default()
    };
    let counts = prune(&pool, &retention, at(1001), false).unwrap();
    assert_eq!(counts.spot_observations, prune::BATCH as u64 + 9);
    pool.read(|s| assert_eq!(count(s, "spot_observations"), 1));
}

#[test]
fn gcp_accelerator_prices_of_an_older_catalog_become_gpu_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let old = open_at_version(&path, 8);
    conn(&old)
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
    let store = Store::open(&path).unwrap();
    let scopes: Vec<(String, String)> = conn(&store)
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
