//! An independent check of a result document against its problem, written
//! from docs/planning-model.md rather than from the model builder: coverage
//! per class and hour, shares, caps, integrality, eligibility of every
//! assignment, class parts that add up to the totals, reserved use within new
//! plus owned capacity, and every cost recomputed. Tests run it on every plan
//! they get; it shares no code with the solver beyond the problem types.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::model::{DemandClass, Measure, Offer, Policy, Problem, Stochastic};

fn allowed(list: &Option<Vec<String>>, v: &str) -> bool {
    list.as_ref().is_none_or(|l| l.iter().any(|x| x == v))
}

fn passes_policy(o: &Offer, p: &Policy) -> bool {
    allowed(&p.allowed_clouds, &o.cloud)
        && allowed(&p.allowed_regions, &o.region)
        && allowed(&p.gpu_models, &o.gpu_model)
        && p.min_gpu_memory_gib
            .is_none_or(|m| o.gpu_memory_gib.is_some_and(|g| g >= m))
}

/// `φ_ck`, or `None` when `o` may not serve `c`.
fn factor(o: &Offer, c: &DemandClass, p: &Policy) -> Option<f64> {
    let ok = passes_policy(o, p)
        && allowed(&c.allowed_clouds, &o.cloud)
        && allowed(&c.allowed_regions, &o.region)
        && allowed(&c.gpu_models, &o.gpu_model)
        && c.min_gpu_memory_gib
            .is_none_or(|m| o.gpu_memory_gib.is_some_and(|g| g >= m));
    if !ok {
        return None;
    }
    match &c.perf {
        None => Some(1.0),
        Some(perf) => o.perf_in(perf),
    }
}

fn series<'a>(
    doc: &'a Value,
    t_len: usize,
    what: &str,
) -> Result<BTreeMap<&'a str, Vec<f64>>, String> {
    let mut out = BTreeMap::new();
    if let Some(map) = doc.as_object() {
        for (id, v) in map {
            let values: Vec<f64> = v
                .as_array()
                .ok_or(format!("{what}.{id} is not a list"))?
                .iter()
                .map(|x| x.as_f64().ok_or(format!("{what}.{id} holds a non-number")))
                .collect::<Result<_, _>>()?;
            if values.len() != t_len {
                return Err(format!(
                    "{what}.{id} has {} hours, not {t_len}",
                    values.len()
                ));
            }
            out.insert(id.as_str(), values);
        }
    }
    Ok(out)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

