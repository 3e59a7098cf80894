//! Schema version 2 (docs/planning-model.md §10): the hand examples E1–E7,
//! v1 equivalence, and randomized problems with classes, owned capacity and
//! hourly spot prices, each plan checked by [`verify`].

use serde_json::{Value, json};

use super::tests::{Lcg, random_problem};
use super::*;

fn gpu(id: &str, model: &str, od: Option<f64>) -> Value {
    json!({"id": id, "cloud": "aws", "region": "us-east-1", "instance_type": id, "gpu_model": model,
           "gpu_memory_gib": 80, "gpus_per_instance": 1, "on_demand_price": od})
}

fn solved(doc: &Value, relax: bool, reduce: bool) -> (Problem, PlanResult) {
    let problem = Problem::from_json(doc).unwrap();
    let opts = SolveOptions {
        relax,
        reduce,
        time_limit: Some(Duration::from_secs(60)),
        ..SolveOptions::default()
    };
    let result = solve(&problem, &opts).unwrap();
    let value = serde_json::to_value(&result).unwrap();
    if let Err(e) = verify(&problem, &value, relax) {
        panic!("{e}\n{value:#}");
    }
    (problem, result)
}

fn run(doc: &Value) -> (PlanResult, Value) {
    let (_, r) = solved(doc, false, true);
    let v = serde_json::to_value(&r).unwrap();
    (r, v)
}

fn near(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-6 * b.abs().max(1.0))
}

#[test]
fn e1_the_price_per_unit_of_work_decides() {
    let mut h100 = gpu("h100", "H100-80GB", Some(5.0));
    h100["reserved"] = json!([{"id": "1y", "term_hours": 8760, "hourly_price": 3.0}]);
    let doc = json!({"schema_version": 2,
        "classes": [{"id": "train", "demand": [3, 3], "perf": {"H100-80GB": 1.0, "A100-80GB": 0.5}},
                    {"id": "infer", "demand": [2, 4], "perf": {"H100-80GB": 1.0, "L4": 0.2}}],
        "offers": [h100, gpu("a100", "A100-80GB", Some(2.8)), gpu("l4", "L4", Some(0.9))]});
    let (r, v) = run(&doc);
    assert_eq!(r.status, "optimal");
    assert!(near(r.objective, 39.0), "{v:#}");
    assert_eq!(r.reserved[0].count, 5.0);
    assert_eq!(v["hourly"]["on_demand_instances"]["l4"], json!([0.0, 10.0]));
    assert!(near(r.baseline_on_demand_cost, 57.0));
    assert!(near(r.savings, 18.0));
    let (_, lp) = solved(&doc, true, true);
    assert!(near(lp.objective, 39.0), "the LP bound equals the optimum");
    assert_eq!(v["excluded_offers"], json!([]));
    assert_eq!(
        v["classes"][0]["excluded_offers"],
        json!([{"offer": "l4", "reason": "perf"}])
    );
}

fn e2(remaining: Value) -> Value {
    let mut o = gpu("a2", "A100-80GB", Some(4.0));
    o["reserved"] = json!([{"id": "1yr-cud", "term_hours": 8760, "hourly_price": 2.5}]);
    json!({"schema_version": 2, "demand": [10, 10, 4], "offers": [o],
           "owned": [{"offer": "a2", "option": "1yr-cud", "count": 6, "remaining_hours": remaining}]})
}

#[test]
fn e2_owned_capacity_makes_the_recommendation_incremental() {
    let (r, v) = run(&e2(Value::Null));
    assert_eq!(r.reserved[0].count, 4.0, "{v:#}");
    assert!(near(r.objective, 30.0));
    assert!(near(v["sunk_cost"].as_f64(), 45.0));
    assert!(near(v["total_cost"].as_f64(), 75.0));
    assert!(near(v["owned_utilization"].as_f64(), 16.0 / 18.0));
    assert!(near(r.baseline_on_demand_cost, 32.0));
    assert!(near(r.savings, 2.0));
    assert!(near(r.savings_pct, 6.25));
    assert_eq!(v["owned"][0]["active_hours"], 3);
    assert_eq!(v["owned"][0]["usable"], true);
    assert!(near(v["gpu_hours"]["owned"].as_f64(), 18.0));
}

