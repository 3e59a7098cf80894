//! `gpuplan advise`: per team and GPU model, the steady on-demand load of the
//! last days of the bills, the plan the catalog recommends for it, and what
//! that saves against going on as billed.

use super::*;
use crate::bills::advice::{self, SteadyLoad};

#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// Only this team (repeatable).
    #[arg(long = "team")]
    teams: Vec<String>,
    /// Days of complete bills to read the on-demand load from.
    #[arg(long, default_value_t = advice::DEFAULT_DAYS)]
    days: u32,
    /// Hours the recommendation is planned and compared over.
    #[arg(long, default_value_t = 720)]
    horizon_hours: usize,
    #[command(flatten)]
    format: Format,
}

/// One piece of advice.
#[derive(Debug, serde::Serialize)]
struct Advice {
    #[serde(flatten)]
    load: SteadyLoad,
    billed_per_gpu_hour: Option<f64>,
    horizon_hours: usize,
    /// The plan's status, purchases and cost for the steady load.
    plan: serde_json::Value,
    /// The steady load for the horizon at the billed on-demand price.
    as_billed_cost: Option<f64>,
    saving: Option<f64>,
    saving_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

async fn advise_one(
    service: &PlanService,
    load: SteadyLoad,
    horizon: usize,
) -> Result<Advice, CliError> {
    let mut advice = Advice {
        billed_per_gpu_hour: load.per_gpu_hour(),
        horizon_hours: horizon,
        plan: serde_json::Value::Null,
        as_billed_cost: None,
        saving: None,
        saving_pct: None,
        note: None,
        load,
    };
    if advice.load.steady_gpus <= 0.0 {
        advice.note =
            Some("no on-demand load ran in 90% of the hours: nothing steady to reserve".into());
        return Ok(advice);
    }
    let request = PlanRequest {
        name: Some(format!(
            "advise {} {}",
            advice.load.team, advice.load.gpu_model
        )),
        input: Input::Catalog {
            classes: vec![optimizer::DemandClass::default_class(vec![
                advice
                    .load
                    .steady_gpus;
                horizon
            ])],
            owned: Some(Vec::new()),
            found: Vec::new(),
            policy: optimizer::Policy::default(),
            gpus: vec![advice.load.gpu_model.clone()],
            clouds: Vec::new(),
            regions: Vec::new(),
            countries: Vec::new(),
        },
        overrides: Overrides::default(),
        relax: false,
        backend: optimizer::Backend::default(),
        save: false,
        wait: true,
        fence: None,
        scenario_keys: serde_json::Map::new(),
        progress: None,
        search: None,
    };
    let planned = match service.prepare(&request).await {
        Ok(p) => service.finish(p, &request).await,
        Err(e) => Err(e),
    };
    let result = match planned {
        Ok(p) => p.result,
        Err(PlanError::Invalid(e)) => {
            advice.note = Some(format!("no plan: {e}"));
            return Ok(advice);
        }
        Err(PlanError::Solve(e)) => {
            advice.note = Some(format!("no plan: {e}"));
            return Ok(advice);
        }
        Err(e) => return Err(CliError::Failed(e.into())),
    };
    advice.plan = json!({
        "status": result.status,
        "objective": result.objective,
        "reserved": result.reserved,
        "spot_share_of_demand": result.spot_share_of_demand,
    });
    #[allow(clippy::cast_precision_loss)]
    let as_billed = advice
        .billed_per_gpu_hour
        .map(|p| p * advice.load.steady_gpus * horizon as f64);
    match (as_billed, result.objective, advice.load.currency.as_deref()) {
        (Some(billed), Some(cost), Some("USD")) => {
            advice.as_billed_cost = Some(billed);
            advice.saving = Some(billed - cost);
            advice.saving_pct = (billed > 0.0).then(|| 100.0 * (billed - cost) / billed);
        }
        (_, None, _) => advice.note = Some(format!("the plan is {}", result.status)),
        (_, _, Some(cur)) if cur != "USD" => {
            advice.note = Some(format!(
                "the bills are in {cur} and catalog prices in USD: no saving is shown"
            ));
        }
        _ => advice.note = Some("the on-demand hours are billed in several currencies".into()),
    }
    Ok(advice)
}

pub(super) async fn run_advise(config: &Config, args: &AdviseArgs) -> Result<ExitCode, CliError> {
    if !(1..=366).contains(&args.days) {
        return Err(CliError::BadInput(anyhow::anyhow!(
            "--days: {} is out of range; allowed: 1 to 366",
            args.days
        )));
    }
    if !(1..=optimizer::MAX_HORIZON_HOURS).contains(&args.horizon_hours) {
        return Err(CliError::BadInput(anyhow::anyhow!(
            "--horizon-hours: {} is out of range; allowed: 1 to {}",
            args.horizon_hours,
            optimizer::MAX_HORIZON_HOURS
        )));
    }
    let pool = Arc::new(open_store(config)?);
    let loads = pool
        .read(|s| advice::steady_on_demand(s, &args.teams, args.days))
        .map_err(|e| CliError::Failed(e.into()))?;
    let Some(loads) = loads else {
        eprintln!("The bills hold no complete day of GPU usage yet; run `gpuplan bills sync`.");
        return Ok(ExitCode::SUCCESS);
    };
    let service = PlanService::new(
        Some(pool),
        &config.planner,
        config.source_intervals(Utc::now()),
    );
    let mut out = Vec::new();
    for load in loads {
        out.push(advise_one(&service, load, args.horizon_hours).await?);
    }
    if args.format.print(&out)? {
        return Ok(ExitCode::SUCCESS);
    }
    if out.is_empty() {
        eprintln!(
            "No on-demand GPU usage in the bills' last {} days.",
            args.days
        );
        return Ok(ExitCode::SUCCESS);
    }
    let money = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
    let header: Vec<String> = [
        "TEAM",
        "GPU",
        "ON-DEMAND GPU-H",
        "STEADY GPUS",
        "BILLED/GPU-H",
        "BUY",
        "AS BILLED",
        "PLAN",
        "SAVING",
        "%",
    ]
    .map(String::from)
    .to_vec();
    let body: Vec<Vec<String>> = out
        .iter()
        .map(|a| {
            let buy: Vec<String> = a.plan["reserved"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .map(|p| {
                            format!(
                                "{} x {} {}",
                                p["count"],
                                p["offer"].as_str().unwrap_or(""),
                                p["option"].as_str().unwrap_or("")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            vec![
                a.load.team.clone(),
                a.load.gpu_model.clone(),
                format!("{:.0}", a.load.on_demand_gpu_hours),
                format!("{:.2}", a.load.steady_gpus),
                money(a.billed_per_gpu_hour),
                if buy.is_empty() {
                    "-".into()
                } else {
                    buy.join(", ")
                },
                money(a.as_billed_cost),
                money(a.plan["objective"].as_f64()),
                money(a.saving),
                a.saving_pct.map_or("-".into(), |p| format!("{p:.1}")),
            ]
        })
        .collect();
    if let Some(first) = out.first() {
        println!(
            "Steady on-demand load from {} to {} (the level 90% of hours reached), planned over {} h:",
            first.load.from.format("%Y-%m-%d"),
            first.load.until.format("%Y-%m-%d"),
            args.horizon_hours
        );
    }
    print!(
        "{}",
        render::render_rows(&header, &body, &[2, 3, 4, 6, 7, 8, 9])
    );
    for a in &out {
        if let Some(note) = &a.note {
            println!("{} {}: {note}", a.load.team, a.load.gpu_model);
        }
    }
    Ok(ExitCode::SUCCESS)
}
