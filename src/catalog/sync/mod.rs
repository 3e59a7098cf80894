//! One sync of one provider: fetch a snapshot, check it, write it, record the run.
//!
//! A provider that fails, or returns a snapshot that does not hold together,
//! leaves its last good data exactly as it was; the run is recorded as failed with
//! the reason. No price of 0 is stored, and prices that look wrong are stored
//! but reported ([`suspicious`]).

pub mod suspicious;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use gpuplan_providers::{FetchContext, Provider, ProviderError, RegionScope, Scope, Snapshot};
use tokio_util::sync::CancellationToken;

use crate::store::{Fence, Pool, StoreError, WriteStats};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("{provider}: snapshot rejected: {reason}")]
    Rejected { provider: String, reason: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{provider}: sync cancelled by shutdown; nothing of it was stored")]
    Cancelled { provider: String },
    /// On a shared catalog, a replica holds the source's sync duty.
    #[error("{provider}: a replica is syncing it now ({duty} is held); try again when it is done")]
    Busy { provider: String, duty: String },
}

/// `[sync]`: how a sync judges a snapshot and retries, validated by `config`.
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// A snapshot with this share (0..1) fewer prices than the source's last good
    /// one is rejected (a page chain that stopped early, say).
    pub max_shrink: f64,
    /// Backoff of the daemon's retries after a failed sync.
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// Tries of one HTTP request within a sync, the first included.
    pub http_attempts: u32,
    pub http_timeout: Duration,
}

impl SyncConfig {
    /// How each source's HTTP requests are retried within one sync.
    #[must_use]
    pub fn retry_policy(&self) -> gpuplan_providers::http::RetryPolicy {
        gpuplan_providers::http::RetryPolicy {
            max_attempts: self.http_attempts,
            request_timeout: self.http_timeout,
            ..gpuplan_providers::http::RetryPolicy::default()
        }
    }
}

/// The result of syncing one provider.
#[derive(Debug)]
pub struct SyncOutcome {
    pub provider: String,
    /// The sync run's id; `None` only when not even the run could be recorded.
    pub run_id: Option<i64>,
    pub result: Result<WriteStats, SyncError>,
    pub seconds: f64,
}

