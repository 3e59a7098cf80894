//! Schema version 3 (docs/planning-model.md §11): the hand examples X1–X8,
//! validation, and randomized problems whose every frontier point is checked
//! by [`verify`] and by evaluating portfolios with their cheapest recourse.

use serde_json::{Value, json};

use super::tests::Lcg;
use super::*;

fn offer(id: &str, od: Option<f64>, spot: Option<f64>, reserved: Option<f64>) -> Value {
    let mut o = json!({"id": id, "cloud": "aws", "region": "r1", "instance_type": id,
                       "gpu_model": "H100-80GB", "gpu_memory_gib": 80, "gpus_per_instance": 1,
                       "on_demand_price": od, "spot_price": spot});
    if let Some(r) = reserved {
        o["reserved"] = json!([{"id": "1y", "term_hours": 8760, "hourly_price": r}]);
    }
    o
}

fn solved(doc: &Value) -> (Problem, PlanResult, Value) {
    let problem = Problem::from_json(doc).unwrap_or_else(|e| panic!("{e}"));
    let opts = SolveOptions {
        time_limit: Some(Duration::from_secs(60)),
        ..SolveOptions::default()
    };
    let result = solve(&problem, &opts).unwrap();
    let value = serde_json::to_value(&result).unwrap();
    if let Err(e) = verify(&problem, &value, false) {
        panic!("{e}\n{value:#}");
    }
    (problem, result, value)
}

fn near(a: &Value, b: f64) -> bool {
    a.as_f64()
        .is_some_and(|a| (a - b).abs() <= 1e-6 * b.abs().max(1.0))
}

/// `(λ, R, objective, mean, P95, CVaR)` per frontier point, R the new
/// reservations of offer `a`.
fn frontier(v: &Value) -> Vec<(f64, f64, f64, f64, f64, f64)> {
    v["frontier"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let r: f64 = p["reserved"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["count"].as_f64().unwrap())
                .sum();
            let f = |k: &str| p[k].as_f64().unwrap();
            (
                f("lambda"),
                r,
                f("objective"),
                f("expected_cost"),
                f("p95_cost"),
                f("cvar_cost"),
            )
        })
        .collect()
}

fn assert_frontier(v: &Value, want: &[(f64, f64, f64, f64, f64, f64)]) {
    let got = frontier(v);
    assert_eq!(got.len(), want.len(), "{v:#}");
    for (g, w) in got.iter().zip(want) {
        let same = [
            g.0 - w.0,
            g.1 - w.1,
            g.2 - w.2,
            g.3 - w.3,
            g.4 - w.4,
            g.5 - w.5,
        ]
        .iter()
        .all(|d| d.abs() < 1e-6);
        assert!(
            same,
            "frontier point {g:?}, wanted {w:?}\n{:#}",
            v["frontier"]
        );
    }
}

fn x1() -> Value {
    json!({"schema_version": 3, "demand": [2, 2],
           "offers": [offer("a", Some(1.0), Some(0.3), Some(0.5))],
           "scenarios": [{"id": "up", "probability": 0.8},
                         {"id": "down", "probability": 0.2, "spot_available": {"aws/r1/a": 0}}],
           "risk": {"beta": 0.9}})
}

