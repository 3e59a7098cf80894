//! End-to-end `gpuplan plan --problem` on generated problems: parse, build,
//! solve, write the result. Prints wall time (median of 3 runs), peak RSS and
//! the optimum; with scipy installed, also the reference model's time and
//! optimum on the same file (benches/reference/planning_reference.py).
//!
//! The problems: v1 at 50 x 168 and 200 x 720; v2 with 3 classes x 60 offers
//! x 168 h and 2 classes x 150 offers x 720 h (perf maps, class filters, owned
//! reservations, hourly spot prices); the one-class week with whole hourly
//! counts (tests/fixtures/heavy-integer-week.json), and the same week split
//! into three classes, which is not proven and runs to a 60 s limit (its
//! best plan, bound and gap are printed); and the two large version 3
//! cases of the planning model (one offer, and 20 offers, over a week with 50
//! generated scenarios of demand and spot outages) with the two-class one (40
//! offers, 20 scenarios), which the extensive form solves; and jobs
//! (version 4): bags of 40 offers x 168 h and gangs over 40 offers x 32
//! nodes, under the cost and the time objectives, beside the per-hour
//! reference (benches/reference/job_reference.py).
//!
//! The reference runs on `GPUPLAN_BENCH_PYTHON` (default `python3`) when that
//! Python has scipy.
//!
//!     cargo bench --bench plan [-- FILTER]   # only the cases whose label contains FILTER

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

/// A deterministic generator: no randomness crate, same problems every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[(self.next() * items.len() as f64) as usize % items.len()].clone()
    }
}

/// `offers` offers over `hours` hours: daily demand cycle with noise, caps on
/// about two thirds of the offers, 1y and 3y reserved options, spot pools, and
/// binding spot (50%) and pool (20%) shares.
fn problem(offers: usize, hours: usize, seed: u64) -> Value {
    let mut r = Lcg(seed);
    let clouds = ["aws", "azure", "gcp", "lambda"];
    let list: Vec<Value> = (0..offers)
        .map(|k| {
            let cloud = clouds[k % 4];
            let g = r.pick(&[1u32, 2, 4, 8]);
            let od = f64::from(g) * (1.5 + 2.5 * r.next());
            json!({
                "id": format!("o{k}"), "cloud": cloud, "region": format!("r{}", k % 10),
                "instance_type": format!("t{k}"), "gpu_model": "H100-80GB", "gpu_memory_gib": 80,
                "gpus_per_instance": g, "on_demand_price": od, "spot_price": od * (0.3 + 0.4 * r.next()),
                "spot_interruption_rate": 0.3 * r.next(), "spot_pool": format!("{cloud}/r{}/p{}", k % 10, k % 7),
                "max_spot_instances": r.pick(&[Value::Null, json!(2), json!(5), json!(10)]),
                "max_on_demand_instances": r.pick(&[Value::Null, json!(4), json!(20)]),
                "max_reserved_instances": r.pick(&[Value::Null, json!(3), json!(10)]),
                "reserved": [
                    {"id": "1y", "term_hours": 8760, "hourly_price": od * 0.62},
                    {"id": "3y", "term_hours": 26280, "hourly_price": od * 0.3, "upfront": od * 0.1 * 26280.0}
                ]
            })
        })
        .collect();
    let demand: Vec<f64> = (0..hours)
        .map(|t| {
            let day = (t as f64 / 24.0 * std::f64::consts::TAU).sin();
            ((200.0 + 150.0 * day + 60.0 * (r.next() - 0.5)) * 100.0).round() / 100.0
        })
        .collect();
    json!({"schema_version": 1, "name": format!("generated-{offers}x{hours}"), "demand": demand,
           "offers": list, "policy": {"max_spot_share": 0.5, "max_pool_share": 0.2}})
}

