//! An independent check of a job's result document against its problem,
//! written from docs/planning-model.md (jobs, "Checking a plan") rather than
//! from the solvers: eligibility, every count within its hour's cap, windows
//! paid for, and work, cost, carbon, the caps, the finish and the objective
//! recomputed from the schedule; for a gang, the chosen option and every
//! ranked option recomputed from the closed form and run through every
//! filter. It shares nothing with [`super::bag`] or [`super::gang`] beyond
//! the problem types. It does not test optimality.

use serde_json::Value;

use super::model::{JobOffer, JobProblem, Objective, Purchase, Shape};

/// Relative agreement of figures (§12.8: results compare to 1e-6).
fn agree(what: &str, got: &Value, want: f64) -> Result<(), String> {
    match got.as_f64() {
        Some(g) if (g - want).abs() <= 1e-6 * want.abs().max(1.0) => Ok(()),
        _ => Err(format!("{what} is {got}, recomputed {want}")),
    }
}

fn capped(x: f64, cap: f64) -> bool {
    x <= cap * (1.0 + 1e-9) + 1e-9
}

/// The offer's perf factor, or why it may not do the job.
pub(super) fn eligible(p: &JobProblem, o: &JobOffer) -> Result<f64, &'static str> {
    if p.job
        .min_gpu_memory_gib
        .is_some_and(|m| o.gpu_memory_gib < m)
    {
        return Err("gpu_memory");
    }
    if !p
        .job
        .needs
        .iter()
        .all(|n| o.capabilities.iter().any(|c| c == n))
    {
        return Err("capability");
    }
    let keyed = o
        .gpu_form_factor
        .as_ref()
        .and_then(|f| p.perf.get(&format!("{}/{f}", o.gpu_model)));
    let Some(&phi) = keyed.or_else(|| p.perf.get(&o.gpu_model)) else {
        return Err("perf");
    };
    if p.carbon.is_some() && o.kgco2e_per_hour.is_none() {
        return Err("carbon_factor");
    }
    if yield_at(p, o, 1.0) <= 0.0 {
        return Err("yield");
    }
    if let Purchase::Window { start_hour, .. } = o.purchase
        && start_hour >= p.hours
    {
        return Err("window");
    }
    Ok(phi)
}

pub(super) fn yield_at(p: &JobProblem, o: &JobOffer, n: f64) -> f64 {
    match o.purchase {
        Purchase::Spot {
            interruptions_per_hour: rho,
            ..
        } => 1.0 - n * rho * (p.job.checkpoint_hours / 2.0 + p.job.restart_hours),
        _ => 1.0,
    }
}

