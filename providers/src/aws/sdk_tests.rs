//! The credentialed path against the local AWS stand-in
//! ([`crate::test_server::aws`]); the SDK clients sign with static test keys.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{TimeZone, Utc};

use super::tests::{config, price};
use super::*;
use crate::secret::Secret;
use crate::snapshot::{PriceKind, PriceRecord, Term, Upfront};
use crate::test_server::aws::{self, ec2_error, form, pricing_error, pricing_json, spot_row, xml};
use axum::response::Response;

use crate::test_server::{self, FixtureServer, Seen};

pub(super) fn sdk_config(server: &FixtureServer, regions: &[&str]) -> AwsConfig {
    AwsConfig {
        credentials: Credentials::Static {
            access_key_id: "AKIDGPUPLANTEST".to_owned(),
            secret_access_key: Secret::new("test-secret-key"),
        },
        pricing_endpoint: Some(server.base.clone()),
        ec2_endpoint: Some(server.base.clone()),
        ..config(server, regions)
    }
}

fn actions(server: &FixtureServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| match r.headers.get("x-amz-target") {
            Some(t) => t.to_str().unwrap().to_owned(),
            None => form(&r.body)
                .get("Action")
                .cloned()
                .unwrap_or_else(|| r.uri.clone()),
        })
        .collect()
}

/// One sync of a provider configured with `cfg`.
async fn fetch(cfg: AwsConfig, ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
    AwsProvider::new(cfg).unwrap().fetch(ctx).await
}

/// One sync of `region` with keys against the stand-in, where `broken`
/// answers the requests it wants to (the others get the stand-in's answer);
/// the sync's error.
async fn failing_sync(
    region: &str,
    broken: impl Fn(&Seen) -> Option<Response> + Send + Sync + 'static,
) -> ProviderError {
    let server = test_server::serve(move |req, base, _| {
        broken(req).unwrap_or_else(|| aws::answer(req, base))
    })
    .await;
    fetch(sdk_config(&server, &[region]), &FetchContext::default())
        .await
        .unwrap_err()
}

