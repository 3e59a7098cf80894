//! Bills as the tests write them: FOCUS rows, and a workspace whose config
//! reads them from `bills/`.

use std::path::Path;

use super::{NO_CLOUDS, Workspace};

pub const HEADER: &str = "BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass,PricingCategory,BilledCost,EffectiveCost,BillingCurrency,ConsumedQuantity,ConsumedUnit,RegionId,SubAccountId,ServiceCategory,SkuPriceDetails,Tags";

/// One hour of `instance_type` run by `team`, starting `hour` hours after
/// 2026-10-01T00:00Z.
pub fn usage_row(hour: u32, instance_type: &str, team: &str, cost: f64) -> String {
    let start = chrono::DateTime::parse_from_rfc3339("2026-10-01T00:00:00Z").unwrap()
        + chrono::Duration::hours(i64::from(hour));
    let end = start + chrono::Duration::hours(1);
    let f = |t: chrono::DateTime<chrono::FixedOffset>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    format!(
        "111111111111,2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,{},{},Usage,,Standard,{cost},{cost},USD,1,Hrs,us-east-1,222222222222,Compute,\"{{\"\"InstanceType\"\":\"\"{instance_type}\"\"}}\",\"{{\"\"team\"\":\"\"{team}\"\"}}\"",
        f(start),
        f(end)
    )
}

/// A workspace whose config reads FOCUS files from `bills/`, with `extra`
/// config lines.
pub fn workspace(extra: &str) -> Workspace {
    let w = Workspace::new(&format!(
        "[store]\npath = \"catalog.db\"\n{NO_CLOUDS}\
         [bills.aws]\nformat = \"focus\"\nprovider = \"aws\"\npath = \"bills\"\nteam_tags = [\"team\", \"project\"]\n\
         teams_by_account = {{ \"333333333333\" = \"research\" }}\n{extra}"
    ));
    std::fs::create_dir_all(w.path("bills")).unwrap();
    w
}

/// The AWS FOCUS export of October 2026 under `tests/fixtures/`.
pub fn fixture() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/bills/aws-focus/focus-2026-10.csv"),
    )
    .unwrap()
}
