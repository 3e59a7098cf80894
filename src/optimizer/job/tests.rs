//! The worked examples of docs/planning-model.md §12.13 that are bags.

use serde_json::{Value, json};

use super::*;

/// §12.13's defaults: one H100-80GB of 80 GiB, on demand; c = 1, r = 0.25.
fn offer(id: &str, extra: Value) -> Value {
    let o = json!({"id": id, "gpu_model": "H100-80GB", "gpu_count": 1, "gpu_memory_gib": 80, "kind": "on_demand"});
    merged(o, &extra)
}

/// `doc` with the keys of `extra` set, and those of `extra.job` set in
/// `doc.job`.
fn merged(mut doc: Value, extra: &Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        match (k.as_str(), v.as_object()) {
            ("job", Some(job)) if doc["job"].is_object() => {
                for (jk, jv) in job {
                    doc["job"][jk] = jv.clone();
                }
            }
            _ => doc[k] = v.clone(),
        }
    }
    doc
}

fn problem(hours: usize, work: f64, offers: Vec<Value>, extra: Value) -> Value {
    let doc = json!({
        "schema_version": 4, "kind": "job", "hours": hours,
        "job": {"shape": "bag", "work": work},
        "offers": offers,
        "perf": {"H100-80GB": 1, "A100-80GB": 0.5, "L4": 0.25},
    });
    merged(doc, &extra)
}

fn solve(doc: &Value) -> JobResult {
    JobProblem::from_json(doc)
        .unwrap()
        .solve(Backend::default(), None)
        .unwrap()
}

impl JobResult {
    fn schedule(&self) -> &[ScheduleEntry] {
        match &self.plan {
            Plan::Bag { schedule, .. } => schedule,
            Plan::Gang { .. } => panic!("a gang has no schedule"),
        }
    }

