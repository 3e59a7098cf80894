//! Version 3 documents: validated field by field, parsed exactly, and
//! kept as they were given.

use super::worked::{x1, x2, x7};
use super::*;

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
