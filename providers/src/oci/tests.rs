use super::*;
use crate::test_server::{self, FixtureServer};

const PRODUCTS: &str = include_str!("../../fixtures/oci/products.json");

fn provider(server: &FixtureServer) -> OciProvider {
    OciProvider::new(OciConfig {
        endpoint: server.base.clone(),
        retry: test_server::fast_retry(),
    })
    .unwrap()
}

/// A fetch from a stand-in that answers every request with `body`.
async fn fetched(body: String) -> Result<Snapshot, ProviderError> {
    let server = test_server::serve(move |_, base, _| test_server::json(&body, base)).await;
    provider(&server).fetch(&FetchContext::default()).await
}

fn price<'a>(snap: &'a Snapshot, shape: &str, kind: PriceKind) -> &'a PriceRecord {
    snap.prices
        .iter()
        .find(|p| p.instance_type == shape && p.price_kind == kind)
        .unwrap_or_else(|| panic!("no {kind} price for {shape}"))
}

#[tokio::test]
async fn gpu_hours_are_multiplied_out_to_shapes_and_the_rest_is_counted_by_reason() {
    let server = test_server::serve(|req, base, _| {
        assert_eq!(
            req.uri,
            "/pls/apex/cetools/api/v1/products/?currencyCode=USD"
        );
        test_server::json(PRODUCTS, base)
    })
    .await;
    let snap = provider(&server)
        .fetch(&FetchContext::default())
        .await
        .unwrap();

    let h100 = price(&snap, "BM.GPU.H100.8", PriceKind::OnDemand);
    assert_eq!((h100.usd_per_hour, h100.region.as_str()), (80.0, "global"));
    assert_eq!(h100.source.as_deref(), Some("B98415"));
    // One part prices three A10 shapes, from its first tier; preemptible is half.
    assert_eq!(
        price(&snap, "VM.GPU.A10.1", PriceKind::OnDemand).usd_per_hour,
        1.5
    );
    assert_eq!(
        price(&snap, "VM.GPU.A10.2", PriceKind::OnDemand).usd_per_hour,
        3.0
    );
    assert_eq!(
        price(&snap, "BM.GPU.A10.4", PriceKind::Spot).usd_per_hour,
        3.0
    );
    assert_eq!(
        price(&snap, "BM.GPU.A100-v2.8", PriceKind::Spot).usd_per_hour,
        16.0
    );
    assert!(
        !snap
            .prices
            .iter()
            .any(|p| p.instance_type == "BM.GPU.H100.8" && p.price_kind == PriceKind::Spot)
    );
    assert_eq!(snap.prices.len(), 7 + 4);
    let l40s = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == "BM.GPU.L40S-NC.4")
        .unwrap();
    assert_eq!(
        (l40s.gpu_model.as_str(), l40s.gpu_count, l40s.gpu_memory_gib),
        ("L40S", 4.0, Some(48.0))
    );
    assert_eq!(snap.skipped.get("license"), Some(&2));
    assert_eq!(snap.skipped.get("unmapped_part"), Some(&2));
    assert_eq!(snap.skipped.get("not_gpu_hour"), Some(&4));
}

#[tokio::test]
async fn a_part_renamed_to_another_gpu_fails_the_sync_and_a_missing_part_prices_nothing() {
    let renamed = PRODUCTS.replace(
        "OCI - Compute - GPU - H100\"",
        "OCI - Compute - GPU - B200\"",
    );
    let err = fetched(renamed).await.unwrap_err();
    assert!(
        err.to_string().contains("B98415") && err.to_string().contains("H100"),
        "{err}"
    );

    let missing = PRODUCTS.replace("\"B110519\"", "\"B110519-retired\"");
    let snap = fetched(missing).await.unwrap();
    assert!(
        !snap
            .prices
            .iter()
            .any(|p| p.instance_type == "BM.GPU.H200.8")
    );
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_and_a_cut_answer_is_refused() {
    let server = test_server::serve(|_, base, n| match n {
        0 => test_server::status(429, "slow down"),
        1 => test_server::status(503, "busy"),
        _ => test_server::json(PRODUCTS, base),
    })
    .await;
    let snap = provider(&server)
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert_eq!(snap.prices.len(), 11);

    let cut = PRODUCTS[..PRODUCTS.len() / 2].to_owned();
    let err = fetched(cut).await.unwrap_err();
    assert!(matches!(err, ProviderError::Decode { .. }), "{err}");

    let err = fetched(r#"{"items": []}"#.to_owned()).await.unwrap_err();
    assert!(err.to_string().contains("none of the GPU shapes"), "{err}");
}
