//! RunPod against a GraphQL stand-in that answers the catalogue and the
//! stock queries as RunPod does, with the traps of its API: per-GPU prices,
//! a cloud flag without a price (and a price without its flag), an unlisted
//! data center, prices stocked nowhere, legacy spot fields, and errors in
//! an `errors` array on HTTP 200.

use serde_json::{Value, json};

use super::*;
use crate::test_server::{self, FixtureServer, Seen};

const CATALOGUE_FIXTURE: &str = include_str!("../../fixtures/runpod/catalogue.json");

fn provider(server: &FixtureServer, key: Option<&str>) -> RunpodProvider {
    RunpodProvider::new(RunpodConfig {
        endpoint: server.base.clone(),
        api_key: key.map(Secret::new),
        retry: test_server::fast_retry(),
    })
    .unwrap()
}

/// Where the stand-in has stock: (gpu type id, location, pod size) ->
/// stock status.
fn stock_status(id: &str, location: &str, n: u32) -> Option<&'static str> {
    match (id, location) {
        ("NVIDIA H100 80GB HBM3", "US-TX-3") => Some("High"),
        ("NVIDIA H100 80GB HBM3", "EU-RO-1") if n == 1 => Some("Low"),
        ("NVIDIA H100 80GB HBM3", "US") if n <= 2 => Some("Medium"),
        ("NVIDIA H200", "EU-RO-1") if n == 8 => Some("Low"),
        ("NVIDIA GeForce RTX 4090", "US" | "CA") => Some("High"),
        // Never asked about: it is not listed.
        (_, "US-KS-2") => Some("High"),
        _ => None,
    }
}

