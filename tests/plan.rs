//! `gpuplan plan`: problem files and catalog-built problems, end to end.

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::NO_CLOUDS;

fn gpuplan(dir: &Path, args: &[&str]) -> Output {
    support::gpuplan()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// `lines(h)` for each of `hours` hours under `header`, as CSV.
fn hourly_csv(header: &str, hours: usize, lines: impl Fn(usize) -> String) -> String {
    std::iter::once(header.to_owned())
        .chain((0..hours).map(lines))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A directory whose catalog holds `sheet` (the clouds off), synced, with
/// `demand` in demand.csv and `extra` added to its gpuplan.toml.
fn synced_sheet(extra: &str, sheet: &str, demand: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gpuplan.toml"),
        format!(
            "[store]\npath = \"c.db\"\n{NO_CLOUDS}[providers.file.sheet]\npath = \"sheet.csv\"\n{extra}"
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("sheet.csv"), sheet).unwrap();
    std::fs::write(dir.path().join("demand.csv"), demand).unwrap();
    let out = gpuplan(dir.path(), &["--config", "gpuplan.toml", "sync"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    dir
}

#[test]
fn the_example_problem_solves_to_its_known_optimum() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/examples/plan-problem.json"
    );
    let out = gpuplan(dir.path(), &["plan", "--problem", example, "--json"]);
    assert!(out.status.success());
    let r = stdout_json(&out);
    assert_eq!(r["status"], "optimal");
    // Cross-checked with benches/reference/planning_reference.py (scipy/HiGHS).
    assert!((r["objective"].as_f64().unwrap() - 950.495_768_645_357_7).abs() < 1e-6);
    assert_eq!(r["reserved"][0]["option"], "3y-partial");

    // The version 2 example is the model's hand example E1 with two of its
    // five reserved H100s already owned: the same 39 in total, 12 of it sunk.
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/examples/plan-problem-v2.json"
    );
    let out = gpuplan(dir.path(), &["plan", "--problem", example, "--json"]);
    assert!(out.status.success());
    let r = stdout_json(&out);
    assert_eq!(
        (r["schema_version"].as_u64(), r["status"].as_str()),
        (Some(2), Some("optimal"))
    );
    assert!(
        (r["objective"].as_f64().unwrap() - 27.0).abs() < 1e-9,
        "{r}"
    );
    assert!((r["sunk_cost"].as_f64().unwrap() - 12.0).abs() < 1e-9);
    assert_eq!(r["reserved"][0]["count"], 3.0);
}

#[test]
fn invalid_problems_exit_2_with_the_field_named() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("{not json", "not JSON"),
        (
            r#"{"demand": [1], "offers": [], "policy": {"max_spot_shar": 1}}"#,
            "policy.max_spot_shar",
        ),
        (r#"{"demand": [1, -1], "offers": []}"#, "demand[1]"),
    ];
    for (text, named) in cases {
        std::fs::write(dir.path().join("p.json"), text).unwrap();
        let out = gpuplan(dir.path(), &["plan", "--problem", "p.json"]);
        assert_eq!(out.status.code(), Some(2), "{text}");
        let r = stdout_json(&out);
        assert_eq!(r["status"], "error");
        assert!(r["error"].as_str().unwrap().contains(named), "{r}");
    }
    let out = gpuplan(dir.path(), &["plan", "--problem", "missing.json"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_demand_file_is_planned_against_the_catalog() {
    let dir = synced_sheet(
        "",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,max_instances\n\
         us-east-1,p5.48xlarge,H100,8,on_demand,98.32,\n\
         us-east-1,p5.48xlarge,H100,8,spot,45,1\n\
         us-east-1,p5.48xlarge,H100,8,reserved_1y_no_upfront,62,\n\
         onprem,dgx,H100,8,on_demand,20,2\n\
         onprem,l4box,L4,4,on_demand,1,\n",
        &hourly_csv("hour,gpus", 48, |h| {
            format!("{h},{}", if h % 24 < 12 { 40 } else { 8 })
        }),
    );

    let out = gpuplan(
        dir.path(),
        &[
            "--config",
            "gpuplan.toml",
            "plan",
            "--demand",
            "demand.csv",
            "--gpu",
            "H100",
            "--json",
            "--write-problem",
            "built.json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = stdout_json(&out);
    assert_eq!(r["status"], "optimal");
    assert_eq!(r["catalog"]["offers"], 2);
    assert_eq!(r["catalog"]["stale_sources"], serde_json::json!([]));
    // The on-prem pool (2 x 8 GPUs at 20/h) is used first, up to its cap.
    let dgx = &r["hourly"]["on_demand_instances"]["file:sheet/onprem/dgx"];
    assert!(
        dgx.as_array()
            .unwrap()
            .iter()
            .all(|v| v.as_f64().unwrap() <= 2.0 + 1e-9)
    );
    assert!(
        dgx.as_array()
            .unwrap()
            .iter()
            .any(|v| v.as_f64().unwrap() > 1.0)
    );
    // The spot cap of 1 instance from the sheet holds (the plan uses that pool).
    let spot = r["hourly"]["spot_instances"]["file:sheet/us-east-1/p5.48xlarge"]
        .as_array()
        .unwrap_or_else(|| panic!("no spot series for the p5 pool: {r}"));
    assert!(spot.iter().all(|v| v.as_f64().unwrap() <= 1.0 + 1e-9));
    // The written problem solves to the same optimum on its own.
    let again = stdout_json(&gpuplan(
        dir.path(),
        &["plan", "--problem", "built.json", "--json"],
    ));
    assert!((again["objective"].as_f64().unwrap() - r["objective"].as_f64().unwrap()).abs() < 1e-6);

    // Past usage instead of demand: two weeks of a daily cycle, forecast a day.
    let usage = hourly_csv("hour,gpus", 336, |h| {
        format!("{h},{}", if h % 24 < 12 { 24 } else { 8 })
    });
    std::fs::write(dir.path().join("usage.csv"), usage).unwrap();
    let out = gpuplan(
        dir.path(),
        &[
            "--config",
            "gpuplan.toml",
            "plan",
            "--usage",
            "usage.csv",
            "--horizon-hours",
            "24",
            "--gpu",
            "H100",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = stdout_json(&out);
    assert_eq!(
        (r["status"].as_str(), r["horizon_hours"].as_u64()),
        (Some("optimal"), Some(24))
    );
    assert_eq!(r["forecast"]["period"], 168);
    assert!(r["forecast"]["backtest"]["mae_gpus"].as_f64().unwrap() < 1e-6);
    let short = gpuplan(
        dir.path(),
        &[
            "--config",
            "gpuplan.toml",
            "plan",
            "--usage",
            "demand.csv",
            "--horizon-hours",
            "0",
        ],
    );
    assert_eq!(short.status.code(), Some(2));

    std::fs::write(dir.path().join("bad.csv"), "hour,gpus\n0,4\n1,lots\n").unwrap();
    let out = gpuplan(
        dir.path(),
        &["--config", "gpuplan.toml", "plan", "--demand", "bad.csv"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("bad.csv:3"));
}

#[test]
fn numbers_out_of_range_exit_2_naming_the_flag_instead_of_crashing() {
    let dir = tempfile::tempdir().unwrap();
    let usage: String = std::iter::once("hour,gpus".to_owned())
        .chain((0..48).map(|h| format!("{h},4")))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.path().join("usage.csv"), usage).unwrap();
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/examples/plan-problem.json"
    );
    // Each of these used to allocate without bound or panic in duration arithmetic.
    for (args, flag) in [
        (
            vec![
                "plan",
                "--usage",
                "usage.csv",
                "--horizon-hours",
                "99999999999",
            ],
            "--horizon-hours",
        ),
        (
            vec!["plan", "--problem", example, "--time-limit-secs", "1e30"],
            "--time-limit-secs",
        ),
        (
            vec![
                "plan",
                "--usage",
                "usage.csv",
                "--spot-window",
                "100000000000d",
            ],
            "--spot-window",
        ),
        (
            vec!["plan", "--usage", "usage.csv", "--restart-hours=-1"],
            "--restart-hours",
        ),
        (
            vec![
                "spot-history",
                "--instance",
                "p5.48xlarge",
                "--since",
                "100000000000d",
            ],
            "--since",
        ),
    ] {
        let out = gpuplan(dir.path(), &args);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains(flag) && said.contains("out of range"),
            "{args:?}: {said}"
        );
    }
}

#[test]
fn the_cli_takes_planner_defaults_and_its_flags_override_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gpuplan.toml"),
        format!(
            "[store]\npath = \"c.db\"\n{NO_CLOUDS}\
             [planner]\ntime_limit_secs = 60\nspot_window = \"3d\"\nrestart_hours = 2\ncheckpoint_hours = 4\n"
        ),
    )
    .unwrap();
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/examples/plan-problem.json"
    );
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "--config",
            "gpuplan.toml",
            "plan",
            "--problem",
            example,
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = gpuplan(dir.path(), &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        stdout_json(&out)["settings"].clone()
    };
    assert_eq!(
        plan(&[]),
        serde_json::json!({"time_limit_secs": 60.0, "spot_window_secs": 259200.0,
                           "restart_hours": 2.0, "checkpoint_hours": 4.0})
    );
    assert_eq!(
        plan(&[
            "--time-limit-secs",
            "30",
            "--spot-window",
            "1d",
            "--restart-hours",
            "0.25",
            "--checkpoint-hours",
            "0.5"
        ]),
        serde_json::json!({"time_limit_secs": 30.0, "spot_window_secs": 86400.0,
                           "restart_hours": 0.25, "checkpoint_hours": 0.5})
    );
    // A problem file solved without --save opens no catalog.
    assert!(!dir.path().join("c.db").exists());
}

#[test]
fn two_classes_and_owned_reservations_are_planned_against_the_catalog() {
    // Training needs one H100 machine's worth of work every hour; inference
    // 8 H100-equivalents half of the time, which L4s do at a fifth of the speed.
    let dir = synced_sheet(
        "[[planner.owned]]\noffer = \"file:sheet/us-east-1/p5.48xlarge\"\noption = \"reserved_1y_no_upfront\"\ncount = 1\n\
         [[planner.owned]]\nprovider = \"aws\"\nregion = \"us-west-2\"\ninstance_type = \"p4d.24xlarge\"\noption = \"reserved_1y\"\ncount = 2\n",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,max_instances\n\
         us-east-1,p5.48xlarge,H100,8,on_demand,98.32,\n\
         us-east-1,p5.48xlarge,H100,8,reserved_1y_no_upfront,62,\n\
         onprem,l4box,L4,4,on_demand,1,\n",
        &hourly_csv("hour,train,infer", 48, |h| {
            format!("{h},8,{}", if h % 2 == 0 { 8 } else { 0 })
        }),
    );
    std::fs::write(
        dir.path().join("classes.toml"),
        "[classes.train]\nperf = { \"H100-80GB\" = 1.0 }\n\n[classes.infer]\nperf = { \"H100-80GB\" = 1.0, \"L4\" = 0.2 }\n",
    )
    .unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "--config",
            "gpuplan.toml",
            "plan",
            "--demand",
            "demand.csv",
            "--classes",
            "classes.toml",
            "--json",
        ];
        args.extend_from_slice(extra);
        gpuplan(dir.path(), &args)
    };

    // [planner.owned]: the p5 is owned, the p4d is outside this catalog.
    let out = plan(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = stdout_json(&out);
    assert_eq!(r["schema_version"], 2);
    assert_eq!(r["status"], "optimal");
    assert_eq!(r["reserved"], serde_json::json!([]), "{r}");
    // Inference runs on 10 L4 boxes (8 units / 0.8 each) in 24 of 48 hours.
    assert!(
        (r["objective"].as_f64().unwrap() - 240.0).abs() < 1e-6,
        "{r}"
    );
    assert!((r["sunk_cost"].as_f64().unwrap() - 62.0 * 48.0).abs() < 1e-6);
    assert!((r["owned_utilization"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    let skipped = r["catalog"]["owned_skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    assert!(
        skipped[0]
            .as_str()
            .unwrap()
            .contains("aws/us-west-2/p4d.24xlarge")
    );
    let split = &r["hourly"]["classes"];
    assert_eq!(
        split["infer"]["on_demand_instances"]["file:sheet/onprem/l4box"][0],
        10.0
    );
    assert_eq!(
        split["train"]["reserved_instances"]["file:sheet/us-east-1/p5.48xlarge"][0],
        1.0
    );

    // --owned replaces the config's list: nothing owned, so buy the p5.
    std::fs::write(dir.path().join("none.csv"), "offer,option,count\n").unwrap();
    let r = stdout_json(&plan(&["--owned", "none.csv"]));
    assert_eq!(
        r["reserved"][0]["offer"],
        "file:sheet/us-east-1/p5.48xlarge"
    );
    assert_eq!(r["reserved"][0]["count"], 1.0);
    assert_eq!(r["sunk_cost"], 0.0);

    // A given entry that matches nothing is refused by name.
    std::fs::write(
        dir.path().join("owned.csv"),
        "provider,region,instance_type,option,count,remaining_hours\nfile:sheet,us-east-1,p5.48xlarge,reserved_3y,1,\n",
    )
    .unwrap();
    let out = plan(&["--owned", "owned.csv"]);
    assert_eq!(out.status.code(), Some(2));
    let error = stdout_json(&out)["error"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("owned[0]") && error.contains("reserved_1y_no_upfront"),
        "{error}"
    );

    // A class's perf may name a workload: here the datasheets' dense BF16
    // against an L4. The plan says which figures each factor rests on.
    std::fs::write(
        dir.path().join("classes.toml"),
        "[classes.train]\nperf = { \"H100-80GB\" = 1.0 }\n\n[classes.infer]\nperf = \"spec:bf16\"\nperf_reference = \"L4\"\n",
    )
    .unwrap();
    let out = plan(&["--owned", "none.csv"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = stdout_json(&out);
    let infer = r["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "infer")
        .unwrap();
    let basis = &infer["perf_basis"];
    assert_eq!(
        (basis["workload"].as_str(), basis["reference"].as_str()),
        (Some("spec:bf16"), Some("L4"))
    );
    assert_eq!(
        (
            basis["estimate"].as_bool(),
            basis["factors"]["L4"]["factor"].as_f64()
        ),
        (Some(true), Some(1.0))
    );
    assert!(
        r["classes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["id"] != "train" || c.get("perf_basis").is_none())
    );
    std::fs::write(
        dir.path().join("classes.toml"),
        "[classes.train]\n\n[classes.infer]\nperf = \"mlperf/none/offline\"\n",
    )
    .unwrap();
    let out = plan(&[]);
    assert_eq!(out.status.code(), Some(2));
    let error = stdout_json(&out)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("classes.toml") && error.contains("classes.infer.perf"),
        "{error}"
    );

    // A column the classes file does not describe names both files.
    std::fs::write(dir.path().join("classes.toml"), "[classes.train]\n").unwrap();
    let out = plan(&[]);
    assert_eq!(out.status.code(), Some(2));
    let error = stdout_json(&out)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("demand.csv:1: column `infer` is not a class of classes.toml"),
        "{error}"
    );
}

#[test]
fn a_plan_cut_short_by_the_time_limit_is_printed_with_its_gap_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let heavy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/heavy-integer-week.json"
    );
    let out = gpuplan(
        dir.path(),
        &[
            "plan",
            "--problem",
            heavy,
            "--json",
            "--time-limit-secs",
            "0.000001",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let r = stdout_json(&out);
    assert_eq!(r["status"], "time_limit", "{r}");
    let (objective, bound) = (
        r["objective"].as_f64().unwrap(),
        r["best_bound"].as_f64().unwrap(),
    );
    assert!(bound <= objective && r["gap"].as_f64().unwrap() >= 0.0);
    assert!(!r["reserved"].as_array().unwrap().is_empty());
    let out = gpuplan(
        dir.path(),
        &["plan", "--problem", heavy, "--time-limit-secs", "0.000001"],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NOT PROVEN OPTIMAL") && text.contains("best bound"),
        "{text}"
    );
}

#[test]
fn a_monthly_prepaid_price_becomes_a_reserved_option_with_its_term() {
    // The model's example E3: 1168 USD for a month of one L4 (1.6/h over
    // 730 h) against 2.5/h on demand.
    let dir = synced_sheet(
        "",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,upfront_usd\n\
         ap-southeast-1,gn7i-l4.1g,L4,1,on_demand,2.5,\n\
         ap-southeast-1,gn7i-l4.1g,L4,1,prepaid_1m,1.6,1168\n",
        &hourly_csv("hour,gpus", 720, |h| format!("{h},2")),
    );
    let prices = stdout_json(&gpuplan(
        dir.path(),
        &[
            "--config",
            "gpuplan.toml",
            "prices",
            "--kind",
            "prepaid_1m",
            "--json",
        ],
    ));
    assert_eq!(prices[0]["price_kind"], "prepaid_1m", "{prices}");
    assert_eq!(prices[0]["upfront_usd"], 1168.0);
    let r = stdout_json(&gpuplan(
        dir.path(),
        &[
            "--config",
            "gpuplan.toml",
            "plan",
            "--demand",
            "demand.csv",
            "--json",
        ],
    ));
    let bought = &r["reserved"][0];
    assert_eq!(
        (bought["option"].as_str(), bought["count"].as_f64()),
        (Some("prepaid_1m"), Some(2.0)),
        "{r}"
    );
    assert_eq!(bought["term_hours"], 730.0);
    assert!((bought["horizon_cost"].as_f64().unwrap() - 2304.0).abs() < 1e-6);
    assert!((bought["commitment_liability"].as_f64().unwrap() - 2336.0).abs() < 1e-6);
}

#[test]
fn usage_plans_against_demand_scenarios_with_calibrated_ranges_and_a_frontier() {
    let dir = synced_sheet(
        "",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,max_instances\n\
         us-east-1,h1,H100,1,on_demand,4,\n\
         us-east-1,h1,H100,1,spot,1.5,\n\
         us-east-1,h1,H100,1,reserved_1y_no_upfront,2.6,\n",
        "hour,gpus\n0,1\n",
    );
    // Four weeks and a day of a daily cycle with deterministic noise.
    let usage = hourly_csv("hour,gpus", 696, |h| {
        let noise = ((h * 7919) % 13) as f64 - 6.0;
        format!(
            "{h},{}",
            if h % 24 < 12 {
                30.0 + noise
            } else {
                12.0 + noise / 2.0
            }
        )
    });
    std::fs::write(dir.path().join("usage.csv"), usage).unwrap();
    let args = [
        "--config",
        "gpuplan.toml",
        "plan",
        "--usage",
        "usage.csv",
        "--horizon-hours",
        "24",
        "--gpu",
        "H100",
        "--scenarios",
        "30",
        "--risk-beta",
        "0.9",
        "--range-levels",
        "0.8,0.95",
        "--write-problem",
        "v3.json",
    ];
    let out = gpuplan(dir.path(), &[&args[..], &["--json"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = stdout_json(&out);
    assert_eq!(
        (r["schema_version"].clone(), r["status"].clone()),
        (3.into(), "optimal".into()),
        "{r}"
    );
    assert_eq!(r["scenarios"].as_array().unwrap().len(), 30);
    assert_eq!(r["frontier"].as_array().unwrap().len(), 5);
    let class = &r["ranges"]["classes"]["default"];
    assert_eq!(class["folds"], 4);
    assert_eq!(class["scores"], serde_json::json!([96]));
    assert_eq!(r["forecast"]["range_coverage"][0][0], 0.8);
    let coverage = r["forecast"]["range_coverage"][0][1].as_f64().unwrap();
    assert!((0.5..=1.0).contains(&coverage), "{coverage}");
    // The written problem is the v3 problem solved: the plan checks out on it.
    let problem = gpuplan::optimizer::Problem::from_json(
        &serde_json::from_str(&std::fs::read_to_string(dir.path().join("v3.json")).unwrap())
            .unwrap(),
    )
    .unwrap();
    gpuplan::optimizer::verify(&problem, &r, false).unwrap();
    // The same seed gives the same plan.
    let again = stdout_json(&gpuplan(dir.path(), &[&args[..], &["--json"]].concat()));
    assert_eq!(again["frontier"], r["frontier"]);

    let text = gpuplan(dir.path(), &args);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Risk frontier over 30 scenarios"), "{text}");
    assert!(text.contains("<- this plan"), "{text}");
    assert!(text.contains("Range at 80%: ±"), "{text}");
    assert!(text.contains("Expected cost over the horizon"), "{text}");

    // Scenarios need a history to be made from, and a history long enough;
    // a bad risk value is named by its field.
    let refused = |extra: &[&str], says: &str| {
        let out = gpuplan(
            dir.path(),
            &[&["--config", "gpuplan.toml", "plan"], extra].concat(),
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains(says), "{text}");
    };
    refused(
        &["--demand", "demand.csv", "--scenarios", "5"],
        "--scenarios",
    );
    refused(
        &[
            "--usage",
            "usage.csv",
            "--horizon-hours",
            "169",
            "--scenarios",
            "5",
        ],
        "history too short for 4 folds of 169 hours",
    );
    refused(
        &[
            "--usage",
            "usage.csv",
            "--horizon-hours",
            "24",
            "--risk-lambda",
            "3",
        ],
        "risk.lambda",
    );
}

#[test]
fn a_v3_problem_file_prints_its_frontier() {
    let dir = tempfile::tempdir().unwrap();
    let x1 = include_str!("fixtures/plan-v3-outage.json");
    std::fs::write(dir.path().join("x1.json"), x1).unwrap();
    let out = gpuplan(dir.path(), &["plan", "--problem", "x1.json"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Not flat"), "{text}");
    assert!(text.contains("2 x a (1y)"), "{text}");
    // The example file: two pools with their own outages and a shared shock;
    // its frontier was cross-checked with the scipy/HiGHS reference model.
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/examples/plan-problem-v3.json"
    );
    let r = stdout_json(&gpuplan(
        dir.path(),
        &["plan", "--problem", example, "--json"],
    ));
    let want = [
        4997.590089473683,
        5393.976873741419,
        5725.821912013729,
        6045.513437299772,
        6189.643759050054,
    ];
    for (p, w) in r["frontier"].as_array().unwrap().iter().zip(want) {
        let got = p["objective"].as_f64().unwrap();
        assert!(
            (got - w).abs() <= 1e-6 * w,
            "λ {}: {got} vs {w}",
            p["lambda"]
        );
    }
    assert_eq!(r["frontier_flat"], false);
    let problem = gpuplan::optimizer::Problem::from_json(
        &serde_json::from_str(&std::fs::read_to_string(example).unwrap()).unwrap(),
    )
    .unwrap();
    gpuplan::optimizer::verify(&problem, &r, false).unwrap();
    // A risk flag overrides the file's risk.
    let out = stdout_json(&gpuplan(
        dir.path(),
        &[
            "plan",
            "--problem",
            "x1.json",
            "--risk-lambda",
            "0.5",
            "--json",
        ],
    ));
    assert_eq!(out["risk"]["lambda"], 0.5);
    assert_eq!(out["risk"]["beta"], 0.9);
    assert_eq!(out["reserved"][0]["count"], 2.0);
}
