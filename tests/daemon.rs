//! The daemon in-process (port 0, temp SQLite file) against local fixture
//! servers: scheduled syncs, the API, failures and recovery, shutdown, the token
//! rule, and the lock on the catalog.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use gpuplan::daemon::{self, Options};
use gpuplan::store::{Reads as _, SqliteStore};
use gpuplan_providers::test_server::{self, FixtureServer};
use gpuplan_providers::{FetchContext, Provider, ProviderError, Snapshot, async_trait};
use serde_json::Value;
use support::sheet::{SHEET, config_in, ok_count, statuses};
use support::{Daemon, JSON, gpuplan, raw, until};
use tokio::net::TcpListener;

const AZURE_1: &str = include_str!("../providers/fixtures/azure/eastus-1.json");
const AZURE_2: &str = include_str!("../providers/fixtures/azure/eastus-2.json");

/// Azure's eastus chain. Answers 500 to the first `fail` requests, and when
/// `truncate` is set its first page claims to be the last.
async fn azure(fail: usize, truncate: Arc<AtomicBool>) -> FixtureServer {
    test_server::serve(move |req, base, n| {
        if n < fail {
            return test_server::status(500, "internal error");
        }
        if req.uri.contains("$skip=6") {
            test_server::json(AZURE_2, base)
        } else if truncate.load(Ordering::SeqCst) {
            let mut page: Value = serde_json::from_str(AZURE_1).unwrap();
            page["NextPageLink"] = Value::Null;
            test_server::json(&page.to_string(), base)
        } else {
            test_server::json(AZURE_1, base)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_daemon_syncs_at_start_and_the_api_matches_the_cli() {
    let server = azure(0, Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), Some(&server.base), "[fx]\nCNY = 7.0\n");
    let d = Daemon::start(config).await;

    let (status, ready) = d.get("/readyz").await;
    assert_eq!((status, ready["ready"].as_bool()), (200, Some(true)));
    d.runs_until(|r| ok_count(r, "azure") == 1 && ok_count(r, "file:onprem") == 1)
        .await;

    let (status, api) = d.get("/v1/prices").await;
    assert_eq!(status, 200);
    assert_eq!(api.as_array().unwrap().len(), 10);
    // A sixth of an A10 is a record: its share as gpu_count, its own memory,
    // and the price of a whole-GPU hour; whole counts stay integers.
    let slice = api
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["instance_type"] == "Standard_NV6ads_A10_v5")
        .unwrap();
    assert!(
        (slice["gpu_count"].as_f64().unwrap() - 1.0 / 6.0).abs() < 1e-9,
        "{slice}"
    );
    assert_eq!(slice["gpu_memory_gib"], 4.0);
    assert!(
        (slice["usd_per_gpu_hour"].as_f64().unwrap() - 2.724).abs() < 1e-9,
        "{slice}"
    );
    let whole = api
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["instance_type"] == "Standard_NC24ads_A100_v4")
        .unwrap();
    assert_eq!(whole["gpu_count"].to_string(), "1");
    let cli = gpuplan()
        .arg("--config")
        .arg(dir.path().join("gpuplan.toml"))
        .args(["prices", "--json"])
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert_eq!(serde_json::from_slice::<Value>(&cli.stdout).unwrap(), api);

    let (_, h100) = d
        .get("/v1/prices?gpu=H100&kind=on_demand,reserved_1y")
        .await;
    assert_eq!(h100.as_array().unwrap().len(), 2);
    let (_, cheap) = d
        .get("/v1/prices?max_usd_per_gpu_hour=1&provider=azure")
        .await;
    assert_eq!(cheap.as_array().unwrap().len(), 1);
    let (_, in_cny) = d.get("/v1/prices?currency=cny").await;
    for (r, usd) in in_cny
        .as_array()
        .unwrap()
        .iter()
        .zip(api.as_array().unwrap())
    {
        assert_eq!(r["usd_per_hour"], usd["usd_per_hour"]);
        let per_hour = r["converted"]["per_hour"].as_f64().unwrap();
        assert!(
            (per_hour - 7.0 * usd["usd_per_hour"].as_f64().unwrap()).abs() < 1e-9,
            "{r}"
        );
        assert_eq!(r["converted"]["currency"], "CNY");
    }

    let (_, history) = d
        .get("/v1/spot-history?instance=p5.48xlarge&since=7d")
        .await;
    assert_eq!(history["series"], serde_json::json!([]));

    // A run is visible as `ok` in the catalog a moment before the scheduler
    // records it in the metrics, so poll (bounded) for the counter.
    until("the good Azure run in the metrics", || async {
        d.text("/metrics")
            .await
            .contains("gpuplan_sync_runs_total{source=\"azure\",result=\"ok\"} 1")
    })
    .await;
    let text = d.text("/metrics").await;
    assert!(
        text.contains("gpuplan_sync_runs_total{source=\"azure\",result=\"ok\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("gpuplan_data_age_seconds{source=\"file:onprem\"}"),
        "{text}"
    );
    assert!(
        text.contains("route=\"/v1/prices\",status=\"200\""),
        "{text}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_follow_the_catalog_after_each_sync() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let d = Daemon::start(config).await;
    d.runs_until(|r| ok_count(r, "file:onprem") == 1).await;
    let (_, first) = d.get("/v1/prices?kind=on_demand").await;
    assert_eq!(first[0]["usd_per_hour"], 18.4);

    std::fs::write(dir.path().join("onprem.csv"), SHEET.replace("18.4", "16.0")).unwrap();
    d.post("/v1/sync").await;
    d.runs_until(|r| ok_count(r, "file:onprem") == 2).await;
    let (_, second) = d.get("/v1/prices?kind=on_demand").await;
    assert_eq!(second[0]["usd_per_hour"], 16.0);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_failing_with_500s_retries_and_recovers() {
    let server = azure(2, Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), Some(&server.base), "");
    let d = Daemon::start(config).await;
    let runs = d.runs_until(|r| ok_count(r, "azure") == 1).await;
    assert_eq!(statuses(&runs, "azure"), vec!["ok", "failed", "failed"]);
    let failed = runs
        .iter()
        .find(|r| r["source"] == "azure" && r["status"] == "failed")
        .unwrap();
    assert!(
        failed["error"].as_str().unwrap().contains("HTTP 500"),
        "{failed}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_truncated_snapshot_is_rejected_and_the_old_data_stays_served() {
    let truncate = Arc::new(AtomicBool::new(false));
    let server = azure(0, truncate.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), Some(&server.base), "");
    let d = Daemon::start(config).await;
    d.runs_until(|r| ok_count(r, "azure") == 1).await;
    let (_, before) = d.get("/v1/prices?provider=azure").await;

    truncate.store(true, Ordering::SeqCst);
    let (status, body) = d.post("/v1/sync?provider=azure").await;
    assert_eq!(
        (status, body["triggered"].clone()),
        (202, serde_json::json!(["azure"]))
    );
    let runs = d
        .runs_until(|r| statuses(r, "azure").first().is_some_and(|s| s == "failed"))
        .await;
    assert!(
        runs[0]["error"].as_str().unwrap().contains("truncated"),
        "{}",
        runs[0]
    );
    let (_, after) = d.get("/v1/prices?provider=azure").await;
    assert_eq!(after, before);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_parameters_get_400_naming_the_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let d = Daemon::start(config).await;
    for (path, parameter) in [
        ("/v1/prices?gpus=H100", "gpus"),
        ("/v1/prices?kind=weekly", "kind"),
        (
            "/v1/prices?max_usd_per_gpu_hour=cheap",
            "max_usd_per_gpu_hour",
        ),
        ("/v1/prices?max_usd_per_gpu_hour=-1", "max_usd_per_gpu_hour"),
        ("/v1/prices?currency=EUR", "currency"),
        ("/v1/spot-history", "instance"),
        (
            "/v1/spot-history?instance=p5.48xlarge&since=yesterday",
            "since",
        ),
        ("/v1/sync-runs?limit=0", "limit"),
    ] {
        let (status, body) = d.get(path).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["parameter"], parameter, "{path}: {body}");
    }
    let (status, body) = d.post("/v1/sync?provider=aws").await;
    assert_eq!(
        (status, body["parameter"].as_str()),
        (400, Some("provider"))
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn beyond_loopback_the_api_needs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let listener = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let options = Options {
        grace: Duration::from_secs(1),
        token: None,
    };
    let err = daemon::run(config.clone(), listener, options, std::future::pending())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("GPUPLAN_API_TOKEN"), "{err}");

    let d = Daemon::start_with(config, None, Some("s3cret")).await;
    let (status, _, _) = raw(&d, "GET", "/v1/prices", &[], "").await;
    assert_eq!(status, 401);
    assert_eq!(d.get("/healthz").await.0, 200);
    let r = d
        .http
        .get(format!("{}/v1/prices", d.base))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = d
        .http
        .get(format!("{}/v1/prices", d.base))
        .bearer_auth("s3cre7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_daemon_on_the_same_catalog_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let d = Daemon::start(config.clone()).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let options = Options {
        grace: Duration::from_secs(1),
        token: None,
    };
    let err = daemon::run(config, listener, options, std::future::pending())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("another gpuplan daemon"), "{err}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_fails_while_the_catalog_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let d = Daemon::start(config).await;
    let (status, ready) = d.get("/readyz").await;
    assert_eq!((status, ready["ready"].as_bool()), (200, Some(true)));
    // Another process breaks the file under the daemon.
    let path = dir.path().join("catalog.db");
    let broken = rusqlite::Connection::open(&path).unwrap();
    broken
        .execute_batch("ALTER TABLE catalog_state RENAME TO catalog_state_gone")
        .unwrap();
    let (status, ready) = d.get("/readyz").await;
    assert_eq!(
        (status, ready["ready"].as_bool()),
        (503, Some(false)),
        "{ready}"
    );
    assert!(
        ready["error"].as_str().unwrap().contains("catalog_state"),
        "{ready}"
    );
    broken
        .execute_batch("ALTER TABLE catalog_state_gone RENAME TO catalog_state")
        .unwrap();
    let (status, _) = d.get("/readyz").await;
    assert_eq!(status, 200, "readiness comes back with the catalog");
    d.stop().await;
}

/// Serves one good snapshot, then hangs on every later fetch until cancelled.
struct HangsAfterFirst {
    calls: AtomicUsize,
}

#[async_trait]
impl Provider for HangsAfterFirst {
    fn id(&self) -> &str {
        "file:onprem"
    }

    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            gpuplan_providers::file::parse_sheet(
                "file:onprem",
                "onprem.csv",
                SHEET,
                gpuplan_providers::file::SheetFormat::Csv,
            )
        } else {
            std::future::pending().await
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_during_a_slow_sync_leaves_the_catalog_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let provider: Box<dyn Provider> = Box::new(HangsAfterFirst {
        calls: AtomicUsize::new(0),
    });
    let d = Daemon::start_with(config, Some(vec![provider]), None).await;
    d.runs_until(|r| ok_count(r, "file:onprem") == 1).await;
    let (_, before) = d.get("/v1/prices").await;
    d.post("/v1/sync").await;
    d.runs_until(|r| {
        statuses(r, "file:onprem")
            .first()
            .is_some_and(|s| s == "running")
    })
    .await;

    let started = std::time::Instant::now();
    d.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited for the hanging sync"
    );

    let store = SqliteStore::open(&dir.path().join("catalog.db")).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    let runs = store.sync_runs(10).unwrap();
    assert_eq!(runs[0].status, "failed");
    assert!(runs[0].error.as_deref().unwrap().contains("cancelled"));
    assert_eq!(
        store.current_prices().unwrap().len(),
        before.as_array().unwrap().len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_the_real_process_mid_sync_and_it_exits_0() {
    // A "cloud" that accepts connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_base = format!("http://{}", silent.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = silent.accept().await {
            held.push(sock);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    config_in(
        dir.path(),
        Some(&silent_base),
        "[api]\nlisten = \"127.0.0.1:0\"",
    );
    let mut child = gpuplan()
        .arg("--config")
        .arg(dir.path().join("gpuplan.toml"))
        .args(["serve", "--shutdown-grace-secs", "5"])
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    // Wait until the Azure sync is running (its run row exists).
    let db = dir.path().join("catalog.db");
    let mut running = false;
    for _ in 0..500 {
        if let Ok(store) = SqliteStore::open(&db)
            && let Ok(runs) = store.sync_runs(10)
            && runs
                .iter()
                .any(|r| r.source == "azure" && r.status == "running")
        {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(running, "the azure sync never started");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));

    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    let azure = store
        .sync_runs(10)
        .unwrap()
        .into_iter()
        .find(|r| r.source == "azure")
        .unwrap();
    assert_eq!(azure.status, "failed");
    assert!(azure.error.unwrap().contains("cancelled"));
    assert_eq!(store.current_prices().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn plans_are_solved_saved_and_fetched_over_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let d = Daemon::start(config).await;
    d.runs_until(|r| ok_count(r, "file:onprem") == 1).await;
    let post = |path: &str, body: Value| {
        let req = d.http.post(format!("{}{path}", d.base)).json(&body);
        async move {
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            (
                status,
                serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap(),
            )
        }
    };
    let (status, _) = d.get("/v1/plans/latest").await;
    assert_eq!(status, 404);

    // A full problem document.
    let problem: Value =
        serde_json::from_str(include_str!("../config/examples/plan-problem.json")).unwrap();
    let (status, r) = post("/v1/plans", problem).await;
    assert_eq!((status, r["status"].as_str()), (200, Some("optimal")));
    assert!((r["objective"].as_f64().unwrap() - 950.495_768_645_357_7).abs() < 1e-6);

    // Demand and policy, offers from the catalog, saved twice.
    let body = serde_json::json!({"name": "onprem", "demand": [16, 16, 8], "gpu": ["H100"], "policy": {"max_spot_share": 0.5}});
    let (status, first) = post("/v1/plans?save=true", body.clone()).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["catalog"]["offers"], 1);
    assert_eq!(first["saved"]["change"], Value::Null);
    let (_, second) = post("/v1/plans?save=true", body).await;
    assert_eq!(second["saved"]["change"]["changed"], false);
    let id = second["saved"]["id"].as_i64().unwrap();

    let (status, latest) = d.get("/v1/plans/latest?name=onprem").await;
    assert_eq!((status, latest["id"].as_i64()), (200, Some(id)));
    let (status, by_id) = d.get(&format!("/v1/plans/{id}")).await;
    assert_eq!(
        (status, by_id["result"]["objective"].clone()),
        (200, second["objective"].clone())
    );
    assert_eq!(d.get("/v1/plans/999").await.0, 404);

    // Nothing is solving now; a solve that is not running cannot be stopped.
    let (status, solves) = d.get("/v1/solves").await;
    assert_eq!(status, 200);
    assert_eq!(solves["solves"], serde_json::json!([]));
    assert!(solves["slots"].as_u64().unwrap() >= 1);
    assert_eq!(
        post("/v1/solves/7/stop", serde_json::json!({})).await.0,
        404
    );
    let (status, bad) = post("/v1/solves/seven/stop", serde_json::json!({})).await;
    assert_eq!((status, bad["parameter"].as_str()), (400, Some("id")));

    // Version 3: a problem with scenarios, and a catalog plan with risk keys.
    // The model's example X1: an outage flips the plan.
    let mut x1: Value = serde_json::from_str(include_str!("fixtures/plan-v3-outage.json")).unwrap();
    x1["risk"]["lambda"] = serde_json::json!(0.25);
    let (status, r) = post("/v1/plans", x1).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["schema_version"], 3);
    assert_eq!(r["frontier"].as_array().unwrap().len(), 5);
    assert_eq!(r["frontier_flat"], false);
    assert_eq!(r["reserved"][0]["count"], 2.0);
    let (status, r) = post(
        "/v1/plans",
        serde_json::json!({"demand": [16, 16, 8], "gpu": ["H100"],
                           "scenarios": [{"id": "low", "demand": [8, 8, 8]}, {"id": "high", "demand": [16, 16, 16]}],
                           "risk": {"lambda": 0.5, "frontier": [0]}}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["risk"]["frontier"], serde_json::json!([0.0, 0.5]));
    assert_eq!(r["scenarios"][1]["id"], "high");
    let (status, bad) = post(
        "/v1/plans",
        serde_json::json!({"demand": [16], "gpu": ["H100"], "risk": {"lambda": 2}}),
    )
    .await;
    assert_eq!(
        (status, bad["parameter"].as_str()),
        (400, Some("risk.lambda")),
        "{bad}"
    );
    assert_eq!(d.get("/v1/plans/abc").await.1["parameter"], "id");

    // Bad input names its field.
    let (status, bad) = post(
        "/v1/plans",
        serde_json::json!({"demand": [1], "policy": {"max_spot_shar": 1}}),
    )
    .await;
    assert_eq!(
        (status, bad["parameter"].as_str()),
        (400, Some("policy.max_spot_shar"))
    );
    let (status, bad) = post(
        "/v1/plans",
        serde_json::json!({"demand": [1], "gpus": ["H100"]}),
    )
    .await;
    assert_eq!((status, bad["parameter"].as_str()), (400, Some("gpus")));

    // Two classes and an owned reservation: the owned machine covers one
    // class, and the other's half-time need is cheaper on demand than reserved.
    let two = serde_json::json!({"name": "two", "gpu": ["H100"],
        "classes": [{"id": "a", "demand": [8, 8]}, {"id": "b", "demand": [8, 0]}],
        "owned": [{"offer": "file:onprem/onprem-fra/dgx-h100", "option": "reserved_1y", "count": 1}]});
    let (status, r) = post("/v1/plans", two.clone()).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (r["schema_version"].as_u64(), r["status"].as_str()),
        (Some(2), Some("optimal"))
    );
    assert!(
        (r["objective"].as_f64().unwrap() - 18.4).abs() < 1e-9,
        "{r}"
    );
    assert!((r["sunk_cost"].as_f64().unwrap() - 28.0).abs() < 1e-9);
    for (mutate, named) in [
        (
            serde_json::json!({"owned": [{"offer": "x/y/z", "option": "reserved_1y", "count": 1}]}),
            "owned[0]",
        ),
        (
            serde_json::json!({"owned": [{"offer": "x/y/z", "option": "reserved_1y", "cont": 1}]}),
            "owned[0]",
        ),
        (
            serde_json::json!({"classes": [{"id": "a", "demand": [1], "perf": {}}]}),
            "classes[0].perf",
        ),
        (serde_json::json!({"demand": [1]}), "classes"),
    ] {
        let mut body = two.clone();
        for (k, v) in mutate.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, bad) = post("/v1/plans", body).await;
        assert_eq!(
            (status, bad["parameter"].as_str()),
            (400, Some(named)),
            "{bad}"
        );
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_and_scheduled_plans_take_planner_defaults_and_the_api_overrides_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("demand.csv"), "hour,gpus\n0,8\n1,8\n").unwrap();
    std::fs::write(dir.path().join("two.csv"), "hour,a,b\n0,8,8\n1,8,0\n").unwrap();
    std::fs::write(
        dir.path().join("classes.toml"),
        "[classes.a]\n[classes.b]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("owned.csv"),
        "offer,option,count\nfile:onprem/onprem-fra/dgx-h100,reserved_1y,1\n",
    )
    .unwrap();
    let config = config_in(
        dir.path(),
        None,
        "[planner]\ntime_limit_secs = 60\nspot_window = \"3d\"\nrestart_hours = 2\ncheckpoint_hours = 4\n\
         [alerts.plans.nightly]\ndemand = \"demand.csv\"\nschedule = \"* * * * * *\"\ngpu = [\"H100\"]\n\
         [alerts.plans.classes]\ndemand = \"two.csv\"\nclasses = \"classes.toml\"\nowned = \"owned.csv\"\n\
         schedule = \"* * * * * *\"\ngpu = [\"H100\"]\n",
    );
    let d = Daemon::start(config).await;
    d.runs_until(|r| ok_count(r, "file:onprem") == 1).await;
    let defaults = serde_json::json!({"time_limit_secs": 60.0, "spot_window_secs": 259200.0,
                                      "restart_hours": 2.0, "checkpoint_hours": 4.0});

    // The scheduled plan saves the settings it was made with.
    let mut saved = Value::Null;
    for _ in 0..500 {
        let (status, plan) = d.get("/v1/plans/latest?name=nightly").await;
        if status == 200 {
            saved = plan;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(saved["result"]["settings"], defaults, "{saved}");
    // A scheduled plan of two classes with its own owned file.
    let mut classes = Value::Null;
    for _ in 0..500 {
        let (status, plan) = d.get("/v1/plans/latest?name=classes").await;
        if status == 200 {
            classes = plan;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let result = &classes["result"];
    assert_eq!(result["schema_version"], 2, "{classes}");
    assert!(
        (result["objective"].as_f64().unwrap() - 18.4).abs() < 1e-9,
        "{classes}"
    );
    assert!((result["sunk_cost"].as_f64().unwrap() - 28.0).abs() < 1e-9);

    let body = serde_json::json!({"demand": [8, 8], "gpu": ["H100"]}).to_string();
    let (status, _, plain) = raw(&d, "POST", "/v1/plans", &[JSON], body).await;
    assert_eq!((status, &plain["settings"]), (200, &defaults), "{plain}");
    let body = serde_json::json!({"demand": [8, 8], "gpu": ["H100"], "spot_window": "1d",
                                  "restart_hours": 0.25, "checkpoint_hours": 0.5})
    .to_string();
    let (status, _, mine) = raw(&d, "POST", "/v1/plans?time_limit_secs=5", &[JSON], body).await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(
        mine["settings"],
        serde_json::json!({"time_limit_secs": 5.0, "spot_window_secs": 86400.0,
                           "restart_hours": 0.25, "checkpoint_hours": 0.5})
    );
    let body = serde_json::json!({"demand": [8], "restart_hours": -1}).to_string();
    let (status, _, bad) = raw(&d, "POST", "/v1/plans", &[JSON], body).await;
    assert_eq!(
        (status, bad["parameter"].as_str()),
        (400, Some("restart_hours")),
        "{bad}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_plan_waits_for_the_catalogs_first_sync() {
    // A plan of an empty catalog has no offers; saved, it would make the
    // first real plan read as a change and alert for nothing.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("demand.csv"), "hour,gpus\n0,4\n1,4\n").unwrap();
    let config = config_in(
        dir.path(),
        None,
        "[alerts.plans.nightly]\ndemand = \"demand.csv\"\nschedule = \"* * * * * *\"\ngpu = [\"H100\"]\n",
    );
    let sheet = dir.path().join("onprem.csv");
    std::fs::remove_file(&sheet).unwrap();
    let d = Daemon::start(config).await;
    d.runs_until(|r| {
        statuses(r, "file:onprem")
            .first()
            .is_some_and(|s| s == "failed")
    })
    .await;
    // Two plan slots pass with nothing synced.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(d.get("/v1/plans/latest?name=nightly").await.0, 404);

    std::fs::write(&sheet, SHEET).unwrap();
    d.post("/v1/sync").await;
    // The source retries every 0.05 to 0.2 s after its failures: a retry
    // may read the sheet before the trigger comes, which then syncs again.
    d.runs_until(|r| ok_count(r, "file:onprem") >= 1).await;
    until("the plan, once the catalog has synced", || async {
        d.get("/v1/plans/latest?name=nightly").await.0 == 200
    })
    .await;
    d.stop().await;
}
