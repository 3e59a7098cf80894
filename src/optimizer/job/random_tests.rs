//! Randomized jobs: every result passes the independent checker, and a bag
//! agrees with the per-hour model of the jobs section (hourly counts within
//! each hour's cap, a whole total per offer, solved once per finish) on status, the kind of
//! infeasibility and its figure, the objective, the total and the finish. A
//! gang's choice and ranking agree with every option enumerated through the
//! checker's own closed form.

use serde_json::{Value, json};

use super::check::{option, verify};
use super::*;
use crate::optimizer::lp::{Milp, Row, Sense};
use crate::optimizer::tests::Lcg;

fn random_offer(r: &mut Lcg, k: usize, hours: usize, carbon: bool) -> Value {
    let (model, memory) = r.pick(&[
        ("H100-80GB", 80),
        ("A100-80GB", 80),
        ("L4", 24),
        ("B200", 180),
    ]);
    let gpus = r.pick(&[1.0, 2.0, 8.0, 0.5]);
    let kind = r.pick(&["on_demand", "spot", "window"]);
    let mut o = json!({"id": format!("o{k}"), "gpu_model": model, "gpu_count": gpus,
                       "gpu_memory_gib": memory, "kind": kind});
    if carbon || r.next() < 0.5 {
        o["kgco2e_per_hour"] = json!(gpus * (0.02 + 0.4 * r.next()));
    }
    let price = gpus * (1.0 + 3.0 * r.next());
    if kind == "window" {
        let instances = r.pick(&[1, 2, 3]);
        let span = 1 + (r.next() * hours as f64) as usize;
        o["window"] = json!({"start_hour": (r.next() * (hours + 1) as f64) as usize, "hours": span,
                             "instances": instances,
                             "upfront_usd": price * instances as f64 * span as f64 * (0.4 + 0.8 * r.next())});
        return o;
    }
    o["usd_per_hour"] = json!(price);
    o["max_instances"] = r.pick(&[Value::Null, json!(1), json!(2), json!(4)]);
    if r.next() < 0.3 {
        let caps: Vec<Value> = (0..hours)
            .map(|_| r.pick(&[Value::Null, json!(0), json!(1), json!(3)]))
            .collect();
        o["available"] = json!(caps);
    }
    if kind == "spot" {
        o["interruptions_per_hour"] = json!(0.6 * r.next());
    }
    o
}

fn random_job(seed: u64, gang: bool) -> Value {
    let mut r = Lcg(seed);
    let hours = if gang {
        24 + (r.next() * 72.0) as usize
    } else {
        3 + (r.next() * 6.0) as usize
    };
    let carbon = r.next() < 0.3;
    let offers: Vec<Value> = (0..2 + (r.next() * 3.0) as usize)
        .map(|k| random_offer(&mut r, k, hours, carbon))
        .collect();
    let mut job = json!({"shape": if gang { "gang" } else { "bag" },
                         "work": r.pick(&[0.1, 3.0, 10.0, 40.0, 200.0]) * if gang { 10.0 } else { 1.0 },
                         "checkpoint_hours": r.pick(&[0.5, 1.0]),
                         "min_gpu_memory_gib": r.pick(&[Value::Null, json!(40)])});
    if gang {
        job["nodes_max"] = json!(r.pick(&[1, 4, 8, 16]));
        job["scaling"] = json!(r.pick(&[1.0, 0.95, 0.8]));
        job["gpus"] = r.pick(&[Value::Null, Value::Null, json!(8), json!(16)]);
    }
    if r.next() < 0.4 {
        job["budget_usd"] = json!(r.pick(&[5.0, 50.0, 500.0, 5000.0]));
    }
    let mut doc = json!({"schema_version": 4, "kind": "job", "hours": hours, "job": job, "offers": offers,
                         "objective": r.pick(&["cost", "time"]),
                         "perf": {"H100-80GB": 1.0, "A100-80GB": 0.5, "L4": 0.25}});
    if carbon {
        doc["carbon"] = r.pick(&[
            json!({"max_kg": 5.0}),
            json!({"usd_per_tonne": 200.0}),
            json!({"max_kg": 50.0, "usd_per_tonne": 50.0}),
        ]);
    }
    doc
}

/// What the per-hour model minimises.
#[derive(Clone, Copy)]
enum Goal {
    Total,
    Cost,
    Carbon,
}

