//! Alerts end to end: the real `gpuplan serve` process, a price sheet whose
//! prices the test moves, and a local receiver standing in for a webhook and
//! Slack. Also where secrets in receiver and provider URLs are pushed through
//! every failure path and searched for everywhere the daemon writes.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gpuplan::alerts::deliver::{SIGNATURE_HEADER, signature};
use gpuplan_providers::secret::Secret;
use gpuplan_providers::test_server::{self, FixtureServer, Seen};
use serde_json::Value;
use support::{NO_CLOUDS, Served, gpuplan, until};

const SECRET: &str = "shh-test-secret";

fn sheet(dir: &Path, spot: f64) {
    std::fs::write(
        dir.join("sheet.csv"),
        format!("region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\nus-east-1,g6.xlarge,L4,1,on_demand,0.98\nus-east-1,h1.xlarge,H100,1,spot,{spot}\n"),
    )
    .unwrap();
}

/// A receiver: `/hook` fails with 500 for its first `hook_failures` calls
/// (or while `down` says so), `/chat` always accepts.
async fn receiver(
    hook_failures: usize,
    down: Arc<AtomicUsize>,
) -> (FixtureServer, Arc<AtomicUsize>) {
    let hooks = Arc::new(AtomicUsize::new(0));
    let counter = hooks.clone();
    let server = test_server::serve(move |req: &Seen, _, _| {
        if down.load(Ordering::SeqCst) > 0 {
            return test_server::status(503, "down");
        }
        if req.uri == "/hook" && counter.fetch_add(1, Ordering::SeqCst) < hook_failures {
            return test_server::status(500, "try later");
        }
        test_server::status(200, "ok")
    })
    .await;
    (server, hooks)
}

/// The config: the API on a port the daemon picks itself (it logs which), so
/// no other process can take it between a test choosing it and the bind.
fn write_config(dir: &Path, receiver: &str) {
    let config = format!(
        "[store]\npath = \"c.db\"\n[api]\nlisten = \"127.0.0.1:0\"\n{NO_CLOUDS}\
         [providers.file.sheet]\npath = \"sheet.csv\"\nschedule = \"0 0 0 1 1 *\"\n\
         [alerts]\nretry_initial_secs = 0.05\nretry_max_secs = 0.2\n\
         [alerts.channels.hook]\ntype = \"webhook\"\nurl = \"{receiver}/hook\"\nsecret_env = \"GPUPLAN_TEST_HOOK_SECRET\"\n\
         [alerts.channels.chat]\ntype = \"slack\"\nurl = \"{receiver}/chat\"\n\
         [[alerts.rules]]\nname = \"cheap-h100-spot\"\nkind = \"price_below\"\ngpu_models = [\"H100\"]\nprice_kinds = [\"spot\"]\n\
         usd_per_gpu_hour = 2.0\nhysteresis_pct = 5\nchannels = [\"hook\", \"chat\"]\n"
    );
    std::fs::write(dir.join("gpuplan.toml"), config).unwrap();
}

/// Starts `gpuplan serve` on the directory's config with `env` set too.
async fn start(dir: &Path, env: &[(&str, &str)]) -> Served {
    let env: Vec<(&str, &str)> = [("GPUPLAN_TEST_HOOK_SECRET", SECRET)]
        .into_iter()
        .chain(env.iter().copied())
        .collect();
    Served::spawn(&dir.join("gpuplan.toml"), &env).await
}

async fn ok_runs(d: &Served) -> usize {
    let runs = d.get("/v1/sync-runs").await;
    runs.as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "ok")
        .count()
}