/// The answer to a stock query: each alias's gpuTypes with their lowest price.
fn stock_answer(query: &str) -> Value {
    let n: u32 = query
        .split("gpuCount: ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let ids: Vec<String> =
        serde_json::from_str::<Value>(CATALOGUE_FIXTURE).unwrap()["data"]["gpuTypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect();
    let mut data = serde_json::Map::new();
    for (i, part) in query.split("lowestPrice(input: ").skip(1).enumerate() {
        let location = part.split(['"']).nth(1).unwrap_or_default().to_owned();
        let types: Vec<Value> = ids
            .iter()
            .map(|id| {
                json!({"id": id, "lowestPrice": {
                    "stockStatus": stock_status(id, &location, n),
                    // Never the price, whatever it says.
                    "uninterruptablePrice": 9.99,
                }})
            })
            .collect();
        data.insert(format!("l{i}"), Value::Array(types));
    }
    json!({ "data": data })
}

fn query_of(req: &Seen) -> String {
    let body: Value = serde_json::from_str(&req.body).unwrap();
    body["query"].as_str().unwrap().to_owned()
}

async fn runpod() -> FixtureServer {
    test_server::serve(|req, base, _| {
        assert_eq!(req.uri, "/graphql");
        let q = query_of(req);
        if q.starts_with("query Catalogue") {
            test_server::json(CATALOGUE_FIXTURE, base)
        } else {
            test_server::json(&stock_answer(&q).to_string(), base)
        }
    })
    .await
}

fn price<'a>(snap: &'a Snapshot, instance: &str, kind: &str) -> &'a PriceRecord {
    snap.prices
        .iter()
        .find(|p| p.instance_type == instance && p.price_kind.to_string() == kind)
        .unwrap_or_else(|| panic!("no {kind} price for {instance}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[tokio::test]
async fn per_gpu_prices_become_pod_sizes_on_both_clouds_with_their_stock() {
    let server = runpod().await;
    let snap = provider(&server, None)
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    // The catalogue, then one stock query per pod size and cloud.
    let requests = server.requests();
    assert_eq!(requests.len(), 9);
    assert!(
        requests
            .iter()
            .all(|r| !r.headers.contains_key("authorization"))
    );
    assert!(
        requests.iter().all(|r| !query_of(r).contains("US-KS-2")),
        "an unlisted data center is never asked about"
    );

    // H100 SXM: 4 secure sizes x (on-demand + 5 terms) + 3 community sizes;
    // H100 PCIe: 2 secure sizes x (on-demand + 1y; its 1m price is 0);
    // RTX 4090: 4 community sizes (its secure price has no secure flag);
    // H200: size 8 only (on-demand + 1m). The A40's price is 0.
    assert_eq!(snap.prices.len(), 24 + 3 + 4 + 4 + 2);
    assert_eq!(snap.skipped.get("not_offered"), Some(&1));
    assert!(snap.prices.iter().all(|p| p.price_kind != PriceKind::Spot));
    assert!(
        snap.prices
            .iter()
            .all(|p| p.region == "global" && p.zone.is_none())
    );

    let h100 = "8x NVIDIA H100 80GB HBM3 (secure)";
    let od = price(&snap, h100, "on_demand");
    assert!(close(od.usd_per_hour, 2.69 * 8.0));
    assert_eq!(od.source.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(od.available_regions, ["US-TX-3"]);
    let one = price(&snap, "1x NVIDIA H100 80GB HBM3 (secure)", "on_demand");
    assert_eq!(one.available_regions, ["EU-RO-1", "US-TX-3"]);
    // A savings plan is paid for the whole term upfront.
    let year = price(&snap, h100, "prepaid_1y");
    assert!(close(year.usd_per_hour, 2.09 * 8.0));
    assert!(close(year.upfront_usd, 2.09 * 8.0 * 8760.0));
    assert_eq!(year.recurring_usd_per_hour, 0.0);
    assert_eq!(year.available_regions, od.available_regions);
    let week = price(&snap, h100, "prepaid_1w");
    assert!(close(week.upfront_usd, 2.49 * 8.0 * 168.0));
    for kind in ["prepaid_1m", "prepaid_3m", "prepaid_6m"] {
        price(&snap, h100, kind);
    }
    let community = price(&snap, "2x NVIDIA H100 80GB HBM3 (community)", "on_demand");
    assert!(close(community.usd_per_hour, 1.99 * 2.0));
    assert_eq!(community.available_regions, ["US"]);
    assert!(
        !snap
            .prices
            .iter()
            .any(|p| p.instance_type.contains("(community)") && p.price_kind != PriceKind::OnDemand),
        "savings plans are secure cloud only"
    );
    // Priced, stocked nowhere: the records stay, with no regions.
    let pcie = price(&snap, "2x NVIDIA H100 PCIe (secure)", "on_demand");
    assert!(pcie.available_regions.is_empty());
    assert!(
        !snap
            .prices
            .iter()
            .any(|p| p.instance_type.contains("PCIe (community)")),
        "a community flag without a price offers nothing"
    );
    let rtx = price(&snap, "4x NVIDIA GeForce RTX 4090 (community)", "on_demand");
    assert!(close(rtx.usd_per_hour, 0.34 * 4.0));
    assert_eq!(rtx.available_regions, ["CA", "US"]);
    assert!(
        !snap
            .prices
            .iter()
            .any(|p| p.instance_type.contains("4090 (secure)"))
    );
    assert_eq!(
        snap.prices
            .iter()
            .filter(|p| p.instance_type.contains("H200"))
            .count(),
        2
    );

    let spec = |name: &str| {
        snap.instance_types
            .iter()
            .find(|t| t.instance_type == name)
            .unwrap()
    };
    let h = spec(h100);
    assert_eq!(
        (
            h.gpu_model.as_str(),
            h.gpu_count,
            h.gpu_memory_gib,
            h.gpu_form_factor
        ),
        ("H100-80GB", 8.0, Some(80.0), Some(crate::FormFactor::Sxm))
    );
    assert_eq!((h.vcpus, h.memory_gib), (None, None));
    assert_eq!(
        spec("1x NVIDIA H100 PCIe (secure)").gpu_form_factor,
        Some(crate::FormFactor::Pcie)
    );
    let r = spec("1x NVIDIA GeForce RTX 4090 (community)");
    assert_eq!((r.gpu_model.as_str(), r.gpu_form_factor), ("RTX4090", None));
    assert_eq!(spec("8x NVIDIA H200 (secure)").gpu_model, "H200-141GB");
}

#[tokio::test]
async fn a_key_is_sent_as_a_bearer_token() {
    let server = runpod().await;
    provider(&server, Some("rp-secret"))
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    let auth = server.requests()[0].headers["authorization"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(auth, "Bearer rp-secret");
}

async fn fails_with(
    answer: impl Fn(usize) -> axum::response::Response + Send + Sync + 'static,
) -> String {
    let server = test_server::serve(move |_, _, n| answer(n)).await;
    provider(&server, Some("rp-secret"))
        .fetch(&FetchContext::default())
        .await
        .unwrap_err()
        .to_string()
}

#[tokio::test]
async fn graphql_errors_on_200_and_400_fail_the_sync_never_an_empty_catalogue() {
    let errors = r#"{"data": null, "errors": [{"message": "Field 'gpuTypes' is rate limited"}]}"#;
    let e = fails_with(move |_| test_server::status_json(200, errors)).await;
    assert!(
        e.contains("GraphQL errors: Field 'gpuTypes' is rate limited"),
        "{e}"
    );
    assert!(!e.contains("rp-secret"));
    let e = fails_with(move |_| test_server::status_json(400, errors)).await;
    assert!(e.contains("GraphQL errors"), "{e}");
    // Data beside errors is still an error.
    let partial = r#"{"data": {"gpuTypes": []}, "errors": [{"message": "partial"}]}"#;
    let e = fails_with(move |_| test_server::status_json(200, partial)).await;
    assert!(e.contains("partial"), "{e}");
}

#[tokio::test]
async fn throttling_is_retried_and_a_cut_or_renamed_answer_is_refused() {
    let server = test_server::serve(|req, base, n| {
        if n == 0 {
            return test_server::status(429, "slow down");
        }
        let q = query_of(req);
        if q.starts_with("query Catalogue") {
            test_server::json(CATALOGUE_FIXTURE, base)
        } else {
            test_server::json(&stock_answer(&q).to_string(), base)
        }
    })
    .await;
    let snap = provider(&server, None)
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert_eq!(snap.prices.len(), 37);

    let cut = &CATALOGUE_FIXTURE[..CATALOGUE_FIXTURE.len() / 2];
    let e = fails_with(move |_| test_server::status_json(200, cut)).await;
    assert!(e.contains("cannot decode"), "{e}");
    let renamed = CATALOGUE_FIXTURE.replace("\"gpuTypes\"", "\"gpu_types\"");
    let e = fails_with(move |_| test_server::status_json(200, &renamed)).await;
    assert!(e.contains("gpuTypes"), "{e}");
    let e = fails_with(|_| test_server::status(503, "down")).await;
    assert!(e.contains("503"), "{e}");
}

/// RunPod names the H200's NVL board "H200 NVL" (id "NVIDIA H200 NVL"): the
/// model is the H200 with 141 GB, the form its NVL board.
#[test]
fn an_h200_nvl_is_an_h200_on_an_nvl_board() {
    let t: GpuType = serde_json::from_value(json!({
        "id": "NVIDIA H200 NVL", "displayName": "H200 NVL", "memoryInGb": 143,
        "secureCloud": true, "communityCloud": false, "maxGpuCountSecureCloud": 8,
        "maxGpuCountCommunityCloud": 0, "minPodGpuCount": 1, "securePrice": 3.39
    }))
    .unwrap();
    let snap = build_snapshot(&[t], &BTreeMap::new());
    let one = snap
        .instance_types
        .iter()
        .find(|i| i.instance_type == "1x NVIDIA H200 NVL (secure)")
        .unwrap();
    assert_eq!(one.gpu_model, "H200-141GB");
    assert_eq!(one.gpu_memory_gib, Some(141.0));
    assert_eq!(one.gpu_form_factor, Some(crate::FormFactor::Nvl));
}