#[test]
fn x1_an_outage_flips_the_plan() {
    let (_, r, v) = solved(&x1());
    assert_eq!(r.status, "optimal");
    assert_frontier(
        &v,
        &[
            (0.0, 0.0, 1.76, 1.76, 4.0, 4.0),
            (0.25, 2.0, 2.0, 2.0, 2.0, 2.0),
            (0.5, 2.0, 2.0, 2.0, 2.0, 2.0),
            (0.75, 2.0, 2.0, 2.0, 2.0, 2.0),
            (1.0, 2.0, 2.0, 2.0, 2.0, 2.0),
        ],
    );
    assert_eq!(v["frontier_flat"], false);
    assert!(near(&v["frontier_tail_gain"], 0.5));
    assert!(near(&v["baseline_on_demand_cost"], 4.0));
    assert!(near(&v["savings_pct"], 56.0));
    assert!(near(&v["objective"], 1.76));
    assert!(near(&v["scenarios"][0]["cost"], 1.2));
    assert!(near(&v["scenarios"][1]["cost"], 4.0));
    assert_eq!(
        v["hourly"]["scenarios"]["up"]["spot_instances"]["a"],
        json!([2.0, 2.0])
    );
    assert_eq!(
        v["hourly"]["scenarios"]["down"]["on_demand_instances"]["a"],
        json!([2.0, 2.0])
    );
    assert!(
        v["hourly"].get("spot_instances").is_none(),
        "v3 has no top-level recourse"
    );
    // The primary plan follows risk.lambda.
    let mut doc = x1();
    doc["risk"]["lambda"] = json!(0.5);
    let (_, r, v) = solved(&doc);
    assert_eq!(r.reserved[0].count, 2.0);
    assert_eq!(v["frontier"][2]["primary"], true);
    assert!(near(&v["p95_cost"], 2.0));
}

fn x2(measure: &str) -> Value {
    json!({"schema_version": 3, "demand": [6, 6],
           "offers": [offer("a", Some(1.0), None, Some(0.6))],
           "scenarios": [{"id": "low", "demand": [4, 4]}, {"id": "high", "demand": [8, 8]}],
           "risk": {"beta": 0.6, "measure": measure}})
}

#[test]
fn x2_demand_scenarios_and_the_two_measures() {
    let (_, _, v) = solved(&x2("cost"));
    assert_frontier(
        &v,
        &[
            (0.0, 4.0, 8.8, 8.8, 12.8, 12.8),
            (0.25, 8.0, 9.6, 9.6, 9.6, 9.6),
            (0.5, 8.0, 9.6, 9.6, 9.6, 9.6),
            (0.75, 8.0, 9.6, 9.6, 9.6, 9.6),
            (1.0, 8.0, 9.6, 9.6, 9.6, 9.6),
        ],
    );
    assert_eq!(v["frontier_flat"], false);

    let (_, _, v) = solved(&x2("savings_shortfall"));
    for p in frontier(&v) {
        assert!((p.1 - 4.0).abs() < 1e-9, "{p:?}");
        assert!((p.2 + 3.2).abs() < 1e-6, "{p:?}");
        assert!((p.3 - 8.8).abs() < 1e-6 && (p.4 - 12.8).abs() < 1e-6 && (p.5 - 12.8).abs() < 1e-6);
    }
    assert_eq!(v["frontier_flat"], true);
    assert!(near(&v["scenarios"][0]["baseline_on_demand_cost"], 8.0));
    assert!(near(&v["scenarios"][1]["baseline_on_demand_cost"], 16.0));
    assert!(near(&v["expected_shortfall"], -3.2));
}

#[test]
fn x3_a_tail_that_splits_a_scenario() {
    let doc = json!({"schema_version": 3, "demand": [4],
        "offers": [offer("a", Some(1.0), None, Some(0.7))],
        "scenarios": [{"id": "s1", "probability": 0.5, "demand": [2]},
                      {"id": "s2", "probability": 0.3, "demand": [4]},
                      {"id": "s3", "probability": 0.2, "demand": [10]}],
        "risk": {"beta": 0.75}});
    let (_, _, v) = solved(&doc);
    assert_frontier(
        &v,
        &[
            (0.0, 2.0, 3.6, 3.6, 9.4, 8.2),
            (0.25, 2.0, 4.75, 3.6, 9.4, 8.2),
            (0.5, 4.0, 5.8, 4.0, 8.8, 7.6),
            (0.75, 4.0, 6.7, 4.0, 8.8, 7.6),
            (1.0, 10.0, 7.0, 7.0, 7.0, 7.0),
        ],
    );
    assert!(near(&v["var_cost"], 3.4));
}

