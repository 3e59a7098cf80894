//! The dashboard, rendered by the real daemon in-process over a seeded
//! catalog: every page and export, checked against the JSON API, for HTML
//! escaping of provider strings, for URLs that leave the machine, and for the
//! browser login beyond loopback.

mod support;

use chrono::Utc;
use gpuplan::config::Config;
use gpuplan_providers::{InstanceType, PriceKind, PriceRecord, Snapshot, SpotObservation};
use reqwest::header;
use serde_json::{Value, json};
use support::{Daemon, NO_CLOUDS, seed, until};

/// A price sheet whose instance names include markup that must stay text.
const SHEET: &str = "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,gpu_memory_gib,upfront_usd\n\
    onprem-fra,dgx-h100,H100,8,on_demand,18.4,80,0\n\
    onprem-fra,dgx-h100,H100,8,reserved_1y,14,80,61320\n\
    onprem-fra,<script>alert(1)</script>,X9000,4,on_demand,2.1,,0\n\
    onprem-fra,\"l4,box\",L4,1,on_demand,0.6,24,0\n";

const BILL_HEADER: &str = "BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,PricingCategory,BilledCost,EffectiveCost,BillingCurrency,ConsumedQuantity,ConsumedUnit,CommitmentDiscountId,CommitmentDiscountType,CommitmentDiscountCategory,CommitmentDiscountStatus,CommitmentDiscountQuantity,CommitmentDiscountUnit,RegionId,SubAccountId,ServiceCategory,SkuPriceDetails,Tags";

/// Ten days of October as an AWS FOCUS export writes them, a row per day and
/// resource: ml runs a p5 on demand, research one on a reservation that
/// goes half unused from the 6th, web an m5, and storage carries no tag.
fn bills_month() -> String {
    let ri = "arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-p5";
    let mut rows = vec![BILL_HEADER.to_owned()];
    for day in 1..=10 {
        let (start, end) = (
            format!("2026-10-{day:02}T00:00:00Z"),
            format!("2026-10-{:02}T00:00:00Z", day + 1),
        );
        let row = |pricing: &str,
                   cost: f64,
                   hours: f64,
                   c: &str,
                   instance: &str,
                   service: &str,
                   team: &str| {
            let tags = if team.is_empty() {
                "{}".to_owned()
            } else {
                format!("{{\"\"team\"\":\"\"{team}\"\"}}")
            };
            let sku = if instance.is_empty() {
                "{}".to_owned()
            } else {
                format!("{{\"\"InstanceType\"\":\"\"{instance}\"\"}}")
            };
            format!(
                "111111111111,2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,{start},{end},Usage,,{pricing},{cost},{cost},USD,{hours},Hrs,{c},us-east-1,222222222222,{service},\"{sku}\",\"{tags}\""
            )
        };
        rows.push(row(
            "Standard",
            2359.68,
            24.0,
            ",,,,,",
            "p5.48xlarge",
            "Compute",
            "ml",
        ));
        let used = if day <= 5 { 24.0 } else { 12.0 };
        rows.push(row(
            "Committed",
            60.0 * used,
            used,
            &format!("{ri},Reserved Instance,Usage,Used,{used},Hours"),
            "p5.48xlarge",
            "Compute",
            "research",
        ));
        if used < 24.0 {
            rows.push(row(
                "Committed",
                60.0 * (24.0 - used),
                24.0 - used,
                &format!("{ri},Reserved Instance,Usage,Unused,{},Hours", 24.0 - used),
                "",
                "Compute",
                "research",
            ));
        }
        rows.push(row(
            "Standard",
            9.22,
            24.0,
            ",,,,,",
            "m5.xlarge",
            "Compute",
            "web",
        ));
        rows.push(row("Standard", 40.0, 1.0, ",,,,,", "", "Storage", ""));
    }
    rows.join("\n") + "\n"
}

