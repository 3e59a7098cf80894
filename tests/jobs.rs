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
