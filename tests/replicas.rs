//! Several replicas on one PostgreSQL catalog: each once-per-cluster duty is
//! done once. Needs a server (`GPUPLAN_TEST_PG_URL`, started by `.ci/run`);
//! skipped without one.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use gpuplan::config::Config;
use gpuplan::store::scratch::ScratchDatabase;
use gpuplan::store::{Location, NewMessage, Pool};
use gpuplan_providers::secret::Secret;
use gpuplan_providers::test_server::{self, Seen};
use support::{Daemon, NO_CLOUDS};

const SHEET: &str = "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\n\
                     onprem-fra,dgx-h100,H100,8,on_demand,18.4\n";

/// Every 2 seconds, so 20 cycles take 40 s.
const CYCLE_SECS: u32 = 2;
const CYCLES: i64 = 20;

fn config(dir: &Path, url: &str) -> Config {
    std::fs::write(dir.join("onprem.csv"), SHEET).unwrap();
    let text = format!(
        "[store]\nurl = \"{url}\"\n\n{NO_CLOUDS}\
         [providers.file.onprem]\npath = \"onprem.csv\"\nschedule = \"*/{CYCLE_SECS} * * * * *\"\n"
    );
    Config::parse(&text, dir).unwrap()
}

async fn get_json(http: &reqwest::Client, url: String) -> serde_json::Value {
    http.get(url).send().await.unwrap().json().await.unwrap()
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
        replicas.push(Daemon::start(config.clone()).await);
    }
    let http = reqwest::Client::new();
    let started = Utc::now();
    // The start-up sync and the first two slots settle; then 20 cycles.
    let window_start = started + chrono::Duration::seconds(3 * i64::from(CYCLE_SECS));
    let window_end = window_start + chrono::Duration::seconds(CYCLES * i64::from(CYCLE_SECS));
    tokio::time::sleep((window_end - Utc::now()).to_std().unwrap() + Duration::from_secs(1)).await;

    let mut alive = Vec::new();
    for r in replicas {
        if !r.is_running() {
            r.stop().await;
            panic!("a replica stopped early");
        }
        alive.push(r);
    }
    let replicas = alive;
    let mut ids = Vec::new();
    for r in &replicas {
        let cluster = get_json(&http, format!("{}/v1/cluster", r.base)).await;
        assert_eq!(cluster["backend"], "postgres", "{cluster}");
        ids.push(cluster["replica"].as_str().unwrap().to_owned());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "each replica has its own id");

    let runs = get_json(
        &http,
        format!("{}/v1/sync-runs?limit=1000", replicas[0].base),
    )
    .await;
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
        r.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_deliver_a_thousand_alerts_once_each() {
    const MESSAGES: usize = 1000;
    let Some(db) = ScratchDatabase::create() else {
        return;
    };
    let server = test_server::serve(|_: &Seen, _, _| test_server::status(200, "ok")).await;
    let pool = Pool::open(&Location::Postgres(Secret::new(db.url())), 0).unwrap();
    let messages: Vec<NewMessage> = (0..MESSAGES)
        .map(|i| NewMessage {
            idempotency_key: format!("cheap/k{i}/1"),
            rule: "cheap".into(),
            channel: "hook".into(),
            payload: serde_json::json!({"idempotency_key": format!("cheap/k{i}/1"), "rule": "cheap",
                                        "key": format!("k{i}"), "message": "cheap"}),
        })
        .collect();
    pool.write(|s| s.apply_alerts(&[], &messages, &[], Utc::now()))
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[store]\nurl = \"{}\"\n{NO_CLOUDS}\
         [alerts.channels.hook]\ntype = \"webhook\"\nurl = \"{}/hook\"\n\
         [[alerts.rules]]\nname = \"cheap\"\nkind = \"price_below\"\ngpu_models = [\"H100\"]\nusd_per_gpu_hour = 1.0\nchannels = [\"hook\"]\n",
        db.url(),
        server.base
    );
    let config = Config::parse(&text, dir.path()).unwrap();
    let started = std::time::Instant::now();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(Daemon::start(config.clone()).await);
    }
    let delivered = || {
        pool.read(|s| s.message_history(u32::try_from(MESSAGES).unwrap()))
            .unwrap()
            .iter()
            .filter(|m| m.delivered_at.is_some())
            .count()
    };
    for _ in 0..600 {
        if delivered() == MESSAGES {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed();
    assert_eq!(delivered(), MESSAGES);
    // Time for a late duplicate to arrive, if any were sent.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let requests = server.requests();
    let keys: std::collections::BTreeSet<String> = requests
        .iter()
        .filter_map(|r| r.headers.get("idempotency-key"))
        .map(|k| k.to_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys.len(), MESSAGES, "every message reached the receiver");
    assert_eq!(requests.len(), MESSAGES, "no message was delivered twice");
    eprintln!(
        "{MESSAGES} messages delivered by 3 replicas in {:.2} s, {} requests, no duplicate",
        took.as_secs_f64(),
        requests.len()
    );
    for r in replicas {
        r.stop().await;
    }
}

/// A PostgreSQL cluster of the test's own (the shared test server must not
/// restart under other tests), through the CI helper; stopped when dropped.
struct OwnCluster {
    dir: tempfile::TempDir,
    port: u16,
}

fn ci_postgres(args: &[&str]) {
    let status = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/postgres"))
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), ".ci/postgres {args:?} failed");
}

