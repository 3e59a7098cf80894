//! The retention loop: prune old history on its schedule.

use super::*;

/// Prunes the catalog on `schedule` until `cancel` fires (see
/// [`crate::store::prune`] for what is kept whatever the settings).
pub async fn run_pruning(
    schedule: Schedule,
    retention: crate::store::Retention,
    pool: Arc<Pool>,
    cluster: Arc<Cluster>,
    cancel: CancellationToken,
    clock: Clock,
) {
    loop {
        let next = schedule.next_after(clock.now());
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(clock.until(next)) => {}
        }
        // One replica prunes; the others find the duty taken and skip.
        let Some(held) = cluster.take("prune", Utc::now(), &cancel).await else {
            continue;
        };
        let (pool, retention) = (pool.clone(), retention.clone());
        let span = tracing::info_span!("prune");
        let outcome = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            crate::store::prune(&pool, &retention, Utc::now(), false)
        })
        .await;
        match outcome {
            Ok(Ok(counts)) if counts.total() > 0 => {
                tracing::info!(?counts, "Pruned old history.");
            }
            Ok(Ok(_)) => tracing::debug!("Nothing to prune."),
            Ok(Err(e)) => tracing::warn!(error = %e, "Pruning failed; will try at the next slot."),
            Err(e) => tracing::error!(error = %e, "Pruning panicked."),
        }
        held.release().await;
    }
}
