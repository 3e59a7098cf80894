//! The worked examples of docs/planning-model.md §12.13 that are bags.

use serde_json::{Value, json};

use super::*;

/// §12.13's defaults: one H100-80GB of 80 GiB, on demand; c = 1, r = 0.25.
fn offer(id: &str, extra: Value) -> Value {
    let mut o = json!({"id": id, "gpu_model": "H100-80GB", "gpu_count": 1, "gpu_memory_gib": 80, "kind": "on_demand"});
    for (k, v) in extra.as_object().unwrap() {
        o[k] = v.clone();
    }
    o
}

fn problem(hours: usize, work: f64, offers: Vec<Value>, extra: Value) -> Value {
    let mut doc = json!({
        "schema_version": 4, "kind": "job", "hours": hours,
        "job": {"shape": "bag", "work": work},
        "offers": offers,
        "perf": {"H100-80GB": 1, "A100-80GB": 0.5, "L4": 0.25},
    });
    for (k, v) in extra.as_object().unwrap() {
        if k == "job" {
            for (jk, jv) in v.as_object().unwrap() {
                doc["job"][jk] = jv.clone();
            }
        } else {
            doc[k] = v.clone();
        }
    }
    doc
}

fn solve(doc: &Value) -> JobResult {
    JobProblem::from_json(doc)
        .unwrap()
        .solve(Backend::default(), None)
        .unwrap()
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-6 * b.abs().max(1.0))
}

fn j1(hours: usize, a100_price: f64) -> Value {
    problem(
        hours,
        64.0,
        vec![
            offer("h100", json!({"usd_per_hour": 3.0, "max_instances": 4})),
            offer(
                "a100",
                json!({"gpu_model": "A100-80GB", "usd_per_hour": a100_price}),
            ),
        ],
        json!({}),
    )
}

#[test]
fn j1_price_per_hour_versus_price_per_work() {
    let a = solve(&j1(24, 2.0));
    assert!(
        close(a.objective, 192.0) && a.finish_hours == Some(16.0),
        "{a:?}"
    );
    assert_eq!(a.schedule.len(), 1);
    assert_eq!(
        a.schedule[0].hours[..17],
        [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0]
    );
    let b = solve(&j1(12, 2.0));
    assert!(
        close(b.objective, 208.0) && b.finish_hours == Some(12.0),
        "{b:?}"
    );
    let a100 = b.schedule.iter().find(|s| s.offer == "a100").unwrap();
    assert_eq!(
        (a100.hours[0], a100.instance_hours),
        (32, 32),
        "the A100 hours all go in hour 0"
    );
    assert!(close(b.work_done, 64.0));
    let rates: Vec<f64> = b.offers.iter().map(|o| o.usd_per_work).collect();
    assert_eq!(rates, [3.0, 4.0]);
    let c = solve(&j1(12, 1.4));
    assert!(
        close(c.objective, 179.2) && c.finish_hours == Some(1.0),
        "{c:?}"
    );
}

fn j2(rho: f64, checkpoint: f64) -> Value {
    problem(
        24,
        17.0,
        vec![
            offer("h100", json!({"usd_per_hour": 3.0, "max_instances": 4})),
            offer(
                "h100-spot",
                json!({"kind": "spot", "usd_per_hour": 2.0, "max_instances": 5, "interruptions_per_hour": rho}),
            ),
        ],
        json!({"job": {"checkpoint_hours": checkpoint}}),
    )
}

#[test]
fn j2_spot_yield_and_the_lexicographic_finish() {
    let a = solve(&j2(0.6, 1.0));
    assert!(
        close(a.objective, 51.0) && a.finish_hours == Some(5.0),
        "{a:?}"
    );
    let b = solve(&j2(0.2, 1.0));
    assert!(
        close(b.objective, 40.0) && b.finish_hours == Some(4.0),
        "{b:?}"
    );
    let c = solve(&j2(0.6, 0.5));
    assert!(
        close(c.objective, 49.0) && c.finish_hours == Some(4.0),
        "{c:?}"
    );
    let spot = c.schedule.iter().find(|s| s.offer == "h100-spot").unwrap();
    assert_eq!(spot.hours[..5], [5, 5, 5, 5, 0]);
}