/// Seeds spot history of one AWS type in two zones, then starts the daemon
/// with the sheet as its only source (and `token` beyond loopback).
async fn start(token: Option<&str>) -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sheet.csv"), SHEET).unwrap();
    std::fs::create_dir_all(dir.path().join("bills")).unwrap();
    std::fs::write(dir.path().join("bills/focus-2026-10.csv"), bills_month()).unwrap();
    let text = format!(
        "[store]\npath = \"catalog.db\"\n\
        [bills.aws-payer]\nformat = \"focus\"\nprovider = \"aws\"\npath = \"bills\"\nteam_tags = [\"team\"]\n\
        [allocation]\nunallocated = \"proportional\"\n\
        [[budgets]]\nname = \"ml-monthly\"\namount = 60000.0\ncurrency = \"USD\"\nteams = [\"ml\"]\n\
        thresholds = [{{ percent = 80, on = \"forecast\" }}]\nchannels = [\"log\"]\n\
        [fx]\nCNY = 7.0\n\
        {NO_CLOUDS}\
        [providers.file.onprem]\npath = \"sheet.csv\"\n\
        [alerts.channels.log]\ntype = \"log\"\n\
        [[alerts.rules]]\nname = \"cheap-h100\"\nkind = \"price_below\"\ngpu_models = [\"H100\"]\nusd_per_gpu_hour = 3.0\nchannels = [\"log\"]\n"
    );
    std::fs::write(dir.path().join("gpuplan.toml"), &text).unwrap();
    let config = Config::parse(&text, dir.path()).unwrap();
    seed_spot(&dir.path().join("catalog.db"));
    let d = Daemon::start_with(config, None, token).await;
    // The sheet's first sync, and the bills' first load.
    until("the sheet's first sync", || async {
        let (_, v) = d.get("/v1/prices?provider=file").await;
        v.as_array().is_some_and(|a| a.len() == 4)
    })
    .await;
    until("the bills' first load", || async {
        let (_, v) = d.get("/v1/bills").await;
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    (d, dir)
}

fn seed_spot(path: &std::path::Path) {
    let now = Utc::now();
    let at = |hours_ago: i64| now - chrono::Duration::hours(hours_ago);
    let obs = |zone: &str, hours_ago, usd| SpotObservation {
        region: "us-east-1".into(),
        zone: zone.into(),
        instance_type: "p5.48xlarge".into(),
        usd_per_hour: usd,
        observed_at: at(hours_ago),
    };
    let slice = InstanceType {
        gpu_form_factor: None,
        instance_type: "g6f.large".into(),
        gpu_model: "L4".into(),
        gpu_count: 0.125,
        gpu_memory_gib: Some(3.0),
        vcpus: Some(2),
        memory_gib: Some(8.0),
        mig_profile: None,
    };
    // Two Capacity Blocks of one p5, for a week and for a day, at 3.5 and
    // 4 USD per GPU-hour; and an eighth of an L4.
    let snapshot = Snapshot {
        instance_types: vec![seed::p5(), slice],
        prices: vec![
            seed::p5_block(168, 3.5),
            seed::p5_block(24, 4.0),
            PriceRecord {
                instance_type: "g6f.large".into(),
                zone: None,
                price_kind: PriceKind::OnDemand,
                usd_per_hour: 0.12,
                upfront_usd: 0.0,
                recurring_usd_per_hour: 0.12,
                source: Some("g6f-od".into()),
                window: None,
                ..seed::p5_block(1, 1.0)
            },
        ],
        spot_observations: vec![
            obs("us-east-1a", 30, 40.0),
            obs("us-east-1a", 5, 38.5),
            obs("us-east-1b", 20, 41.0),
        ],
        ..Snapshot::default()
    };
    seed::write(path, &snapshot, now);
}

/// The dashboard's view of the daemon: requests as a browser sends them,
/// without the API token.
trait Browser {
    async fn fetch(&self, path: &str) -> reqwest::Response;
    async fn page(&self, path: &str) -> String;
    async fn json(&self, path: &str) -> Value;
    async fn plan(&self, name: &str, demand: &[f64]);
}

impl Browser for Daemon {
    async fn fetch(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    /// A page's HTML, after checking the answer is a page with our policy.
    async fn page(&self, path: &str) -> String {
        let r = self.fetch(path).await;
        assert_eq!(r.status(), 200, "{path}");
        let csp = r.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
        assert!(
            r.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let html = r.text().await.unwrap();
        check_no_outside_urls(path, &html);
        check_scripts(path, &html);
        html
    }

    async fn json(&self, path: &str) -> Value {
        self.fetch(path).await.json().await.unwrap()
    }

    async fn plan(&self, name: &str, demand: &[f64]) {
        let r = self
            .http
            .post(format!("{}/v1/plans?save=true", self.base))
            .header("content-type", "application/json")
            .body(json!({"name": name, "gpu": ["H100"], "demand": demand}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }
}

/// Every absolute URL in a page is the daemon's own (there should be none).
fn check_no_outside_urls(path: &str, html: &str) {
    for scheme in ["http://", "https://", "//"] {
        for (i, _) in html.match_indices(scheme) {
            let rest = &html[i + scheme.len()..];
            assert!(
                ["127.0.0.1", "localhost", "[::1]"]
                    .iter()
                    .any(|h| rest.starts_with(h)),
                "{path} links outside: {}",
                &html[i..(i + 60).min(html.len())]
            );
        }
    }
}

/// No inline script: every `<script` loads a file or is a JSON data island.
fn check_scripts(path: &str, html: &str) {
    for (i, _) in html.match_indices("<script") {
        let tag = &html[i..i + html[i..].find('>').unwrap()];
        assert!(
            tag.contains(" src=\"/ui/assets/") || tag.contains("type=\"application/json\""),
            "{path}: inline script {tag}"
        );
    }
}

/// The cells of each row of the table with `id`, as text.
fn rows(html: &str, id: &str) -> Vec<Vec<String>> {
    let start = html.find(&format!("id=\"{id}\"")).expect("the table");
    let body = &html[start..];
    let body = &body[body.find("<tbody>").unwrap()..body.find("</tbody>").unwrap()];
    body.split("<tr")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let inner = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
                    strip_tags(inner)
                })
                .collect()
        })
        .collect()
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in s.chars() {
        match c {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_page_renders_from_the_catalog_and_agrees_with_the_api() {
    let (d, _dir) = start(None).await;

    let overview = d.page("/").await;
    for link in [
        "/ui/prices",
        "/ui/spot",
        "/ui/plans/latest",
        "/ui/jobs",
        "/ui/spend",
        "/ui/usage",
        "/ui/commitments",
        "/ui/alerts",
    ] {
        assert!(
            overview.contains(&format!("href=\"{link}\"")),
            "no link to {link}"
        );
    }
    // The jobs page is a form for POST /v1/jobs, answered in the page.
    let jobs = d.page("/ui/jobs").await;
    assert!(
        jobs.contains("id=\"job-form\"")
            && jobs.contains("action=\"/v1/jobs\"")
            && jobs.contains("id=\"job-frontier-chart\""),
        "{jobs}"
    );
    assert!(overview.contains("H100") && overview.contains("file:onprem"));

    // The table shows exactly the API's rows.
    let api = d.json("/v1/prices").await;
    let api = api.as_array().unwrap();
    let html = d
        .page("/ui/prices?cols=provider,region,instance_type,price_kind,usd_per_gpu_hour&sort=usd_per_gpu_hour")
        .await;
    let shown = rows(&html, "prices");
    assert_eq!(shown.len(), api.len());
    let mut from_api: Vec<(String, String)> = api
        .iter()
        .map(|r| {
            (
                r["instance_type"].as_str().unwrap().to_owned(),
                r["price_kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut from_html: Vec<(String, String)> =
        shown.iter().map(|r| (r[2].clone(), r[3].clone())).collect();
    from_api.sort();
    from_html.sort();
    assert_eq!(from_html, from_api);

    // Provider strings are text, never markup.
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!html.contains("<script>alert(1)"));

    // The exports hold the rows shown, in the order shown.
    let view = "/ui/prices?provider=file&unit=gib&period=month&sort=price&dir=desc&cols=instance_type,price_kind,price";
    let csv = d
        .fetch(&format!("{view}&format=csv"))
        .await
        .text()
        .await
        .unwrap();
    let exported = d.json(&format!("{view}&format=json")).await;
    let json_rows = exported["rows"].as_array().unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let csv_rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(csv_rows.len(), json_rows.len());
    assert_eq!(csv_rows.len(), 4);
    for (c, j) in csv_rows.iter().zip(json_rows) {
        assert_eq!(c[0], *j["instance_type"].as_str().unwrap());
        match j["price"].as_f64() {
            Some(p) => assert!((c[2].parse::<f64>().unwrap() - p).abs() < 1e-9),
            None => assert_eq!(&c[2], "", "a missing price is empty, never 0"),
        }
    }
    // Per GiB of GPU memory per month: dgx-h100 on demand is 18.4 / 640 x 730.
    let dgx = json_rows
        .iter()
        .find(|r| r["instance_type"] == "dgx-h100" && r["price_kind"] == "on_demand")
        .unwrap();
    assert!((dgx["price"].as_f64().unwrap() - 18.4 / 640.0 * 730.0).abs() < 1e-9);
    let html = d.page(view).await;
    assert!(
        html.contains("title=\"GPU memory unknown\""),
        "a missing price says why"
    );

    // A page of the table, and its export: the same rows.
    let paged = "/ui/prices?sort=price&per_page=2&page=2&cols=instance_type,price_kind";
    let html = d.page(paged).await;
    let page_rows = rows(&html, "prices");
    assert_eq!(page_rows.len(), 2);
    assert!(
        html.contains("page 2 of 5")
            && html.contains("rel=\"prev\"")
            && html.contains("rel=\"next\"")
    );
    let exported = d.json(&format!("{paged}&format=json")).await;
    let exported: Vec<Vec<String>> = exported["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            vec![
                r["instance_type"].as_str().unwrap().to_owned(),
                r["price_kind"].as_str().unwrap().to_owned(),
            ]
        })
        .collect();
    assert_eq!(exported, page_rows);

    // Pages continue each other, ties and missing values included: each page
    // is sorted only as far as it needs.
    for order in [
        "sort=provider",
        "sort=zone&dir=desc",
        "sort=price&dir=desc&unit=gib",
    ] {
        let view = format!(
            "/ui/prices?{order}&cols=provider,region,zone,instance_type,price_kind&format=json"
        );
        let whole = d.json(&format!("{view}&per_page=5000")).await["rows"].clone();
        let mut paged = Vec::new();
        for page in 1.. {
            let rows = d.json(&format!("{view}&per_page=3&page={page}")).await["rows"].clone();
            let rows = rows.as_array().unwrap();
            if rows.is_empty() {
                break;
            }
            paged.extend(rows.iter().cloned());
        }
        assert_eq!(serde_json::Value::Array(paged), whole, "{order}");
    }

    // Windows are listed under the table, soonest first, as the API has them;
    // a slice says which share of which GPU it is.
    let html = d.page("/ui/prices?provider=aws").await;
    let windows = rows(&html, "windows");
    assert_eq!(windows.len(), 2, "{windows:?}");
    assert_eq!(
        windows
            .iter()
            .map(|w| (w[2].as_str(), w[9].as_str()))
            .collect::<Vec<_>>(),
        [("24.00", "4.0000"), ("168.00", "3.5000")]
    );
    assert_eq!(
        (windows[0][5].as_str(), windows[0][7].as_str()),
        ("us-east-1a", "8 x H100-80GB")
    );
    assert!(
        html.contains("title=\"a slice: 1/8 of one L4\""),
        "the slice is not marked"
    );
    // Per unit of work by dense BF16 against an H100 SXM, and carbon: the p5
    // (eight H100 SXM in us-east-1) is the reference, at its own price.
    let view = "/ui/prices?provider=aws&kind=spot&per_work=spec:bf16&cols=instance_type,zone,work_factor,usd_per_reference_gpu_hour,kgco2e_per_hour";
    let html = d.page(view).await;
    assert!(
        html.contains(
            "Per work: spec:bf16 against H100-80GB/sxm, estimated from datasheet figures"
        )
    );
    let shown = rows(&html, "prices");
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert_eq!(shown[0][2], "1.000");
    let exported = d.json(&format!("{view}&format=json")).await;
    let first = &exported["rows"][0];
    let api = d
        .json("/v1/prices?provider=aws&kind=spot&per_work=spec:bf16")
        .await;
    let api_row = api
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["zone"] == first["zone"])
        .unwrap();
    assert_eq!(
        first["usd_per_reference_gpu_hour"],
        api_row["per_work"]["usd_per_reference_gpu_hour"]
    );
    assert_eq!(first["kgco2e_per_hour"], api_row["kgco2e_per_hour"]);
    assert!(first["kgco2e_per_hour"].as_f64().unwrap() > 0.0);
    assert_eq!(
        d.fetch("/ui/prices?per_work=mlperf/none/offline")
            .await
            .status(),
        400
    );
    assert_eq!(d.fetch("/v1/prices?reference=B300").await.status(), 400);
    let german = d.page("/ui/prices?country=DE&cols=instance_type").await;
    assert!(
        rows(&german, "prices").is_empty(),
        "no offer of this catalog is in Germany"
    );
    assert!(german.contains("name=\"country\" value=\"DE\""));

    let api = d.json("/v1/windows?gpu=H100&min_days=7").await;
    let api = api.as_array().unwrap();
    assert_eq!(api.len(), 1);
    assert_eq!(
        (
            &api[0]["status"],
            &api[0]["window_hours"],
            &api[0]["usd_per_gpu_hour"],
            &api[0]["vanished_at"]
        ),
        (&json!("offered"), &json!(168.0), &json!(3.5), &Value::Null)
    );
    assert_eq!(d.fetch("/v1/windows?min_days=400").await.status(), 400);

    let spot = d
        .page("/ui/spot?instance=p5.48xlarge&region=us-east-1&range=7d")
        .await;
    assert!(spot.contains("id=\"spot-data\"") && spot.contains("id=\"spot-chart\""));
    let stats = rows(&spot, "spot-stats");
    assert_eq!(stats.len(), 3, "two zones and all zones: {stats:?}");
    let all = d.page("/ui/spot?instance=p5.48xlarge&range=all").await;
    assert_eq!(rows(&all, "spot-stats").len(), 3);
    let picker = d.page("/ui/spot").await;
    assert!(picker.contains("/ui/spot?instance=p5.48xlarge"));

    let empty = d.page("/ui/plans/latest").await;
    assert!(empty.contains("No plan has been saved yet") && empty.contains("id=\"plan-form\""));
    d.plan("weekly</script>", &[8.0; 24]).await;
    d.plan("weekly</script>", &[16.0; 24]).await;
    let plan = d.page("/ui/plans/latest?name=weekly%3C%2Fscript%3E").await;
    assert!(plan.contains("id=\"plan-data\"") && plan.contains("Against plan"));
    assert!(plan.contains("weekly&lt;/script&gt;"));
    let latest = d.json("/v1/plans/latest").await;
    let by_id = d.page(&format!("/ui/plans/{}", latest["id"])).await;
    assert_eq!(by_id, plan);
    assert_eq!(d.fetch("/ui/plans/999999").await.status(), 404);

    // A version 3 plan draws its risk frontier.
    let r = d
        .http
        .post(format!("{}/v1/plans?save=true", d.base))
        .header("content-type", "application/json")
        .body(
            json!({"name": "risky", "gpu": ["H100"], "demand": [8.0, 8.0],
                   "scenarios": [{"id": "low", "demand": [0.0, 0.0]}, {"id": "high", "demand": [16.0, 16.0]}],
                   "risk": {"beta": 0.5}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let risky = d.page("/ui/plans/latest?name=risky").await;
    assert!(
        risky.contains("Risk frontier") && risky.contains("<svg"),
        "{risky}"
    );
    assert!(risky.contains("expected total") && risky.contains("<polyline"));

    let alerts = d.page("/ui/alerts").await;
    assert!(alerts.contains("cheap-h100") && alerts.contains("price_below"));

    // Spend: the table is the API's answer summed per team, direct and
    // allocated; the exports hold the same rows.
    let overview = d.page("/").await;
    assert!(overview.contains("Bill sources") && overview.contains("aws-payer"));
    assert!(overview.contains("ml-monthly"));
    let spend = d.page("/ui/spend").await;
    assert!(spend.contains("id=\"spend-data\"") && spend.contains("id=\"spend-chart\""));
    assert!(
        spend.contains("2026-10-01 to 2026-10-31"),
        "the month of the complete day"
    );
    let api = d
        .json("/v1/spend?since=2026-10-01&until=2026-11-01&group=team")
        .await;
    let mut by_team: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for r in api.as_array().unwrap() {
        let e = by_team
            .entry(r["team"].as_str().unwrap().to_owned())
            .or_default();
        e.0 += r["effective_cost"].as_f64().unwrap();
        e.1 += r["allocated_effective_cost"].as_f64().unwrap();
    }
    let shown = rows(&spend, "spend");
    assert_eq!(shown.len(), by_team.len(), "{shown:?}");
    for row in &shown {
        let (direct, allocated) = by_team[&row[0]];
        assert_eq!(row[2], format!("{direct:.2}"), "{row:?}");
        assert_eq!(row[4], format!("{allocated:.2}"), "{row:?}");
    }
    // The untagged 40 a day is split: nothing stays unallocated.
    assert_eq!(by_team["unallocated"].1, 0.0);
    let csv = d.fetch("/ui/spend?format=csv").await.text().await.unwrap();
    assert_eq!(csv.lines().count() - 1, shown.len());
    let json_rows = d.json("/ui/spend?format=json").await;
    assert_eq!(json_rows.as_array().unwrap().len(), shown.len());
    assert!(rows(&spend, "budgets")[0][0].contains("ml-monthly"));

    let usage = d.page("/ui/usage").await;
    assert!(usage.contains("id=\"usage-data\""));
    let teams = rows(&usage, "usage");
    // ml on demand and research committed, 24 p5-hours (8 GPUs) a day.
    let ml = teams.iter().find(|r| r[0] == "ml").unwrap();
    assert_eq!((ml[1].as_str(), ml[3].as_str()), ("1920.0", "0.0"));
    let research = teams.iter().find(|r| r[0] == "research").unwrap();
    assert_eq!(
        research[3],
        format!("{:.1}", (5.0 * 24.0 + 5.0 * 12.0) * 8.0)
    );
    let one = d.page("/ui/usage?team=ml").await;
    assert_eq!(rows(&one, "usage").len(), 1);

    let commitments = d.page("/ui/commitments").await;
    assert!(commitments.contains("id=\"commitments-data\""));
    let c = rows(&commitments, "commitments");
    assert_eq!(c.len(), 1);
    assert_eq!((c[0][0].as_str(), c[0][5].as_str()), ("ri-p5", "75.0%"));
    let cover = rows(&commitments, "coverage");
    assert_eq!(cover.len(), 1, "{cover:?}");

    for (path, parameter) in [
        ("/ui/prices?unit=furlong", "unit"),
        ("/ui/prices?sort=nope", "sort"),
        ("/ui/spot?instance=x&range=1y", "range"),
        ("/ui/prices?bogus=1", "bogus"),
        ("/ui/prices?page=0", "page"),
        ("/ui/prices?per_page=100000", "per_page"),
        ("/ui/prices?form_factor=oam", "form_factor"),
        ("/ui/spend?by=week", "by"),
        ("/ui/spend?format=xml", "format"),
        ("/ui/usage?since=soon", "since"),
        ("/ui/commitments?since=2026-10-05&until=2026-10-01", "since"),
        ("/ui/spend?since=2000-01-01&until=2026-01-01", "since"),
    ] {
        let r = d.fetch(path).await;
        assert_eq!(r.status(), 400, "{path}");
        assert!(r.text().await.unwrap().contains(parameter), "{path}");
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spot_sync_by_another_process_shows_while_list_prices_stay_as_read() {
    let (d, dir) = start(None).await;
    let view = "/ui/prices?provider=aws&cols=zone,price_kind,price&format=json";
    let rows = |v: Value| {
        let mut rows: Vec<(String, String, f64)> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["zone"].as_str().unwrap_or("").to_owned(),
                    r["price_kind"].as_str().unwrap().to_owned(),
                    r["price"].as_f64().unwrap(),
                )
            })
            .collect();
        rows.sort_by(|a, b| a.partial_cmp(b).unwrap());
        rows
    };
    let spot_metric = || async {
        let text = d
            .http
            .get(format!("{}/metrics", d.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| {
                l.strip_prefix(
                    "gpuplan_cheapest_usd_per_gpu_hour{gpu_model=\"H100-80GB\",kind=\"spot\"} ",
                )
            })
            .map(|v| v.parse::<f64>().unwrap())
    };
    let before = rows(d.json(view).await);
    assert!(
        before.contains(&("us-east-1a".to_owned(), "spot".to_owned(), 38.5)),
        "{before:?}"
    );
    assert_eq!(spot_metric().await, Some(38.5 / 8.0));

    // Another process syncs spot history only: a new price in one zone.
    let now = Utc::now();
    let spot = Snapshot {
        scope: gpuplan_providers::Scope::SpotHistory,
        instance_types: vec![seed::p5()],
        spot_observations: vec![SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "p5.48xlarge".into(),
            usd_per_hour: 12.0,
            observed_at: now,
        }],
        ..Snapshot::default()
    };
    seed::write(&dir.path().join("catalog.db"), &spot, now);

    let after = rows(d.json(view).await);
    let expected: Vec<_> = before
        .iter()
        .map(|(zone, kind, usd)| {
            let usd = if zone == "us-east-1a" && kind == "spot" {
                12.0
            } else {
                *usd
            };
            (zone.clone(), kind.clone(), usd)
        })
        .collect();
    assert_eq!(after, expected);
    assert_eq!(spot_metric().await, Some(1.5));
}

#[tokio::test(flavor = "multi_thread")]
async fn beyond_loopback_pages_need_the_token_through_a_login_cookie() {
    let (d, _dir) = start(Some("s3cret-token")).await;
    let r = d.fetch("/").await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()[header::LOCATION], "/ui/login");
    assert_eq!(d.fetch("/ui/login").await.status(), 200);
    assert_eq!(d.fetch("/ui/assets/app.js").await.status(), 200);
    assert_eq!(d.fetch("/v1/prices").await.status(), 401);

    let login = |content_type: &'static str, body: &'static str| {
        d.http
            .post(format!("{}/ui/login", d.base))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    assert_eq!(
        login("application/x-www-form-urlencoded", "token=s3cret-token")
            .await
            .unwrap()
            .status(),
        415
    );
    assert_eq!(
        login("application/json", r#"{"token": "wrong"}"#)
            .await
            .unwrap()
            .status(),
        401
    );
    let ok = login("application/json", r#"{"token": "s3cret-token"}"#)
        .await
        .unwrap();
    assert_eq!(ok.status(), 204);
    let cookie = ok.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();

    let page = d
        .http
        .get(format!("{}/", d.base))
        .header(header::COOKIE, &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let prices = d
        .http
        .get(format!("{}/v1/prices", d.base))
        .header(header::COOKIE, &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(prices.status(), 200);
    d.stop().await;
}

#[tokio::test]
async fn the_bundled_files_are_served_with_their_types() {
    let (d, _dir) = start(None).await;
    for asset in gpuplan::daemon::http::ui::ASSETS {
        let r = d.fetch(&format!("/ui/assets/{}", asset.name)).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()[header::CONTENT_TYPE], asset.content_type);
        assert_eq!(r.bytes().await.unwrap().as_ref(), asset.bytes);
    }
    assert_eq!(d.fetch("/ui/assets/../Cargo.toml").await.status(), 404);
    d.stop().await;
}

/// The browser suite (`tests/browser/suite.py`) in Debian's headless
/// Chromium through Playwright. `.ci/run` installs both and sets
/// `GPUPLAN_BROWSER_TESTS=1`; then anything missing fails the test. Without
/// it (a machine that has no browser) the suite is skipped, and says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_browser_loads_every_page_draws_the_charts_filters_and_exports() {
    if std::env::var_os("GPUPLAN_BROWSER_TESTS").is_none() {
        eprintln!(
            "browser suite skipped: set GPUPLAN_BROWSER_TESTS=1 (.ci/run installs Chromium and Playwright)"
        );
        return;
    }
    let python = std::env::var("GPUPLAN_BROWSER_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/gpuplan-browser/bin/python",
            std::env::var("HOME").unwrap()
        )
    });
    let chromium =
        std::env::var("GPUPLAN_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&out).unwrap();

    let (d, _dir) = start(None).await;
    // Two days of a working-hours peak: reserved covers the base, the peak
    // goes to spot or on-demand.
    let demand: Vec<f64> = (0..48)
        .map(|h| {
            if (9..18).contains(&(h % 24)) {
                20.0
            } else {
                8.0
            }
        })
        .collect();
    d.plan("nightly", &demand).await;
    let (base, dir) = (d.base.clone(), out.clone());
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/browser/suite.py"
            ))
            .args([
                base.as_str(),
                dir.to_str().unwrap(),
                chromium.as_str(),
                "nightly",
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {python}: {e}"))
    })
    .await
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}\n{stderr}");
    eprintln!("browser suite: {stdout}screenshots in {}", out.display());
    for shot in [
        "overview",
        "prices",
        "spot",
        "plan",
        "alerts",
        "spend",
        "usage",
        "commitments",
    ] {
        let png = std::fs::read(out.join(format!("{shot}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{shot}.png"
        );
    }
    d.stop().await;
}