#[test]
fn e2b_an_expiring_reservation_is_replaced_from_hour_zero() {
    let (r, v) = run(&e2(json!(1)));
    assert_eq!(r.reserved[0].count, 4.0, "{v:#}");
    assert!(near(r.objective, 54.0));
    assert!(near(v["sunk_cost"].as_f64(), 15.0));
    assert_eq!(
        v["hourly"]["on_demand_instances"]["a2"],
        json!([0.0, 6.0, 0.0])
    );
}

#[test]
fn e3_a_monthly_prepaid_term_is_pro_rata_then_renewed() {
    for (hours, cost) in [(720, 2304.0), (1460, 4672.0)] {
        let mut o = gpu("g", "L4", Some(2.5));
        o["reserved"] = json!([{"id": "1mo", "term_hours": 730, "upfront": 1168}]);
        let doc = json!({"schema_version": 2, "demand": vec![2; hours], "offers": [o]});
        let (r, _) = run(&doc);
        assert_eq!(r.reserved[0].count, 2.0);
        assert!(near(Some(r.reserved[0].horizon_cost), cost));
        assert!(near(Some(r.reserved[0].commitment_liability), 2336.0));
    }
}

#[test]
fn e4_capacity_names_the_class() {
    let mut eu = gpu("eu", "L4", Some(1.0));
    eu["region"] = json!("eu-west-1");
    eu["max_on_demand_instances"] = json!(2);
    let doc = json!({"schema_version": 2,
        "classes": [{"id": "us", "demand": [1], "allowed_regions": ["us-east-1"]},
                    {"id": "eu", "demand": [3], "allowed_regions": ["eu-west-1"]}],
        "offers": [gpu("us", "L4", Some(1.0)), eu]});
    let (r, v) = run(&doc);
    assert_eq!(r.status, "infeasible");
    let why = &v["infeasibility"];
    assert_eq!(why["kind"], "capacity");
    assert_eq!(why["class"], "eu");
    assert_eq!(why["hours"], json!([0]));
    assert_eq!(why["max_shortfall"], 1.0);
}

#[test]
fn e5_classes_that_fit_alone_but_not_together() {
    let mut o = gpu("o", "L4", Some(1.0));
    o["max_on_demand_instances"] = json!(3);
    let doc = json!({"schema_version": 2,
        "classes": [{"id": "a", "demand": [2, 1]}, {"id": "b", "demand": [2, 1]}], "offers": [o]});
    let (r, v) = run(&doc);
    assert_eq!(r.status, "infeasible");
    assert_eq!(
        v["infeasibility"],
        json!({"kind": "shared_capacity", "hours": [0], "classes": ["a", "b"]})
    );
}

#[test]
fn e6_hourly_spot_prices_with_an_hour_without_spot() {
    let mut o = gpu("o", "L4", Some(10.0));
    o["spot_price"] = json!([3, null, 12]);
    let doc = json!({"schema_version": 2, "demand": [2, 2, 2], "offers": [o]});
    let (r, v) = run(&doc);
    assert!(near(r.objective, 46.0), "{v:#}");
    assert_eq!(v["hourly"]["spot_instances"]["o"], json!([2.0, 0.0, 0.0]));
}

#[test]
fn e7_one_integer_instance_split_between_classes() {
    let o = json!({"id": "p5", "cloud": "aws", "region": "us-east-1", "instance_type": "p5", "gpu_model": "H100-80GB",
                   "gpus_per_instance": 8, "on_demand_price": 80.0, "spot_price": 40.0});
    let doc = json!({"schema_version": 2,
        "classes": [{"id": "a", "demand": [4]}, {"id": "b", "demand": [4]}], "offers": [o],
        "policy": {"integer_hourly": true, "max_spot_share": 0.5}});
    let (r, v) = run(&doc);
    assert!(near(r.objective, 80.0), "{v:#}");
    assert_eq!(v["hourly"]["on_demand_instances"]["p5"], json!([1.0]));
    let (_, lp) = solved(&doc, true, true);
    assert!(near(lp.objective, 60.0));
}

