use std::sync::Mutex;

use gpuplan_providers::async_trait;

use super::*;
use crate::store::test_support::{count, last_good_run_id, snapshot};

const POLICY: SyncConfig = SyncConfig {
    max_shrink: 0.2,
    retry_initial: std::time::Duration::from_secs(30),
    retry_max: std::time::Duration::from_secs(900),
    http_attempts: 5,
    http_timeout: std::time::Duration::from_secs(120),
};

/// Answers each fetch with the next queued result.
struct Scripted {
    answers: Mutex<Vec<Result<Snapshot, ProviderError>>>,
}

impl Scripted {
    fn new(mut answers: Vec<Result<Snapshot, ProviderError>>) -> Self {
        answers.reverse();
        Self {
            answers: Mutex::new(answers),
        }
    }
}

#[async_trait]
impl Provider for Scripted {
    fn id(&self) -> &str {
        "aws"
    }

    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        self.answers.lock().unwrap().pop().expect("no answer left")
    }
}

fn server_error() -> ProviderError {
    ProviderError::Http {
        provider: "aws".into(),
        url: "http://127.0.0.1:1/".into(),
        status: 500,
        body: "boom".into(),
    }
}

#[tokio::test]
async fn spot_only_syncs_add_spot_history_and_never_count_as_full_ones() {
    let dir = tempfile::tempdir().unwrap();
    let pool =
        Arc::new(Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap());
    let cancel = CancellationToken::new();
    let mut spot = snapshot(1, 1.0);
    spot.scope = Scope::SpotHistory;
    spot.prices.clear();
    spot.spot_observations
        .push(gpuplan_providers::SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: 0.4,
            observed_at: Utc::now(),
        });
    let nothing_new = Snapshot {
        scope: Scope::SpotHistory,
        ..Snapshot::default()
    };
    let provider = Scripted::new(vec![
        Ok(snapshot(2, 1.0)),
        Err(server_error()),
        Ok(spot),
        Ok(nothing_new),
        Ok(snapshot(2, 1.0)),
    ]);
    let full = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None).await;
    assert!(full.result.is_ok());
    let full_at = pool.read(|s| s.last_good_syncs()).unwrap()["aws"];
    let failed = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None).await;
    assert!(failed.result.is_err());

    let spot = sync_provider(&pool, &provider, Scope::SpotHistory, &POLICY, &cancel, None).await;
    assert_eq!(spot.result.unwrap().spot_added, 1);
    // Finding nothing new is a good spot-only run, not an empty snapshot.
    let quiet = sync_provider(&pool, &provider, Scope::SpotHistory, &POLICY, &cancel, None).await;
    assert!(quiet.result.is_ok());
    // A full answer to a spot-only ask is not stored.
    let wrong = sync_provider(&pool, &provider, Scope::SpotHistory, &POLICY, &cancel, None).await;
    assert!(wrong.result.unwrap_err().to_string().contains("spot-only"));

    // List prices are as old as the last full run, and the failed full run
    // is still the newest one the failed-sync alert sees.
    assert_eq!(pool.read(|s| s.last_good_syncs()).unwrap()["aws"], full_at);
    let scopes: Vec<String> = pool
        .read(|s| s.sync_runs(10))
        .unwrap()
        .into_iter()
        .map(|r| r.scope)
        .collect();
    assert_eq!(
        scopes,
        [
            "spot_history",
            "spot_history",
            "spot_history",
            "full",
            "full"
        ]
    );
    let latest = pool.read(|s| s.latest_runs()).unwrap();
    assert_eq!(latest[0].1, "failed");
    // The four list prices stay; the spot observation is the fifth price.
    assert_eq!(pool.read(|s| s.current_prices()).unwrap().len(), 5);
}

