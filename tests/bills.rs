//! Bills end to end: the real binary and the daemon in-process, on export
//! files written as the clouds write them, with the documented JSON shapes,
//! exit codes, API bounds, plans from the bills, and a `kill -9` mid-load.

mod support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::bills::{HEADER, fixture, usage_row, workspace};
use support::{Daemon, Workspace, keys, set};

const OCTOBER: [&str; 4] = ["--since", "2026-10-01", "--until", "2026-11-01"];

#[test]
fn bills_sync_and_every_answer_have_the_documented_shapes() {
    let w = workspace("");
    w.write("bills/focus-2026-10.csv", &fixture());
    let sync = w.json(&["bills", "sync", "--json"]);
    let source = &sync["sources"][0];
    for key in [
        "source",
        "files_read",
        "files_skipped",
        "periods",
        "unmapped",
    ] {
        assert!(source.get(key).is_some(), "{key} missing from {source}");
    }
    let period = &source["periods"][0];
    assert_eq!(period["billing_account"], "111111111111");
    assert_eq!(period["billing_period"], "2026-10");
    assert_eq!(period["result"], "loaded");
    assert_eq!(period["generation"], 1);
    assert_eq!(
        (period["rows"].as_u64(), period["gpu_rows"].as_u64()),
        (Some(11), Some(5))
    );
    assert_eq!(source["unmapped"]["p4de.12xlarge"], 1);

    let usage = w.json(
        &[
            &[
                "usage",
                "--json",
                "--by",
                "hour",
                "--group",
                "team,instance_type,price_kind",
            ][..],
            &OCTOBER,
        ]
        .concat(),
    );
    let first = &usage[0];
    assert_eq!(
        keys(first),
        set(&[
            "start",
            "team",
            "instance_type",
            "price_kind",
            "instance_hours",
            "gpu_hours",
            "billed_cost",
            "effective_cost",
            "currency"
        ])
    );
    assert_eq!(first["start"], "2026-10-01T00:00:00Z");
    let ungrouped = w.json(&[&["usage", "--json", "--by", "month"][..], &OCTOBER].concat());
    assert_eq!(ungrouped.as_array().unwrap().len(), 1);
    assert_eq!(ungrouped[0]["gpu_hours"], 28.0);
    assert_eq!(ungrouped[0]["start"], "2026-10-01T00:00:00Z");

    let spend = w.json(
        &[
            &[
                "spend",
                "--json",
                "--by",
                "month",
                "--group",
                "team",
                "--gpu-only",
            ][..],
            &OCTOBER,
        ]
        .concat(),
    );
    assert_eq!(
        keys(&spend[0]),
        set(&[
            "start",
            "team",
            "billed_cost",
            "effective_cost",
            "allocated_billed_cost",
            "allocated_effective_cost",
            "currency"
        ])
    );

    let commitments = w.json(&[&["commitments", "--json"][..], &OCTOBER].concat());
    assert_eq!(
        keys(&commitments[0]),
        set(&[
            "id",
            "provider",
            "source",
            "type",
            "category",
            "unit",
            "region",
            "instance_type",
            "first_seen",
            "last_seen",
            "used_quantity",
            "unused_quantity",
            "utilization",
            "covered_instance_hours",
            "covered_gpu_hours",
            "currency"
        ])
    );
    let coverage = w.json(&[&["coverage", "--json"][..], &OCTOBER].concat());
    assert_eq!(
        keys(&coverage[0]),
        set(&[
            "provider",
            "region",
            "instance_type",
            "on_demand_hours",
            "covered_hours",
            "coverage"
        ])
    );

    let status = w.json(&["bills", "status", "--json"]);
    for key in [
        "source",
        "billing_account",
        "billing_period",
        "state",
        "generation",
        "rows",
        "billed_cost",
        "effective_cost",
        "gpu_hours",
        "loaded_at",
        "restatements",
        "corrections",
    ] {
        assert!(
            status[0].get(key).is_some(),
            "{key} missing from {}",
            status[0]
        );
    }
    // The text forms print too.
    for args in [
        &["bills", "status"][..],
        &[&["usage", "--group", "team"][..], &OCTOBER].concat(),
    ] {
        let out = w.run(args);
        assert!(out.status.success());
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
    let again = w.json(&["bills", "sync", "--json"]);
    assert_eq!(again["sources"][0]["files_skipped"], 1);
}

#[test]
fn a_bad_file_makes_bills_sync_exit_1_and_bad_flags_exit_2() {
    let w = workspace("");
    w.write(
        "bills/bad.csv",
        &format!(
            "{HEADER}\n{}\n{}\n",
            usage_row(0, "g6.xlarge", "ml", 0.8),
            usage_row(1, "g6.xlarge", "ml", 0.8).replace(",0.8,", ",zero,")
        ),
    );
    let out = w.run(&["bills", "sync", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &report["sources"][0]["periods"][0];
    assert_eq!(p["result"], "failed");
    assert_eq!(p["error"], "bad.csv:3: BilledCost: `zero` is not a number");
    assert!(String::from_utf8_lossy(&out.stderr).contains("failed to load"));

    for (args, flag) in [
        (&["usage", "--by", "week"][..], "--by"),
        (&["usage", "--group", "colour"][..], "--group"),
        (&["spend", "--since", "yesterday"][..], "--since"),
        (
            &[
                "usage",
                "--by",
                "hour",
                "--since",
                "2025-01-01",
                "--until",
                "2026-01-01",
            ][..],
            "--since",
        ),
        (&["bills", "sync", "--source", "nope"][..], "--source"),
    ] {
        let out = w.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(flag),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_plan_forecasts_from_the_bills_up_to_their_last_complete_hour() {
    let w = workspace("[providers.file.sheet]\npath = \"sheet.csv\"\n");
    w.write(
        "sheet.csv",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\n\
         us-east-1,p5.48xlarge,H100-80GB,8,on_demand,98.32\n\
         us-east-1,p5.48xlarge,H100-80GB,8,reserved_1y,60.00\n",
    );
    assert!(w.run(&["sync"]).status.success());
    // Three days and two hours: one p5 (8 GPUs) for ml every hour, a g6 for
    // research in daytime. The last day has only two hours: it is not complete.
    let mut rows = vec![HEADER.to_owned()];
    for hour in 0..74 {
        rows.push(usage_row(hour, "p5.48xlarge", "ml", 98.32));
        if (8..20).contains(&(hour % 24)) {
            rows.push(usage_row(hour, "g6.xlarge", "research", 0.8));
        }
    }
    w.write("bills/oct.csv", &(rows.join("\n") + "\n"));
    assert!(w.run(&["bills", "sync"]).status.success());
    let plan = w.json(&[
        "plan",
        "--usage-from-bills",
        "--team",
        "ml",
        "--gpu",
        "H100",
        "--horizon-hours",
        "24",
        "--json",
    ]);
    assert_eq!(plan["status"], "optimal", "{plan}");
    let usage = &plan["forecast"]["usage"];
    assert_eq!(usage["hours"], 72);
    assert_eq!(usage["from"], "2026-10-01T00:00:00Z");
    assert_eq!(usage["until"], "2026-10-04T00:00:00Z");
    // A flat 8 GPUs is a flat forecast, met by a reserved baseline.
    let gpus = plan["forecast"]["gpus"].as_array().unwrap();
    assert!(
        gpus.iter()
            .all(|g| (g.as_f64().unwrap() - 8.0).abs() < 1e-6),
        "{gpus:?}"
    );

    let text = w.run(&[
        "plan",
        "--usage-from-bills",
        "--team",
        "ml",
        "--horizon-hours",
        "24",
    ]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("Usage from the bills: 72 h from 2026-10-01 00:00 to 2026-10-04 00:00")
    );
    let none = w.run(&[
        "plan",
        "--usage-from-bills",
        "--team",
        "nobody",
        "--horizon-hours",
        "24",
        "--json",
    ]);
    assert_eq!(
        none.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&none.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_loads_bills_on_start_and_serves_them_bounded() {
    let w = workspace("");
    w.write("bills/focus-2026-10.csv", &fixture());
    let d = Daemon::start(w.config()).await;
    let mut loaded = Value::Null;
    for _ in 0..500 {
        let (status, body) = d.get("/v1/bills").await;
        if status == 200 && body.as_array().is_some_and(|a| !a.is_empty()) {
            loaded = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(loaded[0]["generation"], 1, "{loaded}");
    assert_eq!(loaded[0]["gpu_hours"], 28.0);

    let (status, usage) = d
        .get("/v1/usage?since=2026-10-01&until=2026-11-01&by=month&group=team")
        .await;
    assert_eq!(status, 200);
    let total: f64 = usage
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["gpu_hours"].as_f64().unwrap())
        .sum();
    assert!((total - 28.0).abs() < 1e-9);
    let (_, spend) = d
        .get("/v1/spend?since=2026-10-01&until=2026-11-01&gpu_only=true")
        .await;
    assert!(!spend.as_array().unwrap().is_empty());
    let (status, c) = d
        .get("/v1/commitments?since=2026-10-01&until=2026-11-01")
        .await;
    assert_eq!((status, c[0]["type"].as_str()), (200, Some("savings_plan")));
    let (status, _) = d
        .get("/v1/coverage?since=2026-10-01&until=2026-11-01&provider=aws")
        .await;
    assert_eq!(status, 200);

    for (query, parameter) in [
        ("/v1/usage?by=week", "by"),
        ("/v1/usage?group=team,colour", "group"),
        ("/v1/usage?since=2000-01-01", "since"),
        ("/v1/usage?limit=0", "limit"),
        ("/v1/usage?limit=ten", "limit"),
        ("/v1/usage?price_kind=cheap", "price_kind"),
        ("/v1/spend?gpu_only=maybe", "gpu_only"),
        ("/v1/spend?price_kind=spot", "price_kind"),
        ("/v1/commitments?until=soon", "until"),
        ("/v1/bills?source=a&source=b", "source"),
    ] {
        let (status, body) = d.get(query).await;
        assert_eq!(
            (status, body["parameter"].as_str()),
            (400, Some(parameter)),
            "{query}: {body}"
        );
    }
    // More rows than the limit: refused, not cut.
    let (status, body) = d
        .get("/v1/usage?since=2026-10-01&until=2026-11-01&by=hour&group=team&limit=1")
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("more than 1"));

    d.stop().await;
}

/// The stored generation and its GPU-hours, and the GPU-hours its usage
/// rows add up to: the two agree whatever moment a load was killed at.
fn stored(w: &Workspace) -> (i64, f64, f64) {
    let status = w.json(&["bills", "status", "--json"]);
    let usage = w.json(&[&["usage", "--json", "--by", "month"][..], &OCTOBER].concat());
    let summed: f64 = usage
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["gpu_hours"].as_f64().unwrap())
        .sum();
    (
        status[0]["generation"].as_i64().unwrap(),
        status[0]["gpu_hours"].as_f64().unwrap(),
        summed,
    )
}

#[test]
fn kill_9_in_the_middle_of_a_load_leaves_the_previous_generation_intact() {
    let w = workspace("");
    w.write(
        "bills/oct.csv",
        &format!("{HEADER}\n{}\n", usage_row(0, "p5.48xlarge", "ml", 98.32)),
    );
    assert!(w.run(&["bills", "sync"]).status.success());
    assert_eq!(stored(&w), (1, 8.0, 8.0));

    // A month of hours for 40 teams: tens of thousands of aggregate rows to
    // write, so a kill lands in the parse, in the write or after it.
    let mut big = String::from(HEADER);
    big.push('\n');
    for hour in 0..720 {
        for team in 0..40 {
            big.push_str(&usage_row(hour, "g6.xlarge", &format!("team-{team}"), 0.8));
            big.push('\n');
        }
    }
    w.write("bills/oct.csv", &big);
    let full = 720.0 * 40.0;
    let started = std::time::Instant::now();
    let mut timed = w.command(&["bills", "sync"]).spawn().unwrap();
    timed.wait().unwrap();
    let whole = started.elapsed();
    // That load finished: go back to generation 1's file, load it, then kill
    // loads of the big file at points through its run.
    w.write(
        "bills/oct.csv",
        &format!("{HEADER}\n{}\n", usage_row(0, "p5.48xlarge", "ml", 98.32)),
    );
    assert!(w.run(&["bills", "sync"]).status.success());
    let mut seen = BTreeSet::new();
    for pct in [30, 50, 70, 80, 90, 95, 100, 105, 110] {
        let (generation, gpu_hours, summed) = stored(&w);
        assert_eq!((gpu_hours, summed), (8.0, 8.0));
        w.write("bills/oct.csv", &big);
        let mut child = w.command(&["bills", "sync"]).spawn().unwrap();
        std::thread::sleep(whole * pct / 100);
        let killed = Command::new("kill")
            .args(["-9", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let _ = child.wait();
        let (g, hours, summed) = stored(&w);
        assert!(
            (hours - summed).abs() < 1e-6,
            "after a kill at {pct}%: stored {hours}, rows add to {summed}"
        );
        assert!(
            (g == generation && hours == 8.0) || (g > generation && (hours - full).abs() < 1e-6),
            "after a kill at {pct}%: generation {g} with {hours} GPU-hours"
        );
        seen.insert(g > generation);
        // Back to the small file for the next round, whatever this one left.
        w.write(
            "bills/oct.csv",
            &format!("{HEADER}\n{}\n", usage_row(0, "p5.48xlarge", "ml", 98.32)),
        );
        assert!(w.run(&["bills", "sync"]).status.success());
    }
    // A load that is let run ends with the new delivery, whole.
    w.write("bills/oct.csv", &big);
    assert!(w.run(&["bills", "sync"]).status.success());
    let (_, hours, summed) = stored(&w);
    assert_eq!((hours, summed), (full, full));
    eprintln!("a whole load took {whole:?}; kills left the new generation {seen:?}");
}

/// A moto S3 server on a free loopback port, stopped when dropped. `None`
/// (the test is skipped) where moto is not installed, unless CI requires it.
struct Moto {
    child: std::process::Child,
    endpoint: String,
}

impl Moto {
    fn start() -> Option<Self> {
        let bin = std::env::var("GPUPLAN_MOTO_SERVER").unwrap_or_else(|_| "moto_server".to_owned());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = match Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    std::env::var_os("GPUPLAN_TEST_S3_REQUIRED").is_none(),
                    "{bin} cannot start: {e}"
                );
                eprintln!("skipped: {bin} is not installed ({e})");
                return None;
            }
        };
        let moto = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(moto);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("moto_server did not start listening on {port}");
    }

    fn store(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_access_key_id("testing")
            .with_secret_access_key("testing")
            .build()
            .unwrap()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aws_export_bucket_is_read_in_place_from_a_real_s3_server() {
    use object_store::{ObjectStoreExt as _, PutPayload};

    let Some(moto) = Moto::start() else { return };
    let store = moto.store("bills-bucket");
    // moto creates a bucket on a PUT of the bucket itself.
    reqwest::Client::new()
        .put(format!("{}/bills-bucket", moto.endpoint))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    let put = |key: &str, body: String| {
        let store = &store;
        let key = object_store::path::Path::from(key);
        async move {
            store.put(&key, PutPayload::from(body)).await.unwrap();
        }
    };
    let data = "exports/focus/data/billing_period=2026-10";
    let one = format!("{HEADER}\n{}\n", usage_row(0, "p5.48xlarge", "ml", 98.32));
    let two = format!("{one}{}\n", usage_row(1, "p5.48xlarge", "ml", 98.32));
    put(
        &format!("{data}/2026-10-02T00:00:00Z-old/focus-00001.csv"),
        one.clone(),
    )
    .await;
    put(
        &format!("{data}/2026-10-03T00:00:00Z-new/focus-00001.csv"),
        two.clone(),
    )
    .await;
    put(
        "exports/focus/metadata/billing_period=2026-10/focus-Manifest.json",
        r#"{"executionId":"new","dataFiles":["s3://bills-bucket/exports/focus/data/billing_period=2026-10/2026-10-03T00:00:00Z-new/focus-00001.csv"]}"#
            .to_owned(),
    )
    .await;
    // Not under the source's prefix: never listed.
    put("elsewhere/focus-00001.csv", one.clone()).await;

    let w = workspace("");
    let config = w.path("gpuplan.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "path = \"bills\"",
        &format!(
            "url = \"s3://bills-bucket/exports\"\nendpoint = \"{}\"\nregion = \"us-east-1\"",
            moto.endpoint
        ),
    );
    std::fs::write(&config, text).unwrap();
    let run = |args: &[&str]| {
        w.command(args)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("HOME", w.path(""))
            .output()
            .unwrap()
    };
    let report = |args: &[&str]| -> (Option<i32>, Value) {
        let out = run(args);
        (
            out.status.code(),
            serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        )
    };

    let (code, r) = report(&["bills", "sync", "--json"]);
    assert_eq!(code, Some(0), "{r}");
    let s = &r["sources"][0];
    assert_eq!(
        (s["files_read"].as_u64(), s["files_excluded"].as_u64()),
        (Some(1), Some(1)),
        "{s}"
    );
    assert_eq!(s["periods"][0]["result"], "loaded");
    let usage: Value = serde_json::from_slice(
        &run(&[&["usage", "--json", "--by", "month"][..], &OCTOBER].concat()).stdout,
    )
    .unwrap();
    assert_eq!(usage[0]["gpu_hours"], 16.0);

    // Unchanged objects are not fetched again.
    let (_, r) = report(&["bills", "sync", "--json"]);
    assert_eq!(r["sources"][0]["files_skipped"], 1, "{r}");

    // A rewritten object is read again and replaces its period (October is
    // past AWS's two weeks of grace, so the change is a restatement).
    let three = format!("{two}{}\n", usage_row(2, "p5.48xlarge", "ml", 98.32));
    put(
        &format!("{data}/2026-10-03T00:00:00Z-new/focus-00001.csv"),
        three.clone(),
    )
    .await;
    let (_, r) = report(&["bills", "sync", "--json"]);
    assert_eq!(r["sources"][0]["periods"][0]["result"], "restated", "{r}");
    assert_eq!(r["sources"][0]["periods"][0]["deltas"]["gpu_hours"], 8.0);

    // An object larger than what is read in memory goes through a file:
    // four rows padded past 64 MB in a column gpuplan ignores.
    let pad = "x".repeat(17 << 20);
    let big: String = format!("{HEADER},x_Padding\n")
        + &(3..7)
            .map(|h| format!("{},{pad}\n", usage_row(h, "p5.48xlarge", "ml", 98.32)))
            .collect::<String>();
    put("exports/other/big.csv", big).await;
    let (code, r) = report(&["bills", "sync", "--json"]);
    assert_eq!(code, Some(0), "{r}");
    let usage: Value = serde_json::from_slice(
        &run(&[&["usage", "--json", "--by", "month"][..], &OCTOBER].concat()).stdout,
    )
    .unwrap();
    assert_eq!(usage[0]["gpu_hours"], 56.0);
    store
        .delete(&object_store::path::Path::from("exports/other/big.csv"))
        .await
        .unwrap();
    let (_, r) = report(&["bills", "sync", "--json"]);
    assert_eq!(r["sources"][0]["periods"][0]["result"], "restated", "{r}");

    // A corrupt object fails its period by name; the stored rows stay.
    put(
        &format!("{data}/2026-10-03T00:00:00Z-new/focus-00001.csv"),
        format!("{three}111111111111,2026-10-01T00:00:00Z\n"),
    )
    .await;
    let (code, r) = report(&["bills", "sync", "--json"]);
    assert_eq!(code, Some(1));
    let error = r["sources"][0]["periods"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.starts_with(
            "focus/data/billing_period=2026-10/2026-10-03T00:00:00Z-new/focus-00001.csv: line 5"
        ),
        "{r}"
    );
    let usage: Value = serde_json::from_slice(
        &run(&[&["usage", "--json", "--by", "month"][..], &OCTOBER].concat()).stdout,
    )
    .unwrap();
    assert_eq!(usage[0]["gpu_hours"], 24.0);

    // A server that does not answer is named, and nothing is lost.
    drop(moto);
    let (code, r) = report(&["bills", "sync", "--json"]);
    assert_eq!(code, Some(1));
    let errors = r["sources"][0]["errors"].to_string();
    assert!(
        errors.contains("s3://bills-bucket/exports: cannot list"),
        "{errors}"
    );
    let usage: Value = serde_json::from_slice(
        &run(&[&["usage", "--json", "--by", "month"][..], &OCTOBER].concat()).stdout,
    )
    .unwrap();
    assert_eq!(usage[0]["gpu_hours"], 24.0);
}

/// Whether CI requires the storage emulators: their absence fails there and
/// skips elsewhere.
fn emulators_required() -> bool {
    std::env::var_os("GPUPLAN_TEST_EMULATORS_REQUIRED").is_some()
}

/// A storage emulator's process, stopped when dropped.
struct Emulator {
    child: std::process::Child,
    port: u16,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `bin` (named by `var`, else found on PATH) with `args`; `None`
/// (the test is skipped) where it is not installed, unless CI requires it.
fn spawn_emulator(
    var: &str,
    default: &str,
    args: &[String],
    piped: bool,
) -> Option<std::process::Child> {
    let bin = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    let out = if piped {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    };
    match Command::new(&bin)
        .args(args)
        .stdout(out)
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(!emulators_required(), "{bin} cannot start: {e}");
            eprintln!("skipped: {bin} is not installed ({e}); set {var}");
            None
        }
    }
}

impl Emulator {
    /// Azurite's blob service, in memory, on a port it picks and prints.
    fn azurite() -> Option<Self> {
        use std::io::BufRead as _;
        let args = "--blobHost 127.0.0.1 --blobPort 0 --inMemoryPersistence --skipApiVersionCheck \
                    --loose --silent --disableTelemetry --extentMemoryLimit 64";
        let args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
        let mut child = spawn_emulator("GPUPLAN_AZURITE_BLOB", "azurite-blob", &args, true)?;
        let stdout = child.stdout.take().unwrap();
        let mut emulator = Self { child, port: 0 };
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some(port) = line
                .split("successfully listens on http://127.0.0.1:")
                .nth(1)
            {
                emulator.port = port.trim().parse().unwrap();
                return Some(emulator);
            }
        }
        panic!("azurite exited before it listened");
    }

    /// fake-gcs-server, in memory; its XML API answers only the host and
    /// port it is told it is public on.
    fn fake_gcs() -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let args: Vec<String> = [
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            &port.to_string(),
            "-public-host",
            &format!("127.0.0.1:{port}"),
            "-external-url",
            &format!("http://127.0.0.1:{port}"),
            "-backend",
            "memory",
            "-log-level",
            "error",
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
        let child = spawn_emulator("GPUPLAN_FAKE_GCS_SERVER", "fake-gcs-server", &args, false)?;
        let emulator = Self { child, port };
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(emulator);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("fake-gcs-server did not start listening on {port}");
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Creates container `container` in Azurite and uploads every file under
/// `root` into it by its path: Azurite takes only signed requests, signed
/// here with the emulator's published account key (Shared Key).
const AZURITE_UPLOAD: &str = r#"
import base64, email.utils, hashlib, hmac, os, sys, urllib.parse, urllib.request
port, container, root = sys.argv[1], sys.argv[2], sys.argv[3]
account = "devstoreaccount1"
key = base64.b64decode("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
def put(path, query, body, extra):
    headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": "2023-11-03", **extra}
    length, ctype = (str(len(body)), "application/octet-stream") if body else ("", "")
    canon = "".join(f"{k}:{headers[k]}\n" for k in sorted(headers))
    resource = f"/{account}{path}" + "".join(f"\n{k}:{v}" for k, v in sorted(query.items()))
    signed = f"PUT\n\n\n{length}\n\n{ctype}\n\n\n\n\n\n\n{canon}{resource}"
    sig = base64.b64encode(hmac.new(key, signed.encode(), hashlib.sha256).digest()).decode()
    headers["Authorization"] = f"SharedKey {account}:{sig}"
    if body:
        headers["Content-Type"] = ctype
    else:
        headers["Content-Length"] = "0"
    url = f"http://127.0.0.1:{port}{path}" + ("?" + urllib.parse.urlencode(query) if query else "")
    urllib.request.urlopen(urllib.request.Request(url, data=body or None, method="PUT", headers=headers)).read()
put(f"/{account}/{container}", {"restype": "container"}, b"", {})
for folder, _, files in os.walk(root):
    for f in files:
        full = os.path.join(folder, f)
        name = os.path.relpath(full, root).replace(os.sep, "/")
        with open(full, "rb") as data:
            put(f"/{account}/{container}/" + urllib.parse.quote(name), {}, data.read(), {"x-ms-blob-type": "BlockBlob"})
"#;

/// An Azure Cost Management export as it lands in its container: two runs
/// of one export and month, each with its `manifest.json`; only the later
/// run counts.
fn azure_export(w: &Workspace) {
    let fixture = fixture();
    let older: String = fixture.lines().take(3).map(|l| format!("{l}\n")).collect();
    for (run, submitted, text) in [
        ("run-1", "2026-10-10T06:00:00Z", older),
        ("run-2", "2026-10-20T06:00:00Z", fixture),
    ] {
        let dir = format!("bills/exports/focus-daily/20261001-20261031/{run}");
        w.write(&format!("{dir}/part_0_0001.csv"), &text);
        w.write(
            &format!("{dir}/manifest.json"),
            &format!(
                r#"{{"manifestVersion":"2024-04-01","exportConfig":{{"exportName":"focus-daily","type":"FocusCost"}},
                   "runInfo":{{"submittedTime":"{submitted}","runId":"{run}","startDate":"2026-10-01T00:00:00","endDate":"2026-10-31T00:00:00"}},
                   "blobs":[{{"blobName":"exports/focus-daily/20261001-20261031/{run}/part_0_0001.csv","byteCount":{}}}]}}"#,
                text.len()
            ),
        );
    }
}

/// The answers a load gives, as text: usage by hour, spend by day, and
/// commitments, over October.
fn answers(w: &Workspace, env: &[(&str, String)]) -> Vec<String> {
    let run = |args: &[&str]| {
        let mut c = w.command(&[args, &OCTOBER[..]].concat());
        for (k, v) in env {
            c.env(k, v);
        }
        support::json_of(&c.output().unwrap()).to_string()
    };
    vec![
        run(&[
            "usage",
            "--json",
            "--by",
            "hour",
            "--group",
            "team,instance_type,price_kind,provider",
        ]),
        run(&[
            "spend",
            "--json",
            "--by",
            "day",
            "--group",
            "team,provider,account",
        ]),
        run(&["commitments", "--json"]),
    ]
}

/// `bills sync --json` with `env` (and no other cloud variables): exit
/// code, report, and everything printed.
fn cloud_sync(w: &Workspace, env: &[(&str, String)]) -> (Option<i32>, Value, String) {
    let mut c = w.command(&["bills", "sync", "--json"]);
    for (k, _) in std::env::vars() {
        if k.starts_with("AZURE_") || k.starts_with("GOOGLE_") || k.starts_with("AZURITE_") {
            c.env_remove(k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        printed,
    )
}

/// Rewrites `from` in the workspace's config as `to`.
fn reconfigure(w: &Workspace, from: &str, to: &str) {
    let config = w.config_path();
    let text = std::fs::read_to_string(&config).unwrap().replace(from, to);
    std::fs::write(&config, text).unwrap();
}

/// Points the workspace's source at `url` instead of its folder.
fn read_from(w: &Workspace, url: &str) {
    reconfigure(w, "path = \"bills\"", &format!("url = \"{url}\""));
}

/// Asserts a sync report's files read and skipped.
fn assert_files(r: &Value, read: u64, skipped: u64) {
    let s = &r["sources"][0];
    assert_eq!(
        (s["files_read"].as_u64(), s["files_skipped"].as_u64()),
        (Some(read), Some(skipped)),
        "{s}"
    );
}

#[test]
fn an_azure_export_container_is_read_in_place_as_its_folder_copy_reads() {
    let Some(azurite) = Emulator::azurite() else {
        return;
    };
    let local = workspace("");
    azure_export(&local);
    let upload = Command::new("python3")
        .args(["-c", AZURITE_UPLOAD, &azurite.port.to_string(), "costs"])
        .arg(local.path("bills"))
        .output()
        .unwrap();
    assert!(
        upload.status.success(),
        "{}",
        String::from_utf8_lossy(&upload.stderr)
    );

    let folder = local.json(&["bills", "sync", "--json"]);
    assert_eq!(folder["sources"][0]["files_read"], 1, "{folder}");
    let cloud = workspace("");
    read_from(&cloud, "az://costs/exports");
    let env = vec![
        ("AZURE_STORAGE_USE_EMULATOR", "true".to_owned()),
        ("AZURITE_BLOB_STORAGE_URL", azurite.base()),
    ];
    let (code, r, printed) = cloud_sync(&cloud, &env);
    assert_eq!(code, Some(0), "{printed}");
    let s = &r["sources"][0];
    assert_eq!(
        (s["files_read"].as_u64(), s["files_excluded"].as_u64()),
        (Some(1), Some(1)),
        "{s}"
    );
    assert_eq!(answers(&cloud, &[]), answers(&local, &[]));
    // Unchanged blobs (same ETags) are not read again.
    let (_, r, _) = cloud_sync(&cloud, &env);
    assert_files(&r, 0, 1);

    // A container that is not there fails the source by its URL; the
    // stored answers stay.
    reconfigure(&cloud, "az://costs/exports", "az://no-such-costs/exports");
    let (code, r, _) = cloud_sync(&cloud, &env);
    assert_eq!(code, Some(1));
    let errors = r["sources"][0]["errors"].to_string();
    assert!(
        errors.contains("az://no-such-costs/exports: cannot list")
            && errors.contains("ContainerNotFound"),
        "{errors}"
    );
    assert_eq!(answers(&cloud, &[]), answers(&local, &[]));

    // A SAS the server refuses is never shown, in the answer, the log or
    // the catalog.
    let secret = "c2VjcmV0LXNhcy1zaWduYXR1cmU";
    let mut with_sas = env.clone();
    with_sas.push((
        "AZURE_STORAGE_SAS_TOKEN",
        format!("sv=2023-11-03&sp=rl&sig={secret}"),
    ));
    reconfigure(&cloud, "az://no-such-costs/exports", "az://costs/exports");
    let (code, r, printed) = cloud_sync(&cloud, &with_sas);
    assert_eq!(code, Some(1), "{printed}");
    assert!(
        r["sources"][0]["errors"]
            .to_string()
            .contains("az://costs/exports"),
        "{r}"
    );
    assert!(!printed.contains(secret), "{printed}");
    let catalog = std::fs::read(cloud.path("catalog.db")).unwrap();
    assert!(
        !catalog
            .windows(secret.len())
            .any(|w| w == secret.as_bytes())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_storage_bucket_is_read_in_place_as_its_folder_copy_reads() {
    let Some(gcs) = Emulator::fake_gcs() else {
        return;
    };
    let client = reqwest::Client::new();
    client
        .post(format!("{}/storage/v1/b", gcs.base()))
        .json(&serde_json::json!({ "name": "acme-billing" }))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    // BigQuery's FOCUS export written out as files, one folder a month.
    let local = workspace("");
    let fixture = fixture();
    let (head, rest) = fixture.split_at(fixture.find('\n').unwrap() + 1);
    let half = rest.lines().count() / 2;
    let part = |lines: Vec<&str>| format!("{head}{}\n", lines.join("\n"));
    let files = [
        (
            "focus/2026-10/focus-000000000000.csv",
            part(rest.lines().take(half).collect()),
        ),
        (
            "focus/2026-10/focus-000000000001.csv",
            part(rest.lines().skip(half).collect()),
        ),
    ];
    for (name, text) in &files {
        local.write(&format!("bills/{name}"), text);
        let name: String = url_encoded(name);
        client
            .post(format!(
                "{}/upload/storage/v1/b/acme-billing/o?uploadType=media&name={name}",
                gcs.base()
            ))
            .header("content-type", "text/csv")
            .body(text.clone())
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap();
    }
    let folder = local.json(&["bills", "sync", "--json"]);
    assert_eq!(folder["sources"][0]["files_read"], 2, "{folder}");

    let cloud = workspace("");
    read_from(&cloud, "gs://acme-billing/focus");
    // The emulator's address rides in a service account file, as
    // object_store's own tests reach it.
    let account = cloud.path("service-account.json");
    std::fs::write(
        &account,
        serde_json::json!({
            "gcs_base_url": gcs.base(),
            "disable_oauth": true,
            "client_email": "",
            "private_key": "",
            "private_key_id": "",
        })
        .to_string(),
    )
    .unwrap();
    let env = vec![("GOOGLE_SERVICE_ACCOUNT", account.display().to_string())];
    let (code, r, printed) = tokio::task::block_in_place(|| cloud_sync(&cloud, &env));
    assert_eq!(code, Some(0), "{printed}");
    assert_eq!(r["sources"][0]["files_read"], 2, "{r}");
    tokio::task::block_in_place(|| {
        assert_eq!(answers(&cloud, &[]), answers(&local, &[]));
    });
    let (_, r, _) = tokio::task::block_in_place(|| cloud_sync(&cloud, &env));
    assert_files(&r, 0, 2);

    // A bucket that is not there fails the source by its URL.
    reconfigure(
        &cloud,
        "gs://acme-billing/focus",
        "gs://no-such-billing/focus",
    );
    let (code, r, _) = tokio::task::block_in_place(|| cloud_sync(&cloud, &env));
    assert_eq!(code, Some(1));
    let errors = r["sources"][0]["errors"].to_string();
    assert!(
        errors.contains("gs://no-such-billing/focus: cannot list"),
        "{errors}"
    );
}

/// Every byte but letters and digits as `%XX`, as a query value.
fn url_encoded(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
