//! `gpuplan sync` against local servers speaking the Azure, GCP and Lambda wire
//! formats, then `gpuplan prices --json` on what was stored.

mod support;

use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use gpuplan_providers::test_server::{self, FixtureServer, Seen};
use serde_json::Value;

const AZURE_1: &str = include_str!("../providers/fixtures/azure/eastus-1.json");
const AZURE_2: &str = include_str!("../providers/fixtures/azure/eastus-2.json");
const GCP_1: &str = include_str!("../providers/fixtures/gcp/skus-1.json");
const GCP_2: &str = include_str!("../providers/fixtures/gcp/skus-2.json");
const LAMBDA: &str = include_str!("../providers/fixtures/lambda/instance-types.json");
const OCI: &str = include_str!("../providers/fixtures/oci/products.json");

/// One server for all four APIs (their paths do not overlap). When `bad` is
/// set, Azure's first page claims to be the last and Oracle's H100 part is
/// renamed to another GPU.
async fn clouds(bad: Arc<AtomicBool>) -> FixtureServer {
    test_server::serve(move |req: &Seen, base, _| {
        let uri = req.uri.as_str();
        if uri.starts_with("/api/retail/prices") {
            if uri.contains("$skip=6") {
                test_server::json(AZURE_2, base)
            } else if bad.load(Ordering::SeqCst) {
                let first: Value = serde_json::from_str(AZURE_1).unwrap();
                let mut cut = first.clone();
                cut["NextPageLink"] = Value::Null;
                test_server::json(&cut.to_string(), base)
            } else {
                test_server::json(AZURE_1, base)
            }
        } else if uri.starts_with("/v1/services/6F81-5844-456A/skus") {
            test_server::json(if uri.contains("pageToken=page-2") { GCP_2 } else { GCP_1 }, base)
        } else if uri == "/pls/apex/cetools/api/v1/products/?currencyCode=USD" {
            if bad.load(Ordering::SeqCst) {
                test_server::json(&OCI.replace("GPU - H100\"", "GPU - B200\""), base)
            } else {
                test_server::json(OCI, base)
            }
        } else if uri == "/api/v1/instance-types" {
            if req.headers.get("authorization").is_some_and(|h| h == "Bearer lambda-key") {
                test_server::json(LAMBDA, base)
            } else {
                test_server::status(401, r#"{"error":{"code":"global/invalid-api-key","message":"API key was invalid"}}"#)
            }
        } else {
            test_server::status(404, "no such path")
        }
    })
    .await
}

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(base: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "[store]\npath = \"catalog.db\"\n\n\
             [providers.aws]\nenabled = false\n[providers.azure]\nendpoint = \"{base}\"\nregions = [\"eastus\"]\n\n\
             [providers.gcp]\nbilling_endpoint = \"{base}\"\ncompute_endpoint = \"{base}\"\n\n\
             [providers.lambda]\nendpoint = \"{base}\"\n\n\
             [providers.oci]\nendpoint = \"{base}\"\n"
        );
        std::fs::write(dir.path().join("gpuplan.toml"), config).unwrap();
        Self { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("gpuplan.toml")
    }

    fn run(&self, args: &[&str], lambda_key: Option<&str>) -> Output {
        let mut cmd = support::gpuplan();
        cmd.arg("--config").arg(self.config()).args(args);
        cmd.env("GPUPLAN_GCP_API_KEY", "gcp-key")
            .env("RUST_LOG", "warn")
            .env_remove("GPUPLAN_GCP_TOKEN");
        match lambda_key {
            Some(k) => cmd.env("GPUPLAN_LAMBDA_API_KEY", k),
            None => cmd.env_remove("GPUPLAN_LAMBDA_API_KEY"),
        };
        cmd.output().unwrap()
    }

    fn prices(&self) -> Vec<Value> {
        let out = self.run(&["prices", "--json"], None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

fn by_provider(records: &[Value], provider: &str) -> Vec<Value> {
    records
        .iter()
        .filter(|r| r["provider"] == provider)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_sync_fills_the_catalog_from_all_four_clouds() {
    let server = clouds(Arc::default()).await;
    let setup = Setup::new(&server.base);
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        let out = setup.run(&["sync", "--json"], Some("lambda-key"));
        (setup, out)
    })
    .await
    .unwrap();
    let (setup, out) = out;
    println!(
        "sync of azure+gcp+lambda+oci against local servers: {:.3}s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    for run in runs.as_array().unwrap() {
        println!("{}: {}", run["provider"], run["stats"]);
    }

    let records = setup.prices();
    assert_eq!(by_provider(&records, "azure").len(), 8);
    assert_eq!(by_provider(&records, "gcp").len(), 39);
    assert_eq!(by_provider(&records, "lambda").len(), 4);
    // Oracle's per-GPU-hour parts, multiplied out to its GPU shapes, with
    // preemptible capacity as spot; licence rows and other parts skipped.
    let oci = by_provider(&records, "oci");
    assert_eq!(oci.len(), 11);
    let h100 = oci
        .iter()
        .find(|r| r["instance_type"] == "BM.GPU.H100.8" && r["price_kind"] == "on_demand")
        .unwrap();
    assert_eq!(
        (
            h100["usd_per_hour"].as_f64(),
            h100["usd_per_gpu_hour"].as_f64()
        ),
        (Some(80.0), Some(10.0))
    );
    assert_eq!(
        (h100["region"].as_str(), h100["gpu_model"].as_str()),
        (Some("global"), Some("H100-80GB"))
    );
    let oci_run = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["provider"] == "oci")
        .unwrap();
    assert_eq!(oci_run["stats"]["skipped"]["license"], 2, "{oci_run}");

    let azure_ri = records
        .iter()
        .find(|r| r["provider"] == "azure" && r["price_kind"] == "reserved_1y")
        .unwrap();
    assert_eq!(azure_ri["gpu_model"], "A100-80GB");
    assert_eq!(azure_ri["upfront_usd"], 20253.0);
    assert!((azure_ri["usd_per_hour"].as_f64().unwrap() - 20253.0 / 8760.0).abs() < 1e-9);

    let a2 = records
        .iter()
        .find(|r| {
            r["instance_type"] == "a2-highgpu-1g"
                && r["price_kind"] == "on_demand"
                && r["region"] == "us-central1"
        })
        .unwrap();
    assert!((a2["usd_per_hour"].as_f64().unwrap() - 3.673385).abs() < 1e-9);
    assert_eq!(
        (a2["gpu_model"].as_str(), a2["vcpus"].as_u64()),
        (Some("A100-40GB"), Some(12))
    );

    let h100 = records
        .iter()
        .find(|r| r["instance_type"] == "gpu_8x_h100_sxm5")
        .unwrap();
    assert_eq!(h100["region"], "global");
    assert_eq!(h100["usd_per_gpu_hour"], 2.99);
    assert_eq!(
        h100["available_regions"],
        serde_json::json!(["us-east-1", "us-west-1"])
    );
    assert!(records.iter().all(|r| r["stale"] == false));

    // The same filters work across clouds: the cheapest A100 GPU-hour anywhere.
    let out = setup.run(
        &["prices", "--gpu", "A100", "--kind", "on_demand", "--json"],
        None,
    );
    let a100: Value = serde_json::from_slice(&out.stdout).unwrap();
    let providers: std::collections::BTreeSet<&str> = a100
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["provider"].as_str().unwrap())
        .collect();
    assert_eq!(
        providers,
        ["azure", "gcp", "lambda", "oci"].into_iter().collect()
    );
}

