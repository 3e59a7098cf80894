//! `gpuplan sync` against local stand-ins for Alibaba Cloud (international
//! site, USD) and Tencent Cloud (China site, CNY at a configured rate), then
//! `gpuplan prices --json` on what was stored.

mod support;

use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gpuplan_providers::test_server::{FixtureServer, alibaba, tencent};
use serde_json::Value;

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(alibaba: &FixtureServer, tencent: &FixtureServer) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "[store]\npath = \"catalog.db\"\n\n[fx]\nCNY = 7.2\n\n\
             [providers.aws]\nenabled = false\n[providers.azure]\nenabled = false\n\
             [providers.oci]\nenabled = false\n\n\
             [providers.alibaba]\nenabled = true\nendpoint = \"{}\"\nregions = [\"ap-southeast-1\", \"us-east-1\"]\n\n\
             [providers.tencent]\nenabled = true\nsite = \"china\"\nendpoint = \"{}\"\n\
             regions = [\"ap-singapore\", \"na-siliconvalley\"]\n",
            alibaba.base, tencent.base
        );
        std::fs::write(dir.path().join("gpuplan.toml"), config).unwrap();
        Self { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("gpuplan.toml")
    }

    fn run(&self, args: &[&str]) -> Output {
        support::gpuplan()
            .arg("--config")
            .arg(self.config())
            .args(args)
            .env("RUST_LOG", "warn")
            .env("GPUPLAN_ALIBABA_ACCESS_KEY_ID", alibaba::KEY_ID)
            .env("GPUPLAN_ALIBABA_ACCESS_KEY_SECRET", alibaba::KEY_SECRET)
            .env("GPUPLAN_TENCENT_SECRET_ID", tencent::SECRET_ID)
            .env("GPUPLAN_TENCENT_SECRET_KEY", tencent::SECRET_KEY)
            .output()
            .unwrap()
    }

    fn prices(&self, extra: &[&str]) -> Vec<Value> {
        let out = self.run(&[&["prices", "--json"], extra].concat());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

fn find<'a>(
    records: &'a [Value],
    provider: &str,
    zone: Option<&str>,
    instance_type: &str,
    kind: &str,
) -> &'a Value {
    records
        .iter()
        .find(|r| {
            r["provider"] == provider
                && r["zone"].as_str() == zone
                && r["instance_type"] == instance_type
                && r["price_kind"] == kind
        })
        .unwrap_or_else(|| panic!("no {provider} {instance_type} {kind} in {zone:?}"))
}

/// Both stand-ins; while `bad` is set, Alibaba throttles every DescribePrice
/// and Tencent answers its type configs with an error inside HTTP 200.
async fn servers(bad: Arc<AtomicBool>) -> (FixtureServer, FixtureServer) {
    let flag = bad.clone();
    let alibaba = alibaba::stand_in("USD", move |p, _| {
        (flag.load(Ordering::SeqCst) && p["Action"] == "DescribePrice").then(|| {
            alibaba::error(
                403,
                "Throttling.User",
                "Request was denied due to user flow control.",
            )
        })
    })
    .await;
    let tencent = tencent::stand_in(move |action, _, _| {
        (bad.load(Ordering::SeqCst) && action == "DescribeInstanceTypeConfigs")
            .then(|| tencent::error("ResourceUnavailable", "The resource is unavailable."))
    })
    .await;
    (alibaba, tencent)
}

#[tokio::test(flavor = "multi_thread")]
async fn one_sync_fills_the_catalog_from_alibaba_and_tencent_in_usd_with_their_currency_kept() {
    let (alibaba, tencent) = servers(Arc::default()).await;
    let setup = Setup::new(&alibaba, &tencent);
    let (out, all, in_cny) = tokio::task::spawn_blocking(move || {
        let out = setup.run(&["sync"]);
        (
            out,
            setup.prices(&[]),
            setup.prices(&["--provider", "tencent", "--currency", "CNY"]),
        )
    })
    .await
    .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let count = |p: &str| all.iter().filter(|r| r["provider"] == p).count();
    // 19 list prices (4 of a twelfth of an A10) and the newest spot price
    // of 3 (type, zone) pairs; Tencent's include half a T4.
    assert_eq!(count("alibaba"), 22, "{report}");
    assert_eq!(count("tencent"), 11, "{report}");

    let on_demand = find(&all, "alibaba", None, "ecs.gn7i-c8g1.2xlarge", "on_demand");
    assert_eq!(on_demand["usd_per_hour"], 1.2);
    assert_eq!(
        (
            on_demand["currency"].as_str(),
            on_demand["fx_rate"].as_f64()
        ),
        (Some("USD"), Some(1.0))
    );
    let prepaid = find(&all, "alibaba", None, "ecs.gn7i-c8g1.2xlarge", "prepaid_1m");
    assert_eq!(prepaid["upfront_usd"], 600.0);
    // The newest row of each zone across all pages is its current spot price.
    let spot = find(
        &all,
        "alibaba",
        Some("ap-southeast-1b"),
        "ecs.gn7i-c8g1.2xlarge",
        "spot",
    );
    assert_eq!(spot["usd_per_hour"], 0.45);
    assert_eq!(spot["observed_at"], "2026-11-30T09:00:00Z");

    let tencent_od = find(
        &all,
        "tencent",
        Some("na-siliconvalley-2"),
        "GN7.2XLARGE32",
        "on_demand",
    );
    assert!((tencent_od["usd_per_hour"].as_f64().unwrap() - 1.6 / 7.2).abs() < 1e-12);
    assert_eq!(
        (
            tencent_od["currency"].as_str(),
            tencent_od["fx_rate"].as_f64()
        ),
        (Some("CNY"), Some(7.2))
    );

    // Shown in CNY, a CNY price is the source's own figure again.
    let shown = find(
        &in_cny,
        "tencent",
        Some("na-siliconvalley-2"),
        "GN7.2XLARGE32",
        "on_demand",
    );
    assert!(
        (shown["converted"]["per_hour"].as_f64().unwrap() - 1.6).abs() < 1e-9,
        "{shown}"
    );
    assert_eq!(shown["converted"]["currency"], "CNY");
    assert!(all.iter().all(|r| r.get("converted").is_none()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_alibaba_or_tencent_sync_names_the_call_and_keeps_every_stored_price() {
    let bad = Arc::new(AtomicBool::new(false));
    let (alibaba, tencent) = servers(bad.clone()).await;
    let setup = Setup::new(&alibaba, &tencent);
    let (setup, before) = tokio::task::spawn_blocking(move || {
        let out = setup.run(&["sync"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let before = setup.prices(&[]);
        (setup, before)
    })
    .await
    .unwrap();
    // With a twelfth of an A10 on four terms.
    assert_eq!(before.len(), 33);

    bad.store(true, Ordering::SeqCst);
    let (out, after) = tokio::task::spawn_blocking(move || {
        let out = setup.run(&["sync"]);
        (out, setup.prices(&[]))
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    for named in [
        "DescribePrice in ap-southeast-1",
        "DescribeInstanceTypeConfigs in ap-singapore",
        "ResourceUnavailable",
    ] {
        assert!(report.contains(named), "missing {named} in {report}");
    }
    assert!(!report.contains(alibaba::KEY_SECRET) && !report.contains(tencent::SECRET_KEY));
    assert_eq!(after, before);
}

#[test]
fn a_currency_without_a_rate_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = support::gpuplan()
        .current_dir(dir.path())
        .args(["prices", "--currency", "EUR"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--currency EUR") && err.contains("[fx] EUR"),
        "{err}"
    );
}