#[test]
fn a_v2_file_with_one_demand_list_plans_as_v1() {
    for seed in 1..=8 {
        let v1 = random_problem(seed, 6, 24);
        let mut v2 = v1.clone();
        v2["schema_version"] = json!(2);
        for relax in [false, true] {
            let (_, a) = solved(&v1, relax, true);
            let (_, b) = solved(&v2, relax, true);
            assert_eq!(a.status, b.status, "seed {seed}");
            assert_eq!(a.infeasibility, b.infeasibility);
            assert_eq!(a.excluded_offers, b.excluded_offers);
            for (x, y) in [
                (a.objective, b.objective),
                (a.baseline_on_demand_cost, b.baseline_on_demand_cost),
            ] {
                assert_eq!(x.is_some(), y.is_some());
                if let (Some(x), Some(y)) = (x, y) {
                    assert!(near(Some(x), y), "seed {seed}: {x} vs {y}");
                }
            }
        }
    }
}

/// A random v2 problem: two or three classes with filters and perf maps,
/// owned entries, hourly spot prices with gaps, caps and share overrides.
fn random_v2(seed: u64, offers: usize, hours: usize, integer_hourly: bool) -> Value {
    let mut r = Lcg(seed);
    let models = ["H100-80GB", "A100-80GB", "L4"];
    let list: Vec<Value> = (0..offers)
        .map(|k| {
            let g = r.pick(&[1, 2, 8]);
            let model = r.pick(&models);
            let od = f64::from(g) * (1.0 + 3.0 * r.next());
            let spot = if r.next() < 0.3 {
                json!((0..hours).map(|_| if r.next() < 0.2 { Value::Null } else { json!(od * (0.3 + 0.6 * r.next())) }).collect::<Vec<_>>())
            } else {
                json!(od * (0.3 + 0.5 * r.next()))
            };
            json!({"id": format!("o{k}"), "cloud": r.pick(&["aws", "gcp"]), "region": format!("r{}", k % 2),
                   "instance_type": format!("t{k}"), "gpu_model": model, "gpu_memory_gib": if model == "L4" { 24 } else { 80 },
                   "gpus_per_instance": g, "on_demand_price": od, "spot_price": spot,
                   "spot_interruption_rate": 0.3 * r.next(), "spot_pool": format!("p{}", k % 3),
                   "max_spot_instances": r.pick(&[Value::Null, json!(2), json!(6)]),
                   "max_on_demand_instances": r.pick(&[Value::Null, Value::Null, json!(8)]),
                   "max_reserved_instances": r.pick(&[Value::Null, json!(2)]),
                   "reserved": [{"id": "1y", "term_hours": 8760, "hourly_price": od * (0.45 + 0.3 * r.next())},
                                {"id": "1mo", "term_hours": 730, "upfront": od * 730.0 * (0.5 + 0.4 * r.next())}]})
        })
        .collect();
    let n_classes = 2 + (r.next() * 2.0) as usize;
    let classes: Vec<Value> = (0..n_classes)
        .map(|c| {
            let scale = 4.0 + 20.0 * r.next();
            let demand: Vec<f64> = (0..hours).map(|_| (scale * r.next()).round()).collect();
            let mut class = json!({"id": format!("c{c}"), "demand": demand});
            if r.next() < 0.6 {
                class["perf"] = json!({"H100-80GB": 1.0, "A100-80GB": 0.4 + 0.3 * r.next(), "L4": 0.1 + 0.2 * r.next()});
            }
            if r.next() < 0.3 {
                class["min_gpu_memory_gib"] = json!(40);
            }
            if r.next() < 0.3 {
                class["max_spot_share"] = r.pick(&[Value::Null, json!(0.2), json!(1.0)]);
            }
            class
        })
        .collect();
    let mut owned = Vec::new();
    for k in 0..offers {
        if r.next() < 0.3 {
            owned.push(json!({"offer": format!("o{k}"), "option": r.pick(&["1y", "1mo"]), "count": r.pick(&[1, 2]),
                              "remaining_hours": r.pick(&[Value::Null, json!(hours / 2), json!(0)])}));
        }
    }
    json!({"schema_version": 2, "classes": classes, "offers": list, "owned": owned,
           "policy": {"max_spot_share": r.pick(&[Value::Null, json!(0.6)]),
                      "max_pool_share": r.pick(&[Value::Null, json!(0.4)]),
                      "integer_hourly": integer_hourly}})
}

