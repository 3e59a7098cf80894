use super::*;
use crate::test_server::{self, FixtureServer, Seen};

const EASTUS_1: &str = include_str!("../../fixtures/azure/eastus-1.json");
const EASTUS_2: &str = include_str!("../../fixtures/azure/eastus-2.json");
const WESTEUROPE_1: &str = include_str!("../../fixtures/azure/westeurope-1.json");

fn provider(server: &FixtureServer, regions: &[&str]) -> AzureProvider {
    AzureProvider::new(AzureConfig {
        endpoint: server.base.clone(),
        regions: regions.iter().map(|r| (*r).to_owned()).collect(),
        concurrency: 2,
        retry: test_server::fast_retry(),
    })
    .unwrap()
}

/// Serves the real paging chain: the region's first page, then `$skip` pages.
fn catalog(req: &Seen, base: &str) -> axum::response::Response {
    assert!(req.uri.starts_with("/api/retail/prices?"), "{}", req.uri);
    let uri = req
        .uri
        .replace("%20", " ")
        .replace("%27", "'")
        .replace('+', " ");
    if uri.contains("$skip=6") {
        test_server::json(EASTUS_2, base)
    } else if uri.contains("armRegionName eq 'eastus'") {
        test_server::json(EASTUS_1, base)
    } else if uri.contains("armRegionName eq 'westeurope'") {
        test_server::json(WESTEUROPE_1, base)
    } else {
        test_server::status(400, "unexpected filter")
    }
}

fn price<'a>(snap: &'a Snapshot, sku: &str, kind: &str) -> &'a PriceRecord {
    snap.prices
        .iter()
        .find(|p| p.instance_type == sku && p.price_kind.to_string() == kind)
        .unwrap_or_else(|| panic!("no {kind} price for {sku}"))
}

#[tokio::test]
async fn a_sync_follows_every_page_and_classifies_each_row() {
    let server = test_server::serve(|req, base, _| catalog(req, base)).await;
    let snap = provider(&server, &["eastus", "westeurope"])
        .fetch(&FetchContext::default())
        .await
        .unwrap();

    let nc = "Standard_NC24ads_A100_v4";
    // The newer of the two on-demand rows wins.
    assert_eq!(price(&snap, nc, "on_demand").usd_per_hour, 3.673);
    assert_eq!(
        price(&snap, nc, "on_demand").source.as_deref(),
        Some("m-nc24-od")
    );
    assert_eq!(price(&snap, nc, "spot").usd_per_hour, 0.9);
    assert_eq!(price(&snap, nc, "savings_plan_1y").usd_per_hour, 2.5);
    assert_eq!(price(&snap, nc, "savings_plan_3y").usd_per_hour, 1.8);
    // A reservation row's price is the whole term's.
    let r1 = price(&snap, nc, "reserved_1y");
    assert!((r1.usd_per_hour - 20253.0 / 8760.0).abs() < 1e-9);
    assert_eq!((r1.upfront_usd, r1.recurring_usd_per_hour), (20253.0, 0.0));
    assert!((price(&snap, nc, "reserved_3y").usd_per_hour - 1.5).abs() < 1e-9);
    assert_eq!(
        price(&snap, "Standard_ND96isr_H100_v5", "on_demand").region,
        "westeurope"
    );

    let skipped: Vec<(&str, u64)> = snap.skipped.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        skipped,
        vec![
            ("devtest", 1),
            ("low_priority", 1),
            ("no_arm_sku_name", 1),
            ("not_gpu", 1),
            ("os:windows", 1),
            ("superseded", 1),
        ]
    );
    let a100 = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == nc)
        .unwrap();
    assert_eq!(
        (a100.gpu_model.as_str(), a100.gpu_count, a100.gpu_memory_gib),
        ("A100-80GB", 1.0, Some(80.0))
    );
    // A sixth of an A10: 0.454 an hour is 2.724 per whole-GPU hour.
    let slice = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == "Standard_NV6ads_A10_v5")
        .unwrap();
    assert_eq!(
        (
            slice.gpu_model.as_str(),
            slice.gpu_count,
            slice.gpu_memory_gib
        ),
        ("A10", 1.0 / 6.0, Some(4.0))
    );
    let slice_price = price(&snap, "Standard_NV6ads_A10_v5", "on_demand").usd_per_hour;
    assert!((slice_price / slice.gpu_count - 2.724).abs() < 1e-9);
    // NC A100 v4 sizes carry the PCIe card.
    assert_eq!(a100.gpu_form_factor, Some(crate::FormFactor::Pcie));
    // A GPU size missing from the table is still stored, under its own name.
    let unknown = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == "Standard_NC999_v9")
        .unwrap();
    assert!(unknown.gpu_model.contains("Standard_NC999_v9"));
    assert_eq!(snap.prices.len(), 9);
    assert_eq!(snap.availability.len(), 4);
    // Two regions, eastus in two pages.
    assert_eq!(server.requests().len(), 3);
    let first = &server.requests()[0].uri;
    assert!(first.contains("api-version=2023-01-01-preview"), "{first}");
}

#[tokio::test]
async fn no_regions_configured_means_one_unfiltered_chain() {
    let server = test_server::serve(|req, base, _| {
        assert!(!req.uri.contains("armRegionName"), "{}", req.uri);
        test_server::json(WESTEUROPE_1, base)
    })
    .await;
    let snap = provider(&server, &[])
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert_eq!(snap.prices.len(), 1);
}

#[tokio::test]
async fn rate_limits_are_waited_out() {
    let server = test_server::serve(|req, base, n| {
        if n == 0 {
            let mut r = test_server::status(429, "Too many requests");
            r.headers_mut().insert("retry-after", "1".parse().unwrap());
            r
        } else {
            catalog(req, base)
        }
    })
    .await;
    let snap = provider(&server, &["westeurope"])
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert_eq!(snap.prices.len(), 1);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn persistent_server_errors_fail_the_sync() {
    let server = test_server::serve(|_, _, _| test_server::status(503, "unavailable")).await;
    let err = provider(&server, &["eastus"])
        .fetch(&FetchContext::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Http { status: 503, .. }),
        "{err}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_malformed_page_is_a_decode_error_naming_the_page() {
    let server = test_server::serve(|req, base, _| {
        if req.uri.contains("$skip=6") {
            test_server::json(
                r#"{"Items": [{"currencyCode": "USD"}], "NextPageLink": null}"#,
                base,
            )
        } else {
            catalog(req, base)
        }
    })
    .await;
    let err = provider(&server, &["eastus"])
        .fetch(&FetchContext::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Decode { .. }), "{err}");
    assert!(err.to_string().contains("$skip=6"), "{err}");
}

#[tokio::test]
async fn a_looping_next_page_link_is_an_error_not_a_hang() {
    let server = test_server::serve(|_, base, _| {
        test_server::json(
            r#"{"Items": [], "NextPageLink": "{{BASE}}/api/retail/prices?$skip=1000"}"#,
            base,
        )
    })
    .await;
    let err = provider(&server, &["eastus"])
        .fetch(&FetchContext::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("loops"), "{err}");
}