#[test]
fn x4_classes_owned_capacity_and_availability() {
    let mut h100 = offer("h100", Some(4.0), None, Some(2.0));
    h100["gpu_model"] = json!("H100");
    let mut l4 = offer("l4", Some(0.9), Some(0.25), None);
    l4["gpu_model"] = json!("L4");
    l4["gpu_memory_gib"] = json!(24);
    let doc = json!({"schema_version": 3,
        "classes": [{"id": "train", "demand": [2, 2], "min_gpu_memory_gib": 80, "perf": {"H100": 1}},
                    {"id": "infer", "demand": [1, 1], "perf": {"H100": 1, "L4": 0.25}}],
        "offers": [h100, l4],
        "owned": [{"offer": "h100", "option": "1y", "count": 1}],
        "scenarios": [{"id": "calm", "probability": 0.75},
                      {"id": "storm", "probability": 0.25, "classes": {"infer": [2, 2]},
                       "spot_available": {"aws/r1/l4": 0}}],
        "risk": {"beta": 0.8}});
    let (_, _, v) = solved(&doc);
    let points = frontier(&v);
    let rs: Vec<f64> = points.iter().map(|p| p.1).collect();
    assert_eq!(rs, [1.0, 2.0, 3.0, 3.0, 3.0], "{:#}", v["frontier"]);
    let objectives: Vec<f64> = points.iter().map(|p| p.2).collect();
    for (g, w) in objectives.iter().zip([9.1, 11.15, 12.0, 12.0, 12.0]) {
        assert!((g - w).abs() < 1e-6, "{objectives:?}");
    }
    assert!((points[0].4 - 18.4).abs() < 1e-6);
    assert!(near(&v["sunk_cost"], 4.0));
    assert!(near(&v["owned_utilization"], 1.0));
    assert!(near(&v["baseline_on_demand_cost"], 17.0));
    assert!(near(&v["savings"], 7.9));
    assert!(near(&v["savings_pct"], 7.9 / 17.0 * 100.0));
}

#[test]
fn x5_an_infeasible_scenario_is_reported_with_its_hours() {
    let mut a = offer("a", Some(1.0), Some(0.3), None);
    a["max_on_demand_instances"] = json!(2);
    let doc = json!({"schema_version": 3, "demand": [3, 3], "offers": [a],
        "scenarios": [{"id": "up"}, {"id": "down", "spot_available": {"aws/r1/a": [1, 0]}}]});
    let (_, r, v) = solved(&doc);
    assert_eq!(r.status, "infeasible");
    let why = &v["infeasibility"];
    assert_eq!(why["kind"], "capacity", "{why:#}");
    assert_eq!(why["scenario"], "down");
    assert_eq!(why["class"], "default");
    assert_eq!(why["hours"], json!([1]));
    assert!(near(&why["max_shortfall"], 1.0));
    assert_eq!(
        why["scenarios"],
        json!([{"scenario": "down", "class": "default", "hours": [1], "max_shortfall": 1.0}])
    );
}

fn e1(version: u32) -> Value {
    let mut h100 = offer("h100", Some(5.0), None, Some(3.0));
    h100["region"] = json!("us-east-1");
    let mut a100 = offer("a100", Some(2.8), None, None);
    a100["gpu_model"] = json!("A100-80GB");
    let mut l4 = offer("l4", Some(0.9), None, None);
    l4["gpu_model"] = json!("L4");
    json!({"schema_version": version,
        "classes": [{"id": "train", "demand": [3, 3], "perf": {"H100-80GB": 1.0, "A100-80GB": 0.5}},
                    {"id": "infer", "demand": [2, 4], "perf": {"H100-80GB": 1.0, "L4": 0.2}}],
        "offers": [h100, a100, l4]})
}

