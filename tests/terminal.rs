//! The CLI in a terminal: progress lines while a long sync and a long solve
//! run, a clean summary when they end, and none of it in a pipe. The
//! terminal is a real pseudo-terminal, tmux's, read from outside the way a
//! person sees it (`capture-pane`).

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::NO_CLOUDS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One tmux server of our own (its own socket), running one command in a
/// window `width` columns wide; the window stays after the command ends, so
/// its last screen can be read.
struct Tmux {
    socket: String,
    /// Whether screens keep their colours, as escape sequences.
    colours: bool,
}

impl Tmux {
    fn start(dir: &Path, width: u16, command: &str) -> Self {
        Self::start_with(dir, width, command, &[])
    }

    /// [`Tmux::start`] with `env` set for the command; screens then keep
    /// their colours.
    fn start_with(dir: &Path, width: u16, command: &str, env: &[(&str, &str)]) -> Self {
        let socket = format!("gpuplan-test-{}-{}", std::process::id(), fastrand::u32(..));
        let shell = format!("{command}; echo \"exited $?\"; sleep 600");
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", &width.to_string(), "-y", "40", "-c"])
            .arg(dir)
            .arg(shell)
            .env("TERM", "xterm-256color")
            .env("RUST_LOG", "warn")
            .env_remove("GPUPLAN_CONFIG")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR")
            .envs(env.iter().copied())
            .status()
            .expect("tmux runs (Debian's tmux package)");
        assert!(status.success());
        Self {
            socket,
            colours: !env.is_empty(),
        }
    }