#[tokio::test]
async fn zero_prices_are_not_stored_and_suspicious_ones_are_stored_and_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let pool =
        Arc::new(Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap());
    let cancel = CancellationToken::new();
    // gpu0 on demand falls from $1 to $0.05; gpu1's comes as $0.
    let mut poisoned = snapshot(3, 1.0);
    for p in poisoned
        .prices
        .iter_mut()
        .filter(|p| p.price_kind == gpuplan_providers::PriceKind::OnDemand)
    {
        let usd = match p.instance_type.as_str() {
            "gpu0.xlarge" => 0.05,
            "gpu1.xlarge" => 0.0,
            _ => continue,
        };
        (p.usd_per_hour, p.recurring_usd_per_hour) = (usd, usd);
    }
    let provider = Scripted::new(vec![
        Ok(snapshot(3, 1.0)),
        Ok(poisoned.clone()),
        Ok(poisoned),
    ]);
    let mut runs = Vec::new();
    for _ in 0..3 {
        let outcome = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None).await;
        runs.push(outcome.result.unwrap());
    }
    assert!(runs[0].suspicious.is_empty());
    let flagged: Vec<(&str, f64)> = runs[1]
        .suspicious
        .iter()
        .map(|s| (s.instance_type.as_str(), s.usd_per_hour))
        .collect();
    assert_eq!(flagged, [("gpu0.xlarge", 0.05)]);
    assert_eq!(runs[1].skipped["zero_price"], 1);
    // The same price again is not news.
    assert!(runs[2].suspicious.is_empty());

    // Stored with the run; no price of 0 in the catalog.
    let stored = pool.read(|s| s.sync_runs(10)).unwrap();
    assert_eq!(stored[1].stats.suspicious, runs[1].suspicious);
    let recent = pool
        .read(|s| s.suspicious_runs(Utc::now() - chrono::Duration::hours(1)))
        .unwrap();
    assert_eq!(recent.len(), 1);
    assert_eq!(Some(recent[0].id), stored.get(1).map(|r| r.id));
    let prices = pool.read(|s| s.current_prices()).unwrap();
    assert!(prices.iter().all(|p| p.usd_per_hour > 0.0));
    assert!(
        prices
            .iter()
            .any(|p| p.instance_type == "gpu0.xlarge" && p.usd_per_hour == 0.05),
        "a suspicious price is stored"
    );
}

#[test]
fn aws_gets_a_spot_only_job_unless_its_spot_schedule_is_off() {
    use crate::config::Config;
    let parse = |text: &str| Config::parse(text, std::path::Path::new("")).unwrap();
    let spot = |c: &Config| c.providers.aws.spot_job().unwrap().is_some();
    assert!(spot(&parse("")));
    assert!(!spot(&parse("[providers.aws]\nspot_schedule = \"off\"\n")));
    assert!(!spot(&parse("[providers.aws]\nenabled = false\n")));
    assert!(!spot(&parse(
        "[providers.aws]\nsources = [\"offerings\"]\n"
    )));
}

#[tokio::test]
async fn a_failing_provider_leaves_its_previous_data_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let pool =
        Arc::new(Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap());
    let cancel = CancellationToken::new();
    let mut duplicated = snapshot(2, 5.0);
    duplicated.prices.push(duplicated.prices[0].clone());
    let provider = Scripted::new(vec![
        Ok(snapshot(4, 1.0)),
        Err(server_error()),
        Ok(duplicated),
        Ok(Snapshot::default()),
    ]);

    let good = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None).await;
    assert_eq!(good.result.unwrap().prices_seen, 8);
    let before = pool.read(|s| s.current_prices()).unwrap();
    let versions = count(&pool, "price_versions");

    let failed = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None).await;
    assert!(matches!(failed.result, Err(SyncError::Provider(_))));
    let rejected = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None).await;
    let err = rejected.result.unwrap_err().to_string();
    assert!(err.contains("listed twice"), "{err}");
    let empty = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None).await;
    assert!(empty.result.unwrap_err().to_string().contains("empty"));

    assert_eq!(pool.read(|s| s.current_prices()).unwrap(), before);
    assert_eq!(count(&pool, "price_versions"), versions);
    let runs = pool.read(|s| s.sync_runs(10)).unwrap();
    let statuses: Vec<&str> = runs.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(statuses, vec!["failed", "failed", "failed", "ok"]);
    assert!(runs[2].error.as_deref().unwrap().contains("HTTP 500"));
    assert_eq!(last_good_run_id(&pool, "aws"), good.run_id);
}

#[tokio::test]
async fn a_snapshot_much_smaller_than_the_last_good_one_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let pool =
        Arc::new(Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap());
    let cancel = CancellationToken::new();
    let provider = Scripted::new(vec![
        Ok(snapshot(10, 1.0)),
        Ok(snapshot(7, 1.0)),
        Ok(snapshot(8, 1.0)),
    ]);
    sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None)
        .await
        .result
        .unwrap();
    let before = pool.read(|s| s.current_prices()).unwrap();

    let err = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None)
        .await
        .result
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("14 prices, the last good sync had 20"),
        "{err}"
    );
    assert_eq!(pool.read(|s| s.current_prices()).unwrap(), before);
    // Exactly 20% fewer is still within the limit.
    let ok = sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None)
        .await
        .result
        .unwrap();
    assert_eq!(ok.prices_withdrawn, 4);
}