#[test]
fn x6_a_v2_file_relabelled_v3_plans_as_v2() {
    let (_, v2, v2doc) = {
        let p = Problem::from_json(&e1(2)).unwrap();
        let r = solve(&p, &SolveOptions::default()).unwrap();
        let d = serde_json::to_value(&r).unwrap();
        (p, r, d)
    };
    let mut doc = e1(3);
    doc["risk"] = json!({"lambda": 0.5});
    let (_, v3, v) = solved(&doc);
    assert!(near(&v["objective"], 39.0));
    assert_eq!(v3.status, v2.status);
    assert_eq!(v3.reserved, v2.reserved);
    assert_eq!(v3.baseline_on_demand_cost, v2.baseline_on_demand_cost);
    assert_eq!(v["excluded_offers"], v2doc["excluded_offers"]);
    for p in frontier(&v) {
        assert!(
            (p.2 - 39.0).abs() < 1e-6 && (p.4 - 39.0).abs() < 1e-6 && (p.5 - 39.0).abs() < 1e-6
        );
    }
    assert_eq!(v["frontier_flat"], true);
    assert_eq!(v["scenarios"][0]["id"], "nominal");
    // Infeasibility matches too, kind for kind.
    let mut short = e1(3);
    short["offers"][2]["max_on_demand_instances"] = json!(1);
    short["offers"][1]["on_demand_price"] = Value::Null;
    short["offers"][0]["max_on_demand_instances"] = json!(0);
    short["offers"][0]["reserved"] = json!([]);
    let (_, r3, v3doc) = solved(&short);
    short["schema_version"] = json!(2);
    let r2 = solve(
        &Problem::from_json(&short).unwrap(),
        &SolveOptions::default(),
    )
    .unwrap();
    assert_eq!(r3.status, "infeasible");
    assert_eq!(
        v3doc["infeasibility"]["kind"],
        r2.infeasibility.as_ref().unwrap()["kind"]
    );
}

fn x7() -> Value {
    json!({"schema_version": 3, "demand": [10, 10, 10, 10],
        "offers": [offer("a", Some(1.0), Some(0.3), None)],
        "scenario_generator": {"seed": 5, "count": 2,
            "demand": {"residuals": {"default": [[1, -2, 3, 0], [-1, 2, -4, 1]]},
                       "block_hours": 2, "level": 0.8, "range_levels": [0.8, 0.9]},
            "spot": {"pools": [{"pool": "aws/r1/a", "p_down": 0.2, "p_up": 0.5}]}},
        "risk": {"lambda": 1.0}})
}

#[test]
fn x7_the_generator_reproduces_the_worked_draws() {
    let problem = Problem::from_json(&x7()).unwrap();
    let st = problem.stochastic.as_ref().unwrap();
    let s0 = &st.scenarios[0];
    let s1 = &st.scenarios[1];
    assert_eq!((s0.id.as_str(), s1.id.as_str()), ("s0", "s1"));
    let k = 4.0 / 3.0;
    let want0 = [10.0 + k, 10.0 - 2.0 * k, 10.0 - 4.0 * k, 10.0 + k];
    let want1 = [10.0 - k, 10.0 + 2.0 * k, 10.0 - 4.0 * k, 10.0 + k];
    for (got, want) in [(&s0.demand[0], want0), (&s1.demand[0], want1)] {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    }
    assert_eq!(s0.available["aws/r1/a"], [true, false, true, true]);
    assert_eq!(s1.available["aws/r1/a"], [true, true, true, false]);

    let (_, _, v) = solved(&x7());
    assert!(near(&v["scenarios"][0]["cost"], 15.533_333_333_333_333));
    assert!(near(&v["scenarios"][1]["cost"], 19.133_333_333_333_333));
    assert!(near(&v["expected_cost"], 17.333_333_333_333_333));
    assert!(near(&v["objective"], 19.133_333_333_333_333));
    let ranges = &v["ranges"];
    assert_eq!(ranges["level"], 0.8);
    let c = &ranges["classes"]["default"];
    assert_eq!(c["scores"], json!([8]));
    assert_eq!(
        (c["folds"].clone(), c["lead_hours"].clone()),
        (json!(2), json!(4))
    );
    assert!(near(&c["scale"][0], 4.0 / 3.0));
    assert_eq!(c["bands"][0]["half_width"], json!([4.0]));
    assert_eq!(c["bands"][0]["lower"], json!([6.0, 6.0, 6.0, 6.0]));
    assert_eq!(c["bands"][0]["upper"], json!([14.0, 14.0, 14.0, 14.0]));
    assert_eq!(c["bands"][1]["half_width"], json!([null]));
    assert_eq!(c["bands"][1]["upper"], json!([null, null, null, null]));
    assert_eq!(c["bands"][1]["lower"], json!([0.0, 0.0, 0.0, 0.0]));
}

