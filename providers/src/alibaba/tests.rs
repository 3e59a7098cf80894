use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::test_server::alibaba::{
    KEY_ID, KEY_SECRET, TYPES_1, TYPES_2, error, stand_in, verified,
};
use crate::test_server::{self, FixtureServer};

fn config(server: &FixtureServer) -> AlibabaConfig {
    AlibabaConfig {
        endpoint: Some(server.base.clone()),
        regions: vec!["ap-southeast-1".into(), "us-east-1".into()],
        instance_types: Vec::new(),
        access_key_id: Some(Secret::new(KEY_ID)),
        access_key_secret: Some(Secret::new(KEY_SECRET)),
        currency: Currency::usd(),
        spot_history_days: 7,
        concurrency: 3,
        max_requests: 1000,
        retry: test_server::fast_retry(),
    }
}

async fn fetch(config: AlibabaConfig) -> Result<Snapshot, ProviderError> {
    AlibabaProvider::new(config)
        .unwrap()
        .fetch(&FetchContext::default())
        .await
}

fn price<'a>(
    snap: &'a Snapshot,
    region: &str,
    instance_type: &str,
    kind: &str,
) -> Option<&'a PriceRecord> {
    snap.prices.iter().find(|p| {
        p.region == region && p.instance_type == instance_type && p.price_kind.to_string() == kind
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[tokio::test]
async fn a_full_sync_pages_through_types_and_spot_history_and_prices_the_instance_line() {
    let server = stand_in("USD", |_, _| None).await;
    let snap = fetch(config(&server)).await.unwrap();

    let on_demand = price(
        &snap,
        "ap-southeast-1",
        "ecs.gn7i-c8g1.2xlarge",
        "on_demand",
    )
    .unwrap();
    // The instance line (1.2), not the order with disk and bandwidth (1.3).
    assert!(close(on_demand.usd_per_hour, 1.2), "{on_demand:?}");
    assert_eq!(on_demand.zone, None);
    let month = price(
        &snap,
        "ap-southeast-1",
        "ecs.gn7i-c8g1.2xlarge",
        "prepaid_1m",
    )
    .unwrap();
    assert!(close(month.usd_per_hour, 600.0 / 730.0) && close(month.upfront_usd, 600.0));
    assert_eq!(month.recurring_usd_per_hour, 0.0);
    let three = price(
        &snap,
        "ap-southeast-1",
        "ecs.gn7e-c16g1.4xlarge",
        "prepaid_3y",
    )
    .unwrap();
    assert!(close(three.usd_per_hour, 39420.0 / 26280.0));
    // A term that is not sold gets no record; the other terms stand.
    assert!(
        price(
            &snap,
            "ap-southeast-1",
            "ecs.gn6i-c4g1.xlarge",
            "prepaid_1m"
        )
        .is_none()
    );
    assert!(
        price(
            &snap,
            "ap-southeast-1",
            "ecs.gn6i-c4g1.xlarge",
            "prepaid_1y"
        )
        .is_some()
    );
    // A type its zones list but the region does not sell: nothing at all.
    assert!(
        snap.prices
            .iter()
            .all(|p| !(p.region == "us-east-1" && p.instance_type.contains("gn7i")))
    );
    assert_eq!(snap.prices.len(), 4 + 3 + 4 + 4 + 4);

    let types: Vec<(&str, &str, f64)> = snap
        .instance_types
        .iter()
        .map(|t| (t.instance_type.as_str(), t.gpu_model.as_str(), t.gpu_count))
        .collect();
    assert_eq!(
        types,
        [
            ("ecs.gn6i-c4g1.xlarge", "T4", 1.0),
            ("ecs.gn7e-c16g1.4xlarge", "A100-80GB", 1.0),
            ("ecs.gn7i-c8g1.2xlarge", "A10", 1.0),
            ("ecs.sgn7i-vws-m2.xlarge", "A10", 1.0 / 12.0),
        ],
        "the V100 and T4/4 types are listed in no zone, so they have no record"
    );
    // GPUMemorySize is the slice's: a twelfth of a 24 GiB A10.
    let slice = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == "ecs.sgn7i-vws-m2.xlarge")
        .unwrap();
    assert_eq!(slice.gpu_memory_gib, Some(2.0));
    let slice_price = price(
        &snap,
        "ap-southeast-1",
        "ecs.sgn7i-vws-m2.xlarge",
        "on_demand",
    )
    .unwrap();
    assert!(close(slice_price.usd_per_hour, 0.11), "{slice_price:?}");
    let skipped: Vec<(&str, u64)> = snap.skipped.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        skipped,
        [
            ("no_gpu", 1),
            ("not_sold_in_region", 1),
            ("price_not_found", 1)
        ]
    );

    // Every row of every page is history; the newest of zone b was on page 1.
    let mut spot: Vec<(&str, &str, f64)> = snap
        .spot_observations
        .iter()
        .map(|o| (o.zone.as_str(), o.instance_type.as_str(), o.usd_per_hour))
        .collect();
    spot.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(spot.len(), 5);
    assert_eq!(spot[0], ("ap-southeast-1a", "ecs.gn7i-c8g1.2xlarge", 0.38));

    // Sold out in a zone is still offered, without capacity.
    assert!(
        snap.availability
            .iter()
            .any(|a| a.zone.as_deref() == Some("ap-southeast-1b")
                && a.instance_type == "ecs.gn7i-c8g1.2xlarge"
                && a.signal == AvailabilitySignal::CapacityAvailable(false))
    );
    assert!(
        snap.availability
            .iter()
            .all(|a| a.instance_type != "ecs.g7.large")
    );

    // 1 regions + 2 type pages + Singapore (1 zones + 16 prices + 5 spot pages)
    // + Virginia (1 zones + 5 prices + 2 spot) = 33 calls; the throttled
    // DescribePrice was sent twice.
    assert_eq!(server.requests().len(), 34);
    assert_eq!(snap.currency, Currency::usd());
}