#[tokio::test]
async fn with_credentials_every_source_becomes_records() {
    let server = test_server::serve(|req, base, _| aws::answer(req, base)).await;
    let mut cfg = sdk_config(&server, &["us-east-1", "us-west-2"]);
    cfg.sources.placement_scores = true;
    let snap = fetch(cfg, &FetchContext::default()).await.unwrap();

    // Instance facts from DescribeInstanceTypes: L4's 22888 MiB is still an L4,
    // Trainium is kept under its own name, m7i (no accelerator) is not there.
    let t = |name: &str| snap.instance_types.iter().find(|t| t.instance_type == name);
    let p5 = t("p5.48xlarge").unwrap();
    assert_eq!(
        (p5.gpu_model.as_str(), p5.gpu_count, p5.vcpus, p5.memory_gib),
        ("H100-80GB", 8.0, Some(192), Some(2048.0))
    );
    assert_eq!(t("g6.xlarge").unwrap().gpu_model, "L4");
    // A slice: the partition size, not `count` (0) or the price list's `gpu` (1).
    let slice = t("g6f.xlarge").unwrap();
    assert_eq!(
        (
            slice.gpu_model.as_str(),
            slice.gpu_count,
            slice.gpu_memory_gib
        ),
        ("L4", 0.125, Some(3.0))
    );
    assert_eq!(
        price(&snap, "us-east-1", "g6f.xlarge", PriceKind::OnDemand).usd_per_hour,
        0.2526
    );
    let trn = t("trn1.32xlarge").unwrap();
    assert_eq!((trn.gpu_model.as_str(), trn.gpu_count), ("Trainium", 16.0));
    assert!(t("m7i.large").is_none());

    // Prices: the traps of the bulk fixture are skipped the same way.
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
    assert_eq!(
        price(&snap, "us-east-1", "trn1.32xlarge", PriceKind::OnDemand).usd_per_hour,
        21.5
    );
    assert_eq!(snap.skipped.get("os:Windows"), Some(&1));
    assert_eq!(snap.skipped.get("tenancy:Dedicated"), Some(&1));
    assert_eq!(snap.skipped.get("license:Bring your own license"), Some(&1));
    assert_eq!(
        snap.skipped.get("capacitystatus:UnusedCapacityReservation"),
        Some(&1)
    );

    // Spot history: every Linux row of both pages, Windows counted and dropped.
    let mut spot: Vec<(&str, &str, f64)> = snap
        .spot_observations
        .iter()
        .map(|o| (o.zone.as_str(), o.instance_type.as_str(), o.usd_per_hour))
        .collect();
    spot.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(
        spot,
        vec![
            ("us-east-1a", "g5.xlarge", 0.3987),
            ("us-east-1a", "g5.xlarge", 0.4012),
            ("us-east-1b", "p5.48xlarge", 41.112),
            ("us-west-2a", "p5.48xlarge", 39.0),
        ]
    );
    assert_eq!(snap.skipped.get("spot_product:Windows"), Some(&1));

    // Availability: region and zone offerings (not in the impaired zone), the
    // advisor, and a placement score mapped from zone id to name.
    let has = |region: &str, zone: Option<&str>, t: &str, s: AvailabilitySignal| {
        snap.availability.iter().any(|a| {
            a.region == region && a.zone.as_deref() == zone && a.instance_type == t && a.signal == s
        })
    };
    assert!(has(
        "us-east-1",
        None,
        "p5.48xlarge",
        AvailabilitySignal::Offered
    ));
    assert!(has(
        "us-east-1",
        Some("us-east-1b"),
        "p5.48xlarge",
        AvailabilitySignal::Offered
    ));
    assert!(!has(
        "us-east-1",
        Some("us-east-1e"),
        "p5.48xlarge",
        AvailabilitySignal::Offered
    ));
    assert!(has(
        "us-east-1",
        Some("us-east-1a"),
        "g5.xlarge",
        AvailabilitySignal::Offered
    ));
    assert!(has(
        "us-west-2",
        Some("us-west-2a"),
        "p5.48xlarge",
        AvailabilitySignal::Offered
    ));
    assert!(has(
        "us-east-1",
        Some("us-east-1a"),
        "p5.48xlarge",
        AvailabilitySignal::PlacementScore(7)
    ));
    assert!(has(
        "us-east-1",
        None,
        "p5.48xlarge",
        AvailabilitySignal::InterruptionBucket(4)
    ));
    assert_eq!(snap.skipped.get("offering:zone_not_available"), Some(&1));
    // One unknown zone id in the answer for each of the five types.
    assert_eq!(snap.skipped.get("placement_score:unknown_zone"), Some(&5));

    // Every call paged to its end: the empty <nextToken/> ended paging.
    let calls = actions(&server);
    let count = |a: &str| calls.iter().filter(|c| *c == a).count();
    assert_eq!(count("DescribeInstanceTypes"), 3);
    assert_eq!(count("DescribeSpotPriceHistory"), 3);
    // Two pages for each of the five us-east-1 types, one for us-west-2's.
    assert_eq!(count("GetSpotPlacementScores"), 11);
    assert!(!calls.iter().any(|c| c.contains("region_index.json")));
}

#[tokio::test]
async fn query_api_records_equal_the_bulk_file_records_for_the_same_skus() {
    let server = test_server::serve(|req, base, _| aws::answer(req, base)).await;
    let mut sdk_cfg = sdk_config(&server, &["us-east-1"]);
    sdk_cfg.instance_types = vec!["p5.*".to_owned(), "g5.*".to_owned()];
    // Capacity Block offerings are not in the public files at all.
    sdk_cfg.sources.capacity_blocks = false;
    let mut public_cfg = config(&server, &["us-east-1"]);
    public_cfg.instance_types = sdk_cfg.instance_types.clone();
    let ctx = FetchContext::default();
    let with_keys = fetch(sdk_cfg, &ctx).await.unwrap();
    let public = fetch(public_cfg, &ctx).await.unwrap();

    let sorted = |s: &Snapshot| {
        let mut p = s.prices.clone();
        p.sort_by(|a, b| {
            (&a.instance_type, a.price_kind, &a.source).cmp(&(
                &b.instance_type,
                b.price_kind,
                &b.source,
            ))
        });
        p
    };
    assert!(!public.prices.is_empty());
    assert_eq!(sorted(&with_keys), sorted(&public));
}