#[test]
fn shocks_take_every_pool_they_name_down_together() {
    let mut b = offer("b", Some(1.0), Some(0.3), None);
    b["region"] = json!("r2");
    let doc = json!({"schema_version": 3, "demand": vec![1; 48],
        "offers": [offer("a", Some(1.0), Some(0.3), None), b],
        "scenario_generator": {"seed": 11, "count": 20,
            "spot": {"shocks": [{"id": "region", "pools": ["aws/r1/a", "aws/r2/b"],
                                 "p_down": 0.1, "p_up": 0.3}]}}});
    let problem = Problem::from_json(&doc).unwrap();
    let st = problem.stochastic.as_ref().unwrap();
    let mut down = 0;
    for s in &st.scenarios {
        assert_eq!(s.available.get("aws/r1/a"), s.available.get("aws/r2/b"));
        down += s
            .available
            .get("aws/r1/a")
            .map_or(0, |a| a.iter().filter(|u| !**u).count());
    }
    assert!(
        down > 0,
        "a shock with p_down 0.1 over 960 hours never fired"
    );
    // The same seed gives the same scenarios; another seed does not.
    let again = Problem::from_json(&doc).unwrap();
    assert_eq!(again.stochastic, problem.stochastic);
    let mut other = doc.clone();
    other["scenario_generator"]["seed"] = json!(12);
    assert_ne!(
        Problem::from_json(&other)
            .unwrap()
            .stochastic
            .unwrap()
            .scenarios,
        st.scenarios
    );
}

/// `doc` with the value at JSON pointer `at` set, its last key added if missing.
fn set(doc: &Value, at: &str, v: Value) -> Value {
    let mut d = doc.clone();
    let (parent, key) = at.rsplit_once('/').unwrap();
    let slot = d.pointer_mut(parent).unwrap();
    match slot {
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = v,
        other => other[key] = v,
    }
    d
}

fn refused(doc: &Value) -> (String, String) {
    let e = Problem::from_json(doc).unwrap_err();
    (e.path, e.message)
}