#[test]
fn v2_reductions_never_change_the_optimum_and_every_plan_checks() {
    let mut statuses = std::collections::BTreeMap::new();
    for seed in 1..=24 {
        // Integer hourly counts stay small: the default backend's branch
        // and bound is slow on them (see docs/planner.md).
        let integer_hourly = seed % 4 == 0;
        let (offers, hours) = if integer_hourly { (4, 4) } else { (7, 24) };
        let doc = random_v2(seed, offers, hours, integer_hourly);
        for relax in [false, true] {
            let (_, reduced) = solved(&doc, relax, true);
            let (_, full) = solved(&doc, relax, false);
            *statuses.entry(reduced.status).or_insert(0) += 1;
            assert_eq!(reduced.status, full.status, "seed {seed}");
            assert_eq!(reduced.infeasibility, full.infeasibility, "seed {seed}");
            for (x, y) in [
                (reduced.objective, full.objective),
                (
                    reduced.baseline_on_demand_cost,
                    full.baseline_on_demand_cost,
                ),
            ] {
                assert_eq!(x.is_some(), y.is_some(), "seed {seed}");
                if let (Some(x), Some(y)) = (x, y) {
                    assert!(near(Some(x), y), "seed {seed} relax {relax}: {x} vs {y}");
                }
            }
        }
        let (_, lp) = solved(&doc, true, true);
        let (_, mip) = solved(&doc, false, true);
        if let (Some(l), Some(m)) = (lp.objective, mip.objective) {
            assert!(
                l <= m * (1.0 + 1e-9) + 1e-9,
                "seed {seed}: lp {l} > mip {m}"
            );
        }
    }
    // The generator must produce plans, not only infeasibilities.
    assert!(
        statuses.get("optimal").copied().unwrap_or(0) >= 24,
        "{statuses:?}"
    );
}

#[test]
fn v1_files_with_classes_or_owned_and_bad_v2_fields_are_refused_by_name() {
    let path = |doc: Value| Problem::from_json(&doc).unwrap_err().path;
    let o = gpu("a", "L4", Some(1.0));
    assert_eq!(
        path(json!({"demand": [1], "offers": [o], "owned": []})),
        "owned"
    );
    assert_eq!(
        path(json!({"demand": [1], "offers": [o], "classes": [{"id": "x", "demand": [1]}]})),
        "classes"
    );
    let mut spot = o.clone();
    spot["spot_price"] = json!([1.0]);
    assert_eq!(
        path(json!({"demand": [1], "offers": [spot]})),
        "offers[0].spot_price"
    );
    let v2 = |extra: Value| {
        let mut doc = json!({"schema_version": 2, "classes": [{"id": "x", "demand": [1, 2]}],
                             "offers": [{"id": "a", "cloud": "aws", "region": "r", "instance_type": "t",
                                         "gpu_model": "L4", "gpus_per_instance": 1, "on_demand_price": 1.0,
                                         "reserved": [{"id": "1y", "term_hours": 8760}]}]});
        for (k, v) in extra.as_object().unwrap() {
            if let Some((list, key)) = k.split_once('.') {
                doc[list][0][key] = v.clone();
            } else {
                doc[k] = v.clone();
            }
        }
        path(doc)
    };
    assert_eq!(v2(json!({"demand": [1, 2]})), "classes");
    assert_eq!(v2(json!({"classes.perf": {}})), "classes[0].perf");
    assert_eq!(v2(json!({"classes.perf": {"L4": 0}})), "classes[0].perf.L4");
    assert_eq!(
        v2(json!({"classes.max_spot_shar": 0.5})),
        "classes[0].max_spot_shar"
    );
    assert_eq!(
        v2(json!({"classes.max_spot_share": 2})),
        "classes[0].max_spot_share"
    );
    assert_eq!(
        v2(json!({"classes": [{"id": "x", "demand": [1, 2]}, {"id": "y", "demand": [1]}]})),
        "classes[1].demand"
    );
    assert_eq!(
        v2(json!({"classes": [{"id": "x", "demand": [1, 2]}, {"id": "x", "demand": [1, 2]}]})),
        "classes[1].id"
    );
    assert_eq!(
        v2(json!({"offers.spot_price": [1]})),
        "offers[0].spot_price"
    );
    assert_eq!(
        v2(json!({"offers.spot_price": [1, -1]})),
        "offers[0].spot_price[1]"
    );
    assert_eq!(
        v2(json!({"owned": [{"offer": "b", "option": "1y", "count": 1}]})),
        "owned[0].offer"
    );
    assert_eq!(
        v2(json!({"owned": [{"offer": "a", "option": "3y", "count": 1}]})),
        "owned[0].option"
    );
    assert_eq!(
        v2(json!({"owned": [{"offer": "a", "option": "1y", "count": -1}]})),
        "owned[0].count"
    );
    assert_eq!(
        v2(json!({"owned": [{"offer": "a", "option": "1y", "count": 1, "remaining_hour": 5}]})),
        "owned[0].remaining_hour"
    );
    assert_eq!(
        v2(json!({"owned": [{"offer": "a", "option": "1y", "count": 1, "remaining_hours": 1.5}]})),
        "owned[0].remaining_hours"
    );
}

