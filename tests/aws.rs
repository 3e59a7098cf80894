//! AWS end to end: `gpuplan sync` against local servers speaking the
//! public price files' and the SDK's wire formats, with and without
//! credentials, then what the catalog holds.

mod support;

use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gpuplan_providers::test_server::{self, Seen};
use serde_json::Value;

/// Runs the `gpuplan` binary with `config`, in an environment where the AWS
/// credential chain finds exactly the keys given (none: no keys, no profile
/// files, no instance metadata service).
fn gpuplan_aws(config: &std::path::Path, keys: Option<(&str, &str)>, args: &[&str]) -> Output {
    let mut cmd = support::gpuplan();
    cmd.arg("--config")
        .arg(config)
        .args(args)
        .env("RUST_LOG", "warn")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", config.with_file_name("no-aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            config.with_file_name("no-aws-credentials"),
        );
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ] {
        cmd.env_remove(var);
    }
    if let Some((id, secret)) = keys {
        cmd.env("AWS_ACCESS_KEY_ID", id)
            .env("AWS_SECRET_ACCESS_KEY", secret);
    }
    cmd.output().unwrap()
}

/// A config with only AWS enabled, every AWS endpoint at the stand-in `base`.
fn aws_config(base: &str, regions: &[&str]) -> String {
    format!(
        "[store]\npath = \"catalog.db\"\n[providers.azure]\nenabled = false\n[providers.oci]\nenabled = false\n\
         [providers.aws]\nregions = {regions:?}\nbulk_endpoint = \"{base}\"\n\
         spot_advisor_url = \"{base}/spot-advisor-data.json\"\npricing_endpoint = \"{base}\"\nec2_endpoint = \"{base}\"\n"
    )
}

/// `gpuplan sync` (`syncs` times) then `gpuplan prices --provider aws --json`
/// on a fresh catalog.
async fn sync_aws(
    config_text: String,
    keys: Option<(&'static str, &'static str)>,
    syncs: usize,
) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gpuplan.toml");
    std::fs::write(&config, config_text).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        for _ in 0..syncs {
            let sync = gpuplan_aws(&config, keys, &["sync"]);
            assert!(
                sync.status.success(),
                "{}{}",
                String::from_utf8_lossy(&sync.stdout),
                String::from_utf8_lossy(&sync.stderr)
            );
        }
        gpuplan_aws(&config, keys, &["prices", "--provider", "aws", "--json"])
    })
    .await
    .unwrap();
    drop(dir);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn aws_public_price_files_fill_the_catalog_without_credentials() {
    let server =
        test_server::serve(|req: &Seen, base, _| test_server::aws::answer(req, base)).await;
    let base = server.base.clone();
    let records = sync_aws(aws_config(&base, &["us-east-1"]), None, 1).await;
    let records: Vec<&Value> = records
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["gpu_model"] == "H100-80GB")
        .collect();
    assert_eq!(records.len(), 3);
    assert!(records.iter().all(|r| r["stale"] == false));
    let all_upfront = records
        .iter()
        .find(|r| r["price_kind"] == "reserved_3y_all_upfront")
        .unwrap();
    assert_eq!(
        (
            all_upfront["offering_class"].as_str(),
            all_upfront["upfront_usd"].as_f64()
        ),
        (Some("convertible"), Some(1_200_000.0))
    );
    // No credentials: the SDK endpoints were never called.
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.uri.starts_with("/offers/") || r.uri == "/spot-advisor-data.json")
    );
}

