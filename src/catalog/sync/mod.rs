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
    gpuplan_providers::progress::fetched(
        snapshot.prices.len() + snapshot.spot_observations.len(),
        snapshot.skipped.values().sum(),
    );
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
        let (id, priced) = (id.clone(), suspicious::Priced::of(&snapshot));
        blocking(pool, move |p| {
            p.read(|s| suspicious::Baseline::read(s, &id, &priced))
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
        if !(t.gpu_count.is_finite() && t.gpu_count > 0.0) {
            return Err(format!(
                "instance type `{}` has {} GPUs: a count must be above 0",
                t.instance_type, t.gpu_count
            ));
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
        let windowed = p.price_kind == gpuplan_providers::PriceKind::CapacityBlock;
        match &p.window {
            None if windowed => return Err(format!("price `{name}` has no window")),
            Some(_) if !windowed => {
                return Err(format!(
                    "price `{name}` has a window, which only capacity_block prices have"
                ));
            }
            Some(w) if w.instance_count == 0 || w.end <= w.start => {
                return Err(format!(
                    "price `{name}` has an empty window ({} instances, {} to {})",
                    w.instance_count, w.start, w.end
                ));
            }
            _ => {}
        }
        let effective = p.parts_hourly();
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
            p.window,
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
mod tests;
