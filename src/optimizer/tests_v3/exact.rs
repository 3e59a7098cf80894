//! Randomized problems whose every frontier point is checked by
//! [`verify`] and by evaluating portfolios with their cheapest recourse,
//! and the methods that must agree with the extensive form.

use super::*;

/// Each scenario's cost with `r` new reservations of each offer's first
/// option fixed, recourse at its cheapest: the R-fixed LP of §11.12.
fn evaluate(problem: &Problem, r: &[f64]) -> Option<Vec<f64>> {
    let st = problem.stochastic.as_ref().unwrap();
    let hours = problem.horizon() as f64;
    st.scenarios
        .iter()
        .map(|s| {
            let mut p = problem.scenario(s);
            for o in &mut p.offers {
                o.max_reserved_instances = Some(0.0);
            }
            let fixed: f64 = problem
                .offers
                .iter()
                .zip(r)
                .filter(|(_, n)| **n > 0.0)
                .map(|(o, n)| hours * o.reserved[0].effective_hourly() * n)
                .sum();
            for (o, n) in problem.offers.iter().zip(r) {
                if *n > 0.0 {
                    p.owned.push(Owned {
                        offer: o.id.clone(),
                        option: o.reserved[0].id.clone(),
                        count: *n,
                        remaining_hours: None,
                    });
                }
            }
            let res = solve(&p, &SolveOptions::default()).unwrap();
            res.objective.map(|c| c + fixed)
        })
        .collect()
}

fn below(rng: &mut Lcg, n: u64) -> u64 {
    (rng.next() * n as f64) as u64
}

fn risk_objective(st: &Stochastic, costs: &[f64], baselines: &[f64], lambda: f64) -> f64 {
    let losses: Vec<(f64, f64)> = costs
        .iter()
        .zip(baselines)
        .zip(&st.scenarios)
        .map(|((c, b), s)| (c - b, s.probability))
        .collect();
    let mean: f64 = losses.iter().map(|(x, p)| x * p).sum();
    (1.0 - lambda) * mean + lambda * cvar(&losses, st.risk.beta)
}

/// Half the time, one owned reservation of `o0` for the first half of the
/// horizon.
fn maybe_owned(doc: &mut Value, rng: &mut Lcg, hours: usize) {
    if below(rng, 2) == 0 {
        doc["owned"] =
            json!([{"offer": "o0", "option": "1y", "count": 1, "remaining_hours": hours / 2}]);
    }
}

/// `doc` solved as planned and by the extensive form (with the reductions
/// kept iff `reduce`): the problem and both results.
fn both_ways(doc: &Value, reduce: bool) -> (Problem, PlanResult, PlanResult) {
    let problem = Problem::from_json(doc).unwrap();
    let fast = solve(&problem, &SolveOptions::default()).unwrap();
    let plain = solve(
        &problem,
        &SolveOptions {
            reduce,
            decompose: false,
            ..SolveOptions::default()
        },
    )
    .unwrap();
    (problem, fast, plain)
}

/// Every frontier point of `ours` has the objective of `theirs`'s to 1e-6
/// (relative); `what` names the two methods in a failure.
fn assert_same_frontier(
    ours: PlanResult,
    theirs: PlanResult,
    what: &str,
    case: usize,
    doc: &Value,
) {
    let (a, b) = (ours.v3.unwrap(), theirs.v3.unwrap());
    assert_eq!(a.frontier.len(), b.frontier.len(), "case {case}");
    for (p, q) in a.frontier.iter().zip(&b.frontier) {
        assert!(
            (p.objective - q.objective).abs() <= 1e-6 * q.objective.abs().max(1.0),
            "case {case} λ {}: {what} {} vs {}\n{doc}",
            p.lambda,
            p.objective,
            q.objective
        );
    }
}

