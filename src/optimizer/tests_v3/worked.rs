//! The worked examples X1–X8 of §11, each with its figures by hand.

use super::*;

pub(super) fn x1() -> Value {
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

pub(super) fn x2(measure: &str) -> Value {
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
    let (_, _, v) = solved(&x4());
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

/// X4: two classes, owned capacity, an outage (the decomposition's case).
pub(super) fn x4() -> Value {
    let mut h100 = offer("h100", Some(4.0), None, Some(2.0));
    h100["gpu_model"] = json!("H100");
    let mut l4 = offer("l4", Some(0.9), Some(0.25), None);
    l4["gpu_model"] = json!("L4");
    l4["gpu_memory_gib"] = json!(24);
    json!({"schema_version": 3,
        "classes": [{"id": "train", "demand": [2, 2], "min_gpu_memory_gib": 80, "perf": {"H100": 1}},
                    {"id": "infer", "demand": [1, 1], "perf": {"H100": 1, "L4": 0.25}}],
        "offers": [h100, l4],
        "owned": [{"offer": "h100", "option": "1y", "count": 1}],
        "scenarios": [{"id": "calm", "probability": 0.75},
                      {"id": "storm", "probability": 0.25, "classes": {"infer": [2, 2]},
                       "spot_available": {"aws/r1/l4": 0}}],
        "risk": {"beta": 0.8}})
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

pub(super) fn x7() -> Value {
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
