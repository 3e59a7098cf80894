//! Replicas as real processes on one PostgreSQL catalog: the one holding a
//! source's sync is killed (`kill -9`) mid-sync and another takes the duty
//! over. Needs a server (`GPUPLAN_TEST_PG_URL`, started by `.ci/run`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{RawQuery, State};
use axum::response::IntoResponse;
use gpuplan::store::scratch::ScratchDatabase;
use serde_json::Value;
use support::{Served, gpuplan};

const AZURE_1: &str = include_str!("../providers/fixtures/azure/eastus-1.json");
const AZURE_2: &str = include_str!("../providers/fixtures/azure/eastus-2.json");

/// Azure's retail price pages for eastus. The first request for the second
/// page hangs, so the first replica to sync stays mid-sync; later ones are
/// answered at once.
struct Azure {
    base: String,
    second_pages: AtomicUsize,
}

async fn page(State(azure): State<Arc<Azure>>, RawQuery(query): RawQuery) -> impl IntoResponse {
    let body = if query.unwrap_or_default().contains("$skip=6") {
        if azure.second_pages.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        AZURE_2
    } else {
        AZURE_1
    };
    (
        [("content-type", "application/json")],
        body.replace("{{BASE}}", &azure.base),
    )
}

async fn azure() -> Arc<Azure> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let azure = Arc::new(Azure {
        base: format!("http://{}", listener.local_addr().unwrap()),
        second_pages: AtomicUsize::new(0),
    });
    let app = axum::Router::new()
        .route("/api/retail/prices", axum::routing::get(page))
        .with_state(azure.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    azure
}

async fn holds(replica: &Served, duty: &str) -> bool {
    replica.get("/v1/cluster").await["duties_held"]
        .get(duty)
        .is_some()
}

async fn azure_runs(replica: &Served) -> Vec<Value> {
    replica
        .get("/v1/sync-runs")
        .await
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["source"] == "azure")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_killed_mid_sync_is_replaced_within_seconds() {
    let Some(db) = ScratchDatabase::create() else {
        return;
    };
    let azure = azure().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gpuplan.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\nurl = \"{}\"\n[api]\nlisten = \"127.0.0.1:0\"\n[providers.aws]\nenabled = false\n[providers.oci]\nenabled = false\n\
             [providers.azure]\nendpoint = \"{}\"\nregions = [\"eastus\"]\n",
            db.url(),
            azure.base
        ),
    )
    .unwrap();

    let mut first = Served::spawn(&config, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(holds(&first, "sync:azure").await && azure.second_pages.load(Ordering::SeqCst) > 0) {
        assert!(
            Instant::now() < deadline,
            "the first replica never got mid-sync"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let others = [
        Served::spawn(&config, &[]).await,
        Served::spawn(&config, &[]).await,
    ];
    // Mid-sync, nothing of the snapshot is visible from any replica.
    for r in &others {
        assert_eq!(
            r.get("/v1/prices?provider=azure").await,
            serde_json::json!([])
        );
        assert!(!holds(r, "sync:azure").await);
    }

    // A one-off `gpuplan sync` does not sync it a second time meanwhile.
    let cli = gpuplan()
        .arg("--config")
        .arg(&config)
        .args(["sync", "--provider", "azure"])
        .env_remove("GPUPLAN_STORE_URL")
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(1));
    let said = String::from_utf8_lossy(&cli.stdout);
    assert!(
        said.contains("a replica is syncing it now (sync:azure is held)"),
        "{said}"
    );

    first.signal("-KILL");
    first.wait();
    let killed = Instant::now();
    let taken_by = loop {
        let mut holder = None;
        for (i, r) in others.iter().enumerate() {
            if holds(r, "sync:azure").await
                || azure_runs(r).await.iter().any(|run| run["status"] == "ok")
            {
                holder = Some(i);
            }
        }
        if let Some(i) = holder {
            break i;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no replica took the duty"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let takeover = killed.elapsed();
    let deadline = Instant::now() + Duration::from_secs(30);
    let runs = loop {
        let runs = azure_runs(&others[taken_by]).await;
        if runs.iter().any(|r| r["status"] == "ok") {
            break runs;
        }
        assert!(
            Instant::now() < deadline,
            "the new holder never finished: {runs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "duty taken over {:.2} s after kill -9",
        takeover.as_secs_f64()
    );
    assert!(takeover < Duration::from_secs(10), "took {takeover:?}");
    // The killed run ends failed as interrupted; exactly one run stored data.
    let statuses: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap(),
                r["error"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(statuses.len(), 2, "the CLI started no run: {statuses:?}");
    assert_eq!(statuses[0].0, "ok");
    assert_eq!(statuses[1].0, "failed");
    assert!(statuses[1].1.starts_with("interrupted"), "{statuses:?}");
    let prices = others[0].get("/v1/prices?provider=azure").await;
    assert!(!prices.as_array().unwrap().is_empty());
}