/// Syncs `provider` into the catalog: everything it has (`Scope::Full`), or
/// only its new spot history. Never fails itself: the outcome carries the
/// error. Store work runs on the blocking pool; `cancel` abandons the fetch
/// (the run is recorded as failed and nothing of it is stored).
#[tracing::instrument(skip_all, fields(provider = %provider.id(), scope = ?scope))]
pub async fn sync_provider(
    pool: &Arc<Pool>,
    provider: &dyn Provider,
    scope: Scope,
    policy: &SyncConfig,
    cancel: &CancellationToken,
    fence: Option<&Fence>,
) -> SyncOutcome {
    let id = provider.id().to_owned();
    let start = Instant::now();
    let started_at = Utc::now();
    let begin = {
        let id = id.clone();
        let regions = provider.region_scope();
        blocking(pool, move |p| {
            p.write(|s| -> Result<_, StoreError> {
                let run_id = s.begin_run(&id, scope, started_at)?;
                let counts = s.current_price_counts(&id)?;
                let ctx = FetchContext {
                    scope,
                    newest_spot_by_region: s.newest_spot_by_region(&id)?,
                    versions: s.source_versions(&id)?,
                    priced_types: counts
                        .iter()
                        .map(|(region, types)| (region.clone(), types.keys().cloned().collect()))
                        .collect(),
                };
                let last = LastGood {
                    prices: s.last_good_price_count(&id)?,
                    by_region: counts
                        .into_iter()
                        .map(|(region, types)| (region, types.values().sum()))
                        .collect(),
                    versions: ctx.versions.clone(),
                    scope: regions,
                };
                Ok((run_id, ctx, last))
            })
        })
        .await
    };
    let (run_id, ctx, last) = match begin {
        Ok(v) => v,
        Err(e) => {
            return SyncOutcome {
                provider: id,
                run_id: None,
                result: Err(e.into()),
                seconds: start.elapsed().as_secs_f64(),
            };
        }
    };

    let result = tokio::select! {
        () = cancel.cancelled() => Err(SyncError::Cancelled { provider: id.clone() }),
        fetched = provider.fetch(&ctx) => check_and_write(pool, &id, fetched.and_then(|s| in_scope(&id, scope, s)), &last, policy, (run_id, fence.cloned()), started_at).await,
    };
    match &result {
        Ok(stats) => tracing::info!(
            run_id,
            prices = stats.prices_seen,
            changed = stats.prices_changed,
            spot_added = stats.spot_added,
            "Sync finished."
        ),
        Err(err) => {
            tracing::warn!(run_id, error = %err, "Sync failed; keeping the last good data.");
            let message = err.to_string();
            let recorded = blocking(pool, move |p| {
                p.write(|s| s.fail_run(run_id, Utc::now(), &message))
            })
            .await;
            if let Err(e) = recorded {
                tracing::error!(run_id, error = %e, "Could not record the failed sync run.");
            }
        }
    }
    SyncOutcome {
        provider: id,
        run_id: Some(run_id),
        result,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// A spot-only sync must store nothing but spot history, whatever the provider
/// answered: the run is recorded as spot-only.
fn in_scope(id: &str, asked: Scope, snapshot: Snapshot) -> Result<Snapshot, ProviderError> {
    if asked == Scope::SpotHistory && snapshot.scope != Scope::SpotHistory {
        return Err(ProviderError::Decode {
            provider: id.to_owned(),
            location: "a spot-only sync".to_owned(),
            detail: "the provider answered with a full snapshot".to_owned(),
        });
    }
    Ok(snapshot)
}

/// What the source's last good data looked like, to judge a new snapshot by.
struct LastGood {
    prices: Option<i64>,
    /// Current prices per region.
    by_region: BTreeMap<String, i64>,
    /// The source versions the last good full sync read.
    versions: BTreeMap<String, String>,
    /// Which of those regions are still wanted.
    scope: RegionScope,
}

async fn check_and_write(
    pool: &Arc<Pool>,
    id: &str,
    fetched: Result<Snapshot, ProviderError>,
    last: &LastGood,
    policy: &SyncConfig,
    (run_id, fence): (i64, Option<Fence>),
    started_at: DateTime<Utc>,
) -> Result<WriteStats, SyncError> {
    let mut snapshot = fetched?;
    let zero = suspicious::drop_zero_prices(&mut snapshot);
    if zero > 0 {
        tracing::warn!(
            prices = zero,
            "Prices of 0 in the provider's answer were not stored (skipped as zero_price)."
        );
    }
    let reject = |reason| SyncError::Rejected {
        provider: id.to_owned(),
        reason,
    };
    validate(&snapshot).map_err(reject)?;
    if snapshot.scope == Scope::Full {
        check_unchanged(&snapshot, last).map_err(reject)?;
        // Prices of unchanged regions stay current: they are part of the list.
        let kept: i64 = snapshot
            .unchanged_regions
            .iter()
            .filter_map(|r| last.by_region.get(r))
            .sum();
        if let Some(before) = last.prices {
            let now = snapshot.prices.len() + usize::try_from(kept).unwrap_or(0);
            check_shrink(now, before, policy.max_shrink).map_err(reject)?;
        }
        let before: BTreeSet<String> = last.by_region.keys().cloned().collect();
        check_regions(&snapshot, &before, &last.scope).map_err(reject)?;
    }
    let id = id.to_owned();
    let baseline = {
        let id = id.clone();
        blocking(pool, move |p| {
            p.read(|s| suspicious::Baseline::read(s, &id))
        })
        .await?
    };
    let flagged = suspicious::find(&baseline, &snapshot);
    // The run keeps every one; the log names the first few.
    const LOGGED: usize = 20;
    for price in flagged.iter().take(LOGGED) {
        tracing::warn!(%price, reason = ?price.reason, "Suspicious price: stored, and reported to suspicious_price alert rules.");
    }
    if flagged.len() > LOGGED {
        tracing::warn!(
            more = flagged.len() - LOGGED,
            "More suspicious prices: see the sync run."
        );
    }
    let stats = blocking(pool, move |p| {
        p.write_fenced(fence.as_ref(), |s| {
            s.write_snapshot(run_id, &id, &snapshot, &flagged, started_at, Utc::now())
        })
    })
    .await?;
    Ok(stats)
}

/// Runs store work off the async runtime.
async fn blocking<T: Send + 'static>(
    pool: &Arc<Pool>,
    f: impl FnOnce(&Pool) -> T + Send + 'static,
) -> T {
    let pool = pool.clone();
    match tokio::task::spawn_blocking(move || f(&pool)).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// A complete snapshot much smaller than the last good one is more likely a
/// truncated download than a cloud that withdrew its offers overnight.
fn check_shrink(now: usize, before: i64, max_shrink: f64) -> Result<(), String> {
    let floor = before as f64 * (1.0 - max_shrink);
    if (now as f64) < floor {
        return Err(format!(
            "it has {now} prices, the last good sync had {before}: more than {:.0}% fewer looks like a truncated download (sync.max_shrink_pct); keeping the last good data",
            max_shrink * 100.0
        ));
    }
    Ok(())
}

/// A region the last good snapshot had, that is still wanted, and that has no
/// price now is far more likely a failed download than a cloud leaving it.
fn check_regions(
    snapshot: &Snapshot,
    before: &BTreeSet<String>,
    scope: &RegionScope,
) -> Result<(), String> {
    let wanted = |r: &String| match scope {
        RegionScope::All => true,
        RegionScope::Only(list) => list.contains(r),
        RegionScope::NotChecked => false,
    };
    let now: BTreeSet<&String> = snapshot
        .prices
        .iter()
        .map(|p| &p.region)
        .chain(&snapshot.unchanged_regions)
        .collect();
    let missing: Vec<&str> = before
        .iter()
        .filter(|r| wanted(r) && !now.contains(r))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "regions {} of the last good sync have no prices now; keeping the last good data",
            missing.join(", ")
        ))
    }
}

