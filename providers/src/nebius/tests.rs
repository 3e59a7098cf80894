//! Nebius against a stand-in that serves the real protos over gRPC and a
//! token exchange that checks the JWT's signature: paging, preemptible
//! prices only where allowed, decimal strings, usage-based units beside the
//! hourly one, expired tokens, and answers that must fail the sync.

use std::io::Write as _;

use super::*;
use crate::test_server::fast_retry;
use crate::test_server::nebius::{Market, NebiusStandIn};

struct Setup {
    stand_in: NebiusStandIn,
    provider: NebiusProvider,
    _credentials: tempfile::NamedTempFile,
}

impl Setup {
    async fn fetch(&self) -> Result<Snapshot, ProviderError> {
        self.provider.fetch(&FetchContext::default()).await
    }
}

async fn setup(market: Market, expires_in: u64) -> Setup {
    let stand_in = NebiusStandIn::start(market, expires_in).await;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(stand_in.credentials_json.as_bytes())
        .unwrap();
    let provider = NebiusProvider::new(config_for(&stand_in, Some(file.path().into()))).unwrap();
    Setup {
        stand_in,
        provider,
        _credentials: file,
    }
}

fn config_for(stand_in: &NebiusStandIn, credentials_file: Option<PathBuf>) -> NebiusConfig {
    NebiusConfig {
        projects: [
            ("eu-north1".to_owned(), "project-e00north".to_owned()),
            ("us-central1".to_owned(), "project-u00central".to_owned()),
        ]
        .into(),
        auth_endpoint: stand_in.auth.base.clone(),
        compute_endpoint: stand_in.grpc.clone(),
        calculator_endpoint: stand_in.grpc.clone(),
        credentials_file,
        retry: fast_retry(),
    }
}

fn price<'a>(snap: &'a Snapshot, region: &str, instance_type: &str) -> Option<&'a PriceRecord> {
    snap.prices
        .iter()
        .find(|p| p.region == region && p.instance_type == instance_type)
}

#[tokio::test]
async fn prices_every_gpu_preset_of_every_project() {
    let s = setup(Market::sample(), 3600).await;
    let snap = s.fetch().await.unwrap();

    // H100 in both regions, L40S in the first; the CPU platform is skipped.
    let mut names: Vec<(&str, &str)> = snap
        .prices
        .iter()
        .map(|p| (p.region.as_str(), p.instance_type.as_str()))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            ("eu-north1", "gpu-h100-sxm_1gpu-16vcpu-200gb"),
            ("eu-north1", "gpu-h100-sxm_8gpu-128vcpu-1600gb"),
            ("eu-north1", "gpu-l40s-a_1gpu-8vcpu-32gb"),
            ("us-central1", "gpu-h100-sxm_1gpu-16vcpu-200gb"),
            ("us-central1", "gpu-h100-sxm_8gpu-128vcpu-1600gb"),
        ]
    );
    assert_eq!(snap.skipped.get("no_gpu"), Some(&1));
    let h100 = price(&snap, "eu-north1", "gpu-h100-sxm_8gpu-128vcpu-1600gb").unwrap();
    assert_eq!(h100.price_kind, PriceKind::OnDemand);
    assert!((h100.usd_per_hour - 23.6).abs() < 1e-12);
    assert_eq!(h100.zone, None);
    let l40s = price(&snap, "eu-north1", "gpu-l40s-a_1gpu-8vcpu-32gb").unwrap();
    assert!((l40s.usd_per_hour - 1.5456).abs() < 1e-12);

    // Preemptible only where the platform allows it, observed at the sync.
    let mut spot: Vec<(&str, &str, f64)> = snap
        .spot_observations
        .iter()
        .map(|o| (o.zone.as_str(), o.instance_type.as_str(), o.usd_per_hour))
        .collect();
    spot.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(
        spot,
        [
            ("eu-north1", "gpu-h100-sxm_1gpu-16vcpu-200gb", 1.25),
            ("eu-north1", "gpu-h100-sxm_8gpu-128vcpu-1600gb", 10.0),
            ("us-central1", "gpu-h100-sxm_1gpu-16vcpu-200gb", 1.25),
            ("us-central1", "gpu-h100-sxm_8gpu-128vcpu-1600gb", 10.0),
        ]
    );
    assert!(
        snap.spot_observations
            .iter()
            .all(|o| (Utc::now() - o.observed_at).num_seconds() < 60)
    );

    let h100_type = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == "gpu-h100-sxm_8gpu-128vcpu-1600gb")
        .unwrap();
    assert_eq!(h100_type.gpu_model, "H100-80GB");
    assert_eq!(h100_type.gpu_count, 8.0);
    assert_eq!(h100_type.vcpus, Some(128));
    assert_eq!(h100_type.memory_gib, Some(1600.0));
    assert_eq!(h100_type.gpu_form_factor, Some(crate::FormFactor::Sxm));
    let l40s_type = snap
        .instance_types
        .iter()
        .find(|t| t.instance_type == "gpu-l40s-a_1gpu-8vcpu-32gb")
        .unwrap();
    assert_eq!(
        (l40s_type.gpu_model.as_str(), l40s_type.gpu_form_factor),
        ("L40S", None)
    );
    // One exchange; per region the platform pages (2 and 1) and one estimate.
    assert_eq!(s.stand_in.exchanges(), 1);
    assert_eq!(s.stand_in.calls(), 2 + 1 + 1 + 1);
    assert_eq!(
        s.provider.region_scope(),
        RegionScope::Only(vec!["eu-north1".into(), "us-central1".into()])
    );
}