#[test]
fn several_classes_with_whole_hours_keep_a_plan_when_the_time_limit_cuts_the_search() {
    let doc: Value = serde_json::from_str(include_str!(
        "../../tests/fixtures/two-class-integer-day.json"
    ))
    .unwrap();
    let problem = Problem::from_json(&doc).unwrap();
    let opts = SolveOptions {
        time_limit: Some(Duration::from_secs(10)),
        ..SolveOptions::default()
    };
    let r = solve(&problem, &opts).unwrap();
    assert_eq!(r.model_stats.method, "reserved_search");
    assert!(matches!(r.status, "optimal" | "time_limit"), "{}", r.status);
    let value = serde_json::to_value(&r).unwrap();
    verify(&problem, &value, false).unwrap();
    if r.status == "time_limit" {
        let (objective, bound) = (r.objective.unwrap(), r.best_bound.unwrap());
        assert!(bound <= objective && r.gap.unwrap() >= 0.0);
    }
}

#[test]
fn one_class_with_owned_and_hourly_spot_decomposes_to_the_milps_optimum() {
    let mut decomposed = 0;
    for seed in 1..=16 {
        let mut doc = random_v2(seed, 4, 5, true);
        let first = doc["classes"][0].clone();
        doc["classes"] = json!([first]);
        let (_, fast) = solved(&doc, false, true);
        let (_, milp) = solved(&doc, false, false);
        assert_eq!(fast.status, milp.status, "seed {seed}");
        assert_eq!(
            milp.model_stats.method,
            if milp.status == "optimal" {
                "reserved_search"
            } else {
                ""
            }
        );
        if fast.model_stats.method == "decomposition" {
            decomposed += 1;
        }
        if let (Some(a), Some(b)) = (fast.objective, milp.objective) {
            assert!(
                near(Some(a), b),
                "seed {seed}: decomposition {a} vs milp {b}"
            );
        }
    }
    assert!(decomposed >= 8, "only {decomposed} problems decomposed");
}