/// Syncs `provider` against the stand-in (`count` records), then again once
/// the stand-in answers badly: the sync exits 1 with a report holding every
/// word of `named`, and the stored prices are exactly those of before.
async fn a_bad_answer_keeps_the_prices(provider: &'static str, count: usize, named: &[&str]) {
    let bad = Arc::new(AtomicBool::new(false));
    let server = clouds(bad.clone()).await;
    let setup = Setup::new(&server.base);
    let (setup, before) = tokio::task::spawn_blocking(move || {
        let out = setup.run(&["sync", "--provider", provider], None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let before = setup.prices();
        (setup, before)
    })
    .await
    .unwrap();
    assert_eq!(before.len(), count);

    bad.store(true, Ordering::SeqCst);
    let (setup, out) = tokio::task::spawn_blocking(move || {
        let out = setup.run(&["sync", "--provider", provider], None);
        (setup, out)
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(named.iter().all(|w| report.contains(w)), "{report}");
    let after = tokio::task::spawn_blocking(move || setup.prices())
        .await
        .unwrap();
    assert_eq!(after, before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_chain_that_stops_early_is_rejected_and_the_last_good_data_stays() {
    a_bad_answer_keeps_the_prices("azure", 8, &["azure", "truncated"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oracle_part_that_no_longer_names_its_gpu_fails_the_sync_and_keeps_the_prices() {
    a_bad_answer_keeps_the_prices("oci", 11, &["oci", "B98415"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_key_fails_only_its_provider_and_names_the_variable() {
    let server = clouds(Arc::default()).await;
    let setup = Setup::new(&server.base);
    let (setup, out) = tokio::task::spawn_blocking(move || {
        let out = setup.run(&["sync"], None);
        (setup, out)
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("GPUPLAN_LAMBDA_API_KEY"), "{report}");
    let records = tokio::task::spawn_blocking(move || setup.prices())
        .await
        .unwrap();
    assert_eq!(by_provider(&records, "azure").len(), 8);
    assert!(by_provider(&records, "lambda").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn gcp_gpu_only_prices_are_listed_marked_and_never_planned() {
    let server = clouds(Arc::default()).await;
    let setup = Setup::new(&server.base);
    let setup = tokio::task::spawn_blocking(move || {
        let out = setup.run(&["sync", "--provider", "gcp"], None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        setup
    })
    .await
    .unwrap();
    let gcp = by_provider(&setup.prices(), "gcp");
    let gpu_only: Vec<&Value> = gcp
        .iter()
        .filter(|r| r["price_scope"] == "gpu_only")
        .collect();
    // The accelerator SKUs keep their keys and prices; only their scope is new.
    assert!(!gpu_only.is_empty());
    assert!(gpu_only.iter().all(|r| {
        r["instance_type"].as_str().unwrap().starts_with("nvidia-") && r["gpu_count"] == 1
    }));
    assert!(
        gcp.iter()
            .filter(|r| r["price_scope"] == "instance")
            .all(|r| !r["instance_type"].as_str().unwrap().starts_with("nvidia-"))
    );
    let t4 = gpu_only
        .iter()
        .find(|r| r["instance_type"] == "nvidia-l4" && r["price_kind"] == "on_demand")
        .unwrap();
    assert!(t4["usd_per_hour"].as_f64().unwrap() > 0.0);

    let filtered = setup.run(
        &[
            "prices",
            "--provider",
            "gcp",
            "--scope",
            "gpu_only",
            "--json",
        ],
        None,
    );
    let filtered: Value = serde_json::from_slice(&filtered.stdout).unwrap();
    assert_eq!(filtered.as_array().unwrap().len(), gpu_only.len());
    let table = setup.run(&["prices", "--provider", "gcp"], None);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("nvidia-l4 *") && table.contains("* GPU only"),
        "{table}"
    );

    std::fs::write(
        setup.dir.path().join("demand.csv"),
        "hour,gpus\n0,8\n1,8\n2,4\n",
    )
    .unwrap();
    let (demand, written) = (
        setup.dir.path().join("demand.csv"),
        setup.dir.path().join("p.json"),
    );
    let plan = setup.run(
        &[
            "plan",
            "--demand",
            demand.to_str().unwrap(),
            "--clouds",
            "gcp",
            "--write-problem",
            written.to_str().unwrap(),
            "--json",
        ],
        None,
    );
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stdout)
    );
    let problem: Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    let offers = problem["offers"].as_array().unwrap();
    assert!(!offers.is_empty());
    assert!(
        offers
            .iter()
            .all(|o| !o["instance_type"].as_str().unwrap().starts_with("nvidia-")),
        "{offers:?}"
    );
}