#[tokio::test]
async fn keeps_its_token_and_exchanges_a_new_one_when_the_server_expires_it() {
    let s = setup(Market::sample(), 3600).await;
    s.fetch().await.unwrap();
    s.fetch().await.unwrap();
    assert_eq!(s.stand_in.exchanges(), 1, "a fresh token is kept");

    s.stand_in.expire_tokens();
    s.fetch().await.unwrap();
    assert_eq!(
        s.stand_in.exchanges(),
        2,
        "an expired token is exchanged anew"
    );
}

#[tokio::test]
async fn a_token_near_its_expiry_is_renewed_before_use() {
    // 1 s of life: renewed at once (half its life is the margin).
    let s = setup(Market::sample(), 1).await;
    s.fetch().await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    s.fetch().await.unwrap();
    assert_eq!(s.stand_in.exchanges(), 2);
}

#[tokio::test]
async fn a_token_refused_twice_is_an_auth_error_without_the_token() {
    let s = setup(Market::sample(), 3600).await;
    s.stand_in.fail_next([
        tonic::Status::unauthenticated("token is expired"),
        tonic::Status::unauthenticated("token is expired"),
    ]);
    let err = s.fetch().await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("UNAUTHENTICATED") && text.contains(CREDENTIALS_ENV),
        "{text}"
    );
    assert!(!text.contains("nebius-token-"), "{text}");
    assert_eq!(s.stand_in.exchanges(), 2);

    s.stand_in
        .fail_next([tonic::Status::permission_denied("no access to project")]);
    let err = s.fetch().await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
}

#[tokio::test]
async fn unavailable_is_retried_and_a_lasting_outage_fails_the_sync() {
    let s = setup(Market::sample(), 3600).await;
    s.stand_in
        .fail_next([tonic::Status::unavailable("overloaded")]);
    s.fetch().await.unwrap();

    s.stand_in
        .fail_next((0..3).map(|_| tonic::Status::unavailable("down")));
    let err = s.fetch().await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains("UNAVAILABLE"), "{err}");

    s.stand_in
        .fail_next([tonic::Status::invalid_argument("bad parent_id")]);
    let err = s.fetch().await.unwrap_err();
    assert!(!err.is_retryable(), "{err}");
    assert!(err.to_string().contains("PlatformService/List"), "{err}");
}