/// A region may be called unchanged only at the version the last good sync
/// read, and only when that sync left prices of it to keep.
fn check_unchanged(snapshot: &Snapshot, last: &LastGood) -> Result<(), String> {
    for region in &snapshot.unchanged_regions {
        let claimed = snapshot.versions.get(region);
        if claimed.is_none() || claimed != last.versions.get(region) {
            return Err(format!(
                "region {region} is called unchanged, but not at the version the last good sync read"
            ));
        }
        if snapshot.prices.iter().any(|p| &p.region == region) {
            return Err(format!(
                "region {region} is called unchanged but the snapshot carries prices of it"
            ));
        }
        if !last.by_region.contains_key(region) {
            return Err(format!(
                "region {region} is called unchanged, but the catalog has no current price of it"
            ));
        }
    }
    Ok(())
}

/// Checks that a snapshot holds together before anything of it is stored.
///
/// # Errors
/// The first problem found, naming the record.
pub fn validate(snapshot: &Snapshot) -> Result<(), String> {
    // A spot-only sync may well find nothing new since the last one; a full
    // one whose regions are all unchanged keeps the stored prices.
    if snapshot.scope == Scope::Full
        && snapshot.unchanged_regions.is_empty()
        && snapshot.prices.is_empty()
        && snapshot.spot_observations.is_empty()
        && snapshot.availability.is_empty()
    {
        return Err("it is empty (no prices, spot observations or availability)".to_owned());
    }
    let mut types = HashMap::new();
    for t in &snapshot.instance_types {
        if t.instance_type.trim().is_empty() || t.gpu_model.trim().is_empty() {
            return Err(format!(
                "instance type `{}` has an empty name or GPU model",
                t.instance_type
            ));
        }
        if t.gpu_count == 0 {
            return Err(format!("instance type `{}` has no GPUs", t.instance_type));
        }
        let positive = |v: Option<f64>| v.is_none_or(|v| v.is_finite() && v > 0.0);
        if !positive(t.gpu_memory_gib) || !positive(t.memory_gib) {
            return Err(format!(
                "instance type `{}` has a memory size that is not a positive number",
                t.instance_type
            ));
        }
        if let Some(old) = types.insert(t.instance_type.as_str(), t)
            && old != t
        {
            return Err(format!(
                "instance type `{}` is listed twice with different specs",
                t.instance_type
            ));
        }
    }
    let mut keys = HashMap::new();
    for p in &snapshot.prices {
        let name = format!(
            "{} {} {}{}",
            p.instance_type,
            p.price_kind,
            p.region,
            p.zone.as_ref().map(|z| format!("/{z}")).unwrap_or_default()
        );
        if p.region.trim().is_empty() || p.instance_type.trim().is_empty() {
            return Err(format!(
                "price `{name}` has an empty region or instance type"
            ));
        }
        if !types.contains_key(p.instance_type.as_str()) {
            return Err(format!(
                "price `{name}` refers to an instance type the snapshot does not describe"
            ));
        }
        for (field, v) in [
            ("usd_per_hour", p.usd_per_hour),
            ("upfront_usd", p.upfront_usd),
            ("recurring_usd_per_hour", p.recurring_usd_per_hour),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("price `{name}` has {field} = {v}"));
            }
        }
        let effective = gpuplan_providers::PriceRecord::effective_hourly(
            p.price_kind,
            p.upfront_usd,
            p.recurring_usd_per_hour,
        );
        if (effective - p.usd_per_hour).abs() > 1e-6 * p.usd_per_hour.max(1.0) {
            return Err(format!(
                "price `{name}`: usd_per_hour {} is not upfront {} plus recurring {} over the term ({effective})",
                p.usd_per_hour, p.upfront_usd, p.recurring_usd_per_hour
            ));
        }
        let key = (
            &p.region,
            &p.zone,
            &p.instance_type,
            p.price_kind,
            p.offering_class,
        );
        if keys.insert(key, ()).is_some() {
            return Err(format!("price `{name}` is listed twice"));
        }
    }
    for o in &snapshot.spot_observations {
        if o.zone.trim().is_empty()
            || o.region.trim().is_empty()
            || o.instance_type.trim().is_empty()
        {
            return Err(format!(
                "spot observation of `{}` at {} has an empty region, zone or instance type",
                o.instance_type, o.observed_at
            ));
        }
        if !o.usd_per_hour.is_finite() || o.usd_per_hour < 0.0 {
            return Err(format!(
                "spot observation of `{}` in {} at {} has price {}",
                o.instance_type, o.zone, o.observed_at, o.usd_per_hour
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap(),
        );
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

        let spot =
            sync_provider(&pool, &provider, Scope::SpotHistory, &POLICY, &cancel, None).await;
        assert_eq!(spot.result.unwrap().spot_added, 1);
        // Finding nothing new is a good spot-only run, not an empty snapshot.
        let quiet =
            sync_provider(&pool, &provider, Scope::SpotHistory, &POLICY, &cancel, None).await;
        assert!(quiet.result.is_ok());
        // A full answer to a spot-only ask is not stored.
        let wrong =
            sync_provider(&pool, &provider, Scope::SpotHistory, &POLICY, &cancel, None).await;
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
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap(),
        );
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
            let outcome =
                sync_provider(&pool, &provider, Scope::Full, &POLICY, &cancel, None).await;
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
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap(),
        );
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
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap(),
        );
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
        let pool = Arc::new(
            Pool::open(&crate::store::Location::Sqlite(dir.path().join("c.db")), 0).unwrap(),
        );
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
        assert!(
            check_regions(&snap, &before, &RegionScope::Only(vec!["us-east-1".into()])).is_ok()
        );
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
}
