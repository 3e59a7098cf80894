//! `gpuplan sync`: one sync of every enabled source now, with a summary per source.

use gpuplan_providers::progress::Counters;

use super::progress::{Progress, bytes};
use super::*;

pub(super) async fn run_sync(
    config: &Config,
    wanted: &[String],
    json: bool,
    progress: &Progress,
) -> Result<ExitCode, CliError> {
    let mut providers = config
        .providers
        .build_enabled()
        .map_err(|e| CliError::Failed(e.into()))?;
    if !wanted.is_empty() {
        let known: Vec<String> = providers.iter().map(|p| p.id().to_owned()).collect();
        if let Some(missing) = wanted.iter().find(|w| !known.contains(w)) {
            return Err(CliError::BadInput(anyhow::anyhow!(
                "--provider {missing}: no enabled provider has that name; enabled: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        providers.retain(|p| wanted.iter().any(|w| w == p.id()));
    }
    if providers.is_empty() {
        eprintln!("No providers are enabled in the configuration; nothing to sync.");
    }
    let pool =
        Arc::new(Pool::open(&config.store.location, 0).map_err(|e| CliError::Failed(e.into()))?);
    let cancel = CancellationToken::new();
    // On a shared catalog a sync is a duty here too: a source that a replica
    // is syncing now is not synced twice.
    let cluster = crate::daemon::duties::Cluster::new(pool.clone());
    let mut outcomes = Vec::new();
    for provider in &providers {
        let duty = crate::daemon::duties::sync_duty(provider.id(), Scope::Full);
        let Some(held) = cluster.take(&duty, Utc::now(), &cancel).await else {
            outcomes.push(crate::catalog::sync::SyncOutcome {
                provider: provider.id().to_owned(),
                run_id: None,
                result: Err(crate::catalog::sync::SyncError::Busy {
                    provider: provider.id().to_owned(),
                    duty,
                }),
                seconds: 0.0,
            });
            continue;
        };
        let counters = Arc::new(Counters::default());
        let line = progress.line(provider.id(), {
            let counters = counters.clone();
            move || sync_status(&counters)
        });
        let outcome = gpuplan_providers::progress::counting(
            counters,
            crate::catalog::sync::sync_provider(
                &pool,
                provider.as_ref(),
                Scope::Full,
                &config.sync,
                &held.cancel,
                Some(&held.fence),
            ),
        )
        .await;
        drop(line);
        outcomes.push(outcome);
        held.release().await;
    }
    let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
    if json {
        let rows: Vec<_> = outcomes
            .iter()
            .map(|o| match &o.result {
                Ok(stats) => json!({"provider": o.provider, "run_id": o.run_id, "status": "ok",
                                    "seconds": o.seconds, "stats": stats}),
                Err(e) => json!({"provider": o.provider, "run_id": o.run_id, "status": "failed",
                                 "seconds": o.seconds, "error": e.to_string()}),
            })
            .collect();
        print_json(&rows)?;
    } else {
        for o in &outcomes {
            match &o.result {
                Ok(s) => {
                    let skipped = if s.skipped.is_empty() {
                        "none".to_owned()
                    } else {
                        s.skipped
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    let unchanged = if s.regions_unchanged > 0 {
                        format!(
                            "  unchanged regions {} (not downloaded)",
                            s.regions_unchanged
                        )
                    } else {
                        String::new()
                    };
                    println!(
                        "{:<16} ok      {:>7.2}s  types {}  prices {} (changed {}, withdrawn {})  spot {} (new {})  availability {}  skipped: {skipped}{unchanged}",
                        o.provider,
                        o.seconds,
                        s.instance_types,
                        s.prices_seen,
                        s.prices_changed,
                        s.prices_withdrawn,
                        s.spot_seen,
                        s.spot_added,
                        s.availability
                    );
                    for price in &s.suspicious {
                        println!("{:<16} SUSPICIOUS price stored: {price}", o.provider);
                    }
                }
                Err(e) => println!("{:<16} FAILED  {:>7.2}s  {e}", o.provider, o.seconds),
            }
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A sync's progress line: what it has read, then what it is storing.
fn sync_status(c: &Counters) -> String {
    let answers = Counters::get(&c.answers);
    let mut status = format!(
        "{} read in {answers} answer{}",
        bytes(Counters::get(&c.bytes)),
        if answers == 1 { "" } else { "s" }
    );
    let (records, rejected) = (Counters::get(&c.records), Counters::get(&c.rejected));
    if records > 0 || rejected > 0 {
        let _ = write!(
            status,
            "; checking and storing {records} records ({rejected} rows rejected)"
        );
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_sync_line_says_what_was_read_then_what_is_stored() {
        let c = Counters::default();
        c.bytes.store(2048, Ordering::Relaxed);
        c.answers.store(1, Ordering::Relaxed);
        assert_eq!(sync_status(&c), "2.00 KiB read in 1 answer");
        c.answers.store(3, Ordering::Relaxed);
        c.records.store(120, Ordering::Relaxed);
        c.rejected.store(2, Ordering::Relaxed);
        assert_eq!(
            sync_status(&c),
            "2.00 KiB read in 3 answers; checking and storing 120 records (2 rows rejected)"
        );
    }
}