#[test]
fn v3_documents_are_validated_field_by_field() {
    let base = x1();
    let with = |pointer: &str, v: Value| set(&base, pointer, v);
    let cases: Vec<(Value, &str)> = vec![
        (with("/scenarios/1/probability", json!(0.3)), "scenarios"),
        (
            with("/scenarios/1/probability", Value::Null),
            "scenarios[1].probability",
        ),
        (
            with("/scenarios/1/probability", json!(-0.2)),
            "scenarios[1].probability",
        ),
        (with("/scenarios/1/id", json!("up")), "scenarios[1].id"),
        (
            with("/scenarios/1/spot_available", json!({"aws/r1/zz": 0})),
            "scenarios[1].spot_available.aws/r1/zz",
        ),
        (
            with("/scenarios/1/spot_available", json!({"aws/r1/a": false})),
            "scenarios[1].spot_available.aws/r1/a",
        ),
        (
            with("/scenarios/1/spot_available", json!({"aws/r1/a": [1]})),
            "scenarios[1].spot_available.aws/r1/a",
        ),
        (
            with("/scenarios/1/demand", json!([1, 2, 3])),
            "scenarios[1].demand",
        ),
        (
            with("/scenarios/1/classes", json!({"nope": [1, 1]})),
            "scenarios[1].classes.nope",
        ),
        (with("/scenarios/0/weight", json!(1)), "scenarios[0].weight"),
        (with("/scenarios", json!([])), "scenarios"),
        (with("/risk/beta", json!(1.0)), "risk.beta"),
        (with("/risk/lambda", json!(1.5)), "risk.lambda"),
        (with("/risk/measure", json!("regret")), "risk.measure"),
        (
            with("/risk/frontier", json!([0.5, 0.5])),
            "risk.frontier[1]",
        ),
        (with("/risk/frontier", json!([])), "risk.frontier"),
        (with("/risk/lamda", json!(0.5)), "risk.lamda"),
        (
            with("/risk/flat_tolerance", json!(-1)),
            "risk.flat_tolerance",
        ),
    ];
    for (doc, path) in cases {
        assert_eq!(refused(&doc).0, path, "{doc}");
    }
    let mut both = x7();
    both["scenarios"] = x1()["scenarios"].clone();
    assert_eq!(refused(&both).0, "scenario_generator");
    let generator = |pointer: &str, v: Value| set(&x7(), pointer, v);
    let cases: Vec<(Value, &str)> = vec![
        (
            generator("/scenario_generator/seed", json!(-1)),
            "scenario_generator.seed",
        ),
        (
            generator("/scenario_generator/seed", json!(9_007_199_254_740_992_u64)),
            "scenario_generator.seed",
        ),
        (
            generator("/scenario_generator/count", json!(0)),
            "scenario_generator.count",
        ),
        (
            generator("/scenario_generator/count", json!(1001)),
            "scenario_generator.count",
        ),
        (
            generator("/scenario_generator/demand/level", json!(0.9)),
            "scenario_generator.demand.level",
        ),
        (
            generator("/scenario_generator/demand/level", json!(1)),
            "scenario_generator.demand.level",
        ),
        (
            generator(
                "/scenario_generator/demand/residuals",
                json!({"default": [[1, 2], [3]]}),
            ),
            "scenario_generator.demand.residuals.default[1]",
        ),
        (
            generator(
                "/scenario_generator/demand/residuals",
                json!({"other": [[1]]}),
            ),
            "scenario_generator.demand.residuals.other",
        ),
        (
            generator("/scenario_generator/demand/block_hours", json!(0)),
            "scenario_generator.demand.block_hours",
        ),
        (
            generator("/scenario_generator/demand/range_levels", json!([0.8, 0.8])),
            "scenario_generator.demand.range_levels[1]",
        ),
        (
            generator("/scenario_generator/spot/pools/0/pool", json!("x")),
            "scenario_generator.spot.pools[0].pool",
        ),
        (
            generator("/scenario_generator/spot/pools/0/p_up", json!(2)),
            "scenario_generator.spot.pools[0].p_up",
        ),
        (
            generator(
                "/scenario_generator/spot/pools/0/initial",
                json!("sideways"),
            ),
            "scenario_generator.spot.pools[0].initial",
        ),
        (
            generator(
                "/scenario_generator/spot/shocks",
                json!([{"id": "s", "pools": [], "p_down": 0.1, "p_up": 0.1}]),
            ),
            "scenario_generator.spot.shocks[0].pools",
        ),
        (
            generator("/scenario_generator/spot/extra", json!(1)),
            "scenario_generator.spot.extra",
        ),
    ];
    for (doc, path) in cases {
        assert_eq!(refused(&doc).0, path, "{doc}");
    }
    let mut twice = x7();
    twice["scenario_generator"]["spot"]["pools"] = json!([
        {"pool": "aws/r1/a", "p_down": 0.1, "p_up": 0.1},
        {"pool": "aws/r1/a", "p_down": 0.1, "p_up": 0.1}]);
    assert_eq!(refused(&twice).0, "scenario_generator.spot.pools[1].pool");
    let mut budget = x2("savings_shortfall");
    budget["policy"] = json!({"budget": 100});
    assert_eq!(refused(&budget).0, "policy.budget");
    let mut big = json!({"schema_version": 3, "demand": vec![1; 201],
        "offers": [offer("a", Some(1.0), None, None)],
        "scenario_generator": {"seed": 1, "count": 1000}});
    assert_eq!(refused(&big).0, "scenarios");
    big["scenario_generator"]["count"] = json!(995);
    assert!(Problem::from_json(&big).is_ok());
}

