//! The OpenAPI description against the real daemon: openapi-spec-validator
//! checks the document, and Schemathesis fuzzes every operation of a daemon
//! serving a fixture catalog and bills, holding each answer to the
//! description (no 5xx, documented statuses, content types and schemas).
//! Both come from PyPI; `GPUPLAN_API_TOOLS` names the venv's `bin` folder,
//! and `GPUPLAN_API_TOOLS_REQUIRED` (set in CI) makes their absence a
//! failure instead of a skip.

mod support;

use std::path::PathBuf;
use std::process::Command;

use gpuplan::config::Config;
use support::{Daemon, NO_CLOUDS, seed, until};

const SHEET: &str = "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\n\
                     onprem-fra,dgx-h100,H100,8,on_demand,18.4\n\
                     onprem-fra,dgx-h100,H100,8,reserved_1y,14\n\
                     onprem-fra,l4-box,L4,1,spot,0.3\n";

const BILL: &str = "BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,PricingCategory,BilledCost,EffectiveCost,BillingCurrency,ConsumedQuantity,ConsumedUnit,RegionId,SubAccountId,ServiceCategory,SkuPriceDetails,Tags\n\
111111111111,2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,2026-10-01T00:00:00Z,2026-10-01T01:00:00Z,Usage,,Standard,98.32,98.32,USD,1,Hours,us-east-1,222222222222,Compute,\"{\"\"InstanceType\"\":\"\"p5.48xlarge\"\"}\",\"{\"\"team\"\":\"\"ml\"\"}\"\n\
111111111111,2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,2026-10-02T00:00:00Z,2026-10-02T01:00:00Z,Usage,,Standard,98.32,98.32,USD,1,Hours,us-east-1,222222222222,Compute,\"{\"\"InstanceType\"\":\"\"p5.48xlarge\"\"}\",\"{\"\"team\"\":\"\"ml\"\"}\"\n";

fn tools() -> Option<PathBuf> {
    let dir = std::env::var_os("GPUPLAN_API_TOOLS").map(PathBuf::from);
    let found = dir
        .filter(|d| d.join("schemathesis").is_file() && d.join("openapi-spec-validator").is_file());
    if found.is_none() && std::env::var_os("GPUPLAN_API_TOOLS_REQUIRED").is_some() {
        panic!(
            "GPUPLAN_API_TOOLS_REQUIRED is set but GPUPLAN_API_TOOLS has no schemathesis and openapi-spec-validator"
        );
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_the_description_does_not_allow() {
    let Some(tools) = tools() else {
        eprintln!("GPUPLAN_API_TOOLS is not set: the OpenAPI checks are skipped");
        return;
    };
    let spec = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/daemon/http/api/openapi.json");
    let valid = Command::new(tools.join("openapi-spec-validator"))
        .arg(&spec)
        .output()
        .unwrap();
    assert!(
        valid.status.success(),
        "{}{}",
        String::from_utf8_lossy(&valid.stdout),
        String::from_utf8_lossy(&valid.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("onprem.csv"), SHEET).unwrap();
    std::fs::create_dir_all(dir.path().join("bills")).unwrap();
    std::fs::write(dir.path().join("bills/focus-2026-10.csv"), BILL).unwrap();
    let text = format!(
        "[store]\npath = \"catalog.db\"\n{NO_CLOUDS}\
        [providers.file.onprem]\npath = \"onprem.csv\"\n\
        [bills.aws]\nformat = \"focus\"\nprovider = \"aws\"\npath = \"bills\"\nteam_tags = [\"team\"]\n\
        [[budgets]]\nname = \"ml\"\namount = 1000.0\ncurrency = \"USD\"\nteams = [\"ml\"]\n\
        [planner]\ntime_limit_secs = 2\nmax_concurrent_solves = 1\n"
    );
    std::fs::write(dir.path().join("gpuplan.toml"), &text).unwrap();
    let config = Config::parse(&text, dir.path()).unwrap();
    // Priced windows, so that their answers are checked against the schema.
    let windows = gpuplan_providers::Snapshot {
        instance_types: vec![seed::p5()],
        prices: vec![seed::p5_block(168, 3.5), seed::p5_block(24, 4.0)],
        ..gpuplan_providers::Snapshot::default()
    };
    seed::write(&dir.path().join("catalog.db"), &windows, chrono::Utc::now());
    let d = Daemon::start(config).await;
    let base = d.base.clone();
    until("the sheet's first sync", || async {
        let (_, prices) = d.get("/v1/prices").await;
        prices.to_string().contains("dgx-h100")
    })
    .await;

    // A bounded run in CI; GPUPLAN_SCHEMATHESIS_EXAMPLES and _SEED widen
    // or vary it by hand.
    let var =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let (examples, seed) = (
        var("GPUPLAN_SCHEMATHESIS_EXAMPLES", "40"),
        var("GPUPLAN_SCHEMATHESIS_SEED", "1"),
    );
    // Schemathesis keeps a cache where it runs: in the test's folder, not
    // in the checkout.
    let workdir = dir.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || {
        Command::new(tools.join("schemathesis"))
            .current_dir(workdir)
            .args(["run", &format!("{base}/openapi.json")])
            .args([
                "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
                "--max-examples",
                &examples,
                "--seed",
                &seed,
                "--workers",
                "1",
            ])
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    d.stop().await;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    println!("{report}");
    assert!(
        run.status.success(),
        "Schemathesis found failures:\n{report}"
    );
}
