//! Hand-derived cases with exact optima, and an independent checker that every
//! returned plan covers demand, respects caps and shares, and costs what it says.

use serde_json::{Value, json};

use super::*;

fn offer(id: &str, g: u32, od: Option<f64>, spot: Option<f64>) -> Value {
    json!({"id": id, "cloud": "aws", "region": "us-east-1", "instance_type": id, "gpu_model": "H100-80GB",
           "gpu_memory_gib": 80, "gpus_per_instance": g, "on_demand_price": od, "spot_price": spot})
}

fn run(doc: Value, relax: bool) -> PlanResult {
    run_with(doc, relax, true)
}

fn run_with(doc: Value, relax: bool, reduce: bool) -> PlanResult {
    let problem = Problem::from_json(&doc).unwrap();
    let opts = SolveOptions {
        relax,
        time_limit: Some(Duration::from_secs(60)),
        reduce,
        ..SolveOptions::default()
    };
    let result = solve(&problem, &opts).unwrap();
    if result.status == "optimal" {
        check_plan(&problem, &result, relax);
    }
    result
}

/// The independent checker on a result, as the tests use it.
fn check_plan(problem: &Problem, r: &PlanResult, relax: bool) {
    let doc = serde_json::to_value(r).unwrap();
    if let Err(e) = verify(problem, &doc, relax) {
        panic!("{e}\n{doc:#}");
    }
}

/// The offers a plan left out and why: (offer id, reason).
fn exclusions(r: &PlanResult) -> Vec<(&str, &str)> {
    r.excluded_offers
        .iter()
        .map(|e| (e.offer.as_str(), e.reason))
        .collect()
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-6 * b.abs().max(1.0))
}

#[test]
fn flat_demand_is_all_reserved() {
    // 16 GPUs every hour for a day; reserved at 50/h per 8-GPU instance beats 80
    // on-demand (the example of docs/planning-model.md §4).
    let mut o = offer("p5", 8, Some(80.0), None);
    o["reserved"] =
        json!([{"id": "1y", "term_hours": 8760, "hourly_price": 25.0, "upfront": 219000.0}]);
    let r = run(json!({"demand": vec![16; 24], "offers": [o]}), false);
    assert_eq!(r.status, "optimal");
    assert!(close(r.objective, 2400.0));
    assert_eq!((r.reserved[0].count, r.reserved[0].gpus), (2.0, 16.0));
    assert!(close(
        Some(r.reserved[0].commitment_liability),
        2.0 * (219000.0 + 25.0 * 8760.0)
    ));
    assert!(close(r.reserved[0].break_even_utilization, 0.625));
    assert!(close(r.baseline_on_demand_cost, 3840.0));
    assert!(close(r.savings, 1440.0) && close(r.savings_pct, 37.5));
    assert_eq!(r.reserved_utilization, Some(1.0));
}

#[test]
fn spiky_demand_reserves_up_to_the_break_even_quantile() {
    // 1-GPU offer, on-demand 1.0, reserved 0.5: a reserved unit pays off when it
    // is needed more than half the hours. Demand 1,1,1,3: the first unit is used
    // 4/4 hours, the second and third 1/4 -> reserve 1.
    let mut o = offer("g", 1, Some(1.0), None);
    o["reserved"] = json!([{"id": "r", "term_hours": 8760, "hourly_price": 0.5}]);
    let r = run(json!({"demand": [1, 1, 1, 3], "offers": [o]}), false);
    assert_eq!(r.reserved[0].count, 1.0);
    // 4h x 0.5 reserved + 2 extra GPU-hours on demand.
    assert!(close(r.objective, 4.0));
    assert_eq!(r.hourly.on_demand_instances["g"], vec![0.0, 0.0, 0.0, 2.0]);
}