#[tokio::test]
async fn a_china_site_converts_cny_at_the_configured_rate_and_refuses_another_currency() {
    let server = stand_in("CNY", |_, _| None).await;
    let snap = fetch(AlibabaConfig {
        currency: Currency {
            code: "CNY".into(),
            per_usd: 7.2,
        },
        ..config(&server)
    })
    .await
    .unwrap();
    let on_demand = price(
        &snap,
        "ap-southeast-1",
        "ecs.gn7i-c8g1.2xlarge",
        "on_demand",
    )
    .unwrap();
    assert!(close(on_demand.usd_per_hour, 1.2 / 7.2));
    assert_eq!(snap.currency.code, "CNY");
    assert!(
        snap.spot_observations
            .iter()
            .any(|o| close(o.usd_per_hour, 0.38 / 7.2))
    );

    // An international account answering in CNY is a misconfigured site.
    let err = fetch(config(&server)).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("priced in CNY") && text.contains("providers.alibaba.site"),
        "{text}"
    );
}

#[tokio::test]
async fn spot_history_starts_after_the_newest_stored_observation_of_each_region() {
    let server = stand_in("USD", |_, _| None).await;
    let ctx = FetchContext {
        newest_spot_by_region: [(
            "ap-southeast-1".to_owned(),
            Utc::now() - ChronoDuration::hours(2),
        )]
        .into(),
        ..FetchContext::default()
    };
    AlibabaProvider::new(config(&server))
        .unwrap()
        .fetch(&ctx)
        .await
        .unwrap();
    let starts: BTreeMap<String, String> = server
        .requests()
        .iter()
        .map(verified)
        .filter(|p| p["Action"] == "DescribeSpotPriceHistory")
        .map(|p| (p["RegionId"].clone(), p["StartTime"].clone()))
        .collect();
    let start = |region: &str| {
        DateTime::parse_from_rfc3339(&starts[region])
            .unwrap()
            .with_timezone(&Utc)
    };
    let hours_back = |region: &str| (Utc::now() - start(region)).num_minutes() as f64 / 60.0;
    assert!(
        (hours_back("ap-southeast-1") - 2.0).abs() < 0.1,
        "{starts:?}"
    );
    assert!(
        (hours_back("us-east-1") - 7.0 * 24.0).abs() < 0.1,
        "{starts:?}"
    );
}