/// Checks a result's plan (`optimal`, or the best found by `time_limit`);
/// any other status passes (there is no plan).
///
/// # Errors
/// The first rule the plan breaks, in words.
pub fn verify(problem: &Problem, result: &Value, relax: bool) -> Result<(), String> {
    if result["status"] != "optimal" && result["status"] != "time_limit" {
        return Ok(());
    }
    if let Some(st) = &problem.stochastic {
        return verify_scenarios(problem, st, result, relax);
    }
    let p = &problem.policy;
    let t_len = problem.horizon();
    let horizon = t_len as f64;
    let mip = !relax;
    let offer = |id: &str| {
        problem
            .offers
            .iter()
            .find(|o| o.id == id)
            .ok_or(format!("unknown offer {id}"))
    };
    let serves_some = |o: &Offer| problem.classes.iter().any(|c| factor(o, c, p).is_some());
    let mut cost = 0.0;
    let mut bought: BTreeMap<&str, f64> = BTreeMap::new();
    for e in result["reserved"].as_array().ok_or("no reserved list")? {
        let o = offer(e["offer"].as_str().unwrap_or(""))?;
        let opt = o
            .reserved
            .iter()
            .find(|j| Some(j.id.as_str()) == e["option"].as_str())
            .ok_or(format!("unknown option in {e}"))?;
        let count = e["count"].as_f64().ok_or("reserved count missing")?;
        if count < 0.0 || (mip && p.integer_reserved && count.fract() != 0.0) {
            return Err(format!("reserved count {count} of {}", o.id));
        }
        if !serves_some(o) {
            return Err(format!("reserved purchase of ineligible offer {}", o.id));
        }
        cost += horizon * opt.effective_hourly() * count;
        *bought.entry(o.id.as_str()).or_default() += count;
    }
    for (id, n) in &bought {
        if offer(id)?
            .max_reserved_instances
            .is_some_and(|c| *n > c + 1e-6)
        {
            return Err(format!("reserved cap of {id}"));
        }
    }
    let spot = series(&result["hourly"]["spot_instances"], t_len, "spot_instances")?;
    let od = series(
        &result["hourly"]["on_demand_instances"],
        t_len,
        "on_demand_instances",
    )?;
    for (id, s) in &spot {
        let o = offer(id)?;
        for (t, x) in s.iter().enumerate() {
            let price = o.spot_price.at(t);
            if *x < -1e-9
                || (*x > 0.0 && price.is_none())
                || o.max_spot_instances.is_some_and(|c| *x > c + 1e-6)
                || (mip && p.integer_hourly && x.fract() != 0.0)
            {
                return Err(format!("spot count {x} of {id} in hour {t}"));
            }
            cost += price.unwrap_or(0.0) * x;
        }
    }
    for (id, s) in &od {
        let o = offer(id)?;
        for (t, x) in s.iter().enumerate() {
            if *x < -1e-9
                || (*x > 0.0 && o.on_demand_price.is_none())
                || o.max_on_demand_instances.is_some_and(|c| *x > c + 1e-6)
                || (mip && p.integer_hourly && x.fract() != 0.0)
            {
                return Err(format!("on-demand count {x} of {id} in hour {t}"));
            }
            cost += o.on_demand_price.unwrap_or(0.0) * x;
        }
    }
    let objective = result["objective"].as_f64().ok_or("no objective")?;
    if !close(cost, objective) {
        return Err(format!("recomputed cost {cost} != objective {objective}"));
    }
    if let Some(b) = result["baseline_on_demand_cost"].as_f64()
        && objective > b * (1.0 + 1e-9) + 1e-6
    {
        return Err(format!("plan {objective} dearer than the baseline {b}"));
    }
    let owned_at = |id: &str, t: usize| -> f64 {
        problem
            .owned
            .iter()
            .filter(|e| e.offer == id && e.remaining_hours.is_none_or(|h| (t as u64) < h))
            .map(|e| e.count)
            .sum()
    };
    if problem.schema_version >= 2 {
        let mut sunk = 0.0;
        for e in &problem.owned {
            let o = offer(&e.offer)?;
            let opt = o
                .reserved
                .iter()
                .find(|j| j.id == e.option)
                .ok_or("owned option")?;
            let hours = e
                .remaining_hours
                .map_or(horizon, |h| (h as f64).min(horizon));
            sunk += e.count * opt.effective_hourly() * hours;
        }
        let reported = result["sunk_cost"].as_f64().ok_or("no sunk_cost")?;
        if !close(sunk, reported) {
            return Err(format!("sunk cost {sunk} != reported {reported}"));
        }
    }

    // The class split: reported, or (one class) all capacity serving it.
    let classes = &result["hourly"]["classes"];
    let split = |class: &DemandClass, kind: &str| -> Result<BTreeMap<String, Vec<f64>>, String> {
        if classes.is_null() {
            if problem.classes.len() != 1 {
                return Err("several classes and no class split".into());
            }
            let whole = match kind {
                "spot_instances" => &spot,
                "on_demand_instances" => &od,
                _ => {
                    return Ok(problem
                        .offers
                        .iter()
                        .filter(|o| factor(o, class, p).is_some())
                        .map(|o| {
                            let r = bought.get(o.id.as_str()).copied().unwrap_or(0.0);
                            (
                                o.id.clone(),
                                (0..t_len).map(|t| r + owned_at(&o.id, t)).collect(),
                            )
                        })
                        .collect());
                }
            };
            return Ok(whole
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect());
        }
        Ok(series(&classes[&class.id][kind], t_len, kind)?
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect())
    };
    let mut spot_sum: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut od_sum: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut reserved_sum: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for class in &problem.classes {
        let parts = [
            ("reserved_instances", split(class, "reserved_instances")?),
            ("spot_instances", split(class, "spot_instances")?),
            ("on_demand_instances", split(class, "on_demand_instances")?),
        ];
        let sigma = class.max_spot_share.unwrap_or(p.max_spot_share);
        let pi = class.max_pool_share.unwrap_or(p.max_pool_share);
        for t in 0..t_len {
            let d = class.demand[t];
            let tol = 1e-6 * d.max(1.0);
            let mut supply = 0.0;
            let mut spot_units = 0.0;
            let mut pools: BTreeMap<&str, f64> = BTreeMap::new();
            for (kind, map) in &parts {
                for (id, values) in map {
                    let x = values[t];
                    if x < -1e-9 {
                        return Err(format!("negative {kind} of {id} for {}", class.id));
                    }
                    if x == 0.0 {
                        continue;
                    }
                    let o = offer(id)?;
                    let phi = factor(o, class, p).ok_or(format!(
                        "{id} serves class {} it is not eligible for",
                        class.id
                    ))?;
                    let g = o.gpus_per_instance;
                    let sums = match *kind {
                        "spot_instances" => {
                            let u = phi * o.spot_yield(p.spot_overhead_factor) * g * x;
                            spot_units += u;
                            *pools.entry(o.spot_pool.as_str()).or_default() += u;
                            supply += u;
                            &mut spot_sum
                        }
                        "on_demand_instances" => {
                            supply += phi * g * x;
                            &mut od_sum
                        }
                        _ => {
                            supply += phi * g * x;
                            &mut reserved_sum
                        }
                    };
                    sums.entry(id.clone()).or_insert_with(|| vec![0.0; t_len])[t] += x;
                }
            }
            if supply < d - tol {
                return Err(format!(
                    "class {} hour {t}: supply {supply} < demand {d}",
                    class.id
                ));
            }
            if sigma.is_some_and(|s| spot_units > s * d + tol) {
                return Err(format!("class {} hour {t}: spot share", class.id));
            }
            if pi.is_some_and(|pi| pools.values().any(|v| *v > pi * d + tol)) {
                return Err(format!("class {} hour {t}: pool share", class.id));
            }
        }
    }
    for (whole, parts, what) in [(&spot, &spot_sum, "spot"), (&od, &od_sum, "on-demand")] {
        for id in whole
            .keys()
            .map(|k| (*k).to_owned())
            .chain(parts.keys().cloned())
        {
            for t in 0..t_len {
                let a = whole.get(id.as_str()).map_or(0.0, |v| v[t]);
                let b = parts.get(&id).map_or(0.0, |v| v[t]);
                if (a - b).abs() > 1e-6 * a.max(1.0) {
                    return Err(format!(
                        "{what} parts of {id} in hour {t} add to {b}, not {a}"
                    ));
                }
            }
        }
    }
    for (id, used) in &reserved_sum {
        let r = bought.get(id.as_str()).copied().unwrap_or(0.0);
        for (t, y) in used.iter().enumerate() {
            let capacity = r + owned_at(id, t);
            if *y > capacity + 1e-6 * capacity.max(1.0) {
                return Err(format!(
                    "reserved use {y} of {id} in hour {t} > capacity {capacity}"
                ));
            }
        }
    }
    Ok(())
}