/// `doc` as a schema version 2 problem of `n` classes: the demand split
/// between them with a different daily shape each, a perf map per class
/// (unlike GPUs priced by throughput), a memory floor on one class, a share
/// override, owned reservations on a few offers (some expiring mid-horizon),
/// and hourly spot prices on every fifth offer.
fn classes(mut doc: Value, n: usize, seed: u64) -> Value {
    let mut r = Lcg(seed);
    let demand: Vec<f64> = doc["demand"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_f64().unwrap())
        .collect();
    let hours = demand.len();
    let models = ["H100-80GB", "A100-80GB", "L4"];
    let offers = doc["offers"].as_array_mut().unwrap();
    for (k, o) in offers.iter_mut().enumerate() {
        o["gpu_model"] = json!(models[k % 3]);
        o["gpu_memory_gib"] = json!(if k % 3 == 2 { 24 } else { 80 });
        if k % 5 == 0 {
            let base = o["spot_price"].as_f64().unwrap();
            let series: Vec<Value> = (0..hours)
                .map(|_| {
                    let x = r.next();
                    if x < 0.05 {
                        Value::Null
                    } else {
                        json!(base * (0.8 + 0.4 * x))
                    }
                })
                .collect();
            o["spot_price"] = json!(series);
        }
    }
    let owned: Vec<Value> = (0..offers.len())
        .step_by(7)
        .map(|k| {
            json!({"offer": format!("o{k}"), "option": "1y", "count": 1 + k % 2,
                   "remaining_hours": if k % 2 == 0 { Value::Null } else { json!(hours / 2) }})
        })
        .collect();
    let classes: Vec<Value> = (0..n)
        .map(|c| {
            let phase = c as f64 * 8.0;
            let part: Vec<f64> = demand
                .iter()
                .enumerate()
                .map(|(t, d)| {
                    let shape = 1.0 + 0.5 * ((t as f64 + phase) / 24.0 * std::f64::consts::TAU).sin();
                    (d / n as f64 * shape * 100.0).round() / 100.0
                })
                .collect();
            let mut class = json!({"id": format!("c{c}"), "demand": part,
                "perf": {"H100-80GB": 1.0, "A100-80GB": 0.45 + 0.1 * c as f64, "L4": 0.15 + 0.05 * c as f64}});
            if c == 0 {
                class["min_gpu_memory_gib"] = json!(40);
                class["max_spot_share"] = json!(0.3);
            }
            class
        })
        .collect();
    doc["schema_version"] = json!(2);
    doc.as_object_mut().unwrap().remove("demand");
    doc["classes"] = json!(classes);
    doc["owned"] = json!(owned);
    doc
}

/// Runs `cmd` under GNU time; returns (seconds, peak RSS KiB if known, stdout).
fn timed(cmd: &[&str]) -> (f64, Option<u64>, String) {
    let start = Instant::now();
    let gnu_time = Path::new("/usr/bin/time").exists();
    let out = if gnu_time {
        Command::new("/usr/bin/time")
            .args(["-f", "%M"])
            .args(cmd)
            .output()
            .unwrap()
    } else {
        Command::new(cmd[0]).args(&cmd[1..]).output().unwrap()
    };
    let secs = start.elapsed().as_secs_f64();
    let rss = gnu_time
        .then(|| {
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()?
                .trim()
                .parse()
                .ok()
        })
        .flatten();
    (secs, rss, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `doc` as a version 3 problem: `count` scenarios from the generator, demand
/// errors of four weekly folds (noise that grows with the lead, and a daily
/// swing) and outages of every spot pool, with the frontier `lambdas`.
fn scenarios(mut doc: Value, count: usize, lambdas: &[f64], seed: u64) -> Value {
    let mut r = Lcg(seed);
    let classes: Vec<(String, usize)> = match doc["classes"].as_array() {
        Some(list) => list
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap().to_owned(),
                    c["demand"].as_array().unwrap().len(),
                )
            })
            .collect(),
        None => vec![(
            "default".to_owned(),
            doc["demand"].as_array().map_or(168, Vec::len),
        )],
    };
    let mut residuals = serde_json::Map::new();
    for (id, hours) in classes {
        let matrix: Vec<Vec<f64>> = (0..4)
            .map(|_| {
                let swing = 4.0 * (r.next() - 0.5);
                (0..hours)
                    .map(|h| {
                        let daily = swing * ((h % 24) as f64 / 24.0 * std::f64::consts::TAU).sin();
                        daily + (r.next() - 0.5) * (2.0 + h as f64 / 48.0)
                    })
                    .collect()
            })
            .collect();
        residuals.insert(id, json!(matrix));
    }
    let mut pools: Vec<String> = doc["offers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| !o["spot_price"].is_null())
        .map(|o| {
            o["spot_pool"].as_str().map_or_else(
                || {
                    format!(
                        "{}/{}/{}",
                        o["cloud"].as_str().unwrap(),
                        o["region"].as_str().unwrap(),
                        o["instance_type"].as_str().unwrap()
                    )
                },
                str::to_owned,
            )
        })
        .collect();
    pools.sort();
    pools.dedup();
    let chains: Vec<Value> = pools
        .iter()
        .map(|p| json!({"pool": p, "p_down": 0.02, "p_up": 0.1}))
        .collect();
    doc["schema_version"] = json!(3);
    doc["scenario_generator"] = json!({"seed": seed, "count": count,
        "demand": {"residuals": residuals},
        "spot": {"pools": chains}});
    doc["risk"] = json!({"beta": 0.9, "frontier": lambdas});
    doc
}