#[test]
fn random_v3_problems_match_enumeration_over_the_reservations() {
    let mut rng = Lcg(0x5eed_0003);
    for case in 0..25 {
        let hours = 2 + below(&mut rng, 4) as usize;
        let n_offers = 1 + below(&mut rng, 2) as usize;
        let offers: Vec<Value> = (0..n_offers)
            .map(|k| {
                let od = 1.0 + below(&mut rng, 4) as f64 * 0.5;
                let spot = (below(&mut rng, 3) > 0).then(|| 0.2 + below(&mut rng, 5) as f64 * 0.1);
                let reserved = 0.3 + below(&mut rng, 5) as f64 * 0.1;
                let mut o = offer(&format!("o{k}"), Some(od), spot, Some(reserved));
                o["max_reserved_instances"] = json!(3);
                o
            })
            .collect();
        let n = 2 + below(&mut rng, 4) as usize;
        let scenarios: Vec<Value> = (0..n)
            .map(|i| {
                let demand: Vec<u64> = (0..hours).map(|_| below(&mut rng, 4)).collect();
                let mut s = json!({"id": format!("w{i}"), "demand": demand});
                if below(&mut rng, 2) == 0 {
                    let up: Vec<u64> = (0..hours).map(|_| below(&mut rng, 2)).collect();
                    s["spot_available"] = json!({"aws/r1/o0": up});
                }
                s
            })
            .collect();
        let measure = if below(&mut rng, 3) == 0 {
            "savings_shortfall"
        } else {
            "cost"
        };
        let beta = [0.0, 0.5, 0.8, 0.95][below(&mut rng, 4) as usize];
        let doc = json!({"schema_version": 3, "demand": vec![1; hours], "offers": offers,
            "scenarios": scenarios, "risk": {"beta": beta, "measure": measure}});
        let (problem, r, v) = solved(&doc);
        assert_eq!(r.status, "optimal", "case {case}: {v:#}");
        let st = problem.stochastic.as_ref().unwrap();
        let baselines: Vec<f64> = if measure == "cost" {
            vec![0.0; n]
        } else {
            v["scenarios"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["baseline_on_demand_cost"].as_f64().unwrap())
                .collect()
        };
        // Every portfolio with at most 3 of each offer.
        let mut best = vec![f64::INFINITY; st.risk.frontier.len()];
        let combos = 4usize.pow(n_offers as u32);
        for code in 0..combos {
            let r: Vec<f64> = (0..n_offers)
                .map(|k| ((code >> (2 * k)) & 3) as f64)
                .collect();
            let costs = evaluate(&problem, &r).unwrap();
            for (b, lambda) in best.iter_mut().zip(&st.risk.frontier) {
                *b = b.min(risk_objective(st, &costs, &baselines, *lambda));
            }
        }
        for (point, want) in v["frontier"].as_array().unwrap().iter().zip(&best) {
            let got = point["objective"].as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "case {case}: λ {} objective {got}, enumeration {want}\n{doc}",
                point["lambda"]
            );
            // The reported portfolio, re-evaluated, has the reported figures.
            let mut r = vec![0.0; n_offers];
            for e in point["reserved"].as_array().unwrap() {
                let k: usize = e["offer"].as_str().unwrap()[1..].parse().unwrap();
                r[k] = e["count"].as_f64().unwrap();
            }
            let costs = evaluate(&problem, &r).unwrap();
            let lambda = point["lambda"].as_f64().unwrap();
            let again = risk_objective(st, &costs, &baselines, lambda);
            assert!(
                (again - got).abs() <= 1e-6 * got.abs().max(1.0),
                "case {case}: λ {lambda} re-evaluated {again} vs {got}"
            );
        }
    }
}

