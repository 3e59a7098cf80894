//! A scheduled plan's loop: re-solve it on its schedule against the current
//! catalog, save it, and alert `plan_changed` rules when it changed.

use super::*;

/// Runs one scheduled plan until `cancel` fires: at each scheduled time it
/// builds the problem from the catalog, solves it, saves it, and alerts the
/// `plan_changed` rules when the result changed (docs/planning-model.md §7).
#[allow(clippy::too_many_arguments)]
pub async fn run_plan(
    name: String,
    plan: ScheduledPlan,
    planning: Arc<PlanService>,
    pool: Arc<Pool>,
    hook: Option<Arc<AlertHook>>,
    cluster: Arc<Cluster>,
    cancel: CancellationToken,
    clock: Clock,
) {
    loop {
        let next = plan.schedule.next_after(clock.now());
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(clock.until(next)) => {}
        }
        let until = plan.schedule.next_after(clock.now());
        let Some(held) = cluster.take(&format!("plan:{name}"), until, &cancel).await else {
            continue;
        };
        if !plan_due(&pool, &name, slot_window(&plan.schedule, next)).await {
            held.release().await;
            continue;
        }
        let span = tracing::info_span!("scheduled_plan", plan = %name);
        let outcome = tracing::Instrument::instrument(
            plan_once(&name, &plan, &planning, &pool, hook.clone(), &held.fence),
            span,
        )
        .await;
        match outcome {
            Ok(queued) if queued > 0 => {
                tracing::info!(plan = %name, queued, "Plan changed; alerts queued.");
                if let Some(h) = &hook {
                    h.wake.notify_one();
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(plan = %name, error = %e, "Scheduled plan failed."),
        }
        held.release().await;
    }
}

/// Whether the slot's plan of `name` is to be made: not before the catalog's
/// first good sync (a plan of an empty catalog has no offers, and the first
/// real one would then read as a change), and not when another replica
/// already saved it since `since`.
async fn plan_due(pool: &Arc<Pool>, name: &str, since: DateTime<Utc>) -> bool {
    let (pool, name) = (pool.clone(), name.to_owned());
    let due = tokio::task::spawn_blocking(move || {
        pool.read(|s| {
            if s.last_good_syncs()?.is_empty() {
                tracing::info!(plan = %name, "Scheduled plan skipped: no source has synced yet.");
                return Ok(false);
            }
            let done = pool.is_shared()
                && s.saved_plan(None, Some(&name))?
                    .is_some_and(|p| p.created_at >= since);
            Ok::<_, crate::store::StoreError>(!done)
        })
    })
    .await;
    match due {
        Ok(Ok(due)) => due,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "Could not read the catalog; skipping this plan slot.");
            false
        }
        Err(_) => false,
    }
}

/// One run of a scheduled plan; returns how many alert messages it queued.
async fn plan_once(
    name: &str,
    plan: &ScheduledPlan,
    planning: &PlanService,
    pool: &Arc<Pool>,
    hook: Option<Arc<AlertHook>>,
    fence: &crate::store::Fence,
) -> Result<usize, String> {
    let classes = match &plan.input {
        PlanInput::Demand(path) => inputs::read_catalog_classes(path, plan.classes.as_deref())
            .map_err(|e| e.to_string())?,
        PlanInput::Usage {
            path,
            horizon_hours,
        } => {
            let usage = inputs::read_demand(path).map_err(|e| e.to_string())?;
            vec![DemandClass::default_class(
                forecast::forecast(&usage, *horizon_hours)?.gpus,
            )]
        }
        PlanInput::Bills {
            teams,
            days,
            horizon_hours,
        } => {
            let (pool, teams, gpus, days) = (pool.clone(), teams.clone(), plan.gpus.clone(), *days);
            let usage = tokio::task::spawn_blocking(move || {
                pool.read(|s| crate::plan::from_bills::usage_from_bills(s, &teams, &gpus, days))
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("usage from the bills: {e}"))?;
            vec![DemandClass::default_class(
                forecast::forecast(&usage.demand, *horizon_hours)?.gpus,
            )]
        }
    };
    let owned = match &plan.owned {
        Some(path) => Some(inputs::read_owned(path).map_err(|e| e.to_string())?),
        None => None,
    };
    let request = PlanRequest {
        name: Some(name.to_owned()),
        input: Input::Catalog {
            classes,
            owned,
            found: Vec::new(),
            policy: plan.policy.clone(),
            gpus: plan.gpus.clone(),
            clouds: plan.clouds.clone(),
            regions: plan.regions.clone(),
            countries: plan.countries.clone(),
        },
        overrides: Overrides::default(),
        relax: false,
        backend: crate::optimizer::Backend::default(),
        save: true,
        wait: true,
        fence: Some(fence.clone()),
        scenario_keys: serde_json::Map::new(),
        progress: None,
        search: None,
    };
    let planned = planning.plan(request).await.map_err(|e| e.to_string())?;
    let (Some(change), Some(hook)) = (planned.saved.and_then(|s| s.change), hook) else {
        return Ok(0);
    };
    let result_json = serde_json::to_value(&planned.result).unwrap_or_default();
    let (pool, name, fence) = (pool.clone(), name.to_owned(), fence.clone());
    tokio::task::spawn_blocking(move || {
        pool.write_fenced(Some(&fence), |store| {
            let previous = store.alert_states(None)?;
            let d = alerts::plan_changed(
                &hook.rules,
                &previous,
                &name,
                &change,
                &result_json,
                Utc::now(),
            );
            if !d.states.is_empty() {
                store.apply_alerts(&d.states, &d.messages, &[], Utc::now())?;
            }
            Ok(d.messages.len())
        })
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e: crate::store::StoreError| e.to_string())
}