#[test]
fn v1_and_v2_files_with_v3_keys_are_refused() {
    for version in [1, 2] {
        for key in ["scenarios", "scenario_generator", "risk"] {
            let mut doc = json!({"schema_version": version, "demand": [1],
                                 "offers": [offer("a", Some(1.0), None, None)]});
            doc[key] = json!({});
            let (path, message) = refused(&doc);
            assert_eq!(path, key);
            assert!(message.contains("schema_version\": 3"), "{message}");
        }
    }
}

#[test]
fn probabilities_are_normalised_and_parsed_exactly() {
    let mut doc = x1();
    doc["scenarios"][0]["probability"] = json!(0.8000001);
    let p = Problem::from_json(&doc).unwrap();
    let st = p.stochastic.unwrap();
    let sum: f64 = st.scenarios.iter().map(|s| s.probability).sum();
    assert!((sum - 1.0).abs() < 1e-15);
    // A number serde_json's fast parser rounds wrongly without float_roundtrip.
    let text = r#"{"p": 0.30000000000000004441}"#;
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        v["p"].as_f64().unwrap(),
        "0.30000000000000004441".parse::<f64>().unwrap()
    );
}

#[test]
fn the_saved_problem_keeps_its_generator() {
    let p = Problem::from_json(&x7()).unwrap();
    let doc = p.to_json();
    assert_eq!(doc["scenario_generator"], x7()["scenario_generator"]);
    assert_eq!(Problem::from_json(&doc).unwrap(), p);
}

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
        if below(&mut rng, 2) == 0 {
            doc["owned"] =
                json!([{"offer": "o0", "option": "1y", "count": 1, "remaining_hours": hours / 2}]);
        }
        let problem = Problem::from_json(&doc).unwrap();
        let fast = solve(&problem, &SolveOptions::default()).unwrap();
        let plain = solve(
            &problem,
            &SolveOptions {
                reduce: false,
                ..SolveOptions::default()
            },
        )
        .unwrap();
        assert_eq!(fast.status, plain.status, "case {case}");
        if fast.status != "optimal" {
            continue;
        }
        let v = serde_json::to_value(&fast).unwrap();
        verify(&problem, &v, false).unwrap_or_else(|e| panic!("case {case}: {e}\n{doc}"));
        assert_eq!(fast.model_stats.method, "scan", "case {case}");
        assert_eq!(plain.model_stats.method, "extensive_form");
        let (a, b) = (fast.v3.unwrap(), plain.v3.unwrap());
        for (p, q) in a.frontier.iter().zip(&b.frontier) {
            assert!(
                (p.objective - q.objective).abs() <= 1e-6 * q.objective.abs().max(1.0),
                "case {case} λ {}: scan {} vs extensive {}\n{doc}",
                p.lambda,
                p.objective,
                q.objective
            );
        }
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
            ("optimal", "extensive_form"),
            "case {case}"
        );
        let v = serde_json::to_value(&reduced).unwrap();
        verify(&problem, &v, false).unwrap_or_else(|e| panic!("case {case}: {e}\n{doc}"));
        for (p, q) in reduced
            .v3
            .unwrap()
            .frontier
            .iter()
            .zip(&plain.v3.unwrap().frontier)
        {
            assert!(
                (p.objective - q.objective).abs() <= 1e-6 * q.objective.abs().max(1.0),
                "case {case} λ {}: reduced {} vs plain {}\n{doc}",
                p.lambda,
                p.objective,
                q.objective
            );
        }
    }
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