    fn screen(&self) -> String {
        // -J joins lines the terminal wrapped: a line too long for the
        // window shows as one long line. -e keeps colours.
        let flags = if self.colours { "-pJe" } else { "-pJ" };
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", flags])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every distinct screen until `done` holds for one, which is returned
    /// last.
    fn screens_until(&self, done: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut seen: Vec<String> = Vec::new();
        loop {
            let screen = self.screen();
            if seen.last() != Some(&screen) {
                seen.push(screen.clone());
            }
            if done(&screen) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "the command did not end; last screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

fn exited(screen: &str) -> bool {
    screen.lines().any(|l| l.starts_with("exited "))
}

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// No escape sequence and no carriage return: what a pipe or a log file
/// must get.
fn assert_plain(what: &str, bytes: &[u8]) {
    assert!(
        !bytes.iter().any(|b| *b == 0x1b || *b == b'\r'),
        "{what} has control characters: {:?}",
        String::from_utf8_lossy(bytes)
    );
}

/// Vast.ai's bundles search, its answer sent in 20 pieces over 3 seconds.
async fn slow_vast() -> String {
    let offer = |n: u32, dph: f64, geo: &str| {
        json!({"num_gpus": n, "gpu_name": "H100 SXM", "gpu_ram": 81559, "dph_total": dph, "min_bid": dph / 2.0,
               "geolocation": geo, "verification": "verified", "rentable": true, "rented": false})
    };
    let body = json!({"offers": [offer(8, 20.0, "Texas, US"), offer(1, 2.6, "Quebec, CA")]})
        .to_string()
        .into_bytes();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut request = [0u8; 8192];
                let _ = socket.read(&mut request).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                for piece in body.chunks(body.len().div_ceil(20)) {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    if socket.write_all(piece).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    base
}

fn sync_config(dir: &Path, base: &str) {
    std::fs::write(
        dir.join("gpuplan.toml"),
        format!(
            "[store]\npath = \"catalog.db\"\n{NO_CLOUDS}[providers.vast]\nenabled = true\nendpoint = \"{base}\"\n"
        ),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_sync_draws_progress_on_a_terminal_and_nothing_in_a_pipe() {
    let base = slow_vast().await;
    let dir = tempfile::tempdir().unwrap();
    sync_config(dir.path(), &base);
    let bin = env!("CARGO_BIN_EXE_gpuplan");
    let d = dir.path().to_path_buf();
    let screens = tokio::task::spawn_blocking(move || {
        let tmux = Tmux::start(&d, 120, &format!("{bin} --config gpuplan.toml sync"));
        tmux.screens_until(exited)
    })
    .await
    .unwrap();
    let last = screens.last().unwrap();
    // While it read, a line named the source and counted what arrived.
    let drawn: Vec<&String> = screens
        .iter()
        .filter(|s| {
            s.lines()
                .any(|l| l.contains("vast") && l.contains("read in"))
        })
        .collect();
    assert!(
        drawn.len() >= 2,
        "no progress line while the sync read; screens:\n{}",
        screens.join("\n----\n")
    );
    assert!(
        drawn.iter().any(|s| s.contains(" B read in 0 answers"))
            || drawn.iter().any(|s| s.contains("KiB read")),
        "{}",
        drawn.last().unwrap()
    );
    // It ends with the summary alone: the progress line is gone.
    assert!(
        last.lines()
            .any(|l| l.starts_with("vast") && l.contains(" ok ")),
        "{last}"
    );
    assert!(!last.contains("read in"), "{last}");
    assert!(last.contains("exited 0"), "{last}");

    // What it stored, listed in a terminal too narrow for the table: every
    // row one line within the width, headers whole, the text cut with a
    // marker, the prices whole.
    let d = dir.path().to_path_buf();
    let listed = tokio::task::spawn_blocking(move || {
        let tmux = Tmux::start(&d, 90, &format!("{bin} --config gpuplan.toml prices"));
        tmux.screens_until(exited).pop().unwrap()
    })
    .await
    .unwrap();
    let rows: Vec<&str> = listed
        .lines()
        .take_while(|l| !l.starts_with("exited"))
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        rows[0].starts_with("PROVIDER  REGION  ZONE") && rows.len() == 5,
        "{listed}"
    );
    assert!(
        rows.iter().all(|l| l.trim_end().chars().count() <= 90),
        "{listed}"
    );
    assert!(rows.iter().any(|l| l.contains('…')), "{listed}");
    assert!(rows[1..].iter().any(|l| l.contains("20.0000")), "{listed}");

    // The same sync into pipes: the summary, and no control character.
    let dir = tempfile::tempdir().unwrap();
    sync_config(dir.path(), &base);
    let d = dir.path().to_path_buf();
    let out: Output = tokio::task::spawn_blocking(move || {
        support::gpuplan()
            .current_dir(&d)
            .args(["--config", "gpuplan.toml", "sync"])
            .env("TERM", "xterm-256color")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_plain("stdout", &out.stdout);
    assert_plain("stderr", &out.stderr);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("vast"));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A whole-count plan too large to prove within its 3-second limit.
fn long_problem() -> Value {
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let offers: Vec<Value> = (0..40)
        .map(|k| {
            let gpus: u32 = [1, 2, 4, 8][k % 4];
            let od = f64::from(gpus) * (1.5 + 2.5 * next());
            let cloud = ["aws", "azure", "gcp"][k % 3];
            json!({"id": format!("o{k}"), "cloud": cloud,
                   "region": format!("r{}", k % 5), "instance_type": format!("t{k}"),
                   "gpu_model": "H100-80GB", "gpu_memory_gib": 80, "gpus_per_instance": gpus,
                   "on_demand_price": od, "spot_price": od * (0.3 + 0.4 * next()),
                   "spot_interruption_rate": 0.3 * next(), "spot_pool": format!("p{}", k % 7),
                   "max_spot_instances": 3,
                   "reserved": [{"id": "1y", "term_hours": 8760, "hourly_price": od * 0.62}]})
        })
        .collect();
    let demand: Vec<f64> = (0..336)
        .map(|t| {
            let day = (f64::from(t) / 24.0 * std::f64::consts::TAU).sin();
            ((90.0 + 60.0 * day + 30.0 * (next() - 0.5)) * 100.0).round() / 100.0
        })
        .collect();
    json!({"schema_version": 1, "name": "long", "demand": demand, "offers": offers,
           "policy": {"max_spot_share": 0.5, "max_pool_share": 0.2, "integer_hourly": true}})
}

/// Writes [`long_problem`] into `dir` and returns the command that plans it
/// with `flags`, cut at `secs` seconds, the plan going to `plan.txt` (as
/// `> plan.txt` does at a prompt: its hourly rows would scroll the screen;
/// the progress is on stderr).
fn long_plan(dir: &Path, flags: &str, secs: u32) -> String {
    let problem = dir.join("long.json");
    std::fs::write(&problem, long_problem().to_string()).unwrap();
    format!(
        "{} {flags} plan --problem {} --time-limit-secs {secs} > plan.txt",
        env!("CARGO_BIN_EXE_gpuplan"),
        shell_quote(&problem)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_solve_draws_progress_on_a_terminal_and_nothing_in_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let problem = dir.path().join("long.json");
    let command = long_plan(dir.path(), "", 3);
    let d = dir.path().to_path_buf();
    let screens = tokio::task::spawn_blocking(move || {
        let tmux = Tmux::start(&d, 120, &command);
        tmux.screens_until(exited)
    })
    .await
    .unwrap();
    let last = screens.last().unwrap();
    // The line says how far the branch-and-bound got, as microlp reports it.
    let searching =
        |l: &str| l.contains("long") && l.contains("solving: nodes ") && l.contains(", bound ");
    assert!(
        screens.iter().any(|s| s.lines().any(searching)),
        "no progress line while it solved; screens:\n{}",
        screens.join("\n----\n")
    );
    // Stopped by its time limit (exit 1), the line cleared, the plan whole.
    assert_eq!(last.trim(), "exited 1", "{last}");
    let plan = std::fs::read_to_string(dir.path().join("plan.txt")).unwrap();
    assert!(plan.starts_with("long: time_limit"), "{plan}");
    assert_plain("the plan", plan.as_bytes());

    // Piped, and asked for JSON: the plan, and no control character.
    let out = tokio::task::spawn_blocking(move || {
        support::gpuplan()
            .args(["plan", "--problem"])
            .arg(&problem)
            .args(["--time-limit-secs", "3", "--json"])
            .env("TERM", "xterm-256color")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_plain("stdout", &out.stdout);
    assert_plain("stderr", &out.stderr);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["name"], "long", "{plan}");
}

#[test]
fn quiet_draws_nothing_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(dir.path(), 120, &long_plan(dir.path(), "--quiet", 2));
    let screens = tmux.screens_until(exited);
    assert!(
        !screens.iter().any(|s| s.contains("solving")),
        "{}",
        screens.join("\n----\n")
    );
    assert_eq!(screens.last().unwrap().trim(), "exited 1");
    let plan = std::fs::read_to_string(dir.path().join("plan.txt")).unwrap();
    assert!(plan.starts_with("long: time_limit"), "{plan}");
}

/// The progress line is coloured on a terminal, and plain with `NO_COLOR`.
#[test]
fn colours_follow_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let command = long_plan(dir.path(), "", 2);
    let progress_lines = |env: &[(&str, &str)]| -> Vec<String> {
        let tmux = Tmux::start_with(dir.path(), 120, &command, env);
        let screens = tmux.screens_until(exited);
        screens
            .iter()
            .flat_map(|s| s.lines())
            .filter(|l| l.contains("solving"))
            .map(str::to_owned)
            .collect()
    };
    let coloured = progress_lines(&[("CLICOLOR", "1")]);
    assert!(!coloured.is_empty());
    assert!(
        coloured.iter().all(|l| l.contains("\u{1b}[")),
        "{coloured:?}"
    );
    let plain = progress_lines(&[("NO_COLOR", "1")]);
    assert!(!plain.is_empty());
    assert!(plain.iter().all(|l| !l.contains('\u{1b}')), "{plain:?}");
}
