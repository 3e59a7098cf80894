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

mod documents;
mod exact;
mod worked;