/// A Capacity Block row before the on-demand row and a $0.00 placeholder, in
/// the public offer file: `gpuplan sync` counts both by reason and the
/// catalog has the real prices only.
#[tokio::test(flavor = "multi_thread")]
async fn aws_capacity_block_and_zero_rows_never_reach_the_catalog() {
    use test_server::aws::{Offers, Row, answer_from, offer_file};
    let row = |sku, instance_type, market, usd, gpus| Row {
        sku,
        instance_type,
        operating_system: "Linux",
        market,
        gpus,
        on_demand: Some(usd),
        reserved: &[],
    };
    let east: &'static str = Box::leak(
        offer_file(
            "us-east-1",
            &[
                row(
                    "P4DACAPBLOCK001",
                    "p4d.24xlarge",
                    "CapacityBlock",
                    "0.0320000000",
                    "8",
                ),
                row(
                    "P4DBLINUX000001",
                    "p4d.24xlarge",
                    "OnDemand",
                    "32.7726000000",
                    "8",
                ),
                row(
                    "G5AZEROPLACEHLD",
                    "g5.xlarge",
                    "OnDemand",
                    "0.0000000000",
                    "1",
                ),
                row(
                    "G5BLINUX0000001",
                    "g5.xlarge",
                    "OnDemand",
                    "1.0060000000",
                    "1",
                ),
            ],
        )
        .into_boxed_str(),
    );
    let offers = Offers {
        east,
        west: test_server::aws::WEST,
        extra_types: false,
    };
    let server =
        test_server::serve(move |req: &Seen, base, _| answer_from(req, base, offers)).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gpuplan.toml");
    std::fs::write(&config, aws_config(&server.base, &["us-east-1"])).unwrap();
    let (sync, prices) = tokio::task::spawn_blocking(move || {
        let sync = gpuplan_aws(&config, None, &["sync", "--json"]);
        let prices = gpuplan_aws(&config, None, &["prices", "--provider", "aws", "--json"]);
        (sync, prices)
    })
    .await
    .unwrap();
    let sync: Value = serde_json::from_slice(&sync.stdout).unwrap();
    let skipped = &sync[0]["stats"]["skipped"];
    assert_eq!(skipped["marketoption_not_ondemand"], 1, "{sync}");
    assert_eq!(skipped["zero_price"], 1, "{sync}");
    let prices: Value = serde_json::from_slice(&prices.stdout).unwrap();
    let on_demand = |t: &str| {
        prices
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["instance_type"] == t && r["price_kind"] == "on_demand")
            .map(|r| r["usd_per_hour"].as_f64().unwrap())
    };
    assert_eq!(on_demand("p4d.24xlarge"), Some(32.7726));
    assert_eq!(on_demand("g5.xlarge"), Some(1.006));
    assert!(
        prices
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["usd_per_hour"].as_f64().unwrap() > 0.0)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn aws_with_credentials_from_the_environment_syncs_through_the_sdk() {
    let server =
        test_server::serve(|req: &Seen, base, _| test_server::aws::answer(req, base)).await;
    let base = server.base.clone();
    let records = sync_aws(
        aws_config(&base, &["us-east-1", "us-west-2"]),
        Some(("AKIDGPUPLANTEST", "test-secret-key")),
        2,
    )
    .await;
    let records = records.as_array().unwrap();
    let kinds = |t: &str, region: &str| {
        let mut k: Vec<&str> = records
            .iter()
            .filter(|r| r["instance_type"] == t && r["region"] == region)
            .map(|r| r["price_kind"].as_str().unwrap())
            .collect();
        k.sort_unstable();
        k
    };
    assert_eq!(
        kinds("p5.48xlarge", "us-east-1"),
        [
            "capacity_block",
            "capacity_block",
            "capacity_block",
            "on_demand",
            "reserved_1y_partial_upfront",
            "reserved_3y_all_upfront",
            "spot"
        ]
    );
    // A Capacity Block offering in the catalog: its window, and its price per
    // instance-hour and per GPU-hour (950.40 for 8 GPUs and 24 hours).
    let day = records
        .iter()
        .find(|r| r["source"] == "cb-0a1b2c3d4e5f60718")
        .unwrap();
    assert_eq!(
        (
            &day["window_start"],
            &day["window_end"],
            &day["window_hours"],
            &day["instance_count"],
            &day["upfront_usd"],
            &day["zone"]
        ),
        (
            &Value::from("2027-03-09T11:30:00Z"),
            &Value::from("2027-03-10T11:30:00Z"),
            &Value::from(24.0),
            &Value::from(1),
            &Value::from(950.4),
            &Value::from("us-east-1a")
        ),
        "{day}"
    );
    assert!(
        (day["usd_per_gpu_hour"].as_f64().unwrap() - 4.95).abs() < 1e-9,
        "{day}"
    );
    let on_demand = records
        .iter()
        .find(|r| {
            r["instance_type"] == "p5.48xlarge"
                && r["price_kind"] == "on_demand"
                && r["region"] == "us-east-1"
        })
        .unwrap();
    assert_eq!(on_demand["window_start"], Value::Null);
    assert_eq!(kinds("trn1.32xlarge", "us-east-1"), ["on_demand"]);
    assert!(!kinds("p5.48xlarge", "us-west-2").is_empty());
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.headers.contains_key("x-amz-target"))
    );
    assert!(!requests.iter().any(|r| r.uri.contains("region_index.json")));
    // The second sync asked each region only for spot prices newer than the
    // newest it had stored from the first.
    let starts: Vec<(String, String)> = requests
        .iter()
        .filter(|r| r.body.contains("Action=DescribeSpotPriceHistory"))
        .map(|r| {
            let auth = r.headers["authorization"].to_str().unwrap();
            let region = auth.split('/').nth(2).unwrap().to_owned();
            let start = r
                .body
                .split('&')
                .find_map(|kv| kv.strip_prefix("StartTime="))
                .unwrap()
                .replace("%3A", ":");
            (region, start)
        })
        .collect();
    assert!(
        starts.contains(&("us-east-1".to_owned(), "2026-11-22T10:00:00Z".to_owned())),
        "{starts:?}"
    );
    assert!(
        starts.contains(&("us-west-2".to_owned(), "2026-11-21T00:00:00Z".to_owned())),
        "{starts:?}"
    );
    // Requests were signed with the environment's key.
    assert!(requests.iter().any(|r| {
        r.headers
            .get("authorization")
            .is_some_and(|h| h.to_str().unwrap().contains("Credential=AKIDGPUPLANTEST/"))
    }));
}