#[test]
fn the_spot_share_cap_binds() {
    // Spot at 1 per GPU-hour vs on-demand 3; at most half of demand on spot.
    let doc = json!({"demand": [10, 10], "offers": [offer("s", 1, Some(3.0), Some(1.0))],
                     "policy": {"max_spot_share": 0.5}});
    let r = run(doc, false);
    assert!(close(r.objective, 2.0 * (5.0 * 1.0 + 5.0 * 3.0)));
    assert!(close(Some(r.spot_share_of_demand), 0.5));
}

#[test]
fn interruption_derates_spot_supply() {
    // rho 0.5: each spot instance yields half a GPU, so 2 spot-hours per GPU-hour
    // at 1.0 each = 2.0 per useful GPU-hour, still cheaper than on-demand 3.0.
    let mut o = offer("s", 1, Some(3.0), Some(1.0));
    o["spot_interruption_rate"] = json!(0.5);
    let r = run(json!({"demand": [4], "offers": [o]}), false);
    assert!(close(r.objective, 8.0));
    assert_eq!(r.hourly.spot_instances["s"], vec![8.0]);
}

#[test]
fn eligibility_filters_report_the_first_failing_one() {
    let mut gcp = offer("b", 1, Some(1.0), None);
    gcp["cloud"] = json!("gcp");
    let mut small = offer("c", 1, Some(1.0), None);
    small["gpu_memory_gib"] = json!(24);
    small["gpu_model"] = json!("L4");
    let doc = json!({"demand": [1], "offers": [offer("a", 1, Some(2.0), None), gcp, small],
                     "policy": {"allowed_clouds": ["aws"], "min_gpu_memory_gib": 40}});
    let r = run(doc, false);
    let reasons = exclusions(&r);
    assert_eq!(reasons, vec![("b", "cloud"), ("c", "gpu_memory")]);
    assert!(close(r.objective, 2.0));
}

#[test]
fn slices_serve_small_demand_unless_a_memory_floor_excludes_them() {
    // A quarter of a GPU for two hours, in whole instances: two eighths of an
    // L4 (0.25/h each, 2.0 per whole-GPU hour) cost less than a whole L4 at
    // 1.0/h. (With fractional counts the whole L4 is cheaper per GPU.)
    let mut eighth = offer("g6f.large", 1, Some(0.25), None);
    eighth["gpus_per_instance"] = json!(0.125);
    eighth["gpu_model"] = json!("L4");
    eighth["gpu_memory_gib"] = json!(3);
    let mut whole = offer("g6.xlarge", 1, Some(1.0), None);
    whole["gpu_model"] = json!("L4");
    whole["gpu_memory_gib"] = json!(24);
    let doc = json!({"demand": [0.25, 0.25], "offers": [eighth.clone(), whole.clone()],
                     "policy": {"integer_hourly": true}});
    let r = run(doc, false);
    assert_eq!(r.status, "optimal");
    assert!(close(r.objective, 1.0), "{:?}", r.objective);
    // A floor of 16 GiB is checked against the slice's own 3 GiB.
    let doc = json!({"demand": [0.25, 0.25], "offers": [eighth, whole],
                     "policy": {"integer_hourly": true, "min_gpu_memory_gib": 16}});
    let r = run(doc, false);
    let reasons = exclusions(&r);
    assert_eq!(reasons, vec![("g6f.large", "gpu_memory")]);
    assert!(close(r.objective, 2.0), "{:?}", r.objective);
}

