//! `gpuplan store copy`: a SQLite catalog into an empty PostgreSQL one. Needs
//! a server (`GPUPLAN_TEST_PG_URL`, started by `.ci/run`); the refusals of
//! bad flags run without one.

mod support;

use std::process::Output;

use chrono::{DateTime, Utc};
use gpuplan::store::scratch::ScratchDatabase;
use gpuplan::store::{
    AlertState, Location, NewMessage, NewPlan, Pool, Reads as _, SqliteStore, Writes as _,
};
use gpuplan_providers::file::{SheetFormat, parse_sheet};
use gpuplan_providers::secret::Secret;
use gpuplan_providers::{Currency, Scope, SpotObservation};
use serde_json::Value;

const SHEET: &str = "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\n\
                     onprem-fra,dgx-h100,H100,8,on_demand,18.4\n\
                     onprem-fra,dgx-h100,H100,8,reserved_1y,14\n\
                     onprem-fra,l4-box,L4,1,on_demand,0.8\n";

fn at(hour: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + hour * 3600, 0).unwrap()
}

/// A catalog with two syncs (one price changed), spot history in CNY, a
/// plan and a queued alert.
fn seeded(path: &std::path::Path) {
    let mut store = SqliteStore::open(path).unwrap();
    let mut snap = parse_sheet("file:onprem", "onprem.csv", SHEET, SheetFormat::Csv).unwrap();
    snap.currency = Currency {
        code: "CNY".into(),
        per_usd: 7.2,
    };
    snap.spot_observations = (0..300)
        .map(|h| SpotObservation {
            region: "onprem-fra".into(),
            zone: format!("onprem-fra-{}", h % 3),
            instance_type: "dgx-h100".into(),
            usd_per_hour: 5.0 + f64::from(h % 7) / 10.0,
            observed_at: at(i64::from(h)),
        })
        .collect();
    for hour in [0, 300] {
        if hour > 0 {
            snap.prices[0].usd_per_hour = 17.9;
            snap.prices[0].recurring_usd_per_hour = 17.9;
        }
        let run = store
            .begin_run("file:onprem", Scope::Full, at(hour))
            .unwrap();
        store
            .write_snapshot(run, "file:onprem", &snap, &[], at(hour), at(hour))
            .unwrap();
    }
    store
        .save_plan(&NewPlan {
            created_at: at(301),
            name: "weekly",
            inputs_hash: "h",
            status: "optimal",
            objective: Some(1.0),
            problem_json: "{}",
            result_json: r#"{"cost":1}"#,
        })
        .unwrap();
    use gpuplan::store::Alerts as _;
    store
        .apply_alerts(
            &[AlertState {
                rule: "cheap".into(),
                key: "k".into(),
                fired: true,
                last_value: Some(1.0),
                changed_at: at(301),
                last_fired_at: Some(at(301)),
            }],
            &[NewMessage {
                idempotency_key: "cheap/k/1".into(),
                rule: "cheap".into(),
                channel: "log".into(),
                payload: serde_json::json!({"message": "cheap"}),
            }],
            &[],
            at(301),
        )
        .unwrap();
}