#[tokio::test]
async fn errors_name_the_action_and_region_and_auth_errors_the_variables() {
    let server = stand_in("USD", |p, _| {
        (p["Action"] == "DescribeAvailableResource" && p["RegionId"] == "us-east-1").then(|| {
            error(
                400,
                "InvalidParameter",
                "The specified parameter is not valid.",
            )
        })
    })
    .await;
    let text = fetch(config(&server)).await.unwrap_err().to_string();
    assert!(
        text.contains("DescribeAvailableResource in us-east-1")
            && text.contains("InvalidParameter"),
        "{text}"
    );

    let server = stand_in("USD", |_, _| {
        Some(error(
            400,
            "SignatureDoesNotMatch",
            "The request signature does not conform.",
        ))
    })
    .await;
    let err = fetch(config(&server)).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    assert!(err.to_string().contains(ACCESS_KEY_SECRET_ENV), "{err}");
    assert!(!err.to_string().contains(KEY_SECRET));

    let err = fetch(AlibabaConfig {
        access_key_secret: None,
        ..config(&server)
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains(ACCESS_KEY_ID_ENV), "{err}");

    let err = fetch(AlibabaConfig {
        regions: vec!["eu-central-9".into()],
        ..config(&stand_in("USD", |_, _| None).await)
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("`eu-central-9`"), "{err}");
}

#[tokio::test]
async fn throttling_that_never_ends_and_a_broken_page_chain_fail_the_sync() {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let server = stand_in("USD", move |p, _| {
        (p["Action"] == "DescribePrice").then(|| {
            counter.fetch_add(1, Ordering::SeqCst);
            error(
                403,
                "Throttling",
                "Request was denied due to request throttling.",
            )
        })
    })
    .await;
    let err = fetch(AlibabaConfig {
        concurrency: 1,
        ..config(&server)
    })
    .await
    .unwrap_err();
    assert!(matches!(err, ProviderError::RateLimited { .. }), "{err}");
    assert!(
        err.to_string().contains("DescribePrice in ap-southeast-1"),
        "{err}"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        3,
        "one call, tried three times"
    );

    // The second page arrives cut short.
    let server = stand_in("USD", |p, _| {
        p.contains_key("NextToken")
            .then(|| test_server::json(&TYPES_2[..TYPES_2.len() / 2], ""))
    })
    .await;
    let err = fetch(config(&server)).await.unwrap_err();
    assert!(matches!(err, ProviderError::Decode { .. }), "{err}");
    assert!(err.to_string().contains("DescribeInstanceTypes"), "{err}");

    // A token that comes back again would loop for ever.
    let server = stand_in("USD", |p, _| {
        p.contains_key("NextToken")
            .then(|| test_server::json(TYPES_1, ""))
    })
    .await;
    let err = fetch(config(&server)).await.unwrap_err();
    assert!(err.to_string().contains("does not advance"), "{err}");
}

#[tokio::test]
async fn a_sync_stops_at_its_request_budget() {
    let server = stand_in("USD", |_, _| None).await;
    let err = fetch(AlibabaConfig {
        max_requests: 10,
        ..config(&server)
    })
    .await
    .unwrap_err();
    assert!(
        matches!(err, ProviderError::Budget { limit: 10, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("max_requests"), "{err}");
    // Ten calls went out, and retries do not count: the one DescribePrice the
    // stand-in throttles is sent twice when it is among them.
    let sent = server.requests().len();
    assert!((10..=11).contains(&sent), "{sent} requests");
}

#[test]
fn slices_are_read_from_the_spec_and_gpu_less_types_are_skipped() {
    let info = |spec: &str, amount: f64, memory: f64| wire::InstanceTypeInfo {
        instance_type_id: "ecs.x".into(),
        cpu_core_count: Some(4),
        memory_size: Some(16.0),
        gpu_amount: Some(amount),
        gpu_spec: spec.into(),
        gpu_memory_size: Some(memory),
    };
    // GPUAmount says 1 for a slice; the spec says how much of one.
    let twelfth = describe(&info("NVIDIA A10*1/12", 1.0, 2.0)).unwrap();
    assert_eq!(
        (
            twelfth.gpu_model.as_str(),
            twelfth.gpu_count,
            twelfth.gpu_memory_gib
        ),
        ("A10", 1.0 / 12.0, Some(2.0))
    );
    let quarter = describe(&info("NVIDIA T4/4", 1.0, 4.0)).unwrap();
    assert_eq!(
        (quarter.gpu_model.as_str(), quarter.gpu_count),
        ("T4", 0.25)
    );
    // A slice's memory is the slice's: 10 GiB of an A100 is an eighth of a
    // 80 GiB card, so the model is the 80 GB one.
    let eighth = describe(&info("NVIDIA A100*1/8", 1.0, 10.0)).unwrap();
    assert_eq!(
        (eighth.gpu_model.as_str(), eighth.gpu_memory_gib),
        ("A100-80GB", Some(10.0))
    );
    for bad in ["NVIDIA A10*x/12", "NVIDIA A10*3/2", "NVIDIA A10/0"] {
        assert_eq!(
            describe(&info(bad, 1.0, 2.0)).unwrap_err(),
            "unreadable_gpu_spec",
            "{bad}"
        );
    }
    assert_eq!(
        describe(&info("NVIDIA A10", 0.5, 12.0)).unwrap_err(),
        "unreadable_gpu_spec"
    );
    assert_eq!(describe(&info("", 1.0, 40.0)).unwrap_err(), "no_gpu");
    assert_eq!(
        describe(&info("NVIDIA A10", 0.0, 40.0)).unwrap_err(),
        "no_gpu"
    );
    let a100 = describe(&info("NVIDIA A100", 8.0, 40.0)).unwrap();
    assert_eq!(
        (a100.gpu_model.as_str(), a100.gpu_count),
        ("A100-40GB", 8.0)
    );
}