/// A job (planning-model version 4) over `offers` offers and `hours` hours:
/// H100, A100 and L40S offers on demand, on spot (with interruptions and
/// per-hour caps) and as reservation windows, work that needs most of the
/// capacity, a budget that binds under the time objective.
fn job(shape: &str, offers: usize, hours: usize, objective: &str, seed: u64) -> Value {
    let mut r = Lcg(seed);
    let list: Vec<Value> = (0..offers)
        .map(|k| {
            let (model, phi) = r.pick(&[("H100-80GB", 1.0), ("A100-80GB", 0.5), ("L40S", 0.37)]);
            let g = r.pick(&[1.0, 4.0, 8.0]);
            let price = g * phi * (2.0 + 2.0 * r.next());
            let kind = r.pick(&["on_demand", "on_demand", "spot", "window"]);
            let mut o = json!({"id": format!("o{k}"), "gpu_model": model, "gpu_count": g, "gpu_memory_gib": 80,
                               "kind": kind, "kgco2e_per_hour": g * 0.3 * r.next()});
            match kind {
                "window" => {
                    let len = 24 + (r.next() * 96.0) as usize;
                    o["window"] = json!({"start_hour": (r.next() * (hours - 24) as f64) as usize, "hours": len,
                                         "instances": r.pick(&[1, 2, 4]),
                                         "upfront_usd": 0.8 * price * len as f64});
                }
                _ => {
                    o["usd_per_hour"] = json!(price);
                    o["max_instances"] = json!(r.pick(&[2, 4, 8, 16]));
                    if kind == "spot" {
                        o["usd_per_hour"] = json!(price * 0.5);
                        o["interruptions_per_hour"] = json!(0.05 * r.next());
                        let caps: Vec<Value> = (0..hours)
                            .map(|h| if (h / 12 + k) % 5 == 0 { json!(0) } else { Value::Null })
                            .collect();
                        o["available"] = json!(caps);
                    }
                }
            }
            o
        })
        .collect();
    let mut j = json!({"shape": shape, "work": if shape == "gang" { 2000.0 } else { 20_000.0 }});
    if shape == "gang" {
        j["nodes_max"] = json!(32);
        j["scaling"] = json!(0.95);
    }
    if objective == "time" {
        j["budget_usd"] = json!(if shape == "gang" { 9000.0 } else { 60_000.0 });
    }
    json!({"schema_version": 4, "kind": "job", "hours": hours, "objective": objective, "job": j,
           "offers": list, "perf": {"H100-80GB": 1.0, "A100-80GB": 0.5, "L40S": 0.37}})
}

