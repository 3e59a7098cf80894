use super::*;
use crate::snapshot::{OfferingClass, PriceKind, Term, Upfront};
use crate::test_server::aws::{EAST, files};
use crate::test_server::{self, FixtureServer};

/// The public path's settings for `server`: no credentials are looked for.
pub(super) fn config(server: &FixtureServer, regions: &[&str]) -> AwsConfig {
    AwsConfig {
        regions: regions.iter().map(|r| (*r).to_owned()).collect(),
        credentials: Credentials::None,
        ..AwsConfig::new(
            server.base.clone(),
            format!("{}/spot-advisor-data.json", server.base),
            test_server::fast_retry(),
        )
    }
}

fn provider(server: &FixtureServer, regions: &[&str]) -> AwsProvider {
    AwsProvider::new(config(server, regions)).unwrap()
}

pub(super) fn price<'a>(
    snap: &'a Snapshot,
    region: &str,
    itype: &str,
    kind: PriceKind,
) -> &'a crate::PriceRecord {
    snap.prices
        .iter()
        .find(|p| p.region == region && p.instance_type == itype && p.price_kind == kind)
        .unwrap_or_else(|| panic!("no {kind} price for {itype} in {region}"))
}

#[tokio::test]
async fn public_price_files_and_the_spot_advisor_become_records() {
    let server = test_server::serve(|req, base, _| files(req, base)).await;
    let snap = provider(&server, &["us-east-1", "us-west-2"])
        .fetch(&FetchContext::default())
        .await
        .unwrap();

    assert_eq!(snap.prices.len(), 6);
    assert_eq!(
        price(&snap, "us-east-1", "p5.48xlarge", PriceKind::OnDemand).usd_per_hour,
        98.32
    );
    let partial = price(
        &snap,
        "us-east-1",
        "p5.48xlarge",
        PriceKind::AwsReserved(Term::OneYear, Upfront::Partial),
    );
    assert_eq!(
        (partial.upfront_usd, partial.recurring_usd_per_hour),
        (86829.0, 9.912)
    );
    assert!((partial.usd_per_hour - (86829.0 + 9.912 * 8760.0) / 8760.0).abs() < 1e-9);
    assert_eq!(partial.offering_class, Some(OfferingClass::Standard));
    let all = price(
        &snap,
        "us-east-1",
        "p5.48xlarge",
        PriceKind::AwsReserved(Term::ThreeYears, Upfront::All),
    );
    assert!((all.usd_per_hour - 1_200_000.0 / 26280.0).abs() < 1e-9);
    assert_eq!(all.offering_class, Some(OfferingClass::Convertible));
    assert_eq!(
        price(
            &snap,
            "us-east-1",
            "g5.xlarge",
            PriceKind::AwsReserved(Term::OneYear, Upfront::No)
        )
        .usd_per_hour,
        0.636
    );
    assert_eq!(
        price(&snap, "us-west-2", "p5.48xlarge", PriceKind::OnDemand)
            .source
            .as_deref(),
        Some("BBBBP5LINUX0001")
    );

    let p5 = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == "p5.48xlarge")
        .unwrap();
    assert_eq!(
        (p5.gpu_model.as_str(), p5.gpu_count, p5.vcpus, p5.memory_gib),
        ("H100-80GB", 8, Some(192), Some(2048.0))
    );
    assert_eq!(
        snap.instance_types
            .iter()
            .find(|t| t.instance_type == "g5.xlarge")
            .unwrap()
            .gpu_model,
        "A10G"
    );

    let skipped: Vec<(&str, u64)> = snap.skipped.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        skipped,
        vec![
            ("capacitystatus:AllocatedCapacityReservation", 1),
            ("capacitystatus:UnusedCapacityReservation", 1),
            ("family:Storage", 1),
            ("license:Bring your own license", 1),
            ("not_gpu", 1),
            ("os:Windows", 1),
            ("preinstalled_sw:SQL Web", 1),
            ("tenancy:Dedicated", 1),
        ]
    );
    // Advisor entries for the offered (region, type) pairs, Linux only.
    let signals: Vec<(&str, &str, AvailabilitySignal)> = snap
        .availability
        .iter()
        .map(|a| (a.region.as_str(), a.instance_type.as_str(), a.signal))
        .collect();
    assert!(signals.contains(&(
        "us-east-1",
        "p5.48xlarge",
        AvailabilitySignal::InterruptionBucket(4)
    )));
    assert!(signals.contains(&(
        "us-east-1",
        "g5.xlarge",
        AvailabilitySignal::SpotSavingsPct(70)
    )));
    assert_eq!(signals.len(), 4);
}

#[tokio::test]
async fn an_offer_file_that_fails_then_succeeds_is_retried() {
    let server = test_server::serve(|req, base, n| {
        if n == 1 {
            test_server::status(503, "SlowDown")
        } else {
            files(req, base)
        }
    })
    .await;
    let snap = provider(&server, &["us-east-1"])
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert_eq!(snap.prices.len(), 5);
}

#[tokio::test]
async fn a_malformed_offer_file_names_its_url() {
    let server = test_server::serve(|req, base, _| {
        if req.uri.contains("us-east-1/index.json") {
            test_server::json(&EAST[..EAST.len() / 2], base)
        } else {
            files(req, base)
        }
    })
    .await;
    let err = provider(&server, &["us-east-1"])
        .fetch(&FetchContext::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Decode { .. }), "{err}");
    assert!(err.to_string().contains("us-east-1/index.json"), "{err}");
}

#[tokio::test]
async fn a_region_missing_from_the_index_is_an_error() {
    let server = test_server::serve(|req, base, _| files(req, base)).await;
    let err = provider(&server, &["eu-north-9"])
        .fetch(&FetchContext::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("eu-north-9"), "{err}");
}