/// `cap_kh`; `None` for no cap.
pub(super) fn cap(p: &JobProblem, o: &JobOffer, h: usize) -> Option<u64> {
    match &o.purchase {
        Purchase::OnDemand(x) | Purchase::Spot { hourly: x, .. } => {
            let hour = x.available.as_ref().and_then(|a| a[h]);
            match (x.max_instances, hour) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Purchase::Window {
            start_hour,
            hours,
            instances,
            ..
        } => Some(
            if h >= *start_hour && h < (start_hour + hours).min(p.hours) {
                *instances
            } else {
                0
            },
        ),
    }
}

pub(super) fn hourly_price(o: &JobOffer) -> f64 {
    match &o.purchase {
        Purchase::OnDemand(x) | Purchase::Spot { hourly: x, .. } => x.usd_per_hour,
        Purchase::Window { .. } => 0.0,
    }
}

/// Checks `result` (a result document) against `p`.
///
/// # Errors
/// The first disagreement, in words.
pub fn verify(p: &JobProblem, result: &Value) -> Result<(), String> {
    let excluded: Vec<(String, &str)> = p
        .offers
        .iter()
        .filter_map(|o| eligible(p, o).err().map(|r| (o.id.clone(), r)))
        .collect();
    let reported: Vec<(String, &str)> = result["excluded_offers"]
        .as_array()
        .ok_or("excluded_offers is missing")?
        .iter()
        .map(|e| {
            (
                e["offer"].as_str().unwrap_or_default().to_owned(),
                e["reason"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    if reported != excluded {
        return Err(format!(
            "excluded_offers are {reported:?}, recomputed {excluded:?}"
        ));
    }
    match result["status"].as_str() {
        Some("infeasible") => {
            for k in [
                "objective",
                "cost_usd",
                "total_usd",
                "finish_hours",
                "work_done",
            ] {
                if !result[k].is_null() {
                    return Err(format!("an infeasible result has {k} {}", result[k]));
                }
            }
            Ok(())
        }
        Some("optimal") => match p.job.shape {
            Shape::Bag => verify_bag(p, result),
            Shape::Gang { .. } => verify_gang(p, result),
        },
        other => Err(format!("status is {other:?}")),
    }
}

fn offer<'a>(p: &'a JobProblem, id: &Value) -> Result<&'a JobOffer, String> {
    p.offers
        .iter()
        .find(|o| Some(o.id.as_str()) == id.as_str())
        .ok_or_else(|| format!("{id} is not an offer of the problem"))
}

fn verify_bag(p: &JobProblem, r: &Value) -> Result<(), String> {
    let price = p.carbon.and_then(|c| c.usd_per_tonne).unwrap_or(0.0) / 1000.0;
    let (mut work, mut cost, mut carbon, mut finish) = (0.0, 0.0, 0.0, 0);
    let mut carbon_known = true;
    let mut used_windows = Vec::new();
    for entry in r["schedule"].as_array().ok_or("schedule is missing")? {
        let o = offer(p, &entry["offer"])?;
        let phi = eligible(p, o).map_err(|why| format!("{} is not eligible ({why})", o.id))?;
        let hours = entry["hours"]
            .as_array()
            .ok_or("schedule hours are missing")?;
        if hours.len() != p.hours {
            return Err(format!(
                "{} has {} hours, not {}",
                o.id,
                hours.len(),
                p.hours
            ));
        }
        let mut n = 0u64;
        for (h, y) in hours.iter().enumerate() {
            let y = y
                .as_u64()
                .ok_or_else(|| format!("{} hour {h}: {y} is not a whole count", o.id))?;
            if cap(p, o, h).is_some_and(|c| y > c) {
                return Err(format!("{} hour {h}: {y} over its cap", o.id));
            }
            if y > 0 {
                finish = finish.max(h + 1);
            }
            n += y;
        }
        if n > 0 && matches!(o.purchase, Purchase::Window { .. }) {
            used_windows.push(o.id.as_str());
        }
        let n = n as f64;
        work += o.gpu_count * phi * yield_at(p, o, 1.0) * n;
        cost += hourly_price(o) * n;
        match o.kgco2e_per_hour {
            Some(kg) => carbon += kg * n,
            None => carbon_known &= n == 0.0,
        }
    }
    for w in r["windows_bought"]
        .as_array()
        .ok_or("windows_bought is missing")?
    {
        let o = offer(p, &w["offer"])?;
        match o.purchase {
            Purchase::Window { upfront_usd, .. } => cost += upfront_usd,
            _ => return Err(format!("{} is bought as a window but is not one", o.id)),
        }
    }
    for id in used_windows {
        if !r["windows_bought"]
            .as_array()
            .is_some_and(|b| b.iter().any(|w| w["offer"] == id))
        {
            return Err(format!("window {id} runs but is not bought"));
        }
    }
    if work < p.job.work * (1.0 - 1e-9) {
        return Err(format!("the schedule does {work} of {} work", p.job.work));
    }
    if let Some(b) = p.job.budget_usd
        && !capped(cost, b)
    {
        return Err(format!("cost {cost} is over the budget {b}"));
    }
    if let Some(x) = p.carbon.and_then(|c| c.max_kg)
        && !capped(carbon, x)
    {
        return Err(format!("{carbon} kg is over the cap {x}"));
    }
    let total = cost + price * carbon;
    agree("work_done", &r["work_done"], work)?;
    agree("cost_usd", &r["cost_usd"], cost)?;
    agree("total_usd", &r["total_usd"], total)?;
    if carbon_known {
        agree("carbon_kg", &r["carbon_kg"], carbon)?;
    }
    if r["finish_hours"].as_f64() != Some(finish as f64) {
        return Err(format!(
            "finish_hours is {}, the last used hour is {}",
            r["finish_hours"],
            finish as f64 - 1.0
        ));
    }
    let objective = match p.objective {
        Objective::Cost => total,
        Objective::Time => finish as f64,
    };
    agree("objective", &r["objective"], objective)
}

/// An option (offer, n) by the closed form of the gang section: its start,
/// run, finish, cost and carbon, or the first filter it fails.
pub(super) struct Run {
    pub(super) start: f64,
    pub(super) run: f64,
    pub(super) cost: f64,
    pub(super) carbon: Option<f64>,
    pub(super) total: f64,
}

pub(super) fn option(p: &JobProblem, o: &JobOffer, nodes: u64) -> Result<Run, &'static str> {
    let Shape::Gang { scaling, gpus, .. } = p.job.shape else {
        return Err("not a gang");
    };
    let phi = eligible(p, o)?;
    let n = nodes as f64;
    if gpus.is_some_and(|g| (n * o.gpu_count - g).abs() > 1e-9 * g.max(1.0)) {
        return Err("gpus");
    }
    let (limit, start, end) = match &o.purchase {
        Purchase::OnDemand(x) | Purchase::Spot { hourly: x, .. } => {
            (x.max_instances, 0.0, p.hours as f64)
        }
        Purchase::Window {
            start_hour,
            hours,
            instances,
            ..
        } => (
            Some(*instances),
            *start_hour as f64,
            (start_hour + hours).min(p.hours) as f64,
        ),
    };
    if limit.is_some_and(|l| nodes > l) {
        return Err("capacity");
    }
    let y = yield_at(p, o, n);
    if y <= 0.0 {
        return Err("yield");
    }
    let rate = n * o.gpu_count * phi * scaling.powf(n.log2()) * y;
    let run = p.job.work / rate;
    if start + run > end + 1e-9 * end.max(1.0) {
        return Err("deadline");
    }
    if let Purchase::OnDemand(x) | Purchase::Spot { hourly: x, .. } = &o.purchase
        && let Some(available) = &x.available
    {
        let touched = ((run - 1e-9).ceil().max(0.0) as usize).min(p.hours);
        if available[..touched]
            .iter()
            .any(|a| a.is_some_and(|a| a < nodes))
        {
            return Err("availability");
        }
    }
    let cost = match o.purchase {
        Purchase::Window { upfront_usd, .. } => upfront_usd,
        _ => n * hourly_price(o) * run,
    };
    if p.job.budget_usd.is_some_and(|b| !capped(cost, b)) {
        return Err("budget");
    }
    let carbon = o.kgco2e_per_hour.map(|kg| n * kg * run);
    if let Some(x) = p.carbon.and_then(|c| c.max_kg)
        && !capped(carbon.unwrap_or(0.0), x)
    {
        return Err("carbon");
    }
    let price = p.carbon.and_then(|c| c.usd_per_tonne).unwrap_or(0.0) / 1000.0;
    Ok(Run {
        start,
        run,
        cost,
        carbon,
        total: cost + price * carbon.unwrap_or(0.0),
    })
}

fn check_run(p: &JobProblem, what: &str, g: &Value) -> Result<Run, String> {
    let o = offer(p, &g["offer"])?;
    let nodes = g["nodes"]
        .as_u64()
        .ok_or_else(|| format!("{what}: nodes is {}", g["nodes"]))?;
    let run = option(p, o, nodes)
        .map_err(|why| format!("{what}: {} x {nodes} fails the {why} filter", o.id))?;
    agree(&format!("{what} start_hours"), &g["start_hours"], run.start)?;
    agree(&format!("{what} run_hours"), &g["run_hours"], run.run)?;
    agree(
        &format!("{what} finish_hours"),
        &g["finish_hours"],
        run.start + run.run,
    )?;
    agree(&format!("{what} cost_usd"), &g["cost_usd"], run.cost)?;
    agree(&format!("{what} total_usd"), &g["total_usd"], run.total)?;
    if let Some(kg) = run.carbon {
        agree(&format!("{what} carbon_kg"), &g["carbon_kg"], kg)?;
    }
    Ok(run)
}

fn verify_gang(p: &JobProblem, r: &Value) -> Result<(), String> {
    let run = check_run(p, "gang", &r["gang"])?;
    let objective = |run: &Run| match p.objective {
        Objective::Cost => run.total,
        Objective::Time => run.start + run.run,
    };
    agree("objective", &r["objective"], objective(&run))?;
    agree("total_usd", &r["total_usd"], run.total)?;
    agree("cost_usd", &r["cost_usd"], run.cost)?;
    agree("finish_hours", &r["finish_hours"], run.start + run.run)?;
    for (i, entry) in r["ranking"]
        .as_array()
        .ok_or("ranking is missing")?
        .iter()
        .enumerate()
    {
        if entry["feasible"] == true {
            let ranked = check_run(p, &format!("ranking[{i}]"), entry)?;
            agree(
                &format!("ranking[{i}] objective"),
                &entry["objective"],
                objective(&ranked),
            )?;
        }
    }
    Ok(())
}