#[tokio::test]
async fn a_second_sync_asks_only_for_spot_prices_newer_than_the_stored_ones() {
    let server = test_server::serve(|req, base, _| aws::answer(req, base)).await;
    let newest = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
    let ctx = FetchContext {
        scope: Scope::Full,
        newest_spot_by_region: [("us-east-1".to_owned(), newest)].into(),
        ..FetchContext::default()
    };
    fetch(sdk_config(&server, &["us-east-1"]), &ctx)
        .await
        .unwrap();
    let first = server
        .requests()
        .into_iter()
        .map(|r| form(&r.body))
        .find(|f| f.get("Action").map(String::as_str) == Some("DescribeSpotPriceHistory"))
        .unwrap();
    assert_eq!(first["StartTime"], "2026-11-22T10:00:00Z");
    assert_eq!(first["ProductDescription.1"], "Linux/UNIX");
    assert!(first.values().any(|v| v == "p5.48xlarge"));
}

#[tokio::test]
async fn a_spot_only_sync_reads_spot_history_and_nothing_else() {
    let server = test_server::serve(|req, base, _| aws::answer(req, base)).await;
    let ctx = FetchContext {
        scope: Scope::SpotHistory,
        ..FetchContext::default()
    };
    let snap = fetch(sdk_config(&server, &["us-east-1"]), &ctx)
        .await
        .unwrap();
    assert_eq!(snap.scope, Scope::SpotHistory);
    assert!(snap.prices.is_empty() && snap.availability.is_empty());
    assert_eq!(snap.spot_observations.len(), 3);
    // Only the types the observations name are described.
    let mut types: Vec<&str> = snap
        .instance_types
        .iter()
        .map(|t| t.instance_type.as_str())
        .collect();
    types.sort_unstable();
    assert_eq!(types, ["g5.xlarge", "p5.48xlarge"]);
    let mut calls = actions(&server);
    calls.dedup();
    assert_eq!(calls, ["DescribeInstanceTypes", "DescribeSpotPriceHistory"]);
}

