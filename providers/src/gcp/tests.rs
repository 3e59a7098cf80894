use super::*;
use crate::test_server::{self, FixtureServer, Seen};

const SKUS_1: &str = include_str!("../../fixtures/gcp/skus-1.json");
const SKUS_2: &str = include_str!("../../fixtures/gcp/skus-2.json");
const MACHINES_1: &str = include_str!("../../fixtures/gcp/machine-types-1.json");
const MACHINES_2: &str = include_str!("../../fixtures/gcp/machine-types-2.json");

fn provider(
    server: &FixtureServer,
    key: Option<&str>,
    token: Option<&str>,
    regions: &[&str],
) -> GcpProvider {
    GcpProvider::new(GcpConfig {
        billing_endpoint: server.base.clone(),
        compute_endpoint: server.base.clone(),
        project: Some("my-project".into()),
        regions: regions.iter().map(|r| (*r).to_owned()).collect(),
        api_key: key.map(Secret::new),
        token: token.map(Secret::new),
        retry: test_server::fast_retry(),
    })
    .unwrap()
}

fn api(req: &Seen, base: &str) -> axum::response::Response {
    if req.uri.starts_with("/v1/services/6F81-5844-456A/skus?") {
        assert!(
            req.uri.contains("key=test-key") && req.uri.contains("pageSize=5000"),
            "{}",
            req.uri
        );
        if req.uri.contains("pageToken=page-2") {
            test_server::json(SKUS_2, base)
        } else {
            test_server::json(SKUS_1, base)
        }
    } else if req
        .uri
        .starts_with("/compute/v1/projects/my-project/aggregated/machineTypes?")
    {
        assert_eq!(req.headers["authorization"], "Bearer oauth-token");
        if req.uri.contains("pageToken=mt-2") {
            test_server::json(MACHINES_2, base)
        } else {
            test_server::json(MACHINES_1, base)
        }
    } else {
        test_server::status(404, "not found")
    }
}

fn usd(snap: &Snapshot, instance: &str, kind: &str, region: &str) -> Option<f64> {
    snap.prices
        .iter()
        .find(|p| {
            p.instance_type == instance && p.price_kind.to_string() == kind && p.region == region
        })
        .map(|p| p.usd_per_hour)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[tokio::test]
async fn gpu_skus_and_composed_machine_types_from_the_built_in_shapes() {
    let server = test_server::serve(|req, base, _| api(req, base)).await;
    let snap = provider(&server, Some("test-key"), None, &[])
        .fetch(&FetchContext::default())
        .await
        .unwrap();

    // Money is units + nanos; the latest pricingInfo wins over the older 3.00.
    assert!(close(
        usd(&snap, "nvidia-tesla-a100", "on_demand", "us-central1"),
        2.933908
    ));
    // Absent units mean zero.
    assert!(close(
        usd(&snap, "nvidia-tesla-a100", "spot", "us-east1"),
        0.88
    ));
    assert!(close(
        usd(&snap, "nvidia-tesla-a100", "commit_1y", "us-central1"),
        1.848
    ));
    assert!(close(
        usd(&snap, "nvidia-a100-80gb", "on_demand", "us-central1"),
        3.93
    ));
    assert!(close(
        usd(&snap, "nvidia-h100-mega-80gb", "on_demand", "us-central1"),
        11.06
    ));
    // Tiered rates: the first non-zero tier.
    assert!(close(
        usd(&snap, "nvidia-l4", "on_demand", "us-central1"),
        0.56
    ));

    // 12 x core + 85 GiB x RAM + 1 x GPU, the public a2-highgpu-1g list price.
    assert!(close(
        usd(&snap, "a2-highgpu-1g", "on_demand", "us-central1"),
        3.673385
    ));
    assert!(close(
        usd(&snap, "a2-highgpu-1g", "spot", "us-central1"),
        1.101831
    ));
    assert!(close(
        usd(&snap, "a2-highgpu-1g", "commit_1y", "us-east1"),
        2.313845
    ));
    // No spot core/RAM price in us-east1, and no A2 parts in europe-west4.
    assert_eq!(usd(&snap, "a2-highgpu-1g", "spot", "us-east1"), None);
    assert_eq!(
        usd(&snap, "a2-highgpu-1g", "on_demand", "europe-west4"),
        None
    );
    // Families without core/RAM prices get no composite.
    assert_eq!(
        usd(&snap, "a3-megagpu-8g", "on_demand", "us-central1"),
        None
    );
    assert_eq!(snap.prices.len(), 39);

    let spec = |n: &str| {
        snap.instance_types
            .iter()
            .find(|t| t.instance_type == n)
            .unwrap()
    };
    assert_eq!(
        (
            spec("a2-highgpu-8g").gpu_model.as_str(),
            spec("a2-highgpu-8g").gpu_count
        ),
        ("A100-40GB", 8.0)
    );
    assert_eq!(spec("a2-ultragpu-1g").gpu_model, "A100-80GB");
    assert_eq!(
        (
            spec("nvidia-tesla-a100").gpu_model.as_str(),
            spec("nvidia-tesla-a100").gpu_count
        ),
        ("A100-40GB", 1.0)
    );
    assert_eq!(spec("nvidia-h100-mega-80gb").gpu_model, "H100-80GB");
    assert_eq!(
        spec("a2-highgpu-8g").gpu_form_factor,
        Some(crate::FormFactor::Sxm)
    );

    let skipped: Vec<(&str, u64)> = snap.skipped.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        skipped,
        vec![
            ("family:Storage", 1),
            ("not_gpu", 2),
            ("virtual_workstation", 1)
        ]
    );
    assert_eq!(server.requests().len(), 2);
    // Accelerator SKUs price GPUs alone; composed machine types are instances.
    for p in &snap.prices {
        let expected = if p.instance_type.starts_with("nvidia-") {
            crate::PriceScope::GpuOnly
        } else {
            crate::PriceScope::Instance
        };
        assert_eq!(p.price_scope, expected, "{}", p.instance_type);
    }
}

