//! What the API benches share: the daemon started as its own process, a
//! bounded loopback load, and the daemon's memory.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub const REQUESTS: usize = 2000;
pub const CONCURRENCY: usize = 4;

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// What one load measured.
pub struct Latency {
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// The largest answer's size.
    pub bytes: usize,
}

/// Sends `REQUESTS` requests from `CONCURRENCY` tasks; `url(i)` is the i-th
/// request's URL.
pub async fn load(
    client: &reqwest::Client,
    url: impl Fn(usize) -> String + Send + Sync + 'static,
) -> Latency {
    load_n(client, REQUESTS, url).await
}

/// [`load`] of `requests` requests.
pub async fn load_n(
    client: &reqwest::Client,
    requests: usize,
    url: impl Fn(usize) -> String + Send + Sync + 'static,
) -> Latency {
    load_until(client, requests, None, url).await
}

/// [`load`] of `requests` requests, none sent after `deadline`: a load that
/// must span a number of events (a sync every second) lasts as long, however
/// fast it is answered.
pub async fn load_until(
    client: &reqwest::Client,
    requests: usize,
    deadline: Option<Instant>,
    url: impl Fn(usize) -> String + Send + Sync + 'static,
) -> Latency {
    let url = std::sync::Arc::new(url);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (client, url, next) = (client.clone(), url.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut bytes = 0;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= requests || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let start = Instant::now();
                let body = client
                    .get(url(i))
                    .send()
                    .await
                    .unwrap()
                    .error_for_status()
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap();
                times.push(start.elapsed());
                bytes = body.len();
            }
            (times, bytes)
        }));
    }
    let mut all = Vec::new();
    let mut bytes = 0;
    for t in tasks {
        let (times, b) = t.await.unwrap();
        all.extend(times);
        bytes = bytes.max(b);
    }
    all.sort();
    let pct = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Latency {
        p50: pct(0.50),
        p99: pct(0.99),
        max: all[all.len() - 1],
        bytes,
    }
}

/// Starts `gpuplan serve` on a port it picks itself, with `store` as its
/// `[store]` table and `sources` added to its config (in `<name>.toml`);
/// answers the process and its base URL, read from its log (no port to race
/// for).
pub fn serve(dir: &std::path::Path, name: &str, store: &str, sources: &str) -> (Child, String) {
    let config = format!(
        "[store]\n{store}\n[api]\nlisten = \"127.0.0.1:0\"\n[providers.aws]\nenabled = false\n[providers.azure]\nenabled = false\n[providers.oci]\nenabled = false\n{sources}"
    );
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .arg("--config")
        .arg(&file)
        .args(["--log-format", "json", "serve"])
        .env("RUST_LOG", "warn,gpuplan=info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut lines = std::io::BufRead::lines(stderr);
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            let entry: serde_json::Value = serde_json::from_str(&line).ok()?;
            (entry["fields"]["message"] == "gpuplan is serving.")
                .then(|| entry["fields"]["listen"].as_str().map(str::to_owned))
                .flatten()
        })
        .expect("the daemon never said where it listens");
    // Keep draining the log so the daemon never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, format!("http://{addr}"))
}

/// Waits until the daemon at `base` is ready, and a second more.
pub async fn ready(client: &reqwest::Client, base: &str) {
    for _ in 0..500 {
        if client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Stops the daemon as a service manager would (SIGTERM), and waits for it.
pub fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