fn copy(args: &[&str], env: &[(&str, &str)]) -> Output {
    support::gpuplan()
        .args(["store", "copy"])
        .args(args)
        .env_remove("GPUPLAN_STORE_URL")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

#[test]
fn a_sqlite_catalog_copies_whole_and_the_checksums_agree() {
    let Some(db) = ScratchDatabase::create() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("catalog.db");
    seeded(&file);
    let from = format!("sqlite:{}", file.display());
    // The URL from the environment, as the daemon's config would take it.
    let out = copy(
        &["--from", &from, "--json"],
        &[("GPUPLAN_STORE_URL", db.url())],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["source_checksum"], report["target_checksum"]);
    let rows: std::collections::BTreeMap<String, u64> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_str().unwrap().to_owned(), r[1].as_u64().unwrap()))
        .collect();
    // New observations wait in spot_recent until a merge; both tables go.
    assert_eq!(rows["spot_observations"] + rows["spot_recent"], 300);
    assert_eq!(rows["sync_runs"], 2);
    assert_eq!(rows["plans"], 1);
    assert_eq!(rows["alert_outbox"], 1);

    // Vacuumed and analyzed: a daemon on the copy has the planner's
    // statistics from its first query, not after autovacuum comes round.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let not_vacuumed: Vec<String> = runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let copied = [
            "spot_observations",
            "spot_series",
            "price_versions",
            "sync_runs",
        ];
        let vacuumed: Vec<String> = client
            .query(
                "SELECT relname::text FROM pg_stat_user_tables
                 WHERE last_vacuum IS NOT NULL AND last_analyze IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        copied
            .into_iter()
            .filter(|t| !vacuumed.iter().any(|v| v == t))
            .map(str::to_owned)
            .collect()
    });
    assert!(not_vacuumed.is_empty(), "not vacuumed: {not_vacuumed:?}");

    let sqlite = SqliteStore::open(&file).unwrap();
    let pool = Pool::open(&Location::Postgres(Secret::new(db.url())), 0).unwrap();
    let sorted = |mut p: Vec<gpuplan::store::CurrentPrice>| {
        p.sort_by(|a, b| {
            (&a.instance_type, &a.price_kind, &a.zone).cmp(&(
                &b.instance_type,
                &b.price_kind,
                &b.zone,
            ))
        });
        p
    };
    assert_eq!(
        sorted(pool.read(|s| s.current_prices()).unwrap()),
        sorted(sqlite.current_prices().unwrap())
    );
    let history = |s: &dyn gpuplan::store::Store| {
        s.spot_history("dgx-h100", None, None, None, at(0), None)
            .unwrap()
    };
    assert_eq!(pool.read(history), history(&sqlite));
    // The target's state moved past the empty catalog a daemon may have
    // read, and its count of spot writes past the stamps the series brought.
    let source = sqlite.catalog_generation().unwrap();
    let target = pool.read(|s| s.catalog_generation()).unwrap();
    assert!(source.spot > 0, "the seeded catalog has spot writes");
    assert!(target.spot > 0, "{target:?} after {source:?}");
    assert!(target.data > 0 && target.list_prices > 0, "{target:?}");
    assert!(
        pool.read(|s| s.spot_quotes_changed_after(target.spot))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        pool.read(|s| s.sync_runs(10)).unwrap(),
        sqlite.sync_runs(10).unwrap()
    );
    assert_eq!(pool.read(|s| s.message_history(10)).unwrap(), {
        use gpuplan::store::Alerts as _;
        sqlite.message_history(10).unwrap()
    });
    // New rows continue after the copied ids.
    let plan = pool
        .write(|s| {
            s.save_plan(&NewPlan {
                created_at: at(302),
                name: "weekly",
                inputs_hash: "h",
                status: "optimal",
                objective: None,
                problem_json: "{}",
                result_json: "{}",
            })
        })
        .unwrap();
    assert_eq!(plan, 2);

    // A second copy finds data there and changes nothing.
    let again = copy(&["--from", &from, "--to", db.url()], &[]);
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("already holds data (table sync_runs)"),
        "{err}"
    );
    assert_eq!(pool.read(|s| s.sync_runs(10)).unwrap().len(), 2);
}

#[test]
fn bad_flags_are_refused_by_name_without_echoing_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("catalog.db");
    SqliteStore::open(&file).unwrap();
    let from = format!("sqlite:{}", file.display());
    for (args, flag) in [
        (
            vec!["--from", "catalog.db", "--to", "postgres://u@h/d"],
            "--from",
        ),
        (
            vec!["--from", "sqlite:/no/such.db", "--to", "postgres://u@h/d"],
            "--from",
        ),
        (vec!["--from", &from], "--to"),
        (
            vec!["--from", &from, "--to", "postgres://u:hunter2@h:notaport/d"],
            "--to",
        ),
    ] {
        let out = copy(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(!err.contains("hunter2"), "the password leaked: {err}");
    }
}
