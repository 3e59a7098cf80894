//! End-to-end `gpuplan plan --problem` on generated problems: parse, build,
//! solve, write the result. Prints wall time (median of 3 runs), peak RSS and
//! the optimum; with scipy installed, also the reference model's time and
//! optimum on the same file (benches/reference/planning_reference.py).
//!
//!     cargo bench --bench plan

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

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let scipy = Command::new("python3")
        .args(["-c", "import scipy"])
        .status()
        .is_ok_and(|s| s.success());
    let reference = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/reference/planning_reference.py"
    );
    for (offers, hours, seed) in [(50, 168, 1), (200, 720, 2)] {
        let path = dir.path().join(format!("p{offers}x{hours}.json"));
        std::fs::write(&path, problem(offers, hours, seed).to_string()).unwrap();
        let file = path.to_str().unwrap();
        let mut runs = Vec::new();
        let mut last = (0.0, None, String::new());
        for _ in 0..3 {
            last = timed(&[
                env!("CARGO_BIN_EXE_gpuplan"),
                "plan",
                "--problem",
                file,
                "--json",
            ]);
            runs.push(last.0);
        }
        runs.sort_by(f64::total_cmp);
        let result: Value = serde_json::from_str(&last.2).unwrap();
        println!(
            "{offers:>3} offers x {hours:>3} h: gpuplan {:.3} s (median of 3), peak RSS {} MiB, status {}, objective {:.4}, {} vars after reductions ({} removed)",
            runs[1],
            last.1
                .map_or("?".to_owned(), |k| format!("{:.0}", k as f64 / 1024.0)),
            result["status"],
            result["objective"].as_f64().unwrap_or(f64::NAN),
            result["model_stats"]["variables"],
            result["model_stats"]["reduced_variables"],
        );
        if scipy {
            let (secs, _, out) = timed(&["python3", reference, file]);
            let reference: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
            println!(
                "{:>18} reference scipy/HiGHS {secs:.3} s (solve {:.3} s), objective {:.4}",
                "",
                reference["solve_s"].as_f64().unwrap_or(f64::NAN),
                reference["objective"].as_f64().unwrap_or(f64::NAN),
            );
        }
    }
}
