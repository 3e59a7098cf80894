//! Jobs (planning-model version 4): problem files through `gpuplan plan
//! --problem` and `POST /v1/plans`.

mod support;

use serde_json::{Value, json};
use support::{Daemon, JSON, NO_CLOUDS, Workspace, raw};

const BAG: &str = include_str!("../config/examples/job-bag.json");
const GANG: &str = include_str!("../config/examples/job-gang.json");

fn close(v: &Value, want: f64) -> bool {
    v.as_f64()
        .is_some_and(|x| (x - want).abs() <= 1e-6 * want.abs().max(1.0))
}

fn workspace() -> Workspace {
    let ws = Workspace::new(&format!("[store]\npath = \"c.db\"\n{NO_CLOUDS}"));
    ws.write("bag.json", BAG);
    ws.write("gang.json", GANG);
    ws
}

#[test]
fn job_files_plan_from_the_cli_with_json_and_a_summary() {
    let ws = workspace();
    let out = ws.run(&["plan", "--problem", "bag.json", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bag = support::json_of(&out);
    // The window's 768 reference GPU-hours for $6,000, then 33 spot
    // instance-hours of 6.8 each and one on-demand hour of 8 for the other
    // 232 ($2,060; 35 spot hours would cost $2,100). No plan finishes
    // before the window's last hour at that cost.
    assert!(close(&bag["objective"], 8060.0), "{bag:#}");
    assert_eq!(bag["finish_hours"], 24.0);
    assert_eq!(bag["finish_at"], "2025-07-02T00:00:00Z");
    assert_eq!(bag["windows_bought"][0]["instance_hours_used"], 96);
    let spot = bag["schedule"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["offer"] == "p5-spot")
        .unwrap();
    assert_eq!(spot["instance_hours"], 33);
    assert!(bag.get("gang").is_none());

    let text = ws.run(&["plan", "--problem", "bag.json"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("optimal: $8060.00, finished at hour 24 (2025-07-02 00:00 UTC)"),
        "{text}"
    );
    assert!(text.contains("$8.06 per reference GPU-hour"), "{text}");
    assert!(
        text.contains("window cb bought: 4 instances for 24 h from hour 0"),
        "{text}"
    );

    let gang = ws.json(&["plan", "--problem", "gang.json", "--json"]);
    assert_eq!(
        (
            gang["gang"]["offer"].as_str(),
            gang["gang"]["nodes"].as_u64()
        ),
        (Some("p5-spot"), Some(2))
    );
    assert!(close(&gang["objective"], 7_529.411_764_705_882), "{gang:#}");
    assert_eq!(
        gang["excluded_offers"],
        json!([{"offer": "l40s", "reason": "gpu_memory"}])
    );
    let ranked: Vec<_> = gang["ranking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offer"].as_str().unwrap())
        .collect();
    assert_eq!(ranked, ["p5-spot", "cb", "p5", "a100", "p5-east"]);
    assert!(gang.get("schedule").is_none());
    let text = ws.run(&["plan", "--problem", "gang.json"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("2 nodes of p5-spot (16 GPUs, spot)"),
        "{text}"
    );
    assert!(text.contains("no option: availability"), "{text}");
    assert!(text.contains("excluded: l40s (gpu_memory)"), "{text}");
}

#[test]
fn an_infeasible_job_exits_0_and_names_what_binds() {
    let ws = workspace();
    let mut doc: Value = serde_json::from_str(GANG).unwrap();
    doc["job"]["budget_usd"] = json!(7000);
    ws.write("tight.json", &doc.to_string());
    let out = ws.run(&["plan", "--problem", "tight.json", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let r = support::json_of(&out);
    assert_eq!(
        (r["status"].as_str(), r["objective"].clone()),
        (Some("infeasible"), Value::Null)
    );
    assert_eq!(r["infeasibility"]["kind"], "budget");
    assert!(close(
        &r["infeasibility"]["min_cost"],
        7_529.411_764_705_882
    ));
    let text = ws.run(&["plan", "--problem", "tight.json"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains(
        "the cheapest way to finish by the deadline costs $7529.41, over the budget of $7000.00"
    ));
    let mut doc: Value = serde_json::from_str(BAG).unwrap();
    doc["hours"] = json!(2);
    doc["offers"].as_array_mut().unwrap().remove(0);
    ws.write("short.json", &doc.to_string());
    let text = ws.run(&["plan", "--problem", "short.json"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "the most that can be done by the deadline is 91.200 of 1000 reference GPU-hours"
        ),
        "{text}"
    );
}

#[test]
fn bad_job_files_exit_2_naming_the_field() {
    let ws = workspace();
    let refused = |edit: &dyn Fn(&mut Value), args: &[&str]| {
        let mut doc: Value = serde_json::from_str(BAG).unwrap();
        edit(&mut doc);
        ws.write("bad.json", &doc.to_string());
        let out = ws.run(&[&["plan", "--problem", "bad.json"], args].concat());
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["status"], "error");
        r["error"].as_str().unwrap().to_owned()
    };
    let e = refused(
        &|d| d["offers"][1]["interruption_per_hour"] = json!(0.1),
        &[],
    );
    assert!(
        e.contains("bad.json") && e.contains("offers[1].interruption_per_hour"),
        "{e}"
    );
    let e = refused(&|d| d["job"]["nodes_max"] = json!(4), &[]);
    assert!(
        e.contains("job.nodes_max") && e.contains("only for shape gang"),
        "{e}"
    );
    let e = refused(&|d| d["kind"] = json!("plan"), &[]);
    assert!(e.contains("kind"), "{e}");
    let e = refused(&|_| {}, &["--save"]);
    assert!(e.starts_with("--save:"), "{e}");
    // A demand problem with a job in it is refused, not planned as demand.
    let e = refused(
        &|d| {
            *d = json!({"demand": [1], "offers": [], "job": {"work": 1}});
        },
        &[],
    );
    assert!(
        e.contains("job") && e.contains("schema_version\": 4"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_are_planned_over_the_api() {
    let ws = workspace();
    let d = Daemon::start(ws.config()).await;
    let post = |path: &'static str, body: String| {
        let d = &d;
        async move { raw(d, "POST", path, &[JSON], body).await }
    };
    let (status, _, r) = post("/v1/plans", GANG.to_owned()).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["gang"]["nodes"], 2);
    assert!(close(&r["total_usd"], 7_529.411_764_705_882));
    let (status, _, r) = post("/v1/plans", BAG.to_owned()).await;
    assert_eq!(status, 200, "{r}");
    assert!(close(&r["objective"], 8060.0));

    let mut bad: Value = serde_json::from_str(BAG).unwrap();
    bad["job"]["checkpoint_hours"] = json!(0);
    let (status, _, r) = post("/v1/plans", bad.to_string()).await;
    assert_eq!(
        (status, r["parameter"].as_str()),
        (400, Some("job.checkpoint_hours")),
        "{r}"
    );
    let (status, _, r) = post("/v1/plans?save=true", BAG.to_owned()).await;
    assert_eq!(
        (status, r["parameter"].as_str()),
        (400, Some("save")),
        "{r}"
    );
    d.stop().await;
}

/// AWS as its source stores it: p5 on demand in Frankfurt, Stockholm and
/// Virginia, spot in Frankfurt (at most four, advisor band 1), and a day's
/// Capacity Block in Frankfurt two days on.
fn aws_market(ws: &Workspace) {
    use gpuplan_providers::{
        AvailabilityRecord, AvailabilitySignal, PriceKind, PriceRecord, Snapshot,
    };
    let price = |region: &str, zone: Option<&str>, kind: PriceKind, usd: f64, max: Option<u32>| {
        PriceRecord {
            region: region.into(),
            zone: zone.map(Into::into),
            instance_type: "p5.48xlarge".into(),
            price_kind: kind,
            usd_per_hour: usd,
            recurring_usd_per_hour: usd,
            upfront_usd: 0.0,
            max_instances: max,
            window: None,
            source: None,
            ..support::seed::p5_block(24, 3.5)
        }
    };
    let block = PriceRecord {
        region: "eu-central-1".into(),
        zone: Some("eu-central-1a".into()),
        ..support::seed::p5_block(24, 3.5)
    };
    let snapshot = Snapshot {
        instance_types: vec![support::seed::p5()],
        prices: vec![
            price("eu-central-1", None, PriceKind::OnDemand, 63.3, None),
            price("eu-north-1", None, PriceKind::OnDemand, 60.0, Some(2)),
            price("us-east-1", None, PriceKind::OnDemand, 55.04, None),
            price(
                "eu-central-1",
                Some("eu-central-1a"),
                PriceKind::Spot,
                30.0,
                Some(4),
            ),
            block,
        ],
        availability: vec![AvailabilityRecord {
            region: "eu-central-1".into(),
            zone: None,
            instance_type: "p5.48xlarge".into(),
            signal: AvailabilitySignal::InterruptionBucket(1),
        }],
        ..Snapshot::default()
    };
    support::seed::write(&ws.path("c.db"), &snapshot, chrono::Utc::now());
}

#[test]
fn a_job_is_answered_from_the_catalog() {
    let ws = workspace();
    aws_market(&ws);
    let ask = [
        "job",
        "--work",
        "2000",
        "--deadline",
        "5d",
        "--budget",
        "50000",
        "--countries",
        "DE,SE",
        "--write-problem",
        "built.json",
        "--json",
    ];
    let a = ws.json(&ask);
    assert_eq!(a["status"], "optimal", "{a:#}");
    // Virginia is not in the countries asked for.
    let offers: Vec<&str> = a["offers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["offer"].as_str().unwrap())
        .collect();
    assert!(
        offers.iter().all(|o| !o.contains("us-east-1")),
        "{offers:?}"
    );
    assert!(
        offers.contains(&"aws/eu-central-1/p5.48xlarge/spot"),
        "{offers:?}"
    );
    // The block's 192 work at $3.50 a reference GPU-hour is the cheapest,
    // then spot at $3.75 (the band's interruptions cost next to nothing).
    let bought = a["windows_bought"].as_array().unwrap();
    assert_eq!(bought.len(), 1, "{a:#}");
    let spot = a["schedule"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "spot")
        .unwrap();
    assert!(spot["instance_hours"].as_u64().unwrap() >= 226, "{spot}");
    assert!(a["total_usd"].as_f64().unwrap() < 8000.0, "{a:#}");
    let basis = &a["catalog"]["offer_basis"]["aws/eu-central-1/p5.48xlarge/spot"];
    assert!(
        basis.as_str().unwrap().contains("advisor's band 1"),
        "{basis}"
    );
    assert_eq!(a["catalog"]["perf_basis"]["workload"], "spec:bf16");
    let frontier = a["frontier"].as_array().unwrap();
    assert!(!frontier.is_empty());
    assert!(
        frontier
            .windows(2)
            .all(|w| w[0]["total_usd"].as_f64() > w[1]["total_usd"].as_f64())
    );
    // The problem written is a version 4 file that plans the same.
    let again = ws.json(&["plan", "--problem", "built.json", "--json"]);
    assert!(
        close(&again["total_usd"], a["total_usd"].as_f64().unwrap()),
        "{again:#}"
    );

    let text = ws.run(&ask[..ask.len() - 3]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Cost against finish time:")
            && text.contains("Work is rated by spec:bf16 against H100-80GB/sxm"),
        "{text}"
    );

    // A gang of 16 GPUs on one offer: the Frankfurt spot pair, 132 hours
    // at 0.95 for the doubling.
    let g = ws.json(&[
        "job",
        "--work",
        "2000",
        "--deadline",
        "7d",
        "--shape",
        "gang",
        "--gpus",
        "16",
        "--scaling",
        "0.95",
        "--countries",
        "DE,SE",
        "--kinds",
        "on_demand,spot",
        "--json",
    ]);
    assert_eq!(
        (g["gang"]["nodes"].as_u64(), g["gang"]["kind"].as_str()),
        (Some(2), Some("spot")),
        "{g:#}"
    );
    assert_eq!(g["ranking"].as_array().unwrap().len(), 3, "{g:#}");

    // Asking too much names what binds; asking wrongly names the flag.
    let tight = ws.json(&[
        "job",
        "--work",
        "2000",
        "--deadline",
        "5d",
        "--budget",
        "5000",
        "--countries",
        "DE",
        "--json",
    ]);
    assert_eq!(tight["infeasibility"]["kind"], "budget");
    for (flag, value, named) in [
        ("--deadline", "20m", "--deadline"),
        ("--perf", "mlperf-nothing", "--perf"),
        ("--reference", "Z99", "--reference"),
    ] {
        let mut args = vec!["job", "--work", "10", "--deadline", "2d"];
        args.extend([flag, value]);
        let out = ws.run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(named), "{flag}: {err}");
    }
}

#[test]
fn the_readme_job_walk_through_holds() {
    let sheet = include_str!("../config/examples/eu-gpu-sheet.csv");
    let readme = include_str!("../README.md");
    let ws = Workspace::new(&format!(
        "[store]\npath = \"c.db\"\n{NO_CLOUDS}[providers.file.quotes]\npath = \"eu-gpu-sheet.csv\"\n"
    ));
    ws.write("eu-gpu-sheet.csv", sheet);
    assert!(ws.run(&["sync"]).status.success());
    let ask_within = |budget: &'static str| {
        [
            "job",
            "--work",
            "2000",
            "--deadline",
            "96h",
            "--budget",
            budget,
            "--countries",
            "DE,FR,NL,SE",
        ]
    };
    let ask = ask_within("50000");
    assert!(readme.contains(&format!("$ gpuplan {}", ask.join(" "))));
    let out = ws.run(&ask);
    let text = String::from_utf8_lossy(&out.stdout);
    // The lines the README quotes, apart from the time.
    for line in text.lines().filter(|l| {
        (l.starts_with("file:quotes/eu-") && !l.contains(": ")) || l.starts_with("optimal:")
    }) {
        let quoted = line.split(" (").next().unwrap();
        assert!(
            readme.contains(quoted),
            "the README lacks: {quoted}\n{text}"
        );
    }
    assert!(
        text.contains("$4389.96") && !text.contains("us-east-1"),
        "{text}"
    );
    let first = text
        .lines()
        .find(|l| l.trim_start().starts_with("21 "))
        .unwrap();
    assert!(readme.contains(first), "{first}");
    let tight = ws.run(&ask_within("4000"));
    assert!(
        String::from_utf8_lossy(&tight.stdout)
            .contains("the cheapest way to finish by the deadline costs $4389.96")
    );
}