/// One offer with spot and a one-year reservation, over a week of a daily cycle.
fn one_offer_week() -> Value {
    json!({"demand": (0..168).map(|h| if h % 24 < 12 { 24 } else { 10 }).collect::<Vec<_>>(),
           "offers": [{"id": "h100", "cloud": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge",
                       "gpu_model": "H100-80GB", "gpus_per_instance": 8, "on_demand_price": 98.32,
                       "spot_price": 45.0, "spot_interruption_rate": 0.1,
                       "reserved": [{"id": "1y", "term_hours": 8760, "hourly_price": 62.0}]}]})
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let python = std::env::var("GPUPLAN_BENCH_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let scipy = Command::new(&python)
        .args(["-c", "import scipy"])
        .status()
        .is_ok_and(|s| s.success());
    let reference = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/reference/planning_reference.py"
    );
    let job_reference = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/reference/job_reference.py"
    );
    let heavy: Value =
        serde_json::from_str(include_str!("../tests/fixtures/heavy-integer-week.json")).unwrap();
    // The third field is a time limit, for the cases whose goal is one: the
    // three-class whole-count week must be proven, or within a 0.1% gap, in
    // 60 s, and the three-class risk frontier over 50 scenarios proven in
    // 60 s. Their references are skipped (scipy/HiGHS proved neither in 25
    // minutes).
    let cases = [
        ("v1 50 offers x 168 h", problem(50, 168, 1), None),
        ("v1 200 offers x 720 h", problem(200, 720, 2), None),
        (
            "v2 3 classes x 60 offers x 168 h",
            classes(problem(60, 168, 3), 3, 3),
            None,
        ),
        (
            "v2 2 classes x 150 offers x 720 h",
            classes(problem(150, 720, 4), 2, 4),
            None,
        ),
        ("integer_hourly 20 offers x 168 h", heavy.clone(), None),
        (
            "integer_hourly 3 classes x 20 offers x 168 h, 60 s limit",
            classes(heavy, 3, 10),
            Some("60"),
        ),
        (
            "v3 1 offer x 168 h x 50 scenarios x 5 λ",
            scenarios(one_offer_week(), 50, &[0.0, 0.25, 0.5, 0.75, 1.0], 7),
            None,
        ),
        (
            "v3 20 offers x 168 h x 50 scenarios x 2 λ",
            scenarios(problem(20, 168, 5), 50, &[0.0, 0.5], 8),
            None,
        ),
        (
            "v3 2 classes x 40 offers x 168 h x 20 scenarios x 1 λ",
            scenarios(classes(problem(40, 168, 6), 2, 6), 20, &[0.0], 9),
            None,
        ),
        (
            "v3 2 classes x 40 offers x 168 h x 20 scenarios x 1 λ, seed 21",
            scenarios(classes(problem(40, 168, 21), 2, 21), 20, &[0.0], 21),
            None,
        ),
        (
            "v3 2 classes x 40 offers x 168 h x 20 scenarios x 1 λ, seed 22",
            scenarios(classes(problem(40, 168, 22), 2, 22), 20, &[0.5], 22),
            None,
        ),
        (
            "v3 3 classes x 40 offers x 168 h x 50 scenarios x 3 λ",
            scenarios(
                classes(problem(40, 168, 31), 3, 31),
                50,
                &[0.0, 0.5, 1.0],
                31,
            ),
            Some("60"),
        ),
        (
            "job: bag 40 offers x 168 h, cost",
            job("bag", 40, 168, "cost", 11),
            None,
        ),
        (
            "job: bag 40 offers x 168 h, time within a budget",
            job("bag", 40, 168, "time", 12),
            None,
        ),
        (
            "job: gang 40 offers x 32 nodes, cost",
            job("gang", 40, 168, "cost", 13),
            None,
        ),
        (
            "job: gang 40 offers x 32 nodes, time within a budget",
            job("gang", 40, 168, "time", 14),
            None,
        ),
    ];
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    // PLAN_BENCH_KEEP=DIR keeps the generated problems there, to re-run or
    // hand to other solvers.
    let keep = std::env::var_os("PLAN_BENCH_KEEP").map(std::path::PathBuf::from);
    for (i, (label, doc, limit)) in cases.into_iter().enumerate() {
        if !filters.is_empty() && !filters.iter().any(|f| label.contains(f.as_str())) {
            continue;
        }
        let path = keep
            .as_deref()
            .unwrap_or(dir.path())
            .join(format!("case{i}.json"));
        std::fs::write(&path, doc.to_string()).unwrap();
        let file = path.to_str().unwrap();
        let mut args = vec![
            env!("CARGO_BIN_EXE_gpuplan"),
            "plan",
            "--problem",
            file,
            "--json",
        ];
        if let Some(secs) = limit {
            args.extend(["--time-limit-secs", secs]);
        }
        let mut runs = Vec::new();
        let mut last = (0.0, None, String::new());
        for _ in 0..3 {
            last = timed(&args);
            runs.push(last.0);
        }
        runs.sort_by(f64::total_cmp);
        let result: Value = serde_json::from_str(&last.2).unwrap();
        if result["schema_version"] == 4 {
            println!(
                "{label}: gpuplan {:.3} s (median of 3), peak RSS {} MiB, status {}, objective {:.6}, total {:.4}, finish {}",
                runs[1],
                last.1
                    .map_or("?".to_owned(), |k| format!("{:.0}", k as f64 / 1024.0)),
                result["status"],
                result["objective"].as_f64().unwrap_or(f64::NAN),
                result["total_usd"].as_f64().unwrap_or(f64::NAN),
                result["finish_hours"],
            );
            if scipy {
                let (secs, _, out) = timed(&[python.as_str(), job_reference, file]);
                let theirs: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
                println!(
                    "    reference scipy/HiGHS {secs:.3} s (solve {:.3} s), status {}, objective {:.6}, total {:.4}, finish {}; speed-up {:.1}x",
                    theirs["solve_s"].as_f64().unwrap_or(f64::NAN),
                    theirs["status"],
                    theirs["objective"].as_f64().unwrap_or(f64::NAN),
                    theirs["total_usd"].as_f64().unwrap_or(f64::NAN),
                    theirs["finish_hours"],
                    secs / runs[1],
                );
            }
            continue;
        }
        println!(
            "{label}: gpuplan {:.3} s (median of 3), peak RSS {} MiB, status {}, objective {:.4}, {} vars after reductions ({} removed)",
            runs[1],
            last.1
                .map_or("?".to_owned(), |k| format!("{:.0}", k as f64 / 1024.0)),
            result["status"],
            result["objective"].as_f64().unwrap_or(f64::NAN),
            result["model_stats"]["variables"],
            result["model_stats"]["reduced_variables"],
        );
        let ms = |k: &str| result["timings"][k].as_f64().unwrap_or(f64::NAN);
        println!(
            "    inside: build {:.0} ms, solve {:.0} ms ({}), baseline {:.0} ms, total {:.0} ms",
            ms("build_ms"),
            ms("solve_ms"),
            result["model_stats"]["method"].as_str().unwrap_or("-"),
            ms("baseline_ms"),
            ms("total_ms"),
        );
        if result["status"] != "optimal" {
            println!(
                "    best bound {:.4}, gap {:.3}%, stopped by {}",
                result["best_bound"].as_f64().unwrap_or(f64::NAN),
                100.0 * result["gap"].as_f64().unwrap_or(f64::NAN),
                result["stopped_by"],
            );
        }
        if scipy && limit.is_none() {
            let (secs, _, out) = timed(&[python.as_str(), reference, file]);
            let reference: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
            println!(
                "    reference scipy/HiGHS {secs:.3} s (solve {:.3} s), objective {:.4}; speed-up {:.1}x",
                reference["solve_s"].as_f64().unwrap_or(f64::NAN),
                reference["objective"].as_f64().unwrap_or(f64::NAN),
                secs / runs[1],
            );
            // Version 3: every frontier point's objective, both ways.
            for (ours, theirs) in result["frontier"]
                .as_array()
                .into_iter()
                .flatten()
                .zip(reference["frontier"].as_array().into_iter().flatten())
            {
                let (a, b) = (
                    ours["objective"].as_f64().unwrap_or(f64::NAN),
                    theirs["objective"].as_f64().unwrap_or(f64::NAN),
                );
                println!(
                    "    λ {}: gpuplan {a:.4}, reference {b:.4}, relative difference {:.1e}",
                    ours["lambda"],
                    (a - b).abs() / b.abs().max(1.0),
                );
            }
        }
    }
}