fn j4(work: f64) -> Value {
    problem(
        72,
        work,
        vec![
            offer("p5", json!({"gpu_count": 8, "usd_per_hour": 80.0})),
            offer(
                "cb",
                json!({"gpu_count": 8, "kind": "window",
                "window": {"start_hour": 0, "hours": 24, "instances": 4, "upfront_usd": 6000}}),
            ),
        ],
        json!({}),
    )
}

#[test]
fn j4_a_window_pays_when_the_work_it_displaces_is_dearer() {
    let a = solve(&j4(1000.0));
    assert!(
        close(a.objective, 8320.0) && a.finish_hours == Some(24.0),
        "{a:?}"
    );
    assert_eq!(a.windows_bought.len(), 1);
    assert_eq!(a.windows_bought[0].instance_hours_used, 96);
    let p5 = a.schedule.iter().find(|s| s.offer == "p5").unwrap();
    assert_eq!((p5.hours[0], p5.instance_hours), (29, 29));
    let b = solve(&j4(500.0));
    assert!(
        close(b.objective, 5040.0) && b.finish_hours == Some(1.0),
        "{b:?}"
    );
    assert!(b.windows_bought.is_empty());
}

#[test]
fn j5_j6_budget_and_deadline_name_their_figures() {
    let mut doc = j1(12, 2.0);
    doc["job"]["budget_usd"] = json!(200);
    let r = solve(&doc);
    assert_eq!(r.status, "infeasible");
    assert_eq!(r.objective, None);
    let why = r.infeasibility.unwrap();
    assert_eq!(why["kind"], "budget");
    assert!(close(why["min_cost"].as_f64(), 208.0), "{why}");
    doc["job"]["budget_usd"] = json!(208);
    assert_eq!(solve(&doc).status, "optimal");

    let mut doc = j1(8, 2.0);
    doc["offers"][1]["max_instances"] = json!(2);
    let why = solve(&doc).infeasibility.unwrap();
    assert_eq!(
        (why["kind"].as_str(), why["max_work"].as_f64()),
        (Some("deadline"), Some(40.0))
    );
}

#[test]
fn j7_a_slice_wins_a_small_bag() {
    let doc = problem(
        2,
        0.1,
        vec![
            offer("h100", json!({"usd_per_hour": 3.0})),
            offer(
                "l4",
                json!({"gpu_model": "L4", "gpu_memory_gib": 24, "usd_per_hour": 0.8}),
            ),
            offer(
                "l4-eighth",
                json!({"gpu_model": "L4", "gpu_count": 0.125, "gpu_memory_gib": 3, "usd_per_hour": 0.11}),
            ),
            offer(
                "l4-tiny",
                json!({"gpu_model": "L4", "gpu_count": 0.125, "gpu_memory_gib": 1.5, "usd_per_hour": 0.05}),
            ),
        ],
        json!({"job": {"min_gpu_memory_gib": 2}}),
    );
    let r = solve(&doc);
    assert!(
        close(r.objective, 0.44) && r.finish_hours == Some(1.0),
        "{r:?}"
    );
    assert_eq!(
        r.excluded_offers,
        [Excluded {
            offer: "l4-tiny".into(),
            reason: "gpu_memory"
        }]
    );
    let mut big = doc.clone();
    big["job"]["work"] = json!(100);
    assert!(close(solve(&big).objective, 300.0));
}

fn j8(carbon: Value, eun_kg: Option<f64>) -> Value {
    problem(
        24,
        100.0,
        vec![
            offer("use", json!({"usd_per_hour": 3.0, "kgco2e_per_hour": 0.4})),
            offer(
                "eun",
                json!({"usd_per_hour": 3.3, "kgco2e_per_hour": eun_kg}),
            ),
        ],
        json!({"carbon": carbon}),
    )
}

