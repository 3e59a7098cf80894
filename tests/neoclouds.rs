//! `gpuplan sync` against local stand-ins of RunPod's GraphQL API,
//! Vast.ai's bundles search and Nebius's gRPC services, then `gpuplan
//! prices --json` on what was stored: pod sizes and prepaid terms,
//! marketplace medians, preemptible observations, form factors, and the
//! requests one sync makes.

mod support;

use std::process::{Command, Output};

use gpuplan_providers::test_server::nebius::{Market, NebiusStandIn};
use gpuplan_providers::test_server::{self, FixtureServer, Seen};
use serde_json::{Value, json};
use support::NO_CLOUDS;

const RUNPOD: &str = include_str!("../providers/fixtures/runpod/catalogue.json");

/// Every location has stock of every type: the stock answer names each alias.
fn stock(query: &str) -> Value {
    let ids: Vec<Value> = serde_json::from_str::<Value>(RUNPOD).unwrap()["data"]["gpuTypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!({"id": t["id"], "lowestPrice": {"stockStatus": "High", "uninterruptablePrice": 1.0}}))
        .collect();
    let aliases = query.matches("lowestPrice(input: ").count();
    let data: serde_json::Map<String, Value> = (0..aliases)
        .map(|i| (format!("l{i}"), Value::Array(ids.clone())))
        .collect();
    json!({ "data": data })
}

fn vast_offers() -> Value {
    let offer = |gpu: &str, n: u32, dph: f64, geo: &str| {
        json!({"num_gpus": n, "gpu_name": gpu, "gpu_ram": 81559, "dph_total": dph, "min_bid": dph / 2.0,
               "geolocation": geo, "verification": "verified", "rentable": true, "rented": false})
    };
    json!({"offers": [
        offer("H100 SXM", 8, 20.0, "Texas, US"), offer("H100 SXM", 8, 22.0, "US"),
        offer("H100 PCIE", 1, 2.0, "Quebec, CA"),
    ]})
}

async fn neoclouds() -> FixtureServer {
    test_server::serve(|req: &Seen, base, _| match req.uri.as_str() {
        "/graphql" => {
            let q: Value = serde_json::from_str(&req.body).unwrap();
            let q = q["query"].as_str().unwrap();
            if q.starts_with("query Catalogue") {
                test_server::json(RUNPOD, base)
            } else {
                test_server::json(&stock(q).to_string(), base)
            }
        }
        "/api/v0/bundles/" => test_server::json(&vast_offers().to_string(), base),
        _ => test_server::status(404, "no such path"),
    })
    .await
}

fn command(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = support::gpuplan();
    c.arg("--config")
        .arg(dir.join("gpuplan.toml"))
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("GPUPLAN_RUNPOD_API_KEY")
        .env_remove("GPUPLAN_VAST_API_KEY")
        .env_remove("GPUPLAN_NEBIUS_CREDENTIALS");
    c
}

fn run(dir: &std::path::Path, args: &[&str]) -> Output {
    command(dir, args).output().unwrap()
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn runpod_and_vast_fill_the_catalog_when_enabled() {
    let server = neoclouds().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gpuplan.toml"),
        format!(
            "[store]\npath = \"{}\"\n{NO_CLOUDS}\
             [providers.runpod]\nenabled = true\nendpoint = \"{base}\"\n[providers.vast]\nenabled = true\nendpoint = \"{base}\"\n",
            dir.path().join("catalog.db").display(),
            base = server.base
        ),
    )
    .unwrap();
    let d = dir.path().to_path_buf();
    let (sync, runpod, vast, sxm) = tokio::task::spawn_blocking(move || {
        let sync = json_of(&run(&d, &["sync", "--json"]));
        let runpod = json_of(&run(&d, &["prices", "--provider", "runpod", "--json"]));
        let vast = json_of(&run(&d, &["prices", "--provider", "vast", "--json"]));
        let sxm = json_of(&run(
            &d,
            &[
                "prices",
                "--provider",
                "vast",
                "--form-factor",
                "sxm",
                "--json",
            ],
        ));
        (sync, runpod, vast, sxm)
    })
    .await
    .unwrap();
    let requests = server.requests();
    let graphql = requests.iter().filter(|r| r.uri == "/graphql").count();
    let bundles = requests
        .iter()
        .filter(|r| r.uri == "/api/v0/bundles/")
        .count();
    println!("one sync: {graphql} RunPod requests, {bundles} Vast request(s)");
    assert_eq!((graphql, bundles), (9, 1), "{sync}");

    let runpod = runpod.as_array().unwrap();
    let year = runpod
        .iter()
        .find(|r| {
            r["instance_type"] == "8x NVIDIA H100 80GB HBM3 (secure)"
                && r["price_kind"] == "prepaid_1y"
        })
        .expect("a one-year savings plan");
    assert!((year["usd_per_hour"].as_f64().unwrap() - 2.09 * 8.0).abs() < 1e-9);
    assert_eq!(year["gpu_form_factor"], "sxm");
    assert_eq!(year["region"], "global");
    assert_eq!(year["available_regions"], json!(["EU-RO-1", "US-TX-3"]));
    assert!(runpod.iter().all(|r| r["price_kind"] != "spot"));

    let vast = vast.as_array().unwrap();
    let h100 = vast
        .iter()
        .find(|r| r["instance_type"] == "8x H100-80GB sxm" && r["price_kind"] == "on_demand")
        .unwrap();
    assert_eq!(
        (h100["region"].as_str(), h100["usd_per_hour"].as_f64()),
        (Some("US"), Some(21.0))
    );
    assert!(
        vast.iter()
            .any(|r| r["instance_type"] == "1x H100-80GB pcie" && r["price_kind"] == "spot")
    );
    assert!(
        sxm.as_array()
            .unwrap()
            .iter()
            .all(|r| r["gpu_form_factor"] == "sxm")
    );
    assert_eq!(sxm.as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn nebius_prices_presets_over_grpc_and_keeps_them_through_a_bad_sync() {
    let stand_in = NebiusStandIn::start(Market::sample(), 3600).await;
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("nebius.json");
    std::fs::write(&credentials, &stand_in.credentials_json).unwrap();
    std::fs::write(
        dir.path().join("gpuplan.toml"),
        format!(
            "[store]\npath = \"{}\"\n{NO_CLOUDS}{}",
            dir.path().join("catalog.db").display(),
            stand_in.config_toml(&credentials.display().to_string())
        ),
    )
    .unwrap();
    let d = dir.path().to_path_buf();
    let (sync, prices) = tokio::task::spawn_blocking(move || {
        let sync = json_of(&run(&d, &["sync", "--json"]));
        let prices = json_of(&run(&d, &["prices", "--provider", "nebius", "--json"]));
        (sync, prices)
    })
    .await
    .unwrap();
    println!(
        "one sync: {} token exchange(s), {} gRPC calls",
        stand_in.exchanges(),
        stand_in.calls()
    );
    assert_eq!((stand_in.exchanges(), stand_in.calls()), (1, 5), "{sync}");
    let prices = prices.as_array().unwrap();
    let find = |region: &str, kind: &str| {
        prices
            .iter()
            .find(|r| {
                r["instance_type"] == "gpu-h100-sxm_8gpu-128vcpu-1600gb"
                    && r["region"] == region
                    && r["price_kind"] == kind
            })
            .unwrap_or_else(|| panic!("{region} {kind} in {prices:?}"))
    };
    let od = find("eu-north1", "on_demand");
    assert_eq!(od["usd_per_hour"], 23.6);
    assert_eq!(od["usd_per_gpu_hour"], 2.95);
    assert_eq!(od["gpu_form_factor"], "sxm");
    assert_eq!(od["gpu_model"], "H100-80GB");
    assert_eq!(
        (od["vcpus"].as_u64(), od["memory_gib"].as_f64()),
        (Some(128), Some(1600.0))
    );
    assert!(od["zone"].is_null() && od["observed_at"].is_null());
    let spot = find("us-central1", "spot");
    assert_eq!(spot["usd_per_hour"], 10.0);
    assert_eq!(spot["zone"], "us-central1");
    assert!(spot["observed_at"].is_string());
    assert!(
        !prices.iter().any(
            |r| r["instance_type"] == "gpu-l40s-a_1gpu-8vcpu-32gb" && r["price_kind"] == "spot"
        )
    );
    let before = prices.len();
    assert_eq!(before, 5 + 4);

    // A price the adapter cannot read fails the sync; the stored catalog stays.
    let mut bad = Market::sample();
    bad.costs.get_mut("gpu-l40s-a_1gpu-8vcpu-32gb").unwrap().0 = "1,5".to_owned();
    stand_in.set_market(bad);
    let d = dir.path().to_path_buf();
    let (failed, after) = tokio::task::spawn_blocking(move || {
        let failed = run(&d, &["sync"]);
        let after = json_of(&run(&d, &["prices", "--provider", "nebius", "--json"]));
        (failed, after)
    })
    .await
    .unwrap();
    assert_eq!(failed.status.code(), Some(1));
    let err = String::from_utf8_lossy(&failed.stdout).to_string()
        + &String::from_utf8_lossy(&failed.stderr);
    assert!(
        err.contains("gpu-l40s-a_1gpu-8vcpu-32gb on-demand"),
        "{err}"
    );
    assert_eq!(after.as_array().unwrap().len(), before);

    // The environment's credentials file wins over the config's.
    let d = dir.path().to_path_buf();
    let env_wins = tokio::task::spawn_blocking(move || {
        command(&d, &["sync"])
            .env("GPUPLAN_NEBIUS_CREDENTIALS", d.join("missing.json"))
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(env_wins.status.code(), Some(1));
    let err = String::from_utf8_lossy(&env_wins.stdout).to_string()
        + &String::from_utf8_lossy(&env_wins.stderr);
    assert!(err.contains("missing.json"), "{err}");
}
