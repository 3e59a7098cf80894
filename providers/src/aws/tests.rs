use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::snapshot::{OfferingClass, PriceKind, Term, Upfront};
use crate::test_server::aws::{EAST, INDEX, INDEX_ETAG, files, index};
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
        ("H100-80GB", 8.0, Some(192), Some(2048.0))
    );
    // p5 is an HGX board of SXM modules; an A10G has one form.
    assert_eq!(p5.gpu_form_factor, Some(crate::FormFactor::Sxm));
    assert_eq!(
        snap.instance_types
            .iter()
            .find(|t| t.instance_type == "g5.xlarge")
            .unwrap()
            .gpu_form_factor,
        None
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

/// What the fetches so far cost: offer-file downloads, and body bytes of the
/// bulk files served (an index answered 304 has none).
fn served(server: &FixtureServer, index: &str) -> (usize, usize) {
    let seen = server.requests();
    let offers = seen
        .iter()
        .filter(|r| r.uri.ends_with("/us-east-1/index.json"))
        .count();
    let bytes = seen
        .iter()
        .map(|r| match r.uri.as_str() {
            "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
                if r.headers
                    .get("if-none-match")
                    .is_some_and(|v| v == INDEX_ETAG) =>
            {
                0
            }
            u if u.ends_with("region_index.json") => index.len(),
            u if u.ends_with("/us-east-1/index.json") => EAST.len(),
            _ => 0,
        })
        .sum();
    (offers, bytes)
}

/// The context the sync would hand over after storing `snap`.
fn context_after(snap: &Snapshot) -> FetchContext {
    let mut priced: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &snap.prices {
        priced
            .entry(p.region.clone())
            .or_default()
            .insert(p.instance_type.clone());
    }
    FetchContext {
        versions: snap.versions.clone(),
        priced_types: priced,
        ..FetchContext::default()
    }
}

#[tokio::test]
async fn an_offer_file_already_read_is_not_downloaded_again() {
    // The index with the ETag of its version; `/moved` serves one that names a
    // newer version of us-east-1's file (the same content at a new address).
    let server = test_server::serve(|req, base, _| match req.uri.as_str() {
        "/moved/offers/v1.0/aws/AmazonEC2/current/region_index.json" => index(
            req,
            &INDEX.replace("20261101000000/us-east-1", "20261120000000/us-east-1"),
            "\"20261120000000\"",
        ),
        u if u.starts_with("/moved/") => files(
            &test_server::Seen {
                uri: u
                    .trim_start_matches("/moved")
                    .replace("20261120000000/us-east-1", "20261101000000/us-east-1"),
                ..req.clone()
            },
            base,
        ),
        _ => files(req, base),
    })
    .await;
    let aws = provider(&server, &["us-east-1"]);
    let first = aws.fetch(&FetchContext::default()).await.unwrap();
    assert!(first.unchanged_regions.is_empty() && !first.prices.is_empty());
    assert_eq!(
        first.versions["region_index.json"],
        format!("etag:{INDEX_ETAG}")
    );
    assert!(first.versions["us-east-1"].contains("20261101000000/us-east-1"));
    let (offers, first_bytes) = served(&server, INDEX);
    assert_eq!(offers, 1);

    // Unchanged index: a 304, no offer file, the region named unchanged; the
    // spot advisor still describes its stored types.
    let ctx = context_after(&first);
    let second = aws.fetch(&ctx).await.unwrap();
    assert!(second.prices.is_empty());
    assert_eq!(
        second.unchanged_regions,
        BTreeSet::from(["us-east-1".to_owned()])
    );
    assert_eq!(second.versions, first.versions);
    assert_eq!(second.availability, first.availability);
    let (offers, total) = served(&server, INDEX);
    assert_eq!(offers, 1, "the offer file was downloaded again");
    let unchanged_bytes = total - first_bytes;

    // An index without a usable validator still names the same file: no download.
    let mut no_etag = ctx.clone();
    no_etag.versions.remove("region_index.json");
    let third = aws.fetch(&no_etag).await.unwrap();
    assert_eq!(third.unchanged_regions.len(), 1);
    assert_eq!(served(&server, INDEX).0, 1);

    // A new version is downloaded.
    let moved = AwsProvider::new(AwsConfig {
        bulk_endpoint: format!("{}/moved", server.base),
        ..config(&server, &["us-east-1"])
    })
    .unwrap();
    let changed = moved.fetch(&ctx).await.unwrap();
    assert!(changed.unchanged_regions.is_empty());
    assert_eq!(changed.prices, first.prices);
    assert!(changed.versions["us-east-1"].contains("20261120000000/us-east-1"));
    let (offers, after) = served(&server, INDEX);
    assert_eq!(offers, 2);
    let changed_bytes = after - total - INDEX.len();
    println!(
        "bytes of the bulk files per sync: first {first_bytes}, unchanged index {unchanged_bytes}, changed index {changed_bytes}"
    );
    assert_eq!(unchanged_bytes, 0);
    assert!(changed_bytes >= EAST.len());
}