#[test]
fn a_form_factor_key_gives_sxm_and_pcie_their_own_rates_and_changes_the_plan() {
    // An H100 PCIe at 3.0 an hour against an SXM at 4.0. Keyed by the model
    // alone they are the same GPU and the PCIe wins; keyed by form factor the
    // PCIe trains at 0.6 of the SXM, so its unit of work costs 5.0: the SXM
    // wins. The specific key beats the model's; the SXM, with no key of its
    // own, takes the model's 1.0.
    let mut sxm = gpu("sxm", "H100-80GB", Some(4.0));
    sxm["gpu_form_factor"] = json!("sxm");
    let mut pcie = gpu("pcie", "H100-80GB", Some(3.0));
    pcie["gpu_form_factor"] = json!("pcie");
    let plan = |perf: Value| {
        let doc = json!({"schema_version": 2,
            "classes": [{"id": "train", "demand": [4, 4], "perf": perf}],
            "offers": [sxm.clone(), pcie.clone()]});
        run(&doc).1
    };
    let by_model = plan(json!({"H100-80GB": 1.0}));
    assert_eq!(
        by_model["hourly"]["on_demand_instances"]["pcie"],
        json!([4.0, 4.0])
    );
    assert!(near(by_model["objective"].as_f64(), 24.0));
    let by_form = plan(json!({"H100-80GB": 1.0, "H100-80GB/pcie": 0.6}));
    assert_eq!(
        by_form["hourly"]["on_demand_instances"]["sxm"],
        json!([4.0, 4.0]),
        "{by_form:#}"
    );
    assert!(near(by_form["objective"].as_f64(), 32.0));
    // A bad form factor in a problem file is refused by its path.
    let mut bad = gpu("x", "H100-80GB", Some(1.0));
    bad["gpu_form_factor"] = json!("oam");
    let e = Problem::from_json(&json!({"demand": [1], "offers": [bad]})).unwrap_err();
    assert_eq!(e.path, "offers[0].gpu_form_factor");
}

#[test]
fn a_search_past_its_memory_limit_stops_with_its_best_plan_checked() {
    // Several classes with whole hourly counts and continuous reserved
    // counts (which the search over whole reserved counts does not take):
    // the generic MILP, whose search grows. A limit of nothing stops it at
    // its first look, with the best plan found, its bound and its gap.
    let mut doc = random_v2(77, 20, 48, true);
    doc["policy"]["integer_reserved"] = json!(false);
    let problem = Problem::from_json(&doc).unwrap();
    let opts = SolveOptions {
        memory_limit: Some(0),
        time_limit: Some(Duration::from_secs(120)),
        ..SolveOptions::default()
    };
    // 20 offers x 48 hours x its classes: far from proven in 200 nodes.
    let r = solve(&problem, &opts).unwrap();
    assert_eq!(
        (r.status, r.stopped_by),
        ("time_limit", Some("memory_limit"))
    );
    let (bound, gap) = (r.best_bound.unwrap(), r.gap.unwrap());
    assert!(
        bound <= r.objective.unwrap() + 1e-6 && gap >= 0.0,
        "{bound} {gap}"
    );
    let v = serde_json::to_value(&r).unwrap();
    verify(&problem, &v, false).unwrap();
    assert_eq!(v["stopped_by"], "memory_limit");
    // Without the limit the same search runs on (here cut by time instead).
    let timed = SolveOptions {
        time_limit: Some(Duration::from_millis(300)),
        ..SolveOptions::default()
    };
    match solve(&problem, &timed) {
        Ok(r) => assert_ne!(r.stopped_by, Some("memory_limit")),
        Err(e) => assert_eq!(e, OptimizeError::TimeLimit(Duration::from_millis(300))),
    }
}