#[test]
fn the_one_class_scan_agrees_with_the_extensive_form() {
    let mut rng = Lcg(0x5ca_0003);
    for case in 0..20 {
        let hours = 3 + below(&mut rng, 6) as usize;
        let offers: Vec<Value> = (0..2 + below(&mut rng, 4))
            .map(|k| {
                let g = [1, 2, 4, 8][below(&mut rng, 4) as usize];
                let od = f64::from(g) * (1.0 + rng.next());
                let mut o = offer(
                    &format!("o{k}"),
                    Some(od),
                    Some(od * (0.2 + 0.5 * rng.next())),
                    Some(od * (0.4 + 0.4 * rng.next())),
                );
                o["gpus_per_instance"] = json!(g);
                o["region"] = json!(format!("r{}", k % 2));
                o["spot_interruption_rate"] = json!(0.2 * rng.next());
                for (key, v) in [
                    ("max_spot_instances", json!(3)),
                    ("max_on_demand_instances", json!(6)),
                    ("max_reserved_instances", json!(2)),
                ] {
                    if below(&mut rng, 3) == 0 {
                        o[key] = v;
                    }
                }
                o
            })
            .collect();
        let demand: Vec<f64> = (0..hours).map(|_| (rng.next() * 12.0).round()).collect();
        let scenarios: Vec<Value> = (0..2 + below(&mut rng, 5))
            .map(|i| {
                let d: Vec<f64> = demand
                    .iter()
                    .map(|x| (x + (rng.next() - 0.5) * 8.0).max(0.0).round())
                    .collect();
                let up: Vec<u64> = (0..hours)
                    .map(|_| u64::from(below(&mut rng, 4) > 0))
                    .collect();
                json!({"id": format!("w{i}"), "demand": d, "spot_available": {"aws/r0/o0": up}})
            })
            .collect();
        let beta = [0.5, 0.8, 0.9][below(&mut rng, 3) as usize];
        let measure = if below(&mut rng, 3) == 0 {
            "savings_shortfall"
        } else {
            "cost"
        };
        let sigma = [Value::Null, json!(0.6)][below(&mut rng, 2) as usize].clone();
        let pi = [Value::Null, json!(0.4)][below(&mut rng, 2) as usize].clone();
        let mut doc = json!({"schema_version": 3, "demand": demand, "offers": offers, "scenarios": scenarios,
            "risk": {"beta": beta, "measure": measure},
            "policy": {"max_spot_share": sigma, "max_pool_share": pi}});
        maybe_owned(&mut doc, &mut rng, hours);
        let (problem, fast, plain) = both_ways(&doc, false);
        assert_eq!(fast.status, plain.status, "case {case}");
        if fast.status != "optimal" {
            continue;
        }
        let v = serde_json::to_value(&fast).unwrap();
        verify(&problem, &v, false).unwrap_or_else(|e| panic!("case {case}: {e}\n{doc}"));
        assert_eq!(fast.model_stats.method, "scan", "case {case}");
        assert_eq!(plain.model_stats.method, "extensive_form");
        assert_same_frontier(fast, plain, "scan vs extensive", case, &doc);
    }
}