#[tokio::test]
async fn without_credentials_a_spot_only_sync_has_nothing_to_add() {
    let server = test_server::serve(|req, base, _| aws::answer(req, base)).await;
    let ctx = FetchContext {
        scope: Scope::SpotHistory,
        ..FetchContext::default()
    };
    let snap = fetch(config(&server, &["us-east-1"]), &ctx).await.unwrap();
    assert_eq!(
        snap,
        Snapshot {
            scope: Scope::SpotHistory,
            ..Snapshot::default()
        }
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_then_succeed() {
    let (pricing_fails, ec2_fails) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (p, e) = (pricing_fails.clone(), ec2_fails.clone());
    let server = test_server::serve(move |req, base, _| {
        if req.headers.contains_key("x-amz-target") && p.fetch_add(1, Ordering::SeqCst) == 0 {
            return pricing_error("ThrottlingException", "Rate exceeded");
        }
        if req.body.contains("Action=DescribeSpotPriceHistory") {
            match e.fetch_add(1, Ordering::SeqCst) {
                0 => return ec2_error(503, "RequestLimitExceeded"),
                1 => return ec2_error(500, "InternalError"),
                _ => {}
            }
        }
        aws::answer(req, base)
    })
    .await;
    let snap = fetch(
        sdk_config(&server, &["us-west-2"]),
        &FetchContext::default(),
    )
    .await
    .unwrap();
    assert_eq!(snap.spot_observations.len(), 1);
    assert!(!snap.prices.is_empty());
    assert!(pricing_fails.load(Ordering::SeqCst) >= 2);
    assert_eq!(ec2_fails.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_malformed_page_fails_the_fetch_naming_the_call() {
    let err = failing_sync("us-east-1", |req| {
        let f = form(&req.body);
        if f.get("Action").map(String::as_str) == Some("DescribeSpotPriceHistory")
            && f.contains_key("NextToken")
        {
            // Cut at an element boundary: the SDK's XML reader alone would take
            // this for a complete last page.
            return Some(xml(&format!(
                "<DescribeSpotPriceHistoryResponse {{{{NS}}}}><spotPriceHistorySet>{}",
                spot_row(
                    "g5.xlarge",
                    "us-east-1a",
                    "Linux/UNIX",
                    "0.3987",
                    "2026-11-22T10:00:00.000Z"
                )
            )));
        }
        None
    })
    .await;
    assert!(matches!(err, ProviderError::Decode { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("DescribeSpotPriceHistory in us-east-1"),
        "{err}"
    );
}

#[tokio::test]
async fn a_truncated_price_list_page_names_the_query() {
    let err = failing_sync("us-west-2", |req| {
        if req.headers.contains_key("x-amz-target") {
            return Some(pricing_json(
                200,
                r#"{"FormatVersion": "aws_v1", "PriceList": ["{}", "#,
            ));
        }
        None
    })
    .await;
    assert!(matches!(err, ProviderError::Decode { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("GetProducts for p5.48xlarge in us-west-2"),
        "{err}"
    );
}

#[tokio::test]
async fn a_malformed_price_list_element_names_the_query() {
    let err = failing_sync("us-west-2", |req| {
        if req.headers.contains_key("x-amz-target") {
            return Some(pricing_json(
                200,
                r#"{"FormatVersion": "aws_v1", "PriceList": ["{\"product\": {\"sku\": 3"]}"#,
            ));
        }
        None
    })
    .await;
    assert!(
        err.to_string()
            .contains("GetProducts for p5.48xlarge in us-west-2"),
        "{err}"
    );
}

#[tokio::test]
async fn a_server_error_that_outlasts_the_retries_keeps_its_status() {
    let server = test_server::serve(|req, base, _| {
        if req.body.contains("Action=DescribeSpotPriceHistory") {
            return ec2_error(503, "Unavailable");
        }
        if req.body.contains("Action=DescribeAvailabilityZones") {
            return test_server::status(502, "<html>Bad Gateway</html>");
        }
        aws::answer(req, base)
    })
    .await;
    let mut cfg = sdk_config(&server, &["us-west-2"]);
    let err = fetch(cfg.clone(), &FetchContext::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Http { status: 503, .. }),
        "{err}"
    );
    assert!(err.is_retryable());
    cfg.sources.spot_history = false;
    let err = fetch(cfg, &FetchContext::default()).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Http { status: 502, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("DescribeAvailabilityZones in us-west-2"),
        "{err}"
    );
}

#[tokio::test]
async fn keys_the_price_list_refuses_fail_the_sync_unless_credentials_are_auto() {
    let err = failing_sync("us-east-1", |req| {
        if req.headers.contains_key("x-amz-target") {
            return Some(pricing_error(
                "AccessDeniedException",
                "not authorized to perform: pricing:GetProducts",
            ));
        }
        None
    })
    .await;
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    assert!(err.to_string().contains("pricing:GetProducts"), "{err}");
}

#[tokio::test]
async fn rejected_credentials_are_an_auth_error() {
    let err = failing_sync("us-east-1", |req| {
        if req.body.contains("Action=") {
            return Some(ec2_error(401, "AuthFailure"));
        }
        None
    })
    .await;
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("DescribeInstanceTypes in us-east-1"),
        "{err}"
    );
    assert!(!err.to_string().contains("test-secret-key"));
    assert!(err.to_string().contains("credentials = \"none\""), "{err}");
}

#[test]
fn instance_type_patterns() {
    let p = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert!(selected(&[], "p5.48xlarge"));
    assert!(selected(&p(&["p5.*"]), "p5.48xlarge"));
    assert!(!selected(&p(&["p5.*"]), "p5e.48xlarge"));
    assert!(selected(&p(&["g6.xlarge", "*.48xlarge"]), "p5e.48xlarge"));
    assert!(!selected(&p(&["g6.xlarge"]), "g6.2xlarge"));
    assert!(selected(&p(&["g*.*large"]), "g6e.12xlarge"));
}

/// Capacity Blocks (provider-apis §17.3): one record per offering, however
/// many requests answer it, with its window; the fee is a string and the
/// total of the block; an instant block has minutes; dedicated tenancy,
/// other currencies and $0 fees are refused by reason.
#[tokio::test]
async fn capacity_block_offerings_become_one_record_each_with_their_window() {
    let server = test_server::serve(|req, base, _| aws::answer(req, base)).await;
    let snap = fetch(
        sdk_config(&server, &["us-east-1", "us-west-2"]),
        &FetchContext::default(),
    )
    .await
    .unwrap();
    let blocks: Vec<&PriceRecord> = snap
        .prices
        .iter()
        .filter(|p| p.price_kind == PriceKind::CapacityBlock)
        .collect();
    let ids: Vec<&str> = blocks.iter().filter_map(|p| p.source.as_deref()).collect();
    assert_eq!(
        ids,
        [
            "cb-0a1b2c3d4e5f60718",
            "cb-instant000000001",
            "cb-week000000000001"
        ]
    );
    let day = blocks[0];
    let w = day.window.unwrap();
    assert_eq!(
        (
            day.zone.as_deref(),
            w.instance_count,
            w.hours(),
            day.upfront_usd
        ),
        (Some("us-east-1a"), 1, 24.0, 950.40)
    );
    assert_eq!(
        w.start,
        Utc.with_ymd_and_hms(2027, 3, 9, 11, 30, 0).unwrap()
    );
    // 950.40 for one instance and 24 hours: 39.60 an instance-hour.
    assert!((day.usd_per_hour - 39.6).abs() < 1e-9, "{day:?}");
    assert_eq!(day.recurring_usd_per_hour, 0.0);
    // 15:10 to 11:30 the next day is 20 h 20 min, not the 20 its hours say.
    let instant = blocks[1].window.unwrap();
    assert!((instant.hours() - (20.0 + 20.0 / 60.0)).abs() < 1e-9);
    assert!((blocks[1].usd_per_hour - 800.0 / instant.hours()).abs() < 1e-9);
    // Four instances for a week: 23654.40 / (4 x 168) = 35.20.
    let week = blocks[2];
    assert_eq!(week.window.unwrap().instance_count, 4);
    assert!((week.usd_per_hour - 35.2).abs() < 1e-9, "{week:?}");
    for reason in ["tenancy_not_default", "currency_not_usd"] {
        assert_eq!(snap.skipped.get(reason), Some(&1), "{reason}");
    }
    assert!(snap.skipped.get("zero_price").is_some_and(|n| *n >= 1));

    // Only p5 is asked for, in each region, for each count and duration;
    // the first day's answer took two pages.
    let asked: Vec<BTreeMap<String, String>> = server
        .requests()
        .iter()
        .map(|r| form(&r.body))
        .filter(|f| f.get("Action").map(String::as_str) == Some("DescribeCapacityBlockOfferings"))
        .collect();
    assert_eq!(asked.len(), 2 * 4 + 1);
    assert!(asked.iter().all(|f| f["InstanceType"] == "p5.48xlarge"));
}

#[tokio::test]
async fn a_refused_capacity_block_request_fails_the_sync_naming_the_call() {
    let err = failing_sync("us-east-1", |req| {
        req.body
            .contains("Action=DescribeCapacityBlockOfferings")
            .then(|| ec2_error(403, "UnauthorizedOperation"))
    })
    .await;
    let text = err.to_string();
    assert!(
        text.contains("DescribeCapacityBlockOfferings in us-east-1"),
        "{text}"
    );
    assert!(!text.contains("test-secret-key"));
}