#[tokio::test]
async fn with_a_token_shapes_and_zones_come_from_the_compute_api() {
    let server = test_server::serve(|req, base, _| api(req, base)).await;
    let snap = provider(&server, Some("test-key"), Some("oauth-token"), &[])
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    let machine_types: BTreeSet<&str> = snap
        .prices
        .iter()
        .map(|p| p.instance_type.as_str())
        .filter(|t| !t.starts_with("nvidia-"))
        .collect();
    assert_eq!(machine_types, BTreeSet::from(["a2-highgpu-1g"]));
    assert!(close(
        usd(&snap, "a2-highgpu-1g", "on_demand", "us-east1"),
        3.673385
    ));
    let zones: Vec<&str> = snap
        .availability
        .iter()
        .filter_map(|a| a.zone.as_deref())
        .collect();
    assert_eq!(zones, vec!["us-central1-a", "us-east1-b"]);
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn configured_regions_limit_the_records() {
    let server = test_server::serve(|req, base, _| api(req, base)).await;
    let snap = provider(&server, Some("test-key"), None, &["us-east1"])
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert!(snap.prices.iter().all(|p| p.region == "us-east1"));
    assert!(!snap.prices.is_empty());
}

#[tokio::test]
async fn a_missing_key_names_the_variable_to_set() {
    let server = test_server::serve(|req, base, _| api(req, base)).await;
    let err = provider(&server, None, None, &[])
        .fetch(&FetchContext::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains(API_KEY_ENV), "{err}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_rejected_key_names_the_variable_and_never_shows_the_key() {
    let server = test_server::serve(|_, _, _| {
        test_server::status(403, r#"{"error": {"code": 403, "message": "API key not valid.", "status": "PERMISSION_DENIED"}}"#)
    })
    .await;
    let err = provider(&server, Some("test-key"), None, &[])
        .fetch(&FetchContext::default())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ProviderError::Auth { .. }));
    assert!(
        text.contains(API_KEY_ENV) && text.contains("key=REDACTED"),
        "{text}"
    );
    assert!(!text.contains("test-key"), "{text}");
}

#[tokio::test]
async fn a_rate_limited_page_is_retried() {
    let server = test_server::serve(|req, base, n| {
        if n == 1 {
            let mut r = test_server::status(429, "quota");
            r.headers_mut().insert("retry-after", "1".parse().unwrap());
            r
        } else {
            api(req, base)
        }
    })
    .await;
    let snap = provider(&server, Some("test-key"), None, &[])
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert_eq!(snap.prices.len(), 39);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_malformed_page_fails_the_sync() {
    let server = test_server::serve(|req, base, _| {
        if req.uri.contains("pageToken=page-2") {
            test_server::json(r#"{"skus": [{"skuId": 7}], "nextPageToken": ""}"#, base)
        } else {
            api(req, base)
        }
    })
    .await;
    let err = provider(&server, Some("test-key"), None, &[])
        .fetch(&FetchContext::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Decode { .. }), "{err}");
    assert!(!err.to_string().contains("test-key"), "{err}");
}

#[test]
fn descriptions_name_the_gpu_and_the_machine_family_part() {
    assert_eq!(
        gpu_name("Commitment v1: Nvidia Tesla A100 GPU running in Americas for 1 Year"),
        "Tesla A100"
    );
    assert_eq!(
        gpu_name("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas"),
        "Tesla T4"
    );
    assert_eq!(
        gpu_name("A4 Nvidia B200 (1 gpu slice) running in Americas"),
        "B200"
    );
    assert_eq!(gpu_name("H200 141GB GPU running in Americas"), "H200 141GB");
    assert_eq!(accelerator_id("Tesla A100"), "nvidia-tesla-a100");
    assert_eq!(accelerator_id("Tesla A100 80GB"), "nvidia-a100-80gb");
    assert_eq!(accelerator_id("H100 80GB Mega"), "nvidia-h100-mega-80gb");
    assert_eq!(accelerator_id("H200 141GB"), "nvidia-h200-141gb");
    assert_eq!(
        component("Commitment v1: A2 Ram in Americas for 3 Years"),
        Some(("A2".into(), Part::Ram))
    );
    assert_eq!(
        component("Spot Preemptible G2 Instance Core running in Americas"),
        Some(("G2".into(), Part::Core))
    );
    assert_eq!(
        component("N1 Predefined Instance Core running in Americas"),
        None
    );
}

/// A Billing Catalog SKU in the real format, priced `usd` an hour (or per
/// GiB-hour for RAM) in `us-central1`.
fn sku(id: &str, description: &str, group: &str, usage_type: &str, usd: f64) -> serde_json::Value {
    let unit = if group == "RAM" { "GiBy.h" } else { "h" };
    serde_json::json!({
        "name": format!("services/6F81-5844-456A/skus/{id}"), "skuId": id,
        "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                     "resourceGroup": group, "usageType": usage_type},
        "serviceRegions": ["us-central1"],
        "pricingInfo": [{"summary": "", "pricingExpression": {
            "usageUnit": unit, "displayQuantity": 1,
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD",
                "units": format!("{}", usd.trunc()), "nanos": ((usd.fract() * 1e9).round()) as i64}}],
            "baseUnit": "s", "baseUnitConversionFactor": 3600},
            "currencyConversionRate": 1, "effectiveTime": "2026-11-01T08:00:00.000Z"}],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": "REGIONAL", "regions": ["us-central1"]}
    })
}

