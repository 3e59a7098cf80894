//! What only the PostgreSQL backend does: replicas migrating one database
//! together, a newer schema, and a server that cannot be reached.

use crate::store::migrations::latest_version;
use crate::store::test_support::TestDb;
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
