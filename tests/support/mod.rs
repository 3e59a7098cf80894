//! What the integration tests share: the binary, a workspace holding a
//! config, and the daemon, in this process (`Daemon`) or as its own
//! `gpuplan serve` process (`Served`). A test starts a real daemon in one
//! line: `let d = Daemon::start(workspace.config()).await;`.

// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

pub mod bills;
pub mod seed;
pub mod sheet;

use std::collections::BTreeSet;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpuplan::config::Config;
use gpuplan::daemon::{self, Options};
use gpuplan_providers::Provider;
use gpuplan_providers::secret::Secret;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Config lines that turn off the clouds enabled by default, for tests
/// whose sources are price sheets or local fixture servers.
pub const NO_CLOUDS: &str = "[providers.aws]\nenabled = false\n[providers.azure]\nenabled = false\n[providers.oci]\nenabled = false\n";

/// The `gpuplan` binary, quiet but for warnings and with no config from
/// the environment.
pub fn gpuplan() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    c.env_remove("GPUPLAN_CONFIG").env("RUST_LOG", "warn");
    c
}

/// The JSON a successful command printed; a failure shows its stderr.
pub fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "the command failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    })
}

/// The keys of a JSON object.
pub fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// `names` as a set, to compare with [`keys`].
pub fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// A temporary directory with a `gpuplan.toml`; commands run in it.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gpuplan.toml"), config).unwrap();
        Self { dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes `text` to `rel`, making its folders.
    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn config_path(&self) -> PathBuf {
        self.path("gpuplan.toml")
    }

    /// The config file, loaded as the daemon loads it.
    pub fn config(&self) -> Config {
        Config::load(&self.config_path()).unwrap()
    }

    /// `gpuplan --config <this config> args...`, run in this directory.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = gpuplan();
        c.arg("--config")
            .arg(self.config_path())
            .args(args)
            .current_dir(self.dir.path());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// The JSON of a command that must succeed.
    pub fn json(&self, args: &[&str]) -> Value {
        json_of(&self.run(args))
    }
}

/// Polls `check` every 20 ms until it holds; fails after a minute naming
/// `what`. A sync that walks a long page chain took over 10 s on a loaded
/// 2-core machine; a passing check returns at once, so only a failure
/// waits this long.
pub async fn until<F: Future<Output = bool>>(what: &str, check: impl Fn() -> F) {
    for _ in 0..3000 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} never happened");
}

/// The daemon in this process, on a free loopback port.
pub struct Daemon {
    pub base: String,
    pub http: reqwest::Client,
    /// Sent with every request when the daemon has one.
    token: Option<String>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Daemon {
    pub async fn start(config: Config) -> Self {
        Self::start_with(config, None, None).await
    }

    /// With `providers` in place of the config's sources, and `token` required
    /// beyond loopback.
    pub async fn start_with(
        config: Config,
        providers: Option<Vec<Box<dyn Provider>>>,
        token: Option<&str>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let options = Options {
            grace: Duration::from_secs(5),
            token: token.map(Secret::new),
        };
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = tokio::spawn(async move {
            match providers {
                Some(p) => daemon::run_with_providers(config, p, listener, options, shutdown).await,
                None => daemon::run(config, listener, options, shutdown).await,
            }
        });
        Self {
            base,
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            token: token.map(str::to_owned),
            stop,
            task,
        }
    }

    /// A request to `path`, with the token when the daemon has one.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// A GET's status and body: JSON, or the text as a JSON string.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        answer(self.request(reqwest::Method::GET, path)).await
    }

    /// A GET's body, as text.
    pub async fn text(&self, path: &str) -> String {
        let r = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        r.text().await.unwrap()
    }

    /// A POST of no body, as JSON, and its status and body.
    pub async fn post(&self, path: &str) -> (u16, Value) {
        answer(
            self.request(reqwest::Method::POST, path)
                .header("content-type", "application/json"),
        )
        .await
    }

    /// Polls the sync-run log until `done` holds for it (at most a minute,
    /// as [`until`]: a passing check returns at once).
    pub async fn runs_until(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        for _ in 0..3000 {
            let (_, runs) = self.get("/v1/sync-runs").await;
            let runs = runs.as_array().cloned().unwrap_or_default();
            if done(&runs) {
                return runs;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("sync runs never reached the expected state");
    }

    /// Whether the daemon is still running (it has not stopped by itself).
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Stops the daemon as a signal would, and checks it ended cleanly (a
    /// daemon that stopped by itself fails here with its error).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The content type of a JSON request body.
pub const JSON: (&str, &str) = ("content-type", "application/json");

/// A request as a hostile page or client would send it: any method, headers
/// and body. Answers the status, the `Retry-After` header and the body.
pub async fn raw(
    d: &Daemon,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> (u16, Option<String>, Value) {
    let mut req = d.http.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{}{path}", d.base),
    );
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.body(body).send().await.unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = r.text().await.unwrap();
    (
        status,
        retry,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// `gpuplan serve` as its own process, logging JSON; killed when dropped,
/// so a test that fails mid-way leaves no daemon behind (cargo would wait
/// for the orphan's output pipes to close).
pub struct Served {
    child: Child,
    pub base: String,
    /// Every line the daemon logged, for tests that search the log.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Served {
    /// Starts the daemon on `config`, which should listen on port 0 (the
    /// daemon logs the port it took, so no other process can take it
    /// between a test choosing it and the bind), with `env` set and
    /// `GPUPLAN_STORE_URL` taken from the config only.
    pub async fn spawn(config: &Path, env: &[(&str, &str)]) -> Self {
        let mut child = gpuplan()
            .arg("--config")
            .arg(config)
            .args(["--log-format", "json", "serve"])
            .env_remove("GPUPLAN_STORE_URL")
            .env("RUST_LOG", "warn,gpuplan=info,gpuplan_providers=info")
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(entry) = serde_json::from_str::<Value>(&line)
                    && entry["fields"]["message"] == "gpuplan is serving."
                {
                    let _ = addr_tx.send(entry["fields"]["listen"].as_str().unwrap().to_owned());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addr =
            tokio::task::spawn_blocking(move || addr_rx.recv_timeout(Duration::from_secs(30)))
                .await
                .unwrap()
                .expect("the daemon never said where it listens");
        Self {
            child,
            base: format!("http://{addr}"),
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A GET's body, as text.
    pub async fn text(&self, path: &str) -> String {
        reqwest::get(format!("{}{path}", self.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// A GET's body, as JSON.
    pub async fn get(&self, path: &str) -> Value {
        serde_json::from_str(&self.text(path).await).unwrap()
    }

    /// Sends SIGTERM and checks the daemon exits 0.
    pub fn stop(mut self) {
        self.signal("-TERM");
        assert_eq!(self.child.wait().unwrap().code(), Some(0));
    }

    /// Sends `signal` (`-TERM`, `-KILL`, ...) to the daemon.
    pub fn signal(&self, signal: &str) {
        Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
    }

    /// Waits for the process to end, after a signal.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