/// Dynamic Workload Scheduler and calendar-mode SKUs say `usageType`
/// `OnDemand` at 45% and 30% off, before and after the on-demand SKUs they
/// share a key with, and "Reserved ..." SKUs priced 0 stand for commitments:
/// none of them becomes or replaces an on-demand price, and a second SKU
/// for a key does not replace the first. DWS and calendar SKUs are prices of
/// their own kinds (`flex_start`, `calendar`).
#[tokio::test]
async fn dws_calendar_and_reserved_skus_never_become_on_demand_prices() {
    let page_1 = serde_json::json!({"skus": [
        sku("DWS1-A100-0001", "Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs running in Americas", "GPU", "OnDemand", 1.61365),
        sku("DWS1-A2CO-0001", "DWS Defined Duration A2 Core running in Americas", "CPU", "OnDemand", 0.01739),
        sku("DWS1-A2RA-0001", "DWS Defined Duration A2 Ram running in Americas", "RAM", "OnDemand", 0.00233),
        sku("CAL1-H100-0001", "Reserved Nvidia H100 80GB GPU in Americas in Calendar Mode", "GPU", "OnDemand", 7.7),
        sku("RES1-A100-0001", "Reserved Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", 0.0),
    ], "nextPageToken": "dws-2"})
    .to_string();
    let page_2 = serde_json::json!({"skus": [
        sku("039F-D0DA-4055", "Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", 2.933908),
        sku("ODH1-H100-0001", "Nvidia H100 80GB GPU running in Americas", "GPU", "OnDemand", 11.06),
        sku("ODA2-CORE-0001", "A2 Instance Core running in Americas", "CPU", "OnDemand", 0.031611),
        sku("ODA2-RAMS-0001", "A2 Instance Ram running in Americas", "RAM", "OnDemand", 0.004237),
        sku("DWS2-H200-0001", "DWS Flex Start Nvidia H200 141GB GPU running in Americas", "GPU", "OnDemand", 5.0),
        sku("DWS2-A100-0002", "Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs running in Americas", "GPU", "OnDemand", 1.5),
        sku("CAL2-H100-0002", "Reserved Nvidia H100 80GB GPU in Americas in Calendar Mode", "GPU", "OnDemand", 7.8),
        sku("DUPL-A100-0001", "Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", 9.99),
    ], "nextPageToken": ""})
    .to_string();
    let server = test_server::serve(move |req, base, _| {
        if req.uri.contains("pageToken=dws-2") {
            test_server::json(&page_2, base)
        } else {
            test_server::json(&page_1, base)
        }
    })
    .await;
    let snap = provider(&server, Some("test-key"), None, &[])
        .fetch(&FetchContext::default())
        .await
        .unwrap();

    assert!(close(
        usd(&snap, "nvidia-tesla-a100", "on_demand", "us-central1"),
        2.933908
    ));
    assert_eq!(
        snap.prices
            .iter()
            .find(|p| p.instance_type == "nvidia-tesla-a100")
            .and_then(|p| p.source.as_deref()),
        Some("039F-D0DA-4055")
    );
    assert!(close(
        usd(&snap, "nvidia-h100-80gb", "on_demand", "us-central1"),
        11.06
    ));
    // The composite is made of the on-demand parts alone.
    assert!(close(
        usd(&snap, "a2-highgpu-1g", "on_demand", "us-central1"),
        3.673385
    ));
    assert_eq!(
        usd(&snap, "nvidia-h200-141gb", "on_demand", "us-central1"),
        None
    );
    // Each DWS and calendar SKU is its own kind's price: the first of two
    // for a key, whichever page it is on.
    let at = |id: &str, kind: &str| usd(&snap, id, kind, "us-central1");
    assert!(close(at("nvidia-tesla-a100", "flex_start"), 1.61365));
    assert!(close(at("nvidia-h200-141gb", "flex_start"), 5.0));
    assert!(close(at("nvidia-h100-80gb", "calendar"), 7.7));
    // A flex-start a2-highgpu-1g is made of flex-start parts:
    // 12 x 0.01739 + 85 x 0.00233 + 1 x 1.61365.
    assert!(close(at("a2-highgpu-1g", "flex_start"), 2.02038));
    assert_eq!(at("a2-highgpu-1g", "calendar"), None);
    assert!(snap.prices.iter().all(|p| p.usd_per_hour > 0.0));
    let skipped: Vec<(&str, u64)> = snap.skipped.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        skipped,
        vec![("duplicate", 3), ("reservation_placeholder", 1)]
    );
}

