//! A source's loop: sync on its schedule (or at start, or when triggered),
//! back off after a failure, and evaluate alerts after each sync.

use super::*;

/// One source as the scheduler runs it.
pub struct Source {
    pub provider: Box<dyn Provider>,
    /// Full syncs, or only new spot history (AWS's `spot_schedule`).
    pub scope: Scope,
    pub schedule: Schedule,
    /// Notified to sync now (`POST /v1/sync`).
    pub trigger: Arc<Notify>,
}

/// Runs one source until `ctx.cancel` fires.
pub async fn run_source(source: Source, ctx: Context) {
    let id = source.provider.id().to_owned();
    let last_good = {
        let (pool, id) = (ctx.pool.clone(), id.clone());
        tokio::task::spawn_blocking(move || pool.read(|s| s.last_good_syncs()))
            .await
            .ok()
            .and_then(Result::ok)
            .and_then(|m| m.get(&id).copied())
    };
    // A spot-only job waits for its schedule: the full sync at start reads
    // spot history too.
    let mut next = match source.scope {
        Scope::Full => first_run(&source.schedule, last_good, ctx.clock.now()),
        Scope::SpotHistory => source.schedule.next_after(ctx.clock.now()),
    };
    let mut failures = 0u32;
    loop {
        tracing::debug!(provider = %id, next = %next, "Next sync scheduled.");
        // A sync that started since then does this wake-up's work: for a
        // scheduled slot, one from about the slot on; for a trigger, one from
        // the trigger on.
        let done_since = tokio::select! {
            () = ctx.cancel.cancelled() => break,
            () = tokio::time::sleep(ctx.clock.until(next)) => slot_window(&source.schedule, next),
            () = source.trigger.notified() => ctx.clock.now(),
        };
        let Some(held) = take_sync_duty(&source, &ctx, done_since).await else {
            if ctx.cancel.is_cancelled() {
                break;
            }
            next = source.schedule.next_after(ctx.clock.now());
            continue;
        };
        let outcome = sync::sync_provider(
            &ctx.pool,
            source.provider.as_ref(),
            source.scope,
            &ctx.policy,
            &held.cancel,
            Some(&held.fence),
        )
        .await;
        held.release().await;
        ctx.metrics.record_sync(&outcome);
        if ctx.cancel.is_cancelled() {
            break;
        }
        if let Some(hook) = &ctx.alerts {
            hook.evaluate(&ctx.pool, &ctx.cancel).await;
            ctx.metrics.record_alert_evaluation();
        }
        let retry_after = match &outcome.result {
            Ok(_) => {
                failures = 0;
                None
            }
            Err(err) => {
                failures += 1;
                let wait = match err {
                    SyncError::Provider(e) => e.retry_after(),
                    _ => None,
                };
                if let Some(w) = wait.filter(|w| *w > MAX_RETRY_AFTER) {
                    tracing::warn!(provider = %id, requested_secs = w.as_secs(), capped_secs = MAX_RETRY_AFTER.as_secs(), "The server asked for a longer wait than gpuplan honours; capped.");
                }
                wait
            }
        };
        next = after_run(
            &source.schedule,
            ctx.backoff,
            failures,
            retry_after,
            ctx.clock.now(),
            fastrand::f64(),
        );
        if failures > 0 {
            tracing::warn!(provider = %id, failures, retry_at = %next, "Sync failed; retrying with backoff.");
        }
    }
    tracing::info!(provider = %id, "Source stopped.");
}

/// Takes the source's sync duty: `None` when the daemon stops, or when on a
/// shared catalog another replica synced since `done_since` (or still held
/// the duty when the next slot came).
async fn take_sync_duty(
    source: &Source,
    ctx: &Context,
    done_since: DateTime<Utc>,
) -> Option<crate::daemon::duties::Held> {
    let id = source.provider.id().to_owned();
    let duty = crate::daemon::duties::sync_duty(&id, source.scope);
    let until = source.schedule.next_after(ctx.clock.now());
    let held = ctx.cluster.take(&duty, until, &ctx.cancel).await?;
    if !ctx.pool.is_shared() {
        return Some(held);
    }
    // Holding the duty, no other replica syncs this source: a run still
    // running was left by a replica that died, and the slot may be done.
    let (pool, scope, name) = (ctx.pool.clone(), source.scope, id.clone());
    let done = tokio::task::spawn_blocking(move || {
        let closed = pool.write(|s| s.fail_interrupted_runs(Some((&name, scope)), Utc::now()))?;
        if closed > 0 {
            tracing::warn!(provider = %name, runs = closed, "Marked runs of a replica that stopped mid-sync as failed.");
        }
        pool.read(|s| s.sync_done_since(&name, scope, done_since))
    })
    .await;
    match done {
        Ok(Ok(false)) => return Some(held),
        Ok(Ok(true)) => tracing::debug!(provider = %id, "Another replica did this sync."),
        Ok(Err(e)) => {
            tracing::warn!(provider = %id, error = %e, "Could not read the sync runs; skipping this slot.")
        }
        Err(e) => {
            tracing::error!(provider = %id, error = %e, "Reading the sync runs panicked; skipping this slot.")
        }
    }
    held.release().await;
    None
}
