//! What only the PostgreSQL backend does: replicas migrating one database
//! together, a newer schema, and a server that cannot be reached.

use crate::store::migrations::latest_version;
use crate::store::test_support::{TestDb, at, snapshot, sync};
use crate::store::{Location, Pool, StoreError};

#[test]
fn replicas_opening_one_empty_database_at_once_migrate_it_once() {
    let Some(db) = TestDb::postgres() else {
        return;
    };
    let location = db.location();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (location, barrier) = (location.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                Pool::open(&location, 0)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap().unwrap();
    }
    let pool = db.pool(0);
    assert_eq!(
        pool.raw_i64("SELECT version FROM gpuplan_schema"),
        Some(latest_version())
    );
    assert_eq!(pool.raw_i64("SELECT count(*) FROM gpuplan_schema"), Some(1));
}

#[test]
fn a_database_from_a_newer_gpuplan_is_refused() {
    let Some(db) = TestDb::postgres() else {
        return;
    };
    db.pool(0)
        .raw_execute("UPDATE gpuplan_schema SET version = 99");
    let err = Pool::open(&db.location(), 0).err().unwrap();
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
}

#[test]
fn an_unreachable_server_is_named_without_its_password() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://gpuplan:hunter2@127.0.0.1:{port}/catalog");
    let location = Location::Postgres(gpuplan_providers::secret::Secret::new(url));
    let err = Pool::open(&location, 0).err().unwrap().to_string();
    assert!(
        err.contains(&format!("postgres://gpuplan@127.0.0.1:{port}/catalog")),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "the password leaked: {err}");
}

#[test]
fn a_duty_is_held_once_and_a_deposed_holder_cannot_write() {
    use crate::store::test_support::{at, count, snapshot};
    use crate::store::{AlertState, NewPlan};
    use gpuplan_providers::Scope;

    let Some(db) = TestDb::postgres() else {
        return;
    };
    let (one, two) = (db.pool(0), db.pool(0));
    let first = one.try_take_duty("sync:aws", at(0)).unwrap().unwrap();
    assert!(
        two.try_take_duty("sync:aws", at(0)).unwrap().is_none(),
        "held by the first"
    );
    first.heartbeat(at(0)).unwrap();
    let old = first.fence().clone();
    // The first holder's session is gone (as when its process dies); the
    // duty passes on with a newer epoch.
    drop(first);
    let second = (0..100)
        .find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            two.try_take_duty("sync:aws", at(1)).unwrap()
        })
        .expect("the duty was never free again");
    assert_eq!(second.fence().epoch, old.epoch + 1);

    let run = one
        .write(|s| s.begin_run("aws", Scope::Full, at(1)))
        .unwrap();
    let refused = |e: StoreError| {
        assert!(
            matches!(e, StoreError::Fenced { held, current, .. } if held == old.epoch && current == old.epoch + 1),
            "{e}"
        )
    };
    refused(
        one.write_fenced(Some(&old), |s| {
            s.write_snapshot(run, "aws", &snapshot(2, 1.0), &[], at(1), at(1))
        })
        .unwrap_err(),
    );
    let plan = NewPlan {
        created_at: at(1),
        name: "weekly",
        inputs_hash: "h",
        status: "optimal",
        objective: None,
        problem_json: "{}",
        result_json: "{}",
    };
    refused(
        one.write_fenced(Some(&old), |s| s.save_plan(&plan))
            .unwrap_err(),
    );
    let state = AlertState {
        rule: "r".into(),
        key: "k".into(),
        fired: true,
        last_value: None,
        changed_at: at(1),
        last_fired_at: None,
    };
    refused(
        one.write_fenced(Some(&old), |s| {
            s.apply_alerts(std::slice::from_ref(&state), &[], &[], at(1))
        })
        .unwrap_err(),
    );
    assert_eq!(
        count(&one, "price_versions") + count(&one, "plans") + count(&one, "alert_state"),
        0
    );

    // The current holder writes.
    let fence = second.fence().clone();
    two.write_fenced(Some(&fence), |s| s.save_plan(&plan))
        .unwrap();
    two.write_fenced(Some(&fence), |s| {
        s.write_snapshot(run, "aws", &snapshot(2, 1.0), &[], at(1), at(1))
    })
    .unwrap();
    second.heartbeat(at(2)).unwrap();
    second.release();
    assert!(one.try_take_duty("sync:aws", at(3)).unwrap().is_some());
}

#[test]
fn the_stamp_of_a_spot_write_finds_room_on_its_series_page() {
    let Some(db) = TestDb::postgres() else {
        return;
    };
    let pool = db.pool(0);
    let mut snap = snapshot(1, 1.0);
    let observed = |zone: usize, hour: i64| gpuplan_providers::SpotObservation {
        region: "us-east-1".into(),
        zone: format!("us-east-1-z{zone}"),
        instance_type: "gpu0.xlarge".into(),
        usd_per_hour: 1.0 + hour as f64,
        observed_at: at(hour),
    };
    snap.spot_observations = (0..500).map(|z| observed(z, 0)).collect();
    sync(&pool, &snap, 0);
    // Where each series' row is: a stamp written beside it (a HOT update)
    // leaves it on its page; on a full page it moves to another one, with
    // new entries in every index and a dead row for autovacuum. One round
    // of stamps, so that the room depends little on when PostgreSQL prunes
    // what earlier rounds left.
    let page = |row: &str| format!("({row}.ctid::text::point)[0]::bigint");
    pool.raw_execute(&format!(
        "CREATE TABLE pages_before AS SELECT id, {} AS page FROM spot_series",
        page("spot_series")
    ));
    snap.spot_observations = (0..500).map(|z| observed(z, 1)).collect();
    sync(&pool, &snap, 1);
    assert_eq!(
        pool.raw_i64("SELECT count(*) FROM spot_series WHERE changed_in > 1"),
        Some(500),
        "every series is stamped"
    );
    // Measured: 17 of 500 move with the room (pages whose versions from the
    // first write, an insert and its stamp, were not yet pruned), 489
    // without it.
    let moved = pool
        .raw_i64(&format!(
            "SELECT count(*) FROM spot_series s JOIN pages_before b ON b.id = s.id
             WHERE {} <> b.page",
            page("s")
        ))
        .unwrap();
    assert!(
        moved < 100,
        "{moved} of 500 stamped rows moved to other pages"
    );
}

#[test]
fn many_calls_from_a_task_of_a_runtime_do_not_spin() {
    // The CLI calls the store on its runtime's thread; tokio lets a task poll
    // so much before it yields, and a pool call that waits past that would
    // wait forever for a turn only yielding gives it.
    let Some(db) = TestDb::postgres() else {
        return;
    };
    let pool = db.pool(0);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..1000 {
                pool.read(|s| s.catalog_generation()).unwrap();
            }
        });
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("1000 reads from a runtime's task did not end in a minute");
}
