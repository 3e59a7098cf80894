//! The bills loop: load the billing exports on their schedule.

use super::*;

/// Loads a bill source at start and then on `schedule`, until `cancel`
/// fires. Loading is a duty: on a shared catalog one replica loads each
/// source per slot, and what it stored (files and periods) is everyone's.
pub async fn run_bills(
    source: crate::bills::BillSource,
    schedule: Schedule,
    pool: Arc<Pool>,
    cluster: Arc<Cluster>,
    alerts: Option<Arc<AlertHook>>,
    cancel: CancellationToken,
    clock: Clock,
) {
    let duty = crate::bills::load::duty(&source.name);
    let mut first = true;
    loop {
        if !first {
            let next = schedule.next_after(clock.now());
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(clock.until(next)) => {}
            }
        }
        first = false;
        let Some(held) = cluster.take(&duty, Utc::now(), &cancel).await else {
            if cancel.is_cancelled() {
                break;
            }
            continue;
        };
        let (p, s, fence) = (pool.clone(), source.clone(), held.fence.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            crate::bills::load::load_source(&p, &s, Some(&fence), Utc::now(), &Default::default())
        })
        .await;
        if let Err(e) = outcome {
            tracing::error!(source = %source.name, error = %e, "Bill load panicked.");
        }
        held.release().await;
        // Budgets and the rules over the bills follow every load.
        if let Some(hook) = &alerts {
            hook.evaluate(&pool, &cancel).await;
        }
    }
}