impl OwnCluster {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        ci_postgres(&[
            "start",
            &dir.path().display().to_string(),
            &port.to_string(),
        ]);
        Self { dir, port }
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn restart(&self, down_secs: u32) {
        ci_postgres(&[
            "restart",
            &self.dir.path().display().to_string(),
            &down_secs.to_string(),
        ]);
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        ci_postgres(&["stop", &self.dir.path().display().to_string()]);
    }
}

async fn status(http: &reqwest::Client, url: String) -> u16 {
    http.get(url)
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_ride_out_a_postgresql_restart() {
    if std::env::var(gpuplan::store::scratch::SERVER_ENV).is_err() {
        eprintln!(
            "skipped: {} is not set",
            gpuplan::store::scratch::SERVER_ENV
        );
        return;
    }
    let cluster = tokio::task::spawn_blocking(OwnCluster::start)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &cluster.url());
    let replicas = [
        Daemon::start(config.clone()).await,
        Daemon::start(config).await,
    ];
    let http = reqwest::Client::new();
    let runs = |base: String| {
        let http = http.clone();
        async move {
            get_json(&http, format!("{base}/v1/sync-runs?limit=1000"))
                .await
                .as_array()
                .unwrap()
                .clone()
        }
    };
    let ok_runs = |runs: &[serde_json::Value]| runs.iter().filter(|r| r["status"] == "ok").count();
    for _ in 0..200 {
        if ok_runs(&runs(replicas[0].base.clone()).await) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ok_runs(&runs(replicas[0].base.clone()).await) > 0);

    // Down for 3 s; readiness is watched throughout.
    let restart = tokio::task::spawn_blocking(move || {
        cluster.restart(3);
        cluster
    });
    let ready = format!("{}/readyz", replicas[0].base);
    let mut saw_unready = false;
    while !restart.is_finished() {
        saw_unready |= status(&http, ready.clone()).await == 503;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cluster = restart.await.unwrap();
    let back = Utc::now();
    assert!(
        saw_unready,
        "/readyz never failed while the server was down"
    );
    let since_back = std::time::Instant::now();
    while status(&http, ready.clone()).await != 200 {
        assert!(
            since_back.elapsed() < Duration::from_secs(20),
            "readiness never recovered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ready_after = since_back.elapsed();
    // Syncs resume: a good run that started after the server came back.
    let synced_after = loop {
        let all = runs(replicas[1].base.clone()).await;
        if all
            .iter()
            .any(|r| r["status"] == "ok" && parse(&r["started_at"]) > back)
        {
            break since_back.elapsed();
        }
        assert!(
            since_back.elapsed() < Duration::from_secs(30),
            "syncs never resumed: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // No duty held twice: good runs of the source never overlap in time.
    let mut good: Vec<(DateTime<Utc>, DateTime<Utc>)> = runs(replicas[0].base.clone())
        .await
        .iter()
        .filter(|r| r["status"] == "ok")
        .map(|r| (parse(&r["started_at"]), parse(&r["finished_at"])))
        .collect();
    good.sort();
    for pair in good.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two good runs overlap: {pair:?}");
    }
    eprintln!(
        "after a 3 s PostgreSQL restart: ready again in {:.2} s, a good sync {:.2} s after it was back; {} good runs, none overlapping",
        ready_after.as_secs_f64(),
        synced_after.as_secs_f64(),
        good.len()
    );
    for r in replicas {
        r.stop().await;
    }
    drop(cluster);
}