    fn windows_bought(&self) -> &[WindowBought] {
        match &self.plan {
            Plan::Bag { windows_bought, .. } => windows_bought,
            Plan::Gang { .. } => panic!("a gang buys no windows"),
        }
    }
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
    assert_eq!(a.schedule().len(), 1);
    assert_eq!(
        a.schedule()[0].hours[..17],
        [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0]
    );
    let b = solve(&j1(12, 2.0));
    assert!(
        close(b.objective, 208.0) && b.finish_hours == Some(12.0),
        "{b:?}"
    );
    let a100 = b.schedule().iter().find(|s| s.offer == "a100").unwrap();
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
    let spot = c
        .schedule()
        .iter()
        .find(|s| s.offer == "h100-spot")
        .unwrap();
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
    assert_eq!(a.windows_bought().len(), 1);
    assert_eq!(a.windows_bought()[0].instance_hours_used, 96);
    let p5 = a.schedule().iter().find(|s| s.offer == "p5").unwrap();
    assert_eq!((p5.hours[0], p5.instance_hours), (29, 29));
    let b = solve(&j4(500.0));
    assert!(
        close(b.objective, 5040.0) && b.finish_hours == Some(1.0),
        "{b:?}"
    );
    assert!(b.windows_bought().is_empty());
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

fn gang(hours: usize, nodes_max: u32, offers: Vec<Value>, extra: Value) -> Value {
    let doc = problem(
        hours,
        1152.0,
        offers,
        json!({"job": {"shape": "gang", "nodes_max": nodes_max, "scaling": 0.9}}),
    );
    merged(doc, &extra)
}

fn p5(id: &str, extra: Value) -> Value {
    merged(
        offer(id, json!({"gpu_count": 8, "usd_per_hour": 80.0})),
        &extra,
    )
}

fn chosen(r: &JobResult) -> &GangRun {
    match &r.plan {
        Plan::Gang { gang: Some(g), .. } => g,
        _ => panic!("no gang chosen: {r:?}"),
    }
}

fn ranking(r: &JobResult) -> Vec<(String, Option<f64>, Option<&'static str>)> {
    match &r.plan {
        Plan::Gang { ranking, .. } => ranking
            .iter()
            .map(|e| match e {
                Ranked::Feasible { run, objective, .. } => {
                    (run.offer.clone(), Some(*objective), None)
                }
                Ranked::Infeasible { offer, reason, .. } => (offer.clone(), None, Some(*reason)),
            })
            .collect(),
        Plan::Bag { .. } => panic!("a bag has no ranking"),
    }
}

#[test]
fn j3_the_deadline_decides_the_smallest_cluster() {
    let a = solve(&gang(96, 8, vec![p5("p5", json!({}))], json!({})));
    assert!(
        close(a.objective, 12_800.0) && close(a.finish_hours, 80.0),
        "{a:?}"
    );
    assert_eq!(chosen(&a).nodes, 2);
    let b = solve(&gang(48, 8, vec![p5("p5", json!({}))], json!({})));
    let g = chosen(&b);
    assert!(g.nodes == 4 && close(Some(g.rate), 25.92) && close(Some(g.efficiency), 0.81));
    assert!(
        close(b.objective, 14_222.222_222) && close(b.finish_hours, 44.444_444),
        "{b:?}"
    );
    assert!(close(b.work_done, 1152.0));
    let c = solve(&gang(
        48,
        8,
        vec![p5("p5", json!({}))],
        json!({"objective": "time"}),
    ));
    assert_eq!(chosen(&c).nodes, 8);
    assert!(
        close(c.objective, 1152.0 / 46.656) && close(c.total_usd, 15_802.469_136),
        "{c:?}"
    );
    let d = solve(&gang(24, 8, vec![p5("p5", json!({}))], json!({})));
    let inf = d.infeasibility.as_ref().unwrap();
    assert_eq!(inf["kind"], "deadline");
    assert!(close(inf["max_work"].as_f64(), 1119.744), "{inf}");
    assert!(
        close(inf["min_run_hours"].as_f64(), 1152.0 / 46.656),
        "{inf}"
    );
    assert_eq!(
        inf["offers"],
        json!([{"offer": "p5", "reason": "deadline"}])
    );
    assert!(d.objective.is_none() && matches!(d.plan, Plan::Gang { gang: None, .. }));
}

fn j10(extra: Value) -> Value {
    let mut east_available = vec![Value::Null; 96];
    east_available[40] = json!(0);
    gang(
        96,
        4,
        vec![
            p5("p5", json!({})),
            p5(
                "p5-spot",
                json!({"kind": "spot", "usd_per_hour": 40.0, "interruptions_per_hour": 0.1}),
            ),
            offer(
                "cb",
                json!({"gpu_count": 8, "kind": "window",
                       "window": {"start_hour": 12, "hours": 48, "instances": 4, "upfront_usd": 9000}}),
            ),
            p5(
                "a100",
                json!({"gpu_model": "A100-80GB", "usd_per_hour": 40.0}),
            ),
            p5("l40s", json!({"gpu_model": "L4", "gpu_memory_gib": 48})),
            p5(
                "p5-east",
                json!({"usd_per_hour": 70.0, "available": east_available}),
            ),
        ],
        merged(json!({"job": {"min_gpu_memory_gib": 80}}), &extra),
    )
}

#[test]
fn j10_a_gang_ranking() {
    let a = solve(&j10(json!({})));
    assert_eq!(
        a.excluded_offers,
        [Excluded {
            offer: "l40s".into(),
            reason: "gpu_memory"
        }]
    );
    let g = chosen(&a);
    assert!(g.offer == "p5-spot" && g.nodes == 2, "{g:?}");
    assert!(
        close(a.objective, 7_529.411_765) && close(a.finish_hours, 94.117_647),
        "{a:?}"
    );
    let r = ranking(&a);
    let order: Vec<_> = r.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(order, ["p5-spot", "cb", "p5", "a100", "p5-east"]);
    for (e, want) in r
        .iter()
        .zip([7_529.411_765, 9_000.0, 12_800.0, 14_222.222_222])
    {
        assert!(close(e.1, want), "{e:?}");
    }
    assert_eq!(r[4].2, Some("availability"));

    let b = solve(&j10(json!({"objective": "time"})));
    assert!(chosen(&b).offer == "p5" && chosen(&b).nodes == 4);
    assert!(close(b.objective, 44.444_444) && close(b.total_usd, 14_222.222_222));
    let r = ranking(&b);
    let order: Vec<_> = r.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(order, ["p5", "cb", "p5-spot", "a100", "p5-east"]);
    for (e, want) in r
        .iter()
        .zip([44.444_444, 56.444_444, 1152.0 / 18.144, 88.888_889])
    {
        assert!(close(e.1, want), "{e:?}");
    }

    let c = solve(&j10(json!({"job": {"budget_usd": 8000}})));
    assert_eq!(chosen(&c).offer, "p5-spot");
    let reasons: Vec<_> = ranking(&c)
        .into_iter()
        .skip(1)
        .map(|e| (e.0, e.2.unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("p5".to_owned(), "budget"),
            ("cb".to_owned(), "budget"),
            ("a100".to_owned(), "budget"),
            ("p5-east".to_owned(), "availability")
        ]
    );

    let d = solve(&j10(json!({"job": {"budget_usd": 7000}})));
    let inf = d.infeasibility.as_ref().unwrap();
    assert_eq!(inf["kind"], "budget");
    assert!(close(inf["min_cost"].as_f64(), 7_529.411_765), "{inf}");

    let e = solve(&j10(json!({"job": {"gpus": 12}})));
    let inf = e.infeasibility.as_ref().unwrap();
    assert_eq!(inf["kind"], "cluster");
    assert!(
        inf["offers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["reason"] == "gpus"),
        "{inf}"
    );
}

#[test]
fn a_window_gang_takes_the_largest_cluster_the_window_holds() {
    let doc = gang(
        96,
        8,
        vec![offer(
            "cb",
            json!({"gpu_count": 8, "kind": "window",
                   "window": {"start_hour": 12, "hours": 48, "instances": 4, "upfront_usd": 9000}}),
        )],
        json!({"start": "2025-07-01T00:00:00Z"}),
    );
    let r = solve(&doc);
    let g = chosen(&r);
    assert!(g.nodes == 4 && g.start_hours == 12.0, "{g:?}");
    assert_eq!(
        g.start_at.unwrap().to_rfc3339(),
        "2025-07-01T12:00:00+00:00"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("schedule").is_none() && json.get("windows_bought").is_none());
    assert_eq!(json["gang"]["yield"], 1.0);
    assert_eq!(json["ranking"][0]["feasible"], true);
}

#[test]
fn the_frontier_is_the_cheapest_plan_for_each_deadline() {
    // J9 without its budget, objective cost: each hour of waiting moves 4
    // work from the A100 to the H100 and saves $4, until the H100 does it
    // all by hour 16.
    let mut doc = problem(
        24,
        64.0,
        vec![
            offer("h100", json!({"usd_per_hour": 3.0, "max_instances": 4})),
            offer(
                "a100",
                json!({"gpu_model": "A100-80GB", "usd_per_hour": 2.0, "max_instances": 8}),
            ),
        ],
        json!({}),
    );
    let p = JobProblem::from_json(&doc).unwrap();
    let f = p.frontier(Backend::default(), None).unwrap();
    let got: Vec<(f64, f64)> = f.iter().map(|p| (p.finish_hours, p.total_usd)).collect();
    assert_eq!(
        got,
        (8..=16)
            .map(|f| (f64::from(f), 256.0 - 4.0 * f64::from(f)))
            .collect::<Vec<_>>()
    );
    // J3's gang over 96 hours: eight nodes first, two last.
    doc = gang(96, 8, vec![p5("p5", json!({}))], json!({}));
    let f = JobProblem::from_json(&doc)
        .unwrap()
        .frontier(Backend::default(), None)
        .unwrap();
    assert!(
        f.first().unwrap().plan == "p5 x 8 nodes" && close(Some(f[0].total_usd), 15_802.469_136)
    );
    assert!(
        f.last().unwrap().plan == "p5 x 2 nodes"
            && close(Some(f.last().unwrap().total_usd), 12_800.0)
    );
    assert!(
        f.windows(2)
            .all(|w| w[0].finish_hours < w[1].finish_hours && w[0].total_usd > w[1].total_usd)
    );
}
