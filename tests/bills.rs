//! Bills end to end: the real binary and the daemon in-process, on export
//! files written as the clouds write them, with the documented JSON shapes,
//! exit codes, API bounds, plans from the bills, and a `kill -9` mid-load.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gpuplan::store::{SqliteStore, Writes as _};
use gpuplan_providers::{InstanceType, PriceKind, PriceRecord, PriceScope, Scope, Snapshot};
use serde_json::Value;
use support::{Daemon, NO_CLOUDS, Workspace};

const HEADER: &str = "BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,PricingCategory,BilledCost,EffectiveCost,BillingCurrency,ConsumedQuantity,ConsumedUnit,RegionId,SubAccountId,ServiceCategory,SkuPriceDetails,Tags";

/// One hour of `instance_type` run by `team`, starting `hour` hours after
/// 2026-10-01T00:00Z.
fn usage_row(hour: u32, instance_type: &str, team: &str, cost: f64) -> String {
    let start = chrono::DateTime::parse_from_rfc3339("2026-10-01T00:00:00Z").unwrap()
        + chrono::Duration::hours(i64::from(hour));
    let end = start + chrono::Duration::hours(1);
    let f = |t: chrono::DateTime<chrono::FixedOffset>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    format!(
        "111111111111,2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,{},{},Usage,,Standard,{cost},{cost},USD,1,Hrs,us-east-1,222222222222,Compute,\"{{\"\"InstanceType\"\":\"\"{instance_type}\"\"}}\",\"{{\"\"team\"\":\"\"{team}\"\"}}\"",
        f(start),
        f(end)
    )
}

/// A workspace whose config reads FOCUS files from `bills/`, with `extra`
/// config lines.
fn workspace(extra: &str) -> Workspace {
    let w = Workspace::new(&format!(
        "[store]\npath = \"catalog.db\"\n{NO_CLOUDS}\
         [bills.aws]\nformat = \"focus\"\nprovider = \"aws\"\npath = \"bills\"\nteam_tags = [\"team\", \"project\"]\n\
         teams_by_account = {{ \"333333333333\" = \"research\" }}\n{extra}"
    ));
    std::fs::create_dir_all(w.path("bills")).unwrap();
    w
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn fixture() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/bills/aws-focus/focus-2026-10.csv"),
    )
    .unwrap()
}

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

const BUDGETS: &str = "[alerts.channels.ops]\ntype = \"log\"\n\n[allocation]\nunallocated = \"proportional\"\n\n\
    [[budgets]]\nname = \"ml-monthly\"\namount = 1000.0\ncurrency = \"USD\"\nteams = [\"ml\"]\n\
    thresholds = [{ percent = 10, on = \"actual\" }, { percent = 1000, on = \"forecast\" }]\nchannels = [\"ops\"]\n";

