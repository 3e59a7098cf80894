use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::test_server::tencent::{SECRET_ID, SECRET_KEY, error, stand_in};
use crate::test_server::{self, FixtureServer};

fn config(server: &FixtureServer) -> TencentConfig {
    TencentConfig {
        endpoint: server.base.clone(),
        regions: vec!["ap-singapore".into(), "na-siliconvalley".into()],
        secret_id: Some(Secret::new(SECRET_ID)),
        secret_key: Some(Secret::new(SECRET_KEY)),
        currency: Currency::usd(),
        retry: test_server::fast_retry(),
    }
}

async fn fetch(config: TencentConfig) -> Result<Snapshot, ProviderError> {
    TencentProvider::new(config)
        .unwrap()
        .fetch(&FetchContext::default())
        .await
}

fn price(snap: &Snapshot, zone: &str, instance_type: &str, kind: &str) -> Option<f64> {
    snap.prices
        .iter()
        .find(|p| {
            p.zone.as_deref() == Some(zone)
                && p.instance_type == instance_type
                && p.price_kind.to_string() == kind
        })
        .map(|p| p.usd_per_hour)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[tokio::test]
async fn every_zone_gets_its_on_demand_spot_and_prepaid_prices() {
    let server = stand_in(|_, _, _| None).await;
    let snap = fetch(config(&server)).await.unwrap();

    assert!(close(
        price(&snap, "ap-singapore-1", "GN7.2XLARGE32", "on_demand"),
        1.43
    ));
    // A numeric string, the price after discount.
    assert!(close(
        price(&snap, "ap-singapore-1", "GN7.2XLARGE32", "spot"),
        0.429
    ));
    assert!(close(
        price(&snap, "ap-singapore-1", "GN7.2XLARGE32", "prepaid_1m"),
        1.0
    ));
    assert!(close(
        price(&snap, "ap-singapore-1", "GN7.2XLARGE32", "prepaid_1y"),
        0.85
    ));
    // A null three-year price is no record, never zero.
    assert_eq!(
        price(&snap, "ap-singapore-1", "GN7.2XLARGE32", "prepaid_3y"),
        None
    );
    // Tiered on-demand: the first tier.
    assert!(close(
        price(&snap, "ap-singapore-2", "GN7.2XLARGE32", "on_demand"),
        1.5
    ));
    assert!(close(
        price(&snap, "ap-singapore-1", "GT4.41XLARGE948", "prepaid_3y"),
        12.0
    ));
    assert!(close(
        price(&snap, "na-siliconvalley-2", "GN7.2XLARGE32", "on_demand"),
        1.6
    ));
    assert_eq!(snap.prices.len(), 11);
    let prepaid = snap
        .prices
        .iter()
        .find(|p| p.instance_type == "GT4.41XLARGE948" && p.price_kind.to_string() == "prepaid_1y")
        .unwrap();
    assert_eq!(
        (prepaid.upfront_usd, prepaid.recurring_usd_per_hour),
        (140_160.0, 0.0)
    );
    assert!(snap.prices.iter().all(|p| p.zone.is_some()));

    let types: Vec<(&str, &str, f64)> = snap
        .instance_types
        .iter()
        .map(|t| (t.instance_type.as_str(), t.gpu_model.as_str(), t.gpu_count))
        .collect();
    assert_eq!(
        types,
        [
            ("GN7.2XLARGE32", "T4", 1.0),
            ("GT4.41XLARGE948", "A100-40GB", 8.0),
            ("GN7vw.4XLARGE64", "T4", 0.5)
        ]
    );
    // Half a T4: GpuCount 0.5 (Gpu says 1), and GpuMemory is the slice's.
    let half = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == "GN7vw.4XLARGE64")
        .unwrap();
    assert_eq!(half.gpu_memory_gib, Some(8.0));
    let skipped: Vec<(&str, u64)> = snap.skipped.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(skipped, [("charge_type_unsupported", 1), ("no_gpu", 1)]);
    // Sold out is still priced, and kept as no capacity.
    assert!(
        snap.availability
            .iter()
            .any(|a| a.zone.as_deref() == Some("ap-singapore-2")
                && a.signal == AvailabilitySignal::CapacityAvailable(false))
    );
    assert!(
        snap.availability
            .iter()
            .any(|a| a.zone.as_deref() == Some("ap-singapore-1")
                && a.instance_type == "GN7.2XLARGE32"
                && a.signal == AvailabilitySignal::CapacityAvailable(true))
    );
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn an_error_inside_http_200_fails_the_sync_and_names_the_call() {
    let server = stand_in(|action, region, _| {
        (action == "DescribeInstanceTypeConfigs" && region == "na-siliconvalley")
            .then(|| error("InvalidParameterValue", "The value of Filters is invalid."))
    })
    .await;
    let err = fetch(config(&server)).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("DescribeInstanceTypeConfigs in na-siliconvalley")
            && text.contains("InvalidParameterValue"),
        "{text}"
    );

    let server = stand_in(|_, _, _| None).await;
    let err = fetch(TencentConfig {
        regions: vec!["ap-atlantis".into()],
        ..config(&server)
    })
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("UnsupportedRegion") && err.to_string().contains("ap-atlantis"),
        "{err}"
    );

    // A body that is not an API answer is an error, not an empty region.
    let server = stand_in(|_, _, _| {
        Some(test_server::json(
            r#"{"Response": {"InstanceTypeQuotaSet": [{"Zone""#,
            "",
        ))
    })
    .await;
    let err = fetch(config(&server)).await.unwrap_err();
    assert!(matches!(err, ProviderError::Decode { .. }), "{err}");
}

#[tokio::test]
async fn rate_limits_are_retried_and_auth_errors_name_the_variables() {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let server = stand_in(move |_, _, n| {
        counter.fetch_add(1, Ordering::SeqCst);
        (n == 0).then(|| {
            error(
                "RequestLimitExceeded",
                "Your current request times equals to `20` in a second.",
            )
        })
    })
    .await;
    let snap = fetch(config(&server)).await.unwrap();
    assert_eq!(snap.prices.len(), 11);
    assert_eq!(
        hits.load(Ordering::SeqCst),
        5,
        "four calls, the first twice"
    );

    let server = stand_in(|_, _, _| {
        Some(error(
            "AuthFailure.SecretIdNotFound",
            "The SecretId is not found.",
        ))
    })
    .await;
    let err = fetch(config(&server)).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    assert!(err.to_string().contains(SECRET_ID_ENV) && err.to_string().contains(SECRET_KEY_ENV));
    assert_eq!(server.requests().len(), 1, "auth errors are not retried");

    let err = fetch(TencentConfig {
        secret_key: None,
        ..config(&server)
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains(SECRET_KEY_ENV), "{err}");
}

#[tokio::test]
async fn a_china_site_converts_cny_at_the_configured_rate() {
    let server = stand_in(|_, _, _| None).await;
    let snap = fetch(TencentConfig {
        currency: Currency {
            code: "CNY".into(),
            per_usd: 7.0,
        },
        ..config(&server)
    })
    .await
    .unwrap();
    assert!(close(
        price(&snap, "na-siliconvalley-2", "GN7.2XLARGE32", "on_demand"),
        1.6 / 7.0
    ));
    assert_eq!(snap.currency.code, "CNY");
}