#[test]
fn j8_carbon_caps_and_prices() {
    let a = solve(&j8(json!({"max_kg": 20}), Some(0.02)));
    assert!(
        close(a.objective, 315.9) && close(a.carbon_kg, 19.86),
        "{a:?}"
    );
    let b = solve(&j8(json!({"usd_per_tonne": 1000}), Some(0.02)));
    assert!(
        close(b.objective, 332.0) && close(b.cost_usd, 330.0) && close(b.carbon_charge_usd, 2.0),
        "{b:?}"
    );
    let c = solve(&j8(json!({"usd_per_tonne": 100}), Some(0.02)));
    assert!(close(c.objective, 304.0), "{c:?}");
    let d = solve(&j8(json!({"max_kg": 1.5}), Some(0.02)))
        .infeasibility
        .unwrap();
    assert_eq!(d["kind"], "carbon");
    assert!(close(d["min_carbon_kg"].as_f64(), 2.0), "{d}");
    let e = solve(&j8(json!({"max_kg": 20}), None));
    assert_eq!(
        e.excluded_offers,
        [Excluded {
            offer: "eun".into(),
            reason: "carbon_factor"
        }]
    );
    assert!(close(
        e.infeasibility.unwrap()["min_carbon_kg"].as_f64(),
        40.0
    ));
}

#[test]
fn j9_the_earliest_finish_within_the_budget() {
    let doc = |budget: Option<f64>| {
        problem(
            24,
            64.0,
            vec![
                offer("h100", json!({"usd_per_hour": 3.0, "max_instances": 4})),
                offer(
                    "a100",
                    json!({"gpu_model": "A100-80GB", "usd_per_hour": 2.0, "max_instances": 8}),
                ),
            ],
            json!({"objective": "time", "job": {"budget_usd": budget}}),
        )
    };
    let a = solve(&doc(None));
    assert!(
        a.objective == Some(8.0) && close(a.total_usd, 224.0),
        "{a:?}"
    );
    let b = solve(&doc(Some(210.0)));
    assert!(
        b.objective == Some(12.0) && close(b.total_usd, 208.0),
        "{b:?}"
    );
}

#[test]
fn validation_names_the_field() {
    let bad = |edit: &dyn Fn(&mut Value)| {
        let mut doc = j1(12, 2.0);
        edit(&mut doc);
        JobProblem::from_json(&doc).unwrap_err().path
    };
    assert_eq!(bad(&|d| d["kind"] = json!("plan")), "kind");
    assert_eq!(bad(&|d| d["hours"] = json!(12.5)), "hours");
    assert_eq!(bad(&|d| d["hours"] = json!(true)), "hours");
    assert_eq!(bad(&|d| d["start"] = json!("2025-07-01")), "start");
    assert_eq!(bad(&|d| d["job"]["nodes_max"] = json!(4)), "job.nodes_max");
    assert_eq!(bad(&|d| d["job"]["colour"] = json!(4)), "job.colour");
    assert_eq!(
        bad(&|d| d["offers"][0]["interruption_per_hour"] = json!(0.1)),
        "offers[0].interruption_per_hour"
    );
    assert_eq!(
        bad(&|d| d["offers"][0]["interruptions_per_hour"] = json!(0.1)),
        "offers[0].interruptions_per_hour"
    );
    assert_eq!(
        bad(&|d| d["offers"][1]["id"] = json!("h100")),
        "offers[1].id"
    );
    assert_eq!(
        bad(&|d| d["offers"][0]["available"] = json!([1, 2])),
        "offers[0].available"
    );
    assert_eq!(bad(&|d| d["carbon"] = json!({})), "carbon");
    assert_eq!(bad(&|d| d["perf"] = json!({})), "perf");
    assert_eq!(
        bad(&|d| d["job"]["reference"] = json!("B200")),
        "job.reference"
    );
}