#[tokio::test]
async fn a_cost_that_is_not_a_decimal_string_fails_the_sync_naming_the_preset() {
    for bad in ["", "12,5", "1e3", "-1.0", "NaN", "0.000"] {
        let mut market = Market::sample();
        market
            .costs
            .get_mut("gpu-l40s-a_1gpu-8vcpu-32gb")
            .unwrap()
            .0 = bad.to_owned();
        let s = setup(market, 3600).await;
        let err = s.fetch().await.unwrap_err();
        assert!(matches!(err, ProviderError::Decode { .. }), "{bad}: {err}");
        assert!(
            err.to_string()
                .contains("gpu-l40s-a_1gpu-8vcpu-32gb on-demand"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn decimal_strings() {
    assert_eq!(decimal("42.123456789"), Some(42.123_456_789));
    assert_eq!(decimal("3"), Some(3.0));
    for bad in ["", ".5", "5.", "1e3", "+1", "1.2.3", "inf", "0"] {
        assert_eq!(decimal(bad), None, "{bad}");
    }
}

fn spec(platform: &str, preset: &str, preemptible: bool) -> Spec {
    Spec {
        platform: platform.to_owned(),
        preset: preset.to_owned(),
        preemptible,
    }
}

fn hourly(name: &str, cost: &str) -> billing::ResourceCost {
    billing::ResourceCost {
        metadata: Some(common::ResourceMetadata {
            name: name.to_owned(),
            ..Default::default()
        }),
        override_metadata: None,
        aggregation_unit: Some(billing::AggregationUnit {
            unit: "hour".to_owned(),
            unit_type: billing::aggregation_unit::UnitType::TimeBased as i32,
        }),
        cost_type: Some(billing::resource_cost::CostType::General(
            billing::GeneralResourceCost {
                total: Some(billing::CostBreakdown {
                    cost: cost.to_owned(),
                    ..Default::default()
                }),
            },
        )),
    }
}

#[test]
fn estimates_that_do_not_match_their_specs_are_refused() {
    let specs = [
        spec("gpu-h100-sxm", "1gpu", false),
        spec("gpu-h100-sxm", "1gpu", true),
    ];
    let answer =
        |costs: Vec<billing::ResourceCost>, currency: &str| billing::EstimateBatchResponse {
            resource_costs: costs,
            total_costs: Vec::new(),
            currency: currency.to_owned(),
        };
    let good = answer(
        vec![
            hourly("gpu-h100-sxm_1gpu on-demand", "3"),
            hourly("gpu-h100-sxm_1gpu preemptible", "1.5"),
        ],
        "usd",
    );
    assert_eq!(hourly_costs(&good, &specs), Ok(vec![3.0, 1.5]));
    // An answer without names is taken in order.
    let unnamed = answer(vec![hourly("", "3"), hourly("", "1.5")], "USD");
    assert_eq!(hourly_costs(&unnamed, &specs), Ok(vec![3.0, 1.5]));

    let short = answer(vec![hourly("gpu-h100-sxm_1gpu on-demand", "3")], "usd");
    assert!(
        hourly_costs(&short, &specs)
            .unwrap_err()
            .contains("1 hourly costs for 2")
    );
    let swapped = answer(
        vec![
            hourly("gpu-h100-sxm_1gpu preemptible", "1.5"),
            hourly("gpu-h100-sxm_1gpu on-demand", "3"),
        ],
        "usd",
    );
    assert!(
        hourly_costs(&swapped, &specs)
            .unwrap_err()
            .contains("answered as")
    );
    let euros = answer(vec![hourly("", "3"), hourly("", "1.5")], "eur");
    assert!(hourly_costs(&euros, &specs).unwrap_err().contains("`eur`"));
    let mut no_total = hourly("", "3");
    no_total.cost_type = None;
    let missing = answer(vec![no_total, hourly("", "1.5")], "usd");
    assert!(
        hourly_costs(&missing, &specs)
            .unwrap_err()
            .contains("no total")
    );
}

#[tokio::test]
async fn a_platform_listing_that_loops_or_never_ends_fails_the_sync() {
    let mut market = Market::sample();
    market.stuck_page_token = true;
    let s = setup(market, 3600).await;
    let err = s.fetch().await.unwrap_err();
    assert!(err.to_string().contains("came back twice"), "{err}");

    let mut market = Market::sample();
    let platform = market.projects["project-e00north"][0].clone();
    let many: Vec<_> = (0..=MAX_PAGES).map(|_| platform.clone()).collect();
    market.projects.insert("project-e00north".to_owned(), many);
    market.page_size = 1;
    let s = setup(market, 3600).await;
    let err = s.fetch().await.unwrap_err();
    assert!(err.to_string().contains("more than 50 pages"), "{err}");
}

#[tokio::test]
async fn bad_credentials_are_named_and_never_quoted() {
    let stand_in = NebiusStandIn::start(Market::sample(), 3600).await;
    let provider = NebiusProvider::new(config_for(&stand_in, None)).unwrap();
    let err = provider.fetch(&FetchContext::default()).await.unwrap_err();
    assert!(err.to_string().contains(CREDENTIALS_ENV), "{err}");

    let cases = [
        ("{", "not a Nebius credentials file"),
        (
            r#"{"subject-credentials": {"alg": "RS256", "private-key": "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n", "kid": "k", "iss": "a", "sub": "a"}}"#,
            "not a usable RSA key",
        ),
        (
            r#"{"subject-credentials": {"alg": "RS256", "private-key": "nope", "kid": "k", "iss": "a", "sub": "a"}}"#,
            "not a PEM private key",
        ),
        (
            r#"{"subject-credentials": {"alg": "ES256", "private-key": "", "kid": "k", "iss": "a", "sub": "a"}}"#,
            "only RS256",
        ),
        (
            r#"{"subject-credentials": {"alg": "RS256", "private-key": "", "kid": " ", "iss": "a", "sub": "a"}}"#,
            "`subject-credentials.kid` is empty",
        ),
    ];
    for (text, want) in cases {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let provider =
            NebiusProvider::new(config_for(&stand_in, Some(file.path().into()))).unwrap();
        let err = provider.fetch(&FetchContext::default()).await.unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains(want), "{text}: {shown}");
        assert!(
            shown.contains(&file.path().display().to_string()),
            "{shown}"
        );
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
    }
    let missing = NebiusProvider::new(config_for(
        &stand_in,
        Some("/nonexistent/creds.json".into()),
    ))
    .unwrap()
    .fetch(&FetchContext::default())
    .await
    .unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/creds.json"),
        "{missing}"
    );
    assert_eq!(stand_in.exchanges(), 0);
}

#[tokio::test]
async fn a_key_the_exchange_does_not_know_is_refused_with_its_reason() {
    let s = setup(Market::sample(), 3600).await;
    // Another account's key: valid RSA, wrong signature for this account.
    let other = NebiusStandIn::start(Market::sample(), 3600).await;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(other.credentials_json.as_bytes()).unwrap();
    let provider = NebiusProvider::new(config_for(&s.stand_in, Some(file.path().into()))).unwrap();
    let err = provider.fetch(&FetchContext::default()).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    assert!(
        err.to_string().contains("invalid_grant: bad signature"),
        "{err}"
    );
    assert_eq!(s.stand_in.calls(), 0);
}

#[test]
fn the_section_is_checked_by_path() {
    let section: Section = serde_json::from_str(
        r#"{"projects": {"eu-north1": "project-e00a", "EU West": "p", "us-central1": "Project X"},
            "compute_endpoint": "grpc://x"}"#,
    )
    .unwrap();
    let mut p = crate::config::Problems::new("providers.nebius");
    let c = config(&section, RetryPolicy::default(), &mut p);
    let paths: Vec<String> = p.into_vec().into_iter().map(|(path, _)| path).collect();
    assert_eq!(
        paths,
        [
            "providers.nebius.projects.EU West",
            "providers.nebius.projects.us-central1",
            "providers.nebius.compute_endpoint",
        ]
    );
    assert_eq!(c.calculator_endpoint, DEFAULT_CALCULATOR_ENDPOINT);

    let mut p = crate::config::Problems::new("providers.nebius");
    config(&Section::default(), RetryPolicy::default(), &mut p);
    assert_eq!(p.into_vec()[0].0, "providers.nebius.projects");
}

#[test]
fn a_platform_without_its_name_or_spec_fails_instead_of_vanishing() {
    let named = |name: &str| compute::Platform {
        metadata: Some(common::ResourceMetadata {
            name: name.to_owned(),
            ..Default::default()
        }),
        spec: None,
        status: None,
    };
    let mut snap = Snapshot::default();
    let err = offers(&[named("")], &mut snap).err().unwrap();
    assert!(err.contains("no `metadata.name`"), "{err}");
    let err = offers(&[named("gpu-h100-sxm")], &mut snap).err().unwrap();
    assert!(err.contains("`gpu-h100-sxm` has no `spec`"), "{err}");
}