#[test]
fn no_eligible_offers_capacity_integrality_and_budget_are_told_apart() {
    let r = run(
        json!({"demand": [1], "offers": [offer("a", 1, Some(1.0), None)], "policy": {"gpu_models": ["B200"]}}),
        false,
    );
    assert_eq!(r.infeasibility.unwrap()["kind"], "no_eligible_offers");

    let mut capped = offer("a", 1, Some(1.0), None);
    capped["max_on_demand_instances"] = json!(2);
    let r = run(json!({"demand": [1, 3, 2, 5], "offers": [capped]}), false);
    let inf = r.infeasibility.unwrap();
    assert_eq!(
        (inf["kind"].as_str(), inf["hours"].clone()),
        (Some("capacity"), json!([1, 3]))
    );
    assert_eq!(inf["max_shortfall_gpus"], 3.0);
    assert!(r.objective.is_none());

    // One GPU needed, only 8-GPU spot, sigma = 1, integer hourly: an instance
    // over-covers and breaks the share cap.
    let doc = json!({"demand": [1], "offers": [offer("big", 8, None, Some(1.0))],
                     "policy": {"max_spot_share": 1.0, "integer_hourly": true}});
    assert_eq!(
        run(doc.clone(), false).infeasibility.unwrap()["kind"],
        "integrality"
    );
    // Relaxed, it is fine.
    assert_eq!(run(doc, true).status, "optimal");

    let r = run(
        json!({"demand": [10], "offers": [offer("a", 1, Some(1.0), None)], "policy": {"budget": 9.5}}),
        false,
    );
    let inf = r.infeasibility.unwrap();
    assert_eq!(
        (inf["kind"].as_str(), inf["min_cost"].as_f64()),
        (Some("budget"), Some(10.0))
    );
}

#[test]
fn zero_demand_costs_nothing() {
    let r = run(json!({"demand": [0, 0], "offers": []}), false);
    assert_eq!((r.status, r.objective), ("optimal", Some(0.0)));
}

#[test]
fn pools_cap_the_share_of_each_spot_pool() {
    // Two cheap spot pools, each at most 40% of demand; the rest on-demand.
    let doc = json!({"demand": [10], "offers": [
        offer("s1", 1, None, Some(1.0)), offer("s2", 1, None, Some(1.5)), offer("od", 1, Some(4.0), None)],
        "policy": {"max_pool_share": 0.4}});
    let r = run(doc, false);
    assert!(close(r.objective, 4.0 * 1.0 + 4.0 * 1.5 + 2.0 * 4.0));
}

#[test]
fn the_lp_bound_is_at_most_the_mip_optimum_which_is_at_most_the_baseline() {
    let mut o = offer("p", 8, Some(80.0), Some(40.0));
    o["spot_interruption_rate"] = json!(0.2);
    o["reserved"] = json!([{"id": "1y", "term_hours": 8760, "hourly_price": 50.0},
                           {"id": "3y", "term_hours": 26280, "hourly_price": 20.0, "upfront": 500000.0}]);
    o["max_reserved_instances"] = json!(3);
    let demand: Vec<f64> = (0..48).map(|h| 10.0 + f64::from((h * 7) % 23)).collect();
    let doc = json!({"demand": demand, "offers": [o, offer("l4", 1, Some(1.2), Some(0.5))],
                     "policy": {"max_spot_share": 0.6, "max_pool_share": 0.4}});
    let lp = run(doc.clone(), true).objective.unwrap();
    let mip = run(doc, false);
    let m = mip.objective.unwrap();
    assert!(lp <= m * (1.0 + 1e-9), "lp {lp} > mip {m}");
    assert!(m <= mip.baseline_on_demand_cost.unwrap() * (1.0 + 1e-9));
}

#[test]
fn the_same_input_gives_the_same_plan() {
    let doc = json!({"demand": [3, 5, 3, 7], "offers": [offer("a", 1, Some(1.0), Some(0.4)), offer("b", 1, Some(1.0), Some(0.4))],
                     "policy": {"max_pool_share": 0.5}});
    let a = run(doc.clone(), false);
    let b = run(doc, false);
    assert_eq!((a.reserved, a.hourly), (b.reserved, b.hourly));
}

/// A small deterministic generator (no randomness crate needed for tests).
pub(super) struct Lcg(pub(super) u64);

impl Lcg {
    pub(super) fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(super) fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[(self.next() * items.len() as f64) as usize % items.len()].clone()
    }
}