#[tokio::test(flavor = "multi_thread")]
async fn aws_a_malformed_page_fails_the_sync_and_keeps_the_stored_data() {
    let broken = Arc::new(AtomicBool::new(false));
    let flag = broken.clone();
    let server = test_server::serve(move |req: &Seen, base, _| {
        if flag.load(Ordering::SeqCst)
            && req.body.contains("Action=DescribeSpotPriceHistory")
            && req.body.contains("NextToken=")
        {
            return test_server::aws::xml(
                "<DescribeSpotPriceHistoryResponse {{NS}}><spotPriceHistorySet><item>",
            );
        }
        test_server::aws::answer(req, base)
    })
    .await;
    let base = server.base.clone();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gpuplan.toml");
    std::fs::write(&config, aws_config(&base, &["us-east-1"])).unwrap();
    let keys = Some(("AKIDGPUPLANTEST", "test-secret-key"));
    let (first, failed, after) = tokio::task::spawn_blocking(move || {
        // What a record is, without the fields that change with the clock.
        let prices = || {
            let out = gpuplan_aws(&config, keys, &["prices", "--provider", "aws", "--json"]);
            let records: Value = serde_json::from_slice(&out.stdout).unwrap();
            let mut rows: Vec<String> = records
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    format!(
                        "{} {} {} {} {}",
                        r["region"],
                        r["zone"],
                        r["instance_type"],
                        r["price_kind"],
                        r["usd_per_hour"]
                    )
                })
                .collect();
            rows.sort();
            rows
        };
        assert!(gpuplan_aws(&config, keys, &["sync"]).status.success());
        let first = prices();
        broken.store(true, Ordering::SeqCst);
        let failed = gpuplan_aws(&config, keys, &["sync"]);
        (first, failed, prices())
    })
    .await
    .unwrap();
    assert!(!failed.status.success());
    let said = String::from_utf8_lossy(&failed.stdout);
    assert!(
        said.contains("DescribeSpotPriceHistory in us-east-1"),
        "{said}"
    );
    assert!(!first.is_empty());
    assert_eq!(first, after);
}

#[tokio::test(flavor = "multi_thread")]
async fn aws_auto_takes_prices_from_the_public_files_when_the_price_list_refuses_the_keys() {
    let server = test_server::serve(|req: &Seen, base, _| {
        if req.headers.contains_key("x-amz-target") {
            return test_server::aws::pricing_error(
                "AccessDeniedException",
                "not authorized to perform: pricing:GetProducts",
            );
        }
        test_server::aws::answer(req, base)
    })
    .await;
    let base = server.base.clone();
    let records = sync_aws(
        aws_config(&base, &["us-east-1"]),
        Some(("AKIDGPUPLANTEST", "test-secret-key")),
        1,
    )
    .await;
    let kinds: Vec<&str> = records
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["instance_type"] == "p5.48xlarge")
        .map(|r| r["price_kind"].as_str().unwrap())
        .collect();
    // List prices from the offer file, spot prices from EC2.
    assert!(
        kinds.contains(&"on_demand") && kinds.contains(&"spot"),
        "{kinds:?}"
    );
    let requests = server.requests();
    assert!(requests.iter().any(|r| r.uri.contains("region_index.json")));
    assert!(
        requests
            .iter()
            .any(|r| r.body.contains("Action=DescribeSpotPriceHistory"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn aws_an_unchanged_offer_file_is_not_downloaded_and_its_prices_stay_current() {
    let server =
        test_server::serve(|req: &Seen, base, _| test_server::aws::answer(req, base)).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gpuplan.toml");
    std::fs::write(
        &config,
        aws_config(&server.base, &["us-east-1", "us-west-2"]),
    )
    .unwrap();
    let (runs, before, after) = tokio::task::spawn_blocking(move || {
        let sync = || {
            let out = gpuplan_aws(&config, None, &["sync", "--json"]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        };
        let prices = || {
            let out = gpuplan_aws(&config, None, &["prices", "--provider", "aws", "--json"]);
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        };
        let first = sync();
        let before = prices();
        let second = sync();
        (vec![first, second], before, prices())
    })
    .await
    .unwrap();
    let offer_downloads = server
        .requests()
        .iter()
        .filter(|r| r.uri.contains("/20261101000000/"))
        .count();
    assert_eq!(offer_downloads, 2, "one per region, on the first sync only");
    let stats = |run: &Value| run[0]["stats"].clone();
    assert_eq!(stats(&runs[0])["regions_unchanged"], 0, "{}", runs[0]);
    let second = stats(&runs[1]);
    assert_eq!(second["regions_unchanged"], 2, "{}", runs[1]);
    // The same complete list: nothing withdrawn, nothing re-versioned.
    assert_eq!(second["prices_seen"], stats(&runs[0])["prices_seen"]);
    assert_eq!(
        (
            second["prices_withdrawn"].as_i64(),
            second["prices_changed"].as_i64()
        ),
        (Some(0), Some(0))
    );
    let strip = |v: &Value| {
        let mut v = v.clone();
        for r in v.as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("fetched_at");
        }
        v
    };
    assert_eq!(strip(&after), strip(&before));
    assert!(
        after
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["stale"] == false)
    );
}