#[test]
fn several_classes_with_whole_hours_and_nothing_to_buy_are_solved_hour_by_hour() {
    // No reserved option: nothing links the hours, so each hour's own
    // whole-count problem is the whole answer, proven. Hour 1: class a 1.5,
    // b 0.7 take two H100s (1.5 to a, 0.5 to b) and one L4 for b's last 0.2
    // (2.4); hour 2: a 2.6, b 0.2 take three H100s (3.0). The relaxation
    // pays 5.0: 2.2 and 2.8 H100-hours.
    let mut a100 = gpu("a100x2", "A100-80GB", Some(1.5));
    a100["gpus_per_instance"] = json!(2);
    let doc = json!({"schema_version": 2,
        "classes": [{"id": "a", "demand": [1.5, 2.6], "perf": {"H100-80GB": 1.0, "A100-80GB": 0.5}},
                    {"id": "b", "demand": [0.7, 0.2], "perf": {"H100-80GB": 1.0, "L4": 0.3}}],
        "offers": [gpu("h100", "H100-80GB", Some(1.0)), a100, gpu("l4", "L4", Some(0.4))],
        "policy": {"integer_hourly": true}});
    let (r, v) = run(&doc);
    assert_eq!(
        (r.status, r.model_stats.method),
        ("optimal", "decomposition")
    );
    assert!(near(r.objective, 5.4), "{v:#}");
    assert_eq!(
        v["hourly"]["on_demand_instances"]["h100"],
        json!([2.0, 3.0])
    );
    assert_eq!(v["hourly"]["on_demand_instances"]["l4"], json!([1.0, 0.0]));
    assert!(near(r.baseline_on_demand_cost, 5.4));
    let (_, lp) = solved(&doc, true, true);
    assert!(near(lp.objective, 5.0));
}

#[test]
fn the_search_over_reserved_counts_proves_the_milp_optimum_with_several_classes() {
    // Each plan the search proves optimal must cost what the generic MILP
    // (branching on every count) proves optimal on the same model.
    let mut searched = 0;
    for seed in 1..=16 {
        let doc = random_v2(seed, 4, 4, true);
        let (problem, fast) = solved(&doc, false, true);
        if fast.model_stats.method == "reserved_search" {
            searched += 1;
        }
        let setup = Setup::new(&problem);
        let all: Vec<usize> = (0..setup.levels.len()).collect();
        let whole = Scope {
            mip: true,
            purchases: true,
        };
        let (milp, _) = build(&setup, &all, whole);
        match milp.solve(Backend::Microlp, None) {
            Ok(values) => {
                let optimum: f64 = milp.vars.iter().zip(&values).map(|(v, x)| v.cost * x).sum();
                assert_eq!(fast.status, "optimal", "seed {seed}");
                assert!(
                    near(fast.objective, optimum),
                    "seed {seed}: {:?} by {} vs milp {optimum}",
                    fast.objective,
                    fast.model_stats.method
                );
            }
            Err(e) => assert_ne!(fast.status, "optimal", "seed {seed}: milp {e}"),
        }
    }
    assert!(searched >= 8, "{searched} of 16 went to the search");
}

#[test]
fn whole_hourly_counts_swap_out_what_uncapped_on_demand_stands_in_for_without_changing_the_optimum()
{
    // Each problem gets a dearer twin of its first offer (same model and
    // size, so the same work for every class): with whole hourly counts the
    // twin's on-demand, and any spot no cheaper than an uncapped stand-in,
    // is left out of the model. The optimum must not move.
    let mut swapped = 0;
    for seed in 1..=16 {
        let mut doc = random_v2(seed, 4, 3, true);
        let mut twin = doc["offers"][0].clone();
        let od = twin["on_demand_price"].as_f64().unwrap();
        twin["id"] = json!("twin");
        twin["instance_type"] = json!("twin");
        twin["on_demand_price"] = json!(od * 1.25);
        twin["spot_price"] = json!(od * if seed % 2 == 0 { 1.1 } else { 0.6 });
        twin["max_on_demand_instances"] = Value::Null;
        doc["offers"].as_array_mut().unwrap().push(twin);
        let (problem, reduced) = solved(&doc, false, true);
        let (_, full) = solved(&doc, false, false);
        assert_eq!(reduced.status, full.status, "seed {seed}");
        if let Some(x) = full.objective {
            assert!(
                near(reduced.objective, x),
                "seed {seed}: {:?} vs {x}",
                reduced.objective
            );
        }
        let mut setup = Setup::new(&problem);
        setup.reduce(true);
        let all: Vec<usize> = (0..setup.levels.len()).collect();
        let whole = Scope {
            mip: true,
            purchases: true,
        };
        swapped += build(&setup, &all, whole).1.dominated;
    }
    assert!(swapped >= 16, "only {swapped} shares swapped out");
}