pub(super) fn random_problem(seed: u64, offers: usize, hours: usize) -> Value {
    let mut r = Lcg(seed);
    let list: Vec<Value> = (0..offers)
        .map(|k| {
            let g = r.pick(&[1, 2, 4, 8]);
            let od = f64::from(g) * (1.5 + 2.5 * r.next());
            json!({"id": format!("o{k}"), "cloud": "c", "region": format!("r{}", k % 3), "instance_type": format!("t{k}"),
                   "gpu_model": "H100-80GB", "gpu_memory_gib": 80, "gpus_per_instance": g,
                   "on_demand_price": od, "spot_price": od * (0.3 + 0.5 * r.next()),
                   "spot_interruption_rate": 0.3 * r.next(), "spot_pool": format!("p{}", k % 4),
                   "max_spot_instances": r.pick(&[Value::Null, json!(2), json!(5)]),
                   "max_on_demand_instances": r.pick(&[Value::Null, json!(3), json!(10)]),
                   "max_reserved_instances": r.pick(&[Value::Null, json!(2)]),
                   "reserved": [{"id": "1y", "term_hours": 8760, "hourly_price": od * (0.5 + 0.3 * r.next())},
                                {"id": "3y", "term_hours": 26280, "hourly_price": od * 0.3, "upfront": od * 2000.0 * r.next()}]})
        })
        .collect();
    let demand: Vec<f64> = (0..hours).map(|_| (40.0 * r.next()).round()).collect();
    json!({"demand": demand, "offers": list, "policy": {"max_spot_share": r.pick(&[Value::Null, json!(0.6)]),
                                                         "max_pool_share": r.pick(&[Value::Null, json!(0.35)])}})
}

#[test]
fn reductions_never_change_the_optimum() {
    for seed in 1..=12 {
        let doc = random_problem(seed, 8, 24);
        for relax in [false, true] {
            let reduced = run_with(doc.clone(), relax, true);
            let full = run_with(doc.clone(), relax, false);
            assert_eq!(reduced.status, full.status, "seed {seed}");
            if let (Some(a), Some(b)) = (reduced.objective, full.objective) {
                assert!(
                    (a - b).abs() <= 1e-6 * b.max(1.0),
                    "seed {seed} relax {relax}: reduced {a} vs full {b}"
                );
            }
            assert_eq!(
                reduced.baseline_on_demand_cost.map(|b| (b * 1e6).round()),
                full.baseline_on_demand_cost.map(|b| (b * 1e6).round())
            );
        }
        // The LP bound <= the MIP optimum <= all on-demand.
        let (lp, mip) = (run(doc.clone(), true), run(doc, false));
        if let (Some(l), Some(m)) = (lp.objective, mip.objective) {
            assert!(
                l <= m * (1.0 + 1e-9) + 1e-9,
                "seed {seed}: lp {l} > mip {m}"
            );
            if let Some(b) = mip.baseline_on_demand_cost {
                assert!(
                    m <= b * (1.0 + 1e-9) + 1e-9,
                    "seed {seed}: mip {m} > baseline {b}"
                );
            }
        }
    }
}

/// Both searches over purchases report as they go: nodes counted up, and
/// every bound at most the optimum they end with.
#[test]
fn whole_count_searches_report_nodes_and_bounds_below_the_optimum() {
    let mut heard_from = std::collections::BTreeSet::new();
    for seed in 1..=10 {
        let mut doc = random_problem(seed, 4, 6);
        doc["policy"]["integer_hourly"] = json!(true);
        let problem = Problem::from_json(&doc).unwrap();
        for reduce in [true, false] {
            let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let opts = SolveOptions {
                reduce,
                search: Some(SearchSink(std::sync::Arc::new({
                    let heard = heard.clone();
                    move |s: &Search| heard.lock().unwrap().push(*s)
                }))),
                ..SolveOptions::default()
            };
            let r = solve(&problem, &opts).unwrap();
            let heard = heard.lock().unwrap();
            let Some(objective) = r.objective.filter(|_| r.status == "optimal") else {
                continue;
            };
            if !heard.is_empty() {
                heard_from.insert(r.model_stats.method);
            }
            assert!(
                heard.windows(2).all(|w| w[0].nodes < w[1].nodes),
                "{heard:?}"
            );
            for s in heard.iter() {
                let bound = s.bound.unwrap();
                assert!(
                    bound <= objective * (1.0 + 1e-9) + 1e-9,
                    "seed {seed}: {s:?} above {objective}"
                );
                assert!(s.gap.is_none_or(|g| g >= -1e-9), "seed {seed}: {s:?}");
            }
        }
    }
    assert_eq!(
        heard_from.into_iter().collect::<Vec<_>>(),
        ["decomposition", "reserved_search"]
    );
}