/// The per-hour model restricted to hours `< finish`: its optimum under
/// `goal`, with the budget and carbon rows as asked; `None` if infeasible.
fn per_hour(
    p: &JobProblem,
    finish: usize,
    goal: Goal,
    budget: bool,
    carbon: bool,
    max_total: Option<f64>,
) -> Option<f64> {
    let price = p.carbon.and_then(|c| c.usd_per_tonne).unwrap_or(0.0) / 1000.0;
    let mut m = Milp::default();
    let (mut work, mut money, mut kg_row, mut total) = (vec![], vec![], vec![], vec![]);
    let scale = |terms: Vec<(usize, f64)>, sense, rhs: f64| {
        let s = if rhs > 0.0 { 1e6 / rhs } else { 1.0 };
        Row {
            terms: terms.into_iter().map(|(i, c)| (i, c * s)).collect(),
            sense,
            rhs: rhs * s,
        }
    };
    for o in &p.offers {
        let Ok(phi) = check::eligible(p, o) else {
            continue;
        };
        let w = o.gpu_count * phi * check::yield_at(p, o, 1.0);
        let kg = o.kgco2e_per_hour.unwrap_or(0.0);
        let hourly = check::hourly_price(o);
        let z = match o.purchase {
            Purchase::Window { upfront_usd, .. } => {
                let fee = if matches!(goal, Goal::Carbon) {
                    0.0
                } else {
                    upfront_usd
                };
                let z = m.add_var(fee, Some(1.0), true);
                money.push((z, upfront_usd));
                total.push((z, upfront_usd));
                Some(z)
            }
            _ => None,
        };
        // Whole instance-hours per offer, spread over the hours in any way
        // their caps allow: exact, as a whole total lays out in whole
        // instances.
        let cost = match goal {
            Goal::Total => hourly + price * kg,
            Goal::Cost => hourly,
            Goal::Carbon => kg,
        };
        let total_n = m.add_var(cost, None, true);
        let mut spread = vec![(total_n, -1.0)];
        let unbounded = (p.job.work / w).ceil() + 1.0;
        for h in 0..finish {
            let cap = check::cap(p, o, h).map_or(unbounded, |c| c as f64);
            let y = m.add_var(0.0, Some(cap), false);
            if let Some(z) = z {
                m.rows.push(Row {
                    terms: vec![(y, 1.0), (z, -cap)],
                    sense: Sense::AtMost,
                    rhs: 0.0,
                });
            }
            spread.push((y, 1.0));
        }
        m.rows.push(Row {
            terms: spread,
            sense: Sense::Equal,
            rhs: 0.0,
        });
        work.push((total_n, w));
        money.push((total_n, hourly));
        kg_row.push((total_n, kg));
        total.push((total_n, hourly + price * kg));
    }
    m.rows
        .push(scale(work, Sense::AtLeast, p.job.work * (1.0 - 1e-9)));
    if budget && let Some(b) = p.job.budget_usd {
        m.rows
            .push(scale(money.clone(), Sense::AtMost, b * (1.0 + 1e-9) + 1e-9));
    }
    if carbon && let Some(x) = p.carbon.and_then(|c| c.max_kg) {
        m.rows.push(scale(
            kg_row.clone(),
            Sense::AtMost,
            x * (1.0 + 1e-9) + 1e-9,
        ));
    }
    if let Some(t) = max_total {
        m.rows.push(scale(total.clone(), Sense::AtMost, t));
    }
    let values = m.solve(Backend::default(), None).ok()?;
    let of = |terms: &[(usize, f64)]| terms.iter().map(|(i, c)| c * values[*i]).sum::<f64>();
    Some(match goal {
        Goal::Total => of(&total),
        Goal::Cost => of(&money),
        Goal::Carbon => of(&kg_row),
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn random_bags_pass_the_checker_and_match_the_per_hour_model() {
    let (mut optimal, mut kinds) = (0, std::collections::BTreeSet::new());
    for seed in 1..=60 {
        let doc = random_job(seed, false);
        let p = JobProblem::from_json(&doc).unwrap();
        let r = p.solve(Backend::default(), None).unwrap();
        let json = serde_json::to_value(&r).unwrap();
        verify(&p, &json).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{doc}\n{json:#}"));
        let h = p.hours;
        let has_offers = !r.offers.is_empty();
        let free = has_offers
            .then(|| per_hour(&p, h, Goal::Cost, false, false, None))
            .flatten();
        let within_budget = free.and_then(|_| per_hour(&p, h, Goal::Carbon, true, false, None));
        let best = within_budget.and_then(|_| per_hour(&p, h, Goal::Total, true, true, None));
        let kind = r
            .infeasibility
            .as_ref()
            .map(|i| i["kind"].as_str().unwrap().to_owned());
        let expected = if !has_offers {
            Some("no_eligible_offers")
        } else if free.is_none() {
            Some("deadline")
        } else if within_budget.is_none() {
            Some("budget")
        } else if best.is_none() {
            Some("carbon")
        } else {
            None
        };
        assert_eq!(kind.as_deref(), expected, "seed {seed}: {doc}\n{json:#}");
        let inf = r.infeasibility.clone().unwrap_or(Value::Null);
        match expected {
            Some("budget") => assert!(
                close(inf["min_cost"].as_f64().unwrap(), free.unwrap()),
                "seed {seed}: {inf}"
            ),
            Some("carbon") => {
                assert!(
                    close(
                        inf["min_carbon_kg"].as_f64().unwrap(),
                        within_budget.unwrap()
                    ),
                    "seed {seed}: {inf}"
                );
            }
            _ => {}
        }
        kinds.insert(expected.unwrap_or("optimal"));
        let Some(best) = best else { continue };
        optimal += 1;
        let feasible_by =
            |f: usize, cap: Option<f64>| per_hour(&p, f, Goal::Total, true, true, cap);
        let (finish, total) = match p.objective {
            Objective::Cost => {
                let cap = best + 1e-9 * best.abs().max(1.0);
                let f = (1..=h)
                    .find(|&f| feasible_by(f, Some(cap)).is_some())
                    .unwrap();
                (f, best)
            }
            Objective::Time => {
                let f = (1..=h).find(|&f| feasible_by(f, None).is_some()).unwrap();
                (f, feasible_by(f, None).unwrap())
            }
        };
        assert!(
            close(r.total_usd.unwrap(), total),
            "seed {seed}: total {:?} vs {total}\n{doc}",
            r.total_usd
        );
        assert_eq!(r.finish_hours, Some(finish as f64), "seed {seed}: {doc}");
    }
    assert!(
        optimal >= 20 && kinds.len() >= 4,
        "too few kinds of answer: {optimal} optimal, {kinds:?}"
    );
}

#[test]
fn random_gangs_pass_the_checker_and_rank_every_option() {
    let mut optimal = 0;
    for seed in 1..=80 {
        let doc = random_job(seed, true);
        let p = JobProblem::from_json(&doc).unwrap();
        let r = p.solve(Backend::default(), None).unwrap();
        let json = serde_json::to_value(&r).unwrap();
        verify(&p, &json).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{doc}\n{json:#}"));
        let Shape::Gang { nodes_max, .. } = p.job.shape else {
            unreachable!()
        };
        // Each offer's best option by the first key, enumerated afresh.
        let key = |run: &check::Run| match p.objective {
            Objective::Cost => run.total,
            Objective::Time => run.start + run.run,
        };
        let best: Vec<(String, f64)> = p
            .offers
            .iter()
            .filter_map(|o| {
                (1..=u64::from(nodes_max))
                    .filter_map(|n| option(&p, o, n).ok())
                    .map(|run| key(&run))
                    .min_by(f64::total_cmp)
                    .map(|k| (o.id.clone(), k))
            })
            .collect();
        let ranked: Vec<(String, f64)> = json["ranking"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["feasible"] == true)
            .map(|e| {
                (
                    e["offer"].as_str().unwrap().to_owned(),
                    e["objective"].as_f64().unwrap(),
                )
            })
            .collect();
        let mut sorted = ranked.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut want = best.clone();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            sorted.len(),
            want.len(),
            "seed {seed}: {ranked:?} vs {best:?}\n{doc}"
        );
        for (a, b) in sorted.iter().zip(&want) {
            assert!(a.0 == b.0 && close(a.1, b.1), "seed {seed}: {a:?} vs {b:?}");
        }
        match best.iter().map(|b| b.1).min_by(f64::total_cmp) {
            Some(least) => {
                optimal += 1;
                assert!(
                    close(r.objective.unwrap(), least),
                    "seed {seed}: {:?} vs {least}",
                    r.objective
                );
            }
            None => assert_eq!(r.status, "infeasible", "seed {seed}"),
        }
    }
    assert!(optimal >= 20, "only {optimal} random gangs had a plan");
}

#[test]
fn the_checker_refuses_a_tampered_result() {
    for seed in 1..=40 {
        let doc = random_job(seed, seed % 2 == 0);
        let p = JobProblem::from_json(&doc).unwrap();
        let r = serde_json::to_value(p.solve(Backend::default(), None).unwrap()).unwrap();
        if r["status"] != "optimal" {
            continue;
        }
        let mut bad = r.clone();
        bad["total_usd"] = json!(r["total_usd"].as_f64().unwrap() * 0.9 - 1.0);
        assert!(
            verify(&p, &bad).is_err(),
            "seed {seed}: a lower total passed"
        );
        let mut bad = r.clone();
        bad["excluded_offers"] = json!([]);
        assert_eq!(
            verify(&p, &bad).is_err(),
            !r["excluded_offers"].as_array().unwrap().is_empty(),
            "seed {seed}"
        );
        if let Some(schedule) = r["schedule"].as_array() {
            let mut bad = r.clone();
            bad["schedule"][0]["hours"][0] =
                json!(schedule[0]["hours"][0].as_u64().unwrap() + 10_000);
            assert!(
                verify(&p, &bad).is_err(),
                "seed {seed}: a count over its cap passed"
            );
            let mut bad = r.clone();
            bad["schedule"] = json!([]);
            assert!(verify(&p, &bad).is_err(), "seed {seed}: no work passed");
        } else {
            let mut bad = r.clone();
            bad["gang"]["nodes"] = json!(5000);
            assert!(verify(&p, &bad).is_err(), "seed {seed}: 5000 nodes passed");
        }
    }
}
