//! `gpuplan sync`: one sync of every enabled source now, with a summary per source.

use super::*;

pub(super) async fn run_sync(
    config: &Config,
    wanted: &[String],
    json: bool,
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
        outcomes.push(
            crate::catalog::sync::sync_provider(
                &pool,
                provider.as_ref(),
                Scope::Full,
                &config.sync,
                &held.cancel,
                Some(&held.fence),
            )
            .await,
        );
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