#[test]
fn the_description_decides_the_kind_before_the_usage_type() {
    let flex = || Ok(PriceKind::FlexStart);
    let calendar = || Ok(PriceKind::Calendar);
    let cases = [
        (
            "Nvidia Tesla A100 GPU running in Americas",
            "OnDemand",
            Ok(PriceKind::OnDemand),
        ),
        (
            "DWS Flex Start Nvidia H200 141GB GPU running in Americas",
            "OnDemand",
            flex(),
        ),
        (
            "DWS Defined Duration A3 Ram running in Americas",
            "Preemptible",
            flex(),
        ),
        (
            "Nvidia H100 80GB GPU attached to DWS Flex Start VMs running in Americas",
            "OnDemand",
            flex(),
        ),
        (
            "Reserved Nvidia H100 80GB GPU in Americas in Calendar Mode",
            "OnDemand",
            calendar(),
        ),
        (
            "Nvidia H100 80GB GPU in Americas in calendar mode",
            "OnDemand",
            calendar(),
        ),
        (
            "Reserved A2 Core running in Americas",
            "OnDemand",
            Err("reservation_placeholder".to_owned()),
        ),
        (
            "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas",
            "Preemptible",
            Ok(PriceKind::Spot),
        ),
        (
            "Commitment v1: Nvidia Tesla A100 GPU running in Americas for 1 Year",
            "Commit1Yr",
            Ok(PriceKind::Commit(Term::OneYear)),
        ),
        ("Something", "Unknown", Err("usage_type:Unknown".to_owned())),
    ];
    for (description, usage_type, kind) in cases {
        assert_eq!(sku_kind(description, usage_type), kind, "{description}");
    }
}

/// The newest `pricingInfo` is found by time, not by its text: `...:00Z`
/// sorts after `...:00.5Z` as text though it is half a second earlier.
#[test]
fn the_newest_pricing_info_is_told_by_time() {
    let mut value = sku(
        "TIME-A100-0001",
        "Nvidia Tesla A100 GPU running in Americas",
        "GPU",
        "OnDemand",
        3.0,
    );
    let mut newer = value["pricingInfo"][0].clone();
    newer["effectiveTime"] = "2026-11-01T08:00:00.5Z".into();
    newer["pricingExpression"]["tieredRates"][0]["unitPrice"]["units"] = "2".into();
    value["pricingInfo"][0]["effectiveTime"] = "2026-11-01T08:00:00Z".into();
    value["pricingInfo"].as_array_mut().unwrap().push(newer);
    let parsed: Sku = serde_json::from_value(value).unwrap();
    assert_eq!(current_price(&parsed), Ok((2.0, "h")));
}