#[test]
fn whole_hourly_counts_by_decomposition_match_the_milp() {
    // Reduced, each offer keeps one option and the decomposition solves it;
    // unreduced, two options share a cap and the search over reserved
    // counts does.
    for seed in 1..=10 {
        let mut doc = random_problem(seed, 4, 6);
        doc["policy"]["integer_hourly"] = json!(true);
        let fast = run_with(doc.clone(), false, true);
        let milp = run_with(doc.clone(), false, false);
        assert_eq!(fast.status, milp.status, "seed {seed}");
        if fast.status == "optimal" {
            assert_eq!(
                (fast.model_stats.method, milp.model_stats.method),
                ("decomposition", "reserved_search")
            );
        }
        assert_eq!(fast.infeasibility, milp.infeasibility, "seed {seed}");
        if let (Some(a), Some(b)) = (fast.objective, milp.objective) {
            assert!(
                (a - b).abs() <= 1e-6 * b.max(1.0),
                "seed {seed}: decomposition {a} vs milp {b}"
            );
        }
        assert_eq!(
            fast.baseline_on_demand_cost.map(|b| (b * 1e6).round()),
            milp.baseline_on_demand_cost.map(|b| (b * 1e6).round()),
            "seed {seed}"
        );
    }
}

#[cfg(feature = "cbc")]
#[test]
fn cbc_finds_the_same_optima_as_microlp() {
    for seed in 1..=6 {
        let doc = random_problem(seed, 8, 24);
        let problem = Problem::from_json(&doc).unwrap();
        let solve_with = |backend| {
            let opts = SolveOptions {
                time_limit: Some(Duration::from_secs(60)),
                backend,
                ..SolveOptions::default()
            };
            solve(&problem, &opts).unwrap()
        };
        let a = solve_with(Backend::Microlp);
        let b = solve_with(Backend::Cbc);
        check_plan(&problem, &b, false);
        let (a, b) = (a.objective.unwrap(), b.objective.unwrap());
        assert!(
            (a - b).abs() <= 1e-6 * a.max(1.0),
            "seed {seed}: microlp {a} vs cbc {b}"
        );
    }
}

#[test]
fn a_search_cut_short_keeps_its_best_plan_with_the_bound_and_gap() {
    let doc: Value =
        serde_json::from_str(include_str!("../../tests/fixtures/heavy-integer-week.json")).unwrap();
    let problem = Problem::from_json(&doc).unwrap();
    let opts = SolveOptions {
        time_limit: Some(Duration::from_nanos(1)),
        ..SolveOptions::default()
    };
    let r = solve(&problem, &opts).unwrap();
    assert_eq!(r.status, "time_limit");
    let (objective, bound, gap) = (r.objective.unwrap(), r.best_bound.unwrap(), r.gap.unwrap());
    assert!(
        bound.is_finite() && bound <= objective,
        "{bound} > {objective}"
    );
    assert!((gap - (objective - bound) / objective).abs() < 1e-12);
    // The optimum (scipy/HiGHS agrees: 2787.60975) lies between them.
    assert!(bound <= 2_787.609_75 + 1e-6 && 2_787.609_75 <= objective + 1e-6);
    check_plan(&problem, &r, false);
    // Given the time, the same search proves the optimum.
    let r = solve(&problem, &SolveOptions::default()).unwrap();
    assert_eq!((r.status, r.gap), ("optimal", None));
    assert!(close(r.objective, 2_787.609_75));
}
