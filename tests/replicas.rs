//! Several replicas on one PostgreSQL catalog: each once-per-cluster duty is
//! done once. Needs a server (`GPUPLAN_TEST_PG_URL`, started by `.ci/run`);
//! skipped without one.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use gpuplan::config::Config;
use gpuplan::daemon::{self, Options};
use gpuplan::store::scratch::ScratchDatabase;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const SHEET: &str = "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\n\
                     onprem-fra,dgx-h100,H100,8,on_demand,18.4\n";

/// Every 2 seconds, so 20 cycles take 40 s.
const CYCLE_SECS: u32 = 2;
const CYCLES: i64 = 20;

fn config(dir: &Path, url: &str) -> Config {
    std::fs::write(dir.join("onprem.csv"), SHEET).unwrap();
    let text = format!(
        "[store]\nurl = \"{url}\"\n\n[providers.aws]\nenabled = false\n[providers.azure]\nenabled = false\n[providers.oci]\nenabled = false\n\
         [providers.file.onprem]\npath = \"onprem.csv\"\nschedule = \"*/{CYCLE_SECS} * * * * *\"\n"
    );
    Config::parse(&text, dir).unwrap()
}

struct Replica {
    base: String,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

async fn start(config: Config) -> Replica {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let options = Options {
        grace: Duration::from_secs(5),
        token: None,
    };
    let task = tokio::spawn(daemon::run(config, listener, options, async move {
        let _ = stopped.await;
    }));
    Replica { base, stop, task }
}

fn parse(at: &serde_json::Value) -> DateTime<Utc> {
    at.as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_sync_each_source_exactly_once_per_cycle() {
    let Some(db) = ScratchDatabase::create() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), db.url());
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(start(config.clone()).await);
    }
    let http = reqwest::Client::new();
    let started = Utc::now();
    // The start-up sync and the first two slots settle; then 20 cycles.
    let window_start = started + chrono::Duration::seconds(3 * i64::from(CYCLE_SECS));
    let window_end = window_start + chrono::Duration::seconds(CYCLES * i64::from(CYCLE_SECS));
    tokio::time::sleep((window_end - Utc::now()).to_std().unwrap() + Duration::from_secs(1)).await;

    let mut alive = Vec::new();
    for r in replicas {
        if r.task.is_finished() {
            panic!("a replica stopped early: {:?}", r.task.await.unwrap());
        }
        alive.push(r);
    }
    let replicas = alive;
    let mut ids = Vec::new();
    for r in &replicas {
        let cluster: serde_json::Value = http
            .get(format!("{}/v1/cluster", r.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(cluster["backend"], "postgres", "{cluster}");
        ids.push(cluster["replica"].as_str().unwrap().to_owned());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "each replica has its own id");

    let runs: serde_json::Value = http
        .get(format!("{}/v1/sync-runs?limit=1000", replicas[0].base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Runs per cycle: a cycle is CYCLE_SECS long from a multiple of it.
    let mut per_cycle: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for run in runs.as_array().unwrap() {
        assert_eq!(run["source"], "file:onprem");
        let at = parse(&run["started_at"]);
        if at < window_start || at >= window_end {
            continue;
        }
        let cycle = at.timestamp().div_euclid(i64::from(CYCLE_SECS));
        per_cycle.entry(cycle).or_default().push(format!(
            "{} {} {}",
            run["id"],
            run["status"],
            at.nanosecond()
        ));
    }
    // Whole cycles inside the window: the first may have begun before it.
    let first = window_start.timestamp().div_euclid(i64::from(CYCLE_SECS)) + 1;
    for cycle in first..first + CYCLES - 1 {
        let runs = per_cycle.get(&cycle).cloned().unwrap_or_default();
        assert_eq!(
            runs.len(),
            1,
            "cycle {cycle}: {runs:?} (all: {per_cycle:?})"
        );
        assert!(runs[0].contains("\"ok\""), "{runs:?}");
    }
    eprintln!(
        "{} cycles checked, {} runs, one per cycle",
        CYCLES - 1,
        per_cycle.values().map(Vec::len).sum::<usize>()
    );

    for r in replicas {
        let _ = r.stop.send(());
        r.task.await.unwrap().unwrap();
    }
}
