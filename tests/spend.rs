//! What the bills answer, end to end: budgets and allocated spend, the
//! reservations a plan owns from the bills, the advice on what to reserve,
//! and the metrics with their Prometheus rules and dashboard.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gpuplan_providers::{PriceKind, PriceRecord, PriceScope, Snapshot};
use serde_json::Value;
use support::bills::{HEADER, fixture, usage_row, workspace};
use support::{Daemon, Workspace, keys, seed, set, until};

const BUDGETS: &str = "[alerts.channels.ops]\ntype = \"log\"\n\n[allocation]\nunallocated = \"proportional\"\n\n\
    [[budgets]]\nname = \"ml-monthly\"\namount = 1000.0\ncurrency = \"USD\"\nteams = [\"ml\"]\n\
    thresholds = [{ percent = 10, on = \"actual\" }, { percent = 1000, on = \"forecast\" }]\nchannels = [\"ops\"]\n";

/// The fixture's 1 October and one more hour on the 2nd, so the 1st is complete.
fn two_days(w: &Workspace) {
    w.write("bills/focus-2026-10.csv", &fixture());
    w.write(
        "bills/focus-2026-10-b.csv",
        &format!("{HEADER}\n{}\n", usage_row(25, "m5.xlarge", "web", 1.0)),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_evaluates_budgets_after_a_load_and_tells_their_channels_once() {
    let w = workspace(BUDGETS);
    two_days(&w);
    let d = Daemon::start(w.config()).await;
    let mut messages = Value::Null;
    for _ in 0..500 {
        let (_, alerts) = d.get("/v1/alerts").await;
        if alerts["messages"].as_array().is_some_and(|m| !m.is_empty()) {
            messages = alerts["messages"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let messages = messages.as_array().expect("a budget message");
    assert_eq!(messages.len(), 1, "{messages:?}");
    let m = &messages[0]["payload"];
    assert_eq!(m["rule"], "budget:ml-monthly");
    assert_eq!(m["key"], "actual:10:2026-10");
    assert_eq!(m["details"]["complete_to"], "2026-10-01");

    let (status, budgets) = d.get("/v1/budgets").await;
    assert_eq!(status, 200);
    let b = &budgets[0];
    assert_eq!(b["period"], "2026-10");
    assert_eq!(b["complete_to"], "2026-10-01");
    assert_eq!(b["allocated"], true);
    assert_eq!(b["thresholds"][0]["state"], "crossed");
    assert!(b["thresholds"][0]["fired_at"].is_string());
    assert_eq!(b["thresholds"][1]["state"], "ok");
    let (status, body) = d.get("/v1/budgets?name=x").await;
    assert_eq!((status, body["parameter"].as_str()), (400, Some("name")));

    d.stop().await;
}

#[test]
fn budgets_and_allocated_spend_from_the_cli() {
    let w = workspace(BUDGETS);
    two_days(&w);
    assert!(w.run(&["bills", "sync"]).status.success());
    let budgets = w.json(&["budgets", "--json"]);
    let b = &budgets[0];
    assert_eq!(
        keys(b),
        set(&[
            "name",
            "amount",
            "currency",
            "basis",
            "period",
            "period_start",
            "period_end",
            "complete_to",
            "actual",
            "forecast",
            "actual_percent",
            "forecast_percent",
            "daily_mean",
            "days_averaged",
            "days_left",
            "allocated",
            "other_currencies",
            "thresholds",
        ])
    );
    assert_eq!(
        (b["days_averaged"].as_i64(), b["days_left"].as_i64()),
        (Some(1), Some(30))
    );
    let spend = w.json(&[
        "spend",
        "--since",
        "2026-10-01",
        "--until",
        "2026-11-01",
        "--group",
        "team",
        "--json",
    ]);
    let rows = spend.as_array().unwrap();
    let direct: f64 = rows
        .iter()
        .map(|r| r["effective_cost"].as_f64().unwrap())
        .sum();
    let allocated: f64 = rows
        .iter()
        .map(|r| r["allocated_effective_cost"].as_f64().unwrap())
        .sum();
    assert!((direct - allocated).abs() < 1e-6, "the split adds nothing");
    let text = w.run(&["budgets"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("ml-monthly") && text.contains("10% actual: crossed"),
        "{text}"
    );
    let spend = w.run(&[
        "spend",
        "--since",
        "2026-10-01",
        "--until",
        "2026-11-01",
        "--group",
        "team",
    ]);
    let spend = String::from_utf8_lossy(&spend.stdout);
    assert!(
        spend.contains("ALLOC-EFFECTIVE") && spend.contains("unallocated:"),
        "{spend}"
    );
}

/// A FOCUS row of `hour` with commitment columns: (pricing, cost, commitment
/// id, type, category, status).
fn committed_row(
    hour: u32,
    pricing: &str,
    cost: f64,
    c: Option<(&str, &str, &str, &str)>,
) -> String {
    let start = chrono::DateTime::parse_from_rfc3339("2026-10-01T00:00:00Z").unwrap()
        + chrono::Duration::hours(i64::from(hour));
    let end = start + chrono::Duration::hours(1);
    let f = |t: chrono::DateTime<chrono::FixedOffset>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let (id, kind, category, status) = c.unwrap_or_default();
    let instance = if status == "Unused" {
        ""
    } else {
        "p5.48xlarge"
    };
    format!(
        "111111111111,2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,{},{},Usage,,{pricing},{cost},{cost},USD,1,Hrs,{id},{kind},{category},{status},{},{},us-east-1,222222222222,Compute,\"{{\"\"InstanceType\"\":\"\"{instance}\"\"}}\",\"{{\"\"team\"\":\"\"ml\"\"}}\"",
        f(start),
        f(end),
        if id.is_empty() { "" } else { "1" },
        if category == "Usage" {
            "Hours"
        } else if id.is_empty() {
            ""
        } else {
            "USD"
        },
    )
}

const COMMITTED_HEADER: &str = "BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,PricingCategory,BilledCost,EffectiveCost,BillingCurrency,ConsumedQuantity,ConsumedUnit,CommitmentDiscountId,CommitmentDiscountType,CommitmentDiscountCategory,CommitmentDiscountStatus,CommitmentDiscountQuantity,CommitmentDiscountUnit,RegionId,SubAccountId,ServiceCategory,SkuPriceDetails,Tags";

/// ml runs two p5s every hour for three days and two hours: one on demand,
/// one on a reservation; a savings plan goes unused at 5 an hour.
fn owned_workspace() -> Workspace {
    owned_workspace_with("")
}

/// [`owned_workspace`] with more config.
fn owned_workspace_with(extra: &str) -> Workspace {
    let w = workspace(extra);
    // AWS's catalog as its price source writes it: the bills name AWS offers.
    let now = chrono::Utc::now();
    let price = |kind: PriceKind, usd: f64| PriceRecord {
        region: "us-east-1".into(),
        zone: None,
        instance_type: "p5.48xlarge".into(),
        price_kind: kind,
        offering_class: None,
        usd_per_hour: usd,
        upfront_usd: 0.0,
        recurring_usd_per_hour: usd,
        source: None,
        available_regions: Vec::new(),
        max_instances: None,
        price_scope: PriceScope::Instance,
        window: None,
    };
    let snapshot = Snapshot {
        instance_types: vec![seed::p5()],
        prices: vec![
            price(PriceKind::OnDemand, 98.32),
            price("reserved_1y_no_upfront".parse().unwrap(), 60.0),
            price("reserved_3y_no_upfront".parse().unwrap(), 45.0),
        ],
        ..Snapshot::default()
    };
    seed::write(&w.path("catalog.db"), &snapshot, now);
    let mut rows = vec![COMMITTED_HEADER.to_owned()];
    let ri = (
        "arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-1",
        "Reserved Instance",
        "Usage",
        "Used",
    );
    let sp = (
        "arn:aws:savingsplans::111111111111:savingsplan/sp-1",
        "Savings Plan",
        "Spend",
        "Unused",
    );
    for hour in 0..74 {
        rows.push(committed_row(hour, "Standard", 98.32, None));
        rows.push(committed_row(hour, "Committed", 60.0, Some(ri)));
        rows.push(committed_row(hour, "Committed", 5.0, Some(sp)));
    }
    w.write("bills/oct.csv", &(rows.join("\n") + "\n"));
    let sync = w.run(&["bills", "sync"]);
    assert!(
        sync.status.success(),
        "{}",
        String::from_utf8_lossy(&sync.stderr)
    );
    w
}

#[test]
fn a_plan_owns_the_reservations_of_the_bills_and_lists_what_it_cannot_model() {
    let w = owned_workspace();
    let plan = w.json(&[
        "plan",
        "--usage-from-bills",
        "--team",
        "ml",
        "--owned-from-bills",
        "--horizon-hours",
        "24",
        "--json",
    ]);
    assert_eq!(plan["status"], "optimal", "{plan}");
    let found = &plan["owned_from_bills"];
    assert_eq!(found["modelled"].as_array().unwrap().len(), 1, "{found}");
    let ri = &found["modelled"][0];
    assert_eq!(ri["offer"], "aws/us-east-1/p5.48xlarge");
    assert_eq!(ri["count"], 1.0);
    assert!(ri["remaining"].as_str().unwrap().contains("whole horizon"));
    let sp = &found["not_modelled"][0];
    assert_eq!(
        (sp["type"].as_str(), sp["hourly_amount"].as_f64()),
        (Some("savings_plan"), Some(5.0))
    );
    assert!(sp["why"].as_str().unwrap().contains("spend-based"));
    // The owned p5 serves 8 of the 16 GPUs; the term the bills do not give
    // is taken as the offer's shortest.
    let owned = plan["owned"].as_array().unwrap();
    assert_eq!(owned.len(), 1, "{plan}");
    assert_eq!(
        (owned[0]["option"].as_str(), owned[0]["count"].as_f64()),
        (Some("reserved_1y_no_upfront"), Some(1.0))
    );
    let bought: f64 = plan["reserved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["count"].as_f64().unwrap())
        .sum();
    assert!((bought - 1.0).abs() < 1e-9, "{plan}");

    let text = w.run(&[
        "plan",
        "--usage-from-bills",
        "--team",
        "ml",
        "--owned-from-bills",
        "--horizon-hours",
        "24",
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Owned from the bills: 1 x aws/us-east-1/p5.48xlarge"),
        "{text}"
    );
    assert!(!text.contains("Owned, not in this plan"), "{text}");
    assert!(text.contains("Held, not modelled: arn:aws:savingsplans::111111111111:savingsplan/sp-1 (savings_plan, aws): 5.00 USD/hour"), "{text}");
}

#[test]
fn advise_reserves_the_steady_on_demand_load_and_says_what_it_saves() {
    let w = owned_workspace();
    let advice = w.json(&["advise", "--json"]);
    let a = &advice[0];
    assert_eq!(
        (a["team"].as_str(), a["gpu_model"].as_str()),
        (Some("ml"), Some("H100-80GB"))
    );
    // One p5 on demand every hour of the three complete days: 8 GPUs steady.
    assert_eq!(a["hours"], 72);
    assert_eq!(a["steady_gpus"], 8.0);
    assert!((a["billed_per_gpu_hour"].as_f64().unwrap() - 98.32 / 8.0).abs() < 1e-9);
    // 720 h of 8 GPUs: 70,790.40 as billed; the 3-year reservation at 45 an
    // hour costs 32,400: a saving of 38,390.40.
    assert!(
        (a["as_billed_cost"].as_f64().unwrap() - 98.32 * 720.0).abs() < 1e-6,
        "{a}"
    );
    assert_eq!(
        a["plan"]["reserved"][0]["option"], "reserved_3y_no_upfront",
        "{a}"
    );
    assert!(
        (a["saving"].as_f64().unwrap() - (98.32 - 45.0) * 720.0).abs() < 1e-6,
        "{a}"
    );
    let text = w.run(&["advise"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("1.0 x aws/us-east-1/p5.48xlarge reserved_3y_no_upfront"),
        "{text}"
    );
    let bad = w.run(&["advise", "--days", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `promtool`, or `None` to skip its checks, which CI does not allow.
fn promtool() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("promtool"))
            .find(|p| p.is_file())
    });
    if found.is_none() && std::env::var_os("GPUPLAN_PROMTOOL_REQUIRED").is_some() {
        panic!("GPUPLAN_PROMTOOL_REQUIRED is set but promtool is not on PATH");
    }
    found
}

/// Metric names an expression text uses, histogram series folded into
/// their family.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("gpuplan_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        out.insert(family.to_owned());
        rest = &tail[end..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_pass_promtool_and_every_rule_and_dashboard_query_names_an_exported_metric() {
    let w = owned_workspace_with(BUDGETS);
    let d = Daemon::start(w.config()).await;
    until("the budget in the metrics", || async {
        d.text("/metrics").await.contains("gpuplan_budget_actual{")
    })
    .await;
    let text = d.text("/metrics").await;
    // 98.32 and 45 an hour for 8 GPUs; a savings plan never used, a
    // reservation always; the budget of ml's October.
    for line in [
        "gpuplan_cheapest_usd_per_gpu_hour{gpu_model=\"H100-80GB\",kind=\"on_demand\"} 12.29",
        "gpuplan_cheapest_usd_per_gpu_hour{gpu_model=\"H100-80GB\",kind=\"committed\"} 5.625",
        "gpuplan_budget_amount{budget=\"ml-monthly\",currency=\"USD\"} 1000",
        "gpuplan_commitment_lowest_utilization_ratio{source=\"aws\",type=\"savings_plan\"} 0",
        "gpuplan_commitment_lowest_utilization_ratio{source=\"aws\",type=\"reservation\"} 1",
        "gpuplan_commitments{source=\"aws\",type=\"reservation\"} 1",
    ] {
        assert!(text.contains(line), "missing {line} in:\n{text}");
    }
    assert!(text.contains("gpuplan_budget_forecast{budget=\"ml-monthly\",currency=\"USD\"}"));
    d.stop().await;

    let exported: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules_path = root.join("config/prometheus/gpuplan.rules.yml");
    let rules = std::fs::read_to_string(&rules_path).unwrap();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("config/grafana/gpuplan.json")).unwrap(),
    )
    .unwrap();
    let mut queries = String::new();
    let mut panels = 0;
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            queries.push_str(t["expr"].as_str().unwrap());
            queries.push('\n');
            panels += 1;
        }
    }
    for v in dashboard["templating"]["list"].as_array().unwrap() {
        queries.push_str(v["definition"].as_str().unwrap());
    }
    assert!(panels >= 10, "{panels} queries");
    assert_eq!(dashboard["__inputs"][0]["pluginId"], "prometheus");
    for (what, used) in [
        ("rules", metric_names(&rules)),
        ("dashboard", metric_names(&queries)),
    ] {
        assert!(!used.is_empty());
        let missing: Vec<&String> = used.difference(&exported).collect();
        assert!(
            missing.is_empty(),
            "the {what} name metrics gpuplan does not export: {missing:?}"
        );
    }

    let Some(promtool) = promtool() else {
        eprintln!("promtool is not on PATH: its checks are skipped");
        return;
    };
    let rules_check = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&rules_path)
        .output()
        .unwrap();
    assert!(
        rules_check.status.success(),
        "{}",
        String::from_utf8_lossy(&rules_check.stdout)
    );
    let mut check = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