#[tokio::test]
async fn an_unchanged_region_keeps_its_prices_only_at_the_version_last_read() {
    let dir = tempfile::tempdir().unwrap();
    let pool =
        Arc::new(Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap());
    let cancel = CancellationToken::new();
    let versioned = |version: &str| {
        let mut s = snapshot(3, 1.0);
        s.versions.insert("us-east-1".into(), version.into());
        s
    };
    let unchanged = |version: &str| Snapshot {
        versions: [("us-east-1".to_owned(), version.to_owned())].into(),
        unchanged_regions: ["us-east-1".to_owned()].into(),
        ..Snapshot::default()
    };
    let provider = Scripted::new(vec![
        Ok(versioned("v1")),
        // Claims an unchanged region at a version never read: refused.
        Ok(unchanged("v0")),
        Ok(unchanged("v1")),
    ]);
    let run = || sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None);
    run().await.result.unwrap();
    let before = pool.read(|s| s.current_prices()).unwrap();
    let err = run().await.result.unwrap_err().to_string();
    assert!(
        err.contains("not at the version the last good sync read"),
        "{err}"
    );
    // At the stored version: nothing downloaded, nothing withdrawn, and the
    // list counts as complete for the next shrink check.
    let stats = run().await.result.unwrap();
    assert_eq!(
        (
            stats.prices_seen,
            stats.prices_withdrawn,
            stats.regions_unchanged
        ),
        (6, 0, 1)
    );
    assert_eq!(pool.read(|s| s.current_prices()).unwrap(), before);
    assert_eq!(
        pool.read(|s| s.source_versions("aws")).unwrap()["us-east-1"],
        "v1"
    );

    // A region the catalog holds nothing of cannot be "unchanged".
    let empty = tempfile::tempdir().unwrap();
    let fresh_pool = Arc::new(
        Pool::open(
            &crate::store::Location::Sqlite(empty.path().join("c.db")),
            0,
        )
        .unwrap(),
    );
    let liar = Scripted::new(vec![Ok(unchanged("v1"))]);
    let err = sync_provider(&fresh_pool, &liar, Scope::Full, &POLICY, &cancel, None)
        .await
        .result
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("region us-east-1 is called unchanged"),
        "{err}"
    );
}

#[test]
fn a_wanted_region_that_vanished_rejects_the_snapshot() {
    let before: BTreeSet<String> = ["us-east-1", "eu-west-1"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let snap = snapshot(2, 1.0); // us-east-1 only
    let err = check_regions(&snap, &before, &RegionScope::All).unwrap_err();
    assert!(err.contains("eu-west-1"), "{err}");
    // Dropped from the configured regions: its prices may go.
    assert!(check_regions(&snap, &before, &RegionScope::Only(vec!["us-east-1".into()])).is_ok());
    assert!(check_regions(&snap, &before, &RegionScope::NotChecked).is_ok());
}

#[test]
fn snapshots_that_do_not_hold_together_are_rejected_with_the_record_named() {
    let mut orphan = snapshot(1, 1.0);
    orphan.instance_types.clear();
    assert!(validate(&orphan).unwrap_err().contains("gpu0.xlarge"));

    let mut inconsistent = snapshot(1, 1.0);
    inconsistent.prices[1].usd_per_hour += 1.0;
    assert!(validate(&inconsistent).unwrap_err().contains("commit_1y"));

    let mut nan = snapshot(1, 1.0);
    nan.spot_observations[0].usd_per_hour = f64::NAN;
    assert!(validate(&nan).unwrap_err().contains("us-east-1a"));

    assert!(validate(&snapshot(3, 1.0)).is_ok());
}

/// A spot-only sync that does not describe its types is judged against the
/// catalog's spot price of the type it already knows.
#[tokio::test]
async fn a_spot_only_sync_is_judged_by_the_types_the_catalog_knows() {
    let dir = tempfile::tempdir().unwrap();
    let pool =
        Arc::new(Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap());
    let cancel = CancellationToken::new();
    // The full sync leaves gpu0's spot in us-east-1a at 1.333 (hour 1).
    let mut spot = Snapshot {
        scope: Scope::SpotHistory,
        ..Snapshot::default()
    };
    spot.spot_observations
        .push(gpuplan_providers::SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: 0.01,
            observed_at: crate::store::test_support::at(5),
        });
    let provider = Scripted::new(vec![Ok(snapshot(2, 1.0)), Ok(spot)]);
    sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None)
        .await
        .result
        .unwrap();
    let stats = sync_provider(&pool, &provider, Scope::SpotHistory, &POLICY, &cancel, None)
        .await
        .result
        .unwrap();
    let flagged: Vec<(&str, &str, Option<&str>)> = stats
        .suspicious
        .iter()
        .map(|s| {
            (
                s.instance_type.as_str(),
                s.price_kind.as_str(),
                s.zone.as_deref(),
            )
        })
        .collect();
    assert_eq!(flagged, [("gpu0.xlarge", "spot", Some("us-east-1a"))]);
    assert_eq!(
        stats.suspicious[0].reason,
        crate::store::Suspicion::BelowPrevious
    );
}