#[test]
fn several_classes_plan_the_same_with_and_without_the_reductions() {
    let mut rng = Lcg(0x2c1a_5503);
    for case in 0..12 {
        let hours = 2 + below(&mut rng, 4) as usize;
        let mut offers: Vec<Value> = (0..2 + below(&mut rng, 3))
            .map(|k| {
                let od = 1.0 + rng.next();
                let mut o = offer(&format!("o{k}"), Some(od), Some(od * (0.2 + 0.5 * rng.next())), None);
                // Two options: the reductions keep only the cheaper one.
                o["reserved"] = json!([
                    {"id": "1y", "term_hours": 8760, "hourly_price": od * (0.5 + 0.3 * rng.next())},
                    {"id": "3y", "term_hours": 26280, "hourly_price": od * (0.4 + 0.3 * rng.next())}]);
                o
            })
            .collect();
        // A class only reserved capacity can serve: its coverage rows hold
        // purchase columns alone, yet differ by scenario.
        let mut b200 = offer("rsv", None, None, Some(0.9));
        b200["gpu_model"] = json!("B200");
        offers.push(b200);
        let demand = |rng: &mut Lcg| -> Vec<f64> {
            (0..hours).map(|_| (rng.next() * 6.0).round()).collect()
        };
        let scenarios: Vec<Value> = (0..2 + below(&mut rng, 3))
            .map(|i| {
                let up: Vec<u64> = (0..hours).map(|_| u64::from(below(&mut rng, 3) > 0)).collect();
                json!({"id": format!("w{i}"), "classes": {"train": demand(&mut rng), "special": demand(&mut rng)},
                       "spot_available": {"aws/r1/o0": up}})
            })
            .collect();
        let doc = json!({"schema_version": 3,
            "classes": [{"id": "train", "demand": vec![1; hours], "gpu_models": ["H100-80GB"]},
                        {"id": "special", "demand": vec![1; hours], "gpu_models": ["B200"]}],
            "offers": offers, "scenarios": scenarios,
            "risk": {"beta": 0.8, "frontier": [0, 0.5, 1]}});
        let problem = Problem::from_json(&doc).unwrap();
        let reduced = solve(&problem, &SolveOptions::default()).unwrap();
        let plain = solve(
            &problem,
            &SolveOptions {
                reduce: false,
                ..SolveOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            (reduced.status, reduced.model_stats.method),
            ("optimal", "l_shaped"),
            "case {case}"
        );
        let v = serde_json::to_value(&reduced).unwrap();
        verify(&problem, &v, false).unwrap_or_else(|e| panic!("case {case}: {e}\n{doc}"));
        assert_same_frontier(reduced, plain, "reduced vs plain", case, &doc);
    }
}

/// Several classes on a few offers of unlike GPUs, with caps (on-demand
/// caps tight enough that some scenarios need reservations: feasibility
/// cuts), spot outages or none, owned commitments or none, whole or
/// continuous purchases, both measures: the decomposition's frontier
/// matches the extensive form's at every λ, and its plans pass the checker.
#[test]
fn the_decomposition_agrees_with_the_extensive_form() {
    let mut rng = Lcg(0xbe4d_e850);
    let mut decomposed = 0;
    for case in 0..40 {
        let hours = 2 + below(&mut rng, 5) as usize;
        let models = ["H100-80GB", "A100-80GB", "L4"];
        let offers: Vec<Value> = (0..2 + below(&mut rng, 4))
            .map(|k| {
                let g = [1, 2, 4][below(&mut rng, 3) as usize];
                let od = f64::from(g) * (1.0 + rng.next());
                let mut o = offer(
                    &format!("o{k}"),
                    Some(od),
                    Some(od * (0.2 + 0.5 * rng.next())),
                    None,
                );
                o["gpu_model"] = json!(models[k as usize % 3]);
                o["gpus_per_instance"] = json!(g);
                o["region"] = json!(format!("r{}", k % 2));
                o["spot_interruption_rate"] = json!(0.2 * rng.next());
                o["reserved"] = json!([
                    {"id": "1y", "term_hours": 8760, "hourly_price": od * (0.4 + 0.4 * rng.next())},
                    {"id": "3y", "term_hours": 26280, "hourly_price": od * (0.3 + 0.4 * rng.next())}]);
                for (key, v) in [
                    ("max_spot_instances", json!(2)),
                    ("max_on_demand_instances", json!(1 + below(&mut rng, 3))),
                    ("max_reserved_instances", json!(3)),
                ] {
                    if below(&mut rng, 3) == 0 {
                        o[key] = v;
                    }
                }
                o
            })
            .collect();
        let class_count = 2 + below(&mut rng, 2) as usize;
        let classes: Vec<Value> = (0..class_count)
            .map(|c| {
                let mut class = json!({"id": format!("c{c}"), "demand": vec![2; hours],
                    "perf": {"H100-80GB": 1.0, "A100-80GB": 0.4 + 0.2 * rng.next(), "L4": 0.1 + 0.2 * rng.next()}});
                if below(&mut rng, 3) == 0 {
                    class["max_spot_share"] = json!(0.5);
                }
                class
            })
            .collect();
        let outages = below(&mut rng, 3) > 0;
        let scenarios: Vec<Value> = (0..2 + below(&mut rng, 4))
            .map(|i| {
                let mut demand = serde_json::Map::new();
                for c in 0..class_count {
                    let d: Vec<f64> = (0..hours).map(|_| (rng.next() * 6.0).round()).collect();
                    demand.insert(format!("c{c}"), json!(d));
                }
                let mut s = json!({"id": format!("w{i}"), "classes": demand});
                if outages {
                    let up: Vec<u64> = (0..hours)
                        .map(|_| u64::from(below(&mut rng, 3) > 0))
                        .collect();
                    s["spot_available"] = json!({"aws/r0/o0": up});
                }
                s
            })
            .collect();
        let measure = if below(&mut rng, 4) == 0 {
            "savings_shortfall"
        } else {
            "cost"
        };
        let beta = [0.5, 0.8, 0.9][below(&mut rng, 3) as usize];
        let whole = below(&mut rng, 4) > 0;
        let mut doc = json!({"schema_version": 3, "classes": classes, "offers": offers,
            "scenarios": scenarios,
            "risk": {"beta": beta, "measure": measure,
                     "frontier": [0, 0.3, 0.7, 1]},
            "policy": {"integer_reserved": whole}});
        maybe_owned(&mut doc, &mut rng, hours);
        let (problem, fast, plain) = both_ways(&doc, true);
        assert_eq!(fast.status, plain.status, "case {case}\n{doc}");
        if fast.status != "optimal" {
            assert_eq!(
                fast.infeasibility.as_ref().map(|w| &w["kind"]),
                plain.infeasibility.as_ref().map(|w| &w["kind"]),
                "case {case}"
            );
            continue;
        }
        decomposed += usize::from(fast.model_stats.method == "l_shaped");
        let v = serde_json::to_value(&fast).unwrap();
        verify(&problem, &v, false).unwrap_or_else(|e| panic!("case {case}: {e}\n{doc}"));
        assert_same_frontier(fast, plain, "decomposed vs extensive", case, &doc);
    }
    assert!(decomposed >= 20, "only {decomposed} cases were decomposed");
}

#[test]
fn classes_that_fit_alone_but_not_together_name_their_scenario() {
    let mut a = offer("a", Some(1.0), None, None);
    a["max_on_demand_instances"] = json!(3);
    let doc = json!({"schema_version": 3,
        "classes": [{"id": "train", "demand": [2, 2]}, {"id": "infer", "demand": [2, 2]}],
        "offers": [a],
        "scenarios": [{"id": "calm", "classes": {"train": [1, 1], "infer": [1, 1]}}, {"id": "busy"}]});
    let (_, r, v) = solved(&doc);
    assert_eq!(r.status, "infeasible");
    let why = &v["infeasibility"];
    assert_eq!(why["kind"], "shared_capacity", "{why:#}");
    assert_eq!(why["scenario"], "busy");
    assert_eq!(why["hours"], json!([0, 1]));
    assert_eq!(
        why["scenarios"],
        json!([{"scenario": "busy", "hours": [0, 1]}])
    );
}

/// Stopped at its first report (as `POST /v1/solves/{id}/stop` or the time
/// limit would stop it), a decomposed plan answers with its best plan so
/// far, the bound it proved and the gap: the optimum lies between them.
#[test]
fn a_stopped_decomposition_keeps_its_best_plan_and_bound() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    let problem = Problem::from_json(&super::worked::x4()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let heard: Arc<Mutex<Vec<crate::optimizer::Progress>>> = Arc::default();
    let (flag, log) = (stop.clone(), heard.clone());
    let opts = SolveOptions {
        stop: Some(stop),
        progress: Some(crate::optimizer::ProgressSink(Arc::new(move |p| {
            log.lock().unwrap().push(*p);
            flag.store(true, Ordering::Relaxed);
        }))),
        ..SolveOptions::default()
    };
    let r = solve(&problem, &opts).unwrap();
    assert_eq!(
        (r.status, r.stopped_by, r.model_stats.method),
        ("time_limit", Some("stopped"), "l_shaped")
    );
    let (objective, bound) = (r.objective.unwrap(), r.best_bound.unwrap());
    // X4's optimum at λ = 0 is 9.1: the plan is no better, the bound no worse.
    assert!(
        bound <= 9.1 + 1e-9 && objective >= 9.1 - 1e-9,
        "{bound} {objective}"
    );
    let gap = r.gap.unwrap();
    assert!(gap >= (objective - 9.1) / objective - 1e-9, "gap {gap}");
    let heard = heard.lock().unwrap();
    assert!(!heard.is_empty());
    assert!(
        heard
            .iter()
            .all(|p| p.best.is_none_or(|b| p.bound <= b + 1e-9))
    );
    // The plan is a real plan of the problem, whatever its gap.
    let v = serde_json::to_value(&r).unwrap();
    assert!(v["hourly"]["scenarios"]["storm"].is_object(), "{v:#}");

    // Unstopped, the same problem is proven with a progress report per
    // master solve and a bound that never falls.
    let heard: Arc<Mutex<Vec<crate::optimizer::Progress>>> = Arc::default();
    let log = heard.clone();
    let opts = SolveOptions {
        progress: Some(crate::optimizer::ProgressSink(Arc::new(move |p| {
            log.lock().unwrap().push(*p);
        }))),
        ..SolveOptions::default()
    };
    let r = solve(&problem, &opts).unwrap();
    assert_eq!((r.status, r.best_bound), ("optimal", None));
    let heard = heard.lock().unwrap();
    // One search per λ (two at λ = 1: least CVaR, then least mean).
    let searches = heard.iter().filter(|p| p.iteration == 1).count();
    assert_eq!(searches, 6, "{heard:?}");
    for pair in heard.windows(2).filter(|w| w[1].iteration > 1) {
        assert_eq!(pair[1].iteration, pair[0].iteration + 1);
        assert!(pair[1].bound >= pair[0].bound - 1e-9, "{pair:?}");
    }
}