/// `Q_α` of §11.6 over `(value, probability)`, written again here so the
/// check does not trust the solver's.
fn quantile_of(xs: &[(f64, f64)], alpha: f64) -> f64 {
    let mut sorted = xs.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut reached = 0.0;
    sorted
        .iter()
        .find(|(_, p)| {
            reached += p;
            reached >= alpha - 1e-9
        })
        .or(sorted.last())
        .map_or(0.0, |(x, _)| *x)
}

fn tail_mean(xs: &[(f64, f64)], beta: f64) -> f64 {
    let q = quantile_of(xs, beta);
    q + xs.iter().map(|(x, p)| p * (x - q).max(0.0)).sum::<f64>() / (1.0 - beta)
}

/// A version 3 plan (§11.12): each scenario's recourse is a version 2 plan
/// of that scenario with the shared purchases, and the risk figures and the
/// objective are recomputed from the scenario costs.
fn verify_scenarios(
    problem: &Problem,
    st: &Stochastic,
    result: &Value,
    relax: bool,
) -> Result<(), String> {
    let reports = result["scenarios"].as_array().ok_or("no scenarios list")?;
    if reports.len() != st.scenarios.len() {
        return Err(format!(
            "{} scenarios reported, {} in the problem",
            reports.len(),
            st.scenarios.len()
        ));
    }
    let mut costs = Vec::with_capacity(reports.len());
    let mut losses = Vec::with_capacity(reports.len());
    for (s, report) in st.scenarios.iter().zip(reports) {
        if report["id"] != s.id.as_str() {
            return Err(format!("scenario {} reported as {}", s.id, report["id"]));
        }
        let cost = report["cost"]
            .as_f64()
            .ok_or(format!("scenario {}: no cost", s.id))?;
        let one = json!({
            "status": "optimal", "reserved": result["reserved"], "objective": cost,
            "hourly": result["hourly"]["scenarios"][&s.id], "sunk_cost": result["sunk_cost"],
        });
        verify(&problem.scenario(s), &one, relax).map_err(|e| format!("scenario {}: {e}", s.id))?;
        costs.push((cost, s.probability));
        let loss = match st.risk.measure {
            Measure::Cost => cost,
            Measure::SavingsShortfall => {
                cost - report["baseline_on_demand_cost"]
                    .as_f64()
                    .ok_or(format!("scenario {}: no baseline", s.id))?
            }
        };
        losses.push((loss, s.probability));
    }
    let (beta, lambda) = (st.risk.beta, st.risk.lambda);
    let mean = |xs: &[(f64, f64)]| xs.iter().map(|(x, p)| x * p).sum::<f64>();
    let figures = [
        ("expected_cost", mean(&costs)),
        ("p95_cost", quantile_of(&costs, 0.95)),
        ("cvar_cost", tail_mean(&costs, beta)),
        (
            "objective",
            (1.0 - lambda) * mean(&losses) + lambda * tail_mean(&losses, beta),
        ),
    ];
    for (key, want) in figures {
        let got = result[key].as_f64().ok_or(format!("no {key}"))?;
        if !close(got, want) {
            return Err(format!("{key} {got} != recomputed {want}"));
        }
    }
    let points = result["frontier"].as_array().ok_or("no frontier")?;
    let figure = |p: &Value, key: &str| {
        p[key]
            .as_f64()
            .ok_or(format!("frontier point without {key}"))
    };
    let (p95_key, cvar_key) = match st.risk.measure {
        Measure::Cost => ("p95_cost", "cvar_cost"),
        Measure::SavingsShortfall => ("p95_shortfall", "cvar_shortfall"),
    };
    let first = points.first().ok_or("an empty frontier")?;
    let mut flat = true;
    for p in points {
        flat &= figure(first, p95_key)? - figure(p, p95_key)?
            <= st.risk.flat_tolerance * figure(first, "p95_cost")?
            && figure(first, cvar_key)? - figure(p, cvar_key)?
                <= st.risk.flat_tolerance * figure(first, "cvar_cost")?;
    }
    if result["frontier_flat"] != flat {
        return Err(format!(
            "frontier_flat is {}, recomputed {flat}",
            result["frontier_flat"]
        ));
    }
    Ok(())
}