/// How many times the daemon has evaluated its rules (once after each sync).
async fn evaluations(d: &Served) -> u64 {
    let text = d.text("/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix("gpuplan_alert_evaluations_total "))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// Triggers a sync and waits until the rules were evaluated on its result,
/// so that "nothing new" afterwards means nothing fired.
async fn sync(d: &Served) {
    let (runs, evaluated) = (ok_runs(d).await, evaluations(d).await);
    let r = reqwest::Client::new()
        .post(format!("{}/v1/sync", d.base))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    until("a sync and its evaluation", || async {
        ok_runs(d).await > runs && evaluations(d).await > evaluated
    })
    .await;
}

async fn messages(d: &Served) -> Vec<Value> {
    d.get("/v1/alerts").await["messages"]
        .as_array()
        .unwrap()
        .clone()
}

async fn delivered(d: &Served, n: usize) {
    until("the deliveries", || async {
        messages(d)
            .await
            .iter()
            .filter(|m| !m["delivered_at"].is_null())
            .count()
            >= n
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crossing_is_delivered_once_to_each_channel_and_again_after_re_arming() {
    let (server, _) = receiver(0, Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &server.base);
    sheet(dir.path(), 2.5);
    let d = start(dir.path(), &[]).await;
    until("the first sync", || async { ok_runs(&d).await == 1 }).await;
    assert!(server.requests().is_empty());

    sheet(dir.path(), 1.5);
    sync(&d).await;
    delivered(&d, 2).await;
    let seen = server.requests();
    let hook = seen.iter().find(|r| r.uri == "/hook").unwrap();
    let body: Value = serde_json::from_str(&hook.body).unwrap();
    assert_eq!(
        (body["rule"].as_str(), body["value"].as_f64()),
        (Some("cheap-h100-spot"), Some(1.5))
    );
    assert_eq!(
        hook.headers["idempotency-key"].to_str().unwrap(),
        body["idempotency_key"].as_str().unwrap()
    );
    let sig = hook.headers[SIGNATURE_HEADER].to_str().unwrap();
    assert_eq!(sig, signature(&Secret::new(SECRET), hook.body.as_bytes()));
    let chat: Value =
        serde_json::from_str(&seen.iter().find(|r| r.uri == "/chat").unwrap().body).unwrap();
    let text = chat["text"].as_str().unwrap();
    assert!(
        text.contains("cheap-h100-spot") && text.contains("1.5000") && text.contains("threshold 2"),
        "{text}"
    );

    // Still below on three more syncs: nothing new.
    for _ in 0..3 {
        sync(&d).await;
    }
    assert_eq!(messages(&d).await.len(), 2);
    assert_eq!(server.requests().len(), 2);

    // 2.05 is above 2 but inside the 5% hysteresis: not re-armed.
    sheet(dir.path(), 2.05);
    sync(&d).await;
    sheet(dir.path(), 1.9);
    sync(&d).await;
    assert_eq!(messages(&d).await.len(), 2);
    // Back past it, then below again: delivered again.
    sheet(dir.path(), 2.5);
    sync(&d).await;
    sheet(dir.path(), 1.2);
    sync(&d).await;
    delivered(&d, 4).await;
    assert_eq!(server.requests().len(), 4);

    let state = d.get("/v1/alerts").await["state"].clone();
    assert_eq!(state[0]["fired"], true);
    d.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_failing_twice_gets_exactly_one_accepted_delivery() {
    let (server, hooks) = receiver(2, Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &server.base);
    sheet(dir.path(), 1.5);
    let d = start(dir.path(), &[]).await;
    delivered(&d, 2).await;
    assert_eq!(hooks.load(Ordering::SeqCst), 3);
    let hook = messages(&d)
        .await
        .into_iter()
        .find(|m| m["channel"] == "hook")
        .unwrap();
    assert_eq!(hook["attempts"], 3);
    // Give the delivery task time to (wrongly) send again; it must not.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(hooks.load(Ordering::SeqCst), 3);
    d.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn undelivered_alerts_survive_a_restart() {
    let down = Arc::new(AtomicUsize::new(1));
    let (server, _) = receiver(0, down.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &server.base);
    sheet(dir.path(), 1.5);
    let d = start(dir.path(), &[]).await;
    until("two messages", || async { messages(&d).await.len() == 2 }).await;
    until("a try of each", || async {
        messages(&d)
            .await
            .iter()
            .all(|m| m["attempts"].as_i64().unwrap() >= 1)
    })
    .await;
    d.stop();

    down.store(0, Ordering::SeqCst);
    let d = start(dir.path(), &[]).await;
    delivered(&d, 2).await;
    let accepted = server
        .requests()
        .iter()
        .filter(|r| r.uri == "/hook")
        .count();
    assert!(
        accepted >= 2,
        "the hook saw its failed try and the delivery"
    );
    // The rule did not fire again on restart: still two messages.
    assert_eq!(messages(&d).await.len(), 2);
    d.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn alerts_test_sends_through_the_rules_channels() {
    let (server, _) = receiver(0, Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &server.base);
    let dir_path = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        gpuplan()
            .arg("--config")
            .arg(dir_path.join("gpuplan.toml"))
            .args(["alerts", "test", "cheap-h100-spot"])
            .env("GPUPLAN_TEST_HOOK_SECRET", SECRET)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hook: sent\nchat: sent\n"
    );
    assert_eq!(server.requests().len(), 2);
    assert!(server.requests()[0].body.contains("test message"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_plan_that_changes_alerts_its_rule() {
    let (server, _) = receiver(0, Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &server.base);
    let mut config = std::fs::read_to_string(dir.path().join("gpuplan.toml")).unwrap();
    config.push_str(
        "[alerts.plans.weekly]\ndemand = \"demand.csv\"\nschedule = \"* * * * * *\"\ngpu = [\"H100\"]\n\
         [[alerts.rules]]\nname = \"plan-moved\"\nkind = \"plan_changed\"\nplans = [\"weekly\"]\nchannels = [\"hook\"]\n",
    );
    std::fs::write(dir.path().join("gpuplan.toml"), config).unwrap();
    std::fs::write(dir.path().join("demand.csv"), "hour,gpus\n0,4\n1,4\n2,4\n").unwrap();
    let priced = |reserved: f64| {
        format!(
            "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\nr,h1,H100,1,on_demand,10\nr,h1,H100,1,reserved_1y,{reserved}\n"
        )
    };
    std::fs::write(dir.path().join("sheet.csv"), priced(4.0)).unwrap();
    let d = start(dir.path(), &[]).await;
    // The first plan reserves 4 GPUs; it is the first of its name, so no alert.
    until("the first plan", || async {
        d.get("/v1/plans/latest?name=weekly").await["result"]["reserved"][0]["count"] == 4.0
    })
    .await;
    assert!(server.requests().is_empty());

    // Reserved now dearer than on-demand: the next plan reserves nothing.
    std::fs::write(dir.path().join("sheet.csv"), priced(12.0)).unwrap();
    sync(&d).await;
    until("the plan alert", || async {
        server.requests().iter().any(|r| r.uri == "/hook")
    })
    .await;
    let hook = server
        .requests()
        .into_iter()
        .find(|r| r.uri == "/hook")
        .unwrap();
    let body: Value = serde_json::from_str(&hook.body).unwrap();
    assert_eq!(body["rule"], "plan-moved");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("plan weekly changed"),
        "{body}"
    );
    d.stop();
}

/// In every receiver URL's path, and the GCP API key.
const URL_SECRET: &str = "s3cr3t-hook-t0ken-4711";
const GCP_KEY: &str = "gcp-s3cr3t-key-0815";

/// A "server" that accepts connections and never answers: every request to it
/// times out.
async fn silent() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    base
}

/// A port nothing listens on: connections are refused.
fn refused() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

fn run_cli(dir: &Path, args: &[&str], env: &[(String, String)]) -> String {
    let out = gpuplan()
        .arg("--config")
        .arg(dir.join("gpuplan.toml"))
        .args(args)
        .env("RUST_LOG", "info")
        .envs(env.iter().cloned())
        .env_remove("GPUPLAN_GCP_TOKEN")
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_in_urls_never_reach_the_log_the_database_or_any_answer() {
    // Receivers and a GCP billing API that echo the request, secret included,
    // in their error bodies; GCP answers by the path prefix its base URL has.
    let echo = test_server::serve(|req: &Seen, _, n| {
        let uri = req.uri.clone();
        if uri.starts_with("/e403/") {
            test_server::status(403, &format!("forbidden: {uri}"))
        } else if uri.starts_with("/e500/") || uri.starts_with("/hook500/") {
            test_server::status(500, &format!("failed: {uri}"))
        } else if uri.starts_with("/bad/") {
            test_server::status(200, &format!("{{\"skus\": [{uri}"))
        } else if uri.starts_with("/pages/") {
            let page = format!("{{\"skus\": [], \"nextPageToken\": \"t{n}\"}}");
            test_server::status(200, &page)
        } else {
            test_server::status(404, &format!("no route {uri}"))
        }
    })
    .await;
    let (quiet, closed) = (silent().await, refused());
    let dir = tempfile::tempdir().unwrap();
    sheet(dir.path(), 1.5);
    let receivers = [
        format!("{closed}/refused/{URL_SECRET}"),
        format!("{quiet}/timeout/{URL_SECRET}"),
        format!("{}/hook404/{URL_SECRET}?token={URL_SECRET}", echo.base),
        format!("{}/hook500/{URL_SECRET}", echo.base),
    ];
    let gcp_config = |base: &str| {
        format!(
            "[store]\npath = \"c.db\"\n[api]\nlisten = \"127.0.0.1:0\"\n\
             [sync]\nhttp_attempts = 1\nhttp_timeout_secs = 0.5\nretry_initial_secs = 0.05\nretry_max_secs = 0.2\n\
             {NO_CLOUDS}\
             [providers.gcp]\nbilling_endpoint = \"{base}\"\n\
             [providers.file.sheet]\npath = \"sheet.csv\"\nschedule = \"0 0 0 1 1 *\"\n\
             [alerts]\nretry_initial_secs = 0.05\nretry_max_secs = 0.2\ntimeout_secs = 0.3\n\
             [alerts.channels.c0]\ntype = \"webhook\"\nurl_env = \"GPUPLAN_TEST_URL_0\"\n\
             [alerts.channels.c1]\ntype = \"slack\"\nurl_env = \"GPUPLAN_TEST_URL_1\"\n\
             [alerts.channels.c2]\ntype = \"webhook\"\nurl_env = \"GPUPLAN_TEST_URL_2\"\n\
             [alerts.channels.c3]\ntype = \"slack\"\nurl = \"{}\"\n\
             [[alerts.rules]]\nname = \"cheap-h100-spot\"\nkind = \"price_below\"\ngpu_models = [\"H100\"]\n\
             price_kinds = [\"spot\"]\nusd_per_gpu_hour = 2.0\nchannels = [\"c0\", \"c1\", \"c2\", \"c3\"]\n",
            receivers[3]
        )
    };
    let env: Vec<(String, String)> = [
        ("GPUPLAN_GCP_API_KEY", GCP_KEY),
        ("GPUPLAN_TEST_URL_0", receivers[0].as_str()),
        ("GPUPLAN_TEST_URL_1", receivers[1].as_str()),
        ("GPUPLAN_TEST_URL_2", receivers[2].as_str()),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into();
    let mut seen = String::new();

    // GCP through each failure path, by the CLI: refused, timeout, 4xx, 5xx,
    // a body that is not JSON, and a page chain that never ends.
    for base in [
        closed.clone(),
        quiet.clone(),
        format!("{}/e403", echo.base),
        format!("{}/e500", echo.base),
        format!("{}/bad", echo.base),
        format!("{}/pages", echo.base),
    ] {
        std::fs::write(dir.path().join("gpuplan.toml"), gcp_config(&base)).unwrap();
        let (dir_path, env) = (dir.path().to_path_buf(), env.clone());
        let out = tokio::task::spawn_blocking(move || {
            run_cli(&dir_path, &["sync", "--provider", "gcp"], &env)
        })
        .await
        .unwrap();
        assert!(
            out.contains("gcp") && out.contains("FAILED"),
            "{base}: {out}"
        );
        seen.push_str(&out);
    }
    assert!(seen.contains("more than 10000 pages"), "{seen}");
    assert!(seen.contains("key=REDACTED"), "{seen}");

    // The daemon: the rule fires, every receiver fails and is retried, and
    // GCP fails again at start.
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let d = start(dir.path(), &env_refs).await;
    until("every receiver tried twice", || async {
        let queued = messages(&d).await;
        queued.len() == 4 && queued.iter().all(|m| m["attempts"].as_i64().unwrap() >= 2)
    })
    .await;
    let failed_gcp = |runs: &Value| {
        runs.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["source"] == "gcp" && r["status"] == "failed")
            .count()
    };
    until("seven failed GCP syncs", || async {
        failed_gcp(&d.get("/v1/sync-runs?limit=100").await) >= 7
    })
    .await;
    for path in [
        "/v1/alerts",
        "/v1/sync-runs?limit=100",
        "/v1/prices",
        "/metrics",
        "/healthz",
    ] {
        seen.push_str(&d.text(path).await);
    }
    let errors: Vec<String> = messages(&d)
        .await
        .iter()
        .map(|m| m["last_error"].as_str().unwrap_or_default().to_owned())
        .collect();
    // The errors are there and say what happened; only the secret is gone.
    assert!(errors.iter().any(|e| e.contains("HTTP 404")), "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("HTTP 500")), "{errors:?}");
    assert!(errors.iter().all(|e| e.contains("127.0.0.1")), "{errors:?}");
    let log = d.log.clone();
    d.stop();
    seen.push_str(&log.lock().unwrap().join("\n"));
    assert!(
        seen.contains("Alert delivery failed"),
        "the log was searched"
    );

    // The CLI's views of the same failures, and one more try of each receiver.
    let dir_path = dir.path().to_path_buf();
    let cli = tokio::task::spawn_blocking(move || {
        [
            run_cli(&dir_path, &["alerts", "history"], &env),
            run_cli(&dir_path, &["alerts", "history", "--json"], &env),
            run_cli(&dir_path, &["alerts", "test", "cheap-h100-spot"], &env),
            run_cli(&dir_path, &["alerts", "list", "--json"], &env),
            run_cli(&dir_path, &["config", "validate"], &env),
        ]
        .join("\n")
    })
    .await
    .unwrap();
    assert!(
        cli.contains("c2: FAILED") && cli.contains("HTTP 404"),
        "{cli}"
    );
    seen.push_str(&cli);

    // Every file of the catalog, write-ahead log included.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("c.db")
        {
            seen.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    for secret in [URL_SECRET, GCP_KEY] {
        assert!(!seen.contains(secret), "`{secret}` leaked: {}", {
            let i = seen.find(secret).unwrap();
            &seen[i.saturating_sub(300)..(i + 100).min(seen.len())]
        });
    }
}
