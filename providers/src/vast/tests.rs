//! Vast.ai against a stand-in of the bundles search, with the traps of a
//! marketplace: offers to aggregate to exact medians (even-sized groups
//! too), SXM beside PCIe, memory in MB, offers to skip by reason, and the
//! 64-offer default page.

use serde_json::{Value, json};

use super::*;
use crate::test_server::{self, FixtureServer};

fn offer(gpu: &str, n: u32, ram_mb: f64, dph: f64, bid: Option<f64>, geo: Option<&str>) -> Value {
    json!({"id": 1, "num_gpus": n, "gpu_name": gpu, "gpu_ram": ram_mb, "dph_total": dph,
           "min_bid": bid, "geolocation": geo, "verification": "verified", "rentable": true,
           "rented": false, "gpu_frac": 1.0, "reliability": 0.99, "cpu_cores": 32})
}

fn market() -> Value {
    let mut offers = vec![
        // 8x H100 SXM in the US: dph 20, 22, 24, 30 -> median 23; bids 10,
        // 12, 14 (one has none) -> 12.
        offer("H100 SXM", 8, 81559.0, 20.0, Some(10.0), Some("Texas, US")),
        offer("H100 SXM", 8, 81559.0, 24.0, Some(14.0), Some("US")),
        offer("H100 SXM", 8, 81559.0, 30.0, None, Some("Oregon, US")),
        offer(
            "H100 SXM",
            8,
            81559.0,
            22.0,
            Some(12.0),
            Some("California, US"),
        ),
        // One H100 PCIe beside one SXM: never one median.
        offer("H100 PCIE", 1, 81559.0, 2.0, None, Some("US")),
        offer("H100 PCIE", 1, 81559.0, 2.4, None, Some("Quebec, CA")),
        offer("H100 PCIE", 1, 81559.0, 2.2, Some(1.0), Some("Quebec, CA")),
        offer("H100 SXM", 1, 81559.0, 2.5, None, Some("US")),
        // L40S reports 46068 MB; its memory is the model's 48 GiB.
        offer("L40S", 2, 46068.0, 1.6, Some(0.9), Some("Sweden, SE")),
        offer("RTX 4090", 1, 24564.0, 0.35, Some(0.2), Some("Poland, PL")),
        offer("Tesla V100", 1, 16384.0, 0.2, None, Some("US")),
    ];
    // Two GPUs of a larger host: an offer like any other.
    let mut part = offer("RTX 4090", 1, 24564.0, 0.45, None, Some("Poland, PL"));
    part["gpu_frac"] = json!(0.125);
    offers.push(part);
    let mut skip = |field: &str, value: Value| {
        let mut o = offer("H100 SXM", 8, 81559.0, 1.0, Some(0.5), Some("US"));
        o[field] = value;
        offers.push(o);
    };
    skip("verification", json!("unverified"));
    skip("verification", json!("deverified"));
    skip("rentable", json!(false));
    skip("rented", json!(true));
    skip("geolocation", Value::Null);
    json!({ "offers": offers })
}

fn provider(server: &FixtureServer, key: Option<&str>) -> VastProvider {
    VastProvider::new(VastConfig {
        endpoint: server.base.clone(),
        api_key: key.map(Secret::new),
        retry: test_server::fast_retry(),
        limit: OFFER_LIMIT,
    })
    .unwrap()
}

fn price<'a>(
    snap: &'a Snapshot,
    instance: &str,
    region: &str,
    kind: PriceKind,
) -> Option<&'a PriceRecord> {
    snap.prices
        .iter()
        .find(|p| p.instance_type == instance && p.region == region && p.price_kind == kind)
}