/// The fixture's 1 October and one more hour on the 2nd, so the 1st is complete.
fn two_days(w: &Workspace) {
    w.write("bills/focus-2026-10.csv", &fixture());
    w.write(
        "bills/focus-2026-10-b.csv",
        &format!("{HEADER}\n{}\n", usage_row(25, "m5.xlarge", "web", 1.0)),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_evaluates_budgets_after_a_load_and_tells_their_channels_once() {
    let w = workspace(BUDGETS);
    two_days(&w);
    let d = Daemon::start(w.config()).await;
    let mut messages = Value::Null;
    for _ in 0..500 {
        let (_, alerts) = d.get("/v1/alerts").await;
        if alerts["messages"].as_array().is_some_and(|m| !m.is_empty()) {
            messages = alerts["messages"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let messages = messages.as_array().expect("a budget message");
    assert_eq!(messages.len(), 1, "{messages:?}");
    let m = &messages[0]["payload"];
    assert_eq!(m["rule"], "budget:ml-monthly");
    assert_eq!(m["key"], "actual:10:2026-10");
    assert_eq!(m["details"]["complete_to"], "2026-10-01");

    let (status, budgets) = d.get("/v1/budgets").await;
    assert_eq!(status, 200);
    let b = &budgets[0];
    assert_eq!(b["period"], "2026-10");
    assert_eq!(b["complete_to"], "2026-10-01");
    assert_eq!(b["allocated"], true);
    assert_eq!(b["thresholds"][0]["state"], "crossed");
    assert!(b["thresholds"][0]["fired_at"].is_string());
    assert_eq!(b["thresholds"][1]["state"], "ok");
    let (status, body) = d.get("/v1/budgets?name=x").await;
    assert_eq!((status, body["parameter"].as_str()), (400, Some("name")));

    d.stop().await;
}

#[test]
fn budgets_and_allocated_spend_from_the_cli() {
    let w = workspace(BUDGETS);
    two_days(&w);
    assert!(w.run(&["bills", "sync"]).status.success());
    let budgets = w.json(&["budgets", "--json"]);
    let b = &budgets[0];
    assert_eq!(
        keys(b),
        set(&[
            "name",
            "amount",
            "currency",
            "basis",
            "period",
            "period_start",
            "period_end",
            "complete_to",
            "actual",
            "forecast",
            "actual_percent",
            "forecast_percent",
            "daily_mean",
            "days_averaged",
            "days_left",
            "allocated",
            "other_currencies",
            "thresholds",
        ])
    );
    assert_eq!(
        (b["days_averaged"].as_i64(), b["days_left"].as_i64()),
        (Some(1), Some(30))
    );
    let spend = w.json(&[
        "spend",
        "--since",
        "2026-10-01",
        "--until",
        "2026-11-01",
        "--group",
        "team",
        "--json",
    ]);
    let rows = spend.as_array().unwrap();
    let direct: f64 = rows
        .iter()
        .map(|r| r["effective_cost"].as_f64().unwrap())
        .sum();
    let allocated: f64 = rows
        .iter()
        .map(|r| r["allocated_effective_cost"].as_f64().unwrap())
        .sum();
    assert!((direct - allocated).abs() < 1e-6, "the split adds nothing");
    let text = w.run(&["budgets"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("ml-monthly") && text.contains("10% actual: crossed"),
        "{text}"
    );
    let spend = w.run(&[
        "spend",
        "--since",
        "2026-10-01",
        "--until",
        "2026-11-01",
        "--group",
        "team",
    ]);
    let spend = String::from_utf8_lossy(&spend.stdout);
    assert!(
        spend.contains("ALLOC-EFFECTIVE") && spend.contains("unallocated:"),
        "{spend}"
    );
}

/// A FOCUS row of `hour` with commitment columns: (pricing, cost, commitment
/// id, type, category, status).
fn committed_row(
    hour: u32,
    pricing: &str,
    cost: f64,
    c: Option<(&str, &str, &str, &str)>,
) -> String {
    let start = chrono::DateTime::parse_from_rfc3339("2026-10-01T00:00:00Z").unwrap()
        + chrono::Duration::hours(i64::from(hour));
    let end = start + chrono::Duration::hours(1);
    let f = |t: chrono::DateTime<chrono::FixedOffset>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let (id, kind, category, status) = c.unwrap_or_default();
    let instance = if status == "Unused" {
        ""
    } else {
        "p5.48xlarge"
    };
    format!(
        "111111111111,2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,{},{},Usage,,{pricing},{cost},{cost},USD,1,Hrs,{id},{kind},{category},{status},{},{},us-east-1,222222222222,Compute,\"{{\"\"InstanceType\"\":\"\"{instance}\"\"}}\",\"{{\"\"team\"\":\"\"ml\"\"}}\"",
        f(start),
        f(end),
        if id.is_empty() { "" } else { "1" },
        if category == "Usage" {
            "Hours"
        } else if id.is_empty() {
            ""
        } else {
            "USD"
        },
    )
}

const COMMITTED_HEADER: &str = "BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,PricingCategory,BilledCost,EffectiveCost,BillingCurrency,ConsumedQuantity,ConsumedUnit,CommitmentDiscountId,CommitmentDiscountType,CommitmentDiscountCategory,CommitmentDiscountStatus,CommitmentDiscountQuantity,CommitmentDiscountUnit,RegionId,SubAccountId,ServiceCategory,SkuPriceDetails,Tags";

/// ml runs two p5s every hour for three days and two hours: one on demand,
/// one on a reservation; a savings plan goes unused at 5 an hour.
fn owned_workspace() -> Workspace {
    owned_workspace_with("")
}

/// [`owned_workspace`] with more config.
fn owned_workspace_with(extra: &str) -> Workspace {
    let w = workspace(extra);
    // AWS's catalog as its price source writes it: the bills name AWS offers.
    let now = chrono::Utc::now();
    let price = |kind: PriceKind, usd: f64| PriceRecord {
        region: "us-east-1".into(),
        zone: None,
        instance_type: "p5.48xlarge".into(),
        price_kind: kind,
        offering_class: None,
        usd_per_hour: usd,
        upfront_usd: 0.0,
        recurring_usd_per_hour: usd,
        source: None,
        available_regions: Vec::new(),
        max_instances: None,
        price_scope: PriceScope::Instance,
    };
    let snapshot = Snapshot {
        instance_types: vec![InstanceType {
            gpu_form_factor: None,
            instance_type: "p5.48xlarge".into(),
            gpu_model: "H100-80GB".into(),
            gpu_count: 8,
            gpu_memory_gib: Some(80.0),
            vcpus: Some(192),
            memory_gib: Some(2048.0),
        }],
        prices: vec![
            price(PriceKind::OnDemand, 98.32),
            price("reserved_1y_no_upfront".parse().unwrap(), 60.0),
            price("reserved_3y_no_upfront".parse().unwrap(), 45.0),
        ],
        ..Snapshot::default()
    };
    let mut store = SqliteStore::open(&w.path("catalog.db")).unwrap();
    let run = store.begin_run("aws", Scope::Full, now).unwrap();
    store
        .write_snapshot(run, "aws", &snapshot, &[], now, now)
        .unwrap();
    drop(store);
    let mut rows = vec![COMMITTED_HEADER.to_owned()];
    let ri = (
        "arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-1",
        "Reserved Instance",
        "Usage",
        "Used",
    );
    let sp = (
        "arn:aws:savingsplans::111111111111:savingsplan/sp-1",
        "Savings Plan",
        "Spend",
        "Unused",
    );
    for hour in 0..74 {
        rows.push(committed_row(hour, "Standard", 98.32, None));
        rows.push(committed_row(hour, "Committed", 60.0, Some(ri)));
        rows.push(committed_row(hour, "Committed", 5.0, Some(sp)));
    }
    w.write("bills/oct.csv", &(rows.join("\n") + "\n"));
    let sync = w.run(&["bills", "sync"]);
    assert!(
        sync.status.success(),
        "{}",
        String::from_utf8_lossy(&sync.stderr)
    );
    w
}

#[test]
fn a_plan_owns_the_reservations_of_the_bills_and_lists_what_it_cannot_model() {
    let w = owned_workspace();
    let plan = w.json(&[
        "plan",
        "--usage-from-bills",
        "--team",
        "ml",
        "--owned-from-bills",
        "--horizon-hours",
        "24",
        "--json",
    ]);
    assert_eq!(plan["status"], "optimal", "{plan}");
    let found = &plan["owned_from_bills"];
    assert_eq!(found["modelled"].as_array().unwrap().len(), 1, "{found}");
    let ri = &found["modelled"][0];
    assert_eq!(ri["offer"], "aws/us-east-1/p5.48xlarge");
    assert_eq!(ri["count"], 1.0);
    assert!(ri["remaining"].as_str().unwrap().contains("whole horizon"));
    let sp = &found["not_modelled"][0];
    assert_eq!(
        (sp["type"].as_str(), sp["hourly_amount"].as_f64()),
        (Some("savings_plan"), Some(5.0))
    );
    assert!(sp["why"].as_str().unwrap().contains("spend-based"));
    // The owned p5 serves 8 of the 16 GPUs; the term the bills do not give
    // is taken as the offer's shortest.
    let owned = plan["owned"].as_array().unwrap();
    assert_eq!(owned.len(), 1, "{plan}");
    assert_eq!(
        (owned[0]["option"].as_str(), owned[0]["count"].as_f64()),
        (Some("reserved_1y_no_upfront"), Some(1.0))
    );
    let bought: f64 = plan["reserved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["count"].as_f64().unwrap())
        .sum();
    assert!((bought - 1.0).abs() < 1e-9, "{plan}");

    let text = w.run(&[
        "plan",
        "--usage-from-bills",
        "--team",
        "ml",
        "--owned-from-bills",
        "--horizon-hours",
        "24",
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Owned from the bills: 1 x aws/us-east-1/p5.48xlarge"),
        "{text}"
    );
    assert!(!text.contains("Owned, not in this plan"), "{text}");
    assert!(text.contains("Held, not modelled: arn:aws:savingsplans::111111111111:savingsplan/sp-1 (savings_plan, aws): 5.00 USD/hour"), "{text}");
}

#[test]
fn advise_reserves_the_steady_on_demand_load_and_says_what_it_saves() {
    let w = owned_workspace();
    let advice = w.json(&["advise", "--json"]);
    let a = &advice[0];
    assert_eq!(
        (a["team"].as_str(), a["gpu_model"].as_str()),
        (Some("ml"), Some("H100-80GB"))
    );
    // One p5 on demand every hour of the three complete days: 8 GPUs steady.
    assert_eq!(a["hours"], 72);
    assert_eq!(a["steady_gpus"], 8.0);
    assert!((a["billed_per_gpu_hour"].as_f64().unwrap() - 98.32 / 8.0).abs() < 1e-9);
    // 720 h of 8 GPUs: 70,790.40 as billed; the 3-year reservation at 45 an
    // hour costs 32,400: a saving of 38,390.40.
    assert!(
        (a["as_billed_cost"].as_f64().unwrap() - 98.32 * 720.0).abs() < 1e-6,
        "{a}"
    );
    assert_eq!(
        a["plan"]["reserved"][0]["option"], "reserved_3y_no_upfront",
        "{a}"
    );
    assert!(
        (a["saving"].as_f64().unwrap() - (98.32 - 45.0) * 720.0).abs() < 1e-6,
        "{a}"
    );
    let text = w.run(&["advise"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("1.0 x aws/us-east-1/p5.48xlarge reserved_3y_no_upfront"),
        "{text}"
    );
    let bad = w.run(&["advise", "--days", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `promtool`, or `None` to skip its checks, which CI does not allow.
fn promtool() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("promtool"))
            .find(|p| p.is_file())
    });
    if found.is_none() && std::env::var_os("GPUPLAN_PROMTOOL_REQUIRED").is_some() {
        panic!("GPUPLAN_PROMTOOL_REQUIRED is set but promtool is not on PATH");
    }
    found
}

/// Metric names an expression text uses, histogram series folded into
/// their family.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("gpuplan_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        out.insert(family.to_owned());
        rest = &tail[end..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_pass_promtool_and_every_rule_and_dashboard_query_names_an_exported_metric() {
    let w = owned_workspace_with(BUDGETS);
    let d = Daemon::start(w.config()).await;
    let mut text = String::new();
    for _ in 0..500 {
        text = d
            .http
            .get(format!("{}/metrics", d.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains("gpuplan_budget_actual{") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // 98.32 and 45 an hour for 8 GPUs; a savings plan never used, a
    // reservation always; the budget of ml's October.
    for line in [
        "gpuplan_cheapest_usd_per_gpu_hour{gpu_model=\"H100-80GB\",kind=\"on_demand\"} 12.29",
        "gpuplan_cheapest_usd_per_gpu_hour{gpu_model=\"H100-80GB\",kind=\"committed\"} 5.625",
        "gpuplan_budget_amount{budget=\"ml-monthly\",currency=\"USD\"} 1000",
        "gpuplan_commitment_lowest_utilization_ratio{source=\"aws\",type=\"savings_plan\"} 0",
        "gpuplan_commitment_lowest_utilization_ratio{source=\"aws\",type=\"reservation\"} 1",
        "gpuplan_commitments{source=\"aws\",type=\"reservation\"} 1",
    ] {
        assert!(text.contains(line), "missing {line} in:\n{text}");
    }
    assert!(text.contains("gpuplan_budget_forecast{budget=\"ml-monthly\",currency=\"USD\"}"));
    d.stop().await;

    let exported: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules_path = root.join("config/prometheus/gpuplan.rules.yml");
    let rules = std::fs::read_to_string(&rules_path).unwrap();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("config/grafana/gpuplan.json")).unwrap(),
    )
    .unwrap();
    let mut queries = String::new();
    let mut panels = 0;
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            queries.push_str(t["expr"].as_str().unwrap());
            queries.push('\n');
            panels += 1;
        }
    }
    for v in dashboard["templating"]["list"].as_array().unwrap() {
        queries.push_str(v["definition"].as_str().unwrap());
    }
    assert!(panels >= 10, "{panels} queries");
    assert_eq!(dashboard["__inputs"][0]["pluginId"], "prometheus");
    for (what, used) in [
        ("rules", metric_names(&rules)),
        ("dashboard", metric_names(&queries)),
    ] {
        assert!(!used.is_empty());
        let missing: Vec<&String> = used.difference(&exported).collect();
        assert!(
            missing.is_empty(),
            "the {what} name metrics gpuplan does not export: {missing:?}"
        );
    }

    let Some(promtool) = promtool() else {
        eprintln!("promtool is not on PATH: its checks are skipped");
        return;
    };
    let rules_check = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&rules_path)
        .output()
        .unwrap();
    assert!(
        rules_check.status.success(),
        "{}",
        String::from_utf8_lossy(&rules_check.stdout)
    );
    let mut check = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