#[tokio::test]
async fn verified_rentable_offers_become_medians_per_model_form_size_and_country() {
    let server = test_server::serve(|req, base, _| {
        assert_eq!(req.uri, "/api/v0/bundles/");
        test_server::json(&market().to_string(), base)
    })
    .await;
    let snap = provider(&server, None)
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body: Value = serde_json::from_str(&requests[0].body).unwrap();
    assert_eq!(body["limit"], 10_000, "never the 64-offer default page");
    assert_eq!(body["type"], "on-demand");
    assert!(!requests[0].headers.contains_key("authorization"));

    let skipped: Vec<(&str, u64)> = snap.skipped.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        skipped,
        [("no_country", 1), ("not_rentable", 2), ("unverified", 2)]
    );
    let sxm8 = "8x H100-80GB sxm";
    assert_eq!(
        price(&snap, sxm8, "US", PriceKind::OnDemand)
            .unwrap()
            .usd_per_hour,
        23.0
    );
    assert_eq!(
        price(&snap, sxm8, "US", PriceKind::Spot)
            .unwrap()
            .usd_per_hour,
        12.0
    );
    // SXM and PCIe never share a median; a group without bids has no spot.
    assert_eq!(
        price(&snap, "1x H100-80GB sxm", "US", PriceKind::OnDemand)
            .unwrap()
            .usd_per_hour,
        2.5
    );
    assert_eq!(
        price(&snap, "1x H100-80GB pcie", "US", PriceKind::OnDemand)
            .unwrap()
            .usd_per_hour,
        2.0
    );
    assert!(price(&snap, "1x H100-80GB pcie", "US", PriceKind::Spot).is_none());
    let ca = price(&snap, "1x H100-80GB pcie", "CA", PriceKind::OnDemand).unwrap();
    assert!(
        (ca.usd_per_hour - 2.3).abs() < 1e-12,
        "the mean of the middle two"
    );
    assert_eq!(
        price(&snap, "1x H100-80GB pcie", "CA", PriceKind::Spot)
            .unwrap()
            .usd_per_hour,
        1.0
    );
    // The part of a larger host counts: median of 0.35 and 0.45.
    let rtx = price(&snap, "1x RTX4090", "PL", PriceKind::OnDemand).unwrap();
    assert!((rtx.usd_per_hour - 0.40).abs() < 1e-12);
    assert!(
        snap.prices
            .iter()
            .all(|p| p.zone.is_none() && p.available_regions.is_empty())
    );

    let spec = |name: &str| {
        snap.instance_types
            .iter()
            .find(|t| t.instance_type == name)
            .unwrap()
    };
    let l40s = spec("2x L40S");
    assert_eq!(
        (
            l40s.gpu_model.as_str(),
            l40s.gpu_memory_gib,
            l40s.gpu_form_factor
        ),
        ("L40S", Some(48.0), None)
    );
    let h = spec(sxm8);
    assert_eq!(
        (h.gpu_count, h.gpu_memory_gib, h.gpu_form_factor),
        (8.0, Some(80.0), Some(FormFactor::Sxm))
    );
    assert_eq!(
        spec("1x V100").gpu_form_factor,
        None,
        "Tesla V100 does not say"
    );
    assert_eq!(
        (spec("1x RTX4090").vcpus, spec("1x RTX4090").memory_gib),
        (None, None)
    );
}

#[tokio::test]
async fn a_key_is_sent_and_an_unreadable_answer_fails_the_sync() {
    let server = test_server::serve(|_, base, n| match n {
        0 => test_server::status(429, "{\"error\": \"slow down\"}"),
        _ => test_server::json(&market().to_string(), base),
    })
    .await;
    provider(&server, Some("vast-secret"))
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "a 429 is retried");
    assert_eq!(requests[1].headers["authorization"], "Bearer vast-secret");

    for bad in [
        market().to_string()[..200].to_owned(),
        market()
            .to_string()
            .replace("\"dph_total\"", "\"price_total\""),
        "{\"success\": false, \"error\": \"invalid filters\"}".to_owned(),
    ] {
        let server = test_server::serve(move |_, base, _| test_server::json(&bad, base)).await;
        let e = provider(&server, None)
            .fetch(&FetchContext::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot decode"), "{e}");
    }
}

#[test]
fn medians_are_exact_and_countries_are_codes() {
    assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(median(&mut []), None);
    assert_eq!(country("Texas, US").as_deref(), Some("US"));
    assert_eq!(country("se").as_deref(), Some("SE"));
    assert_eq!(country("Somewhere"), None);
}
