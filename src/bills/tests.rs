//! The traps of reading bills, each a test named after it, with figures
//! derived by hand. Files are written as the exports write them (CSV with
//! JSON key-value cells, gzipped CSV, Parquet with map columns, the AWS and
//! Azure manifests) and loaded into a real catalog.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};

use super::load::{SourceReport, load_source};
use super::{BillFormat, BillProvider, BillSource};
use crate::store::Pool;
use crate::store::bills::{BillQuery, Bucket, CommitmentRecord, SpendRow, UsageRow};
use crate::store::test_support::{TestDb, on_both_backends};

const FOCUS: &[&str] = &[
    "BillingAccountId",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ChargeClass",
    "PricingCategory",
    "BilledCost",
    "EffectiveCost",
    "BillingCurrency",
    "ConsumedQuantity",
    "ConsumedUnit",
    "CommitmentDiscountId",
    "CommitmentDiscountType",
    "CommitmentDiscountCategory",
    "CommitmentDiscountStatus",
    "CommitmentDiscountQuantity",
    "CommitmentDiscountUnit",
    "RegionId",
    "SubAccountId",
    "ServiceCategory",
    "SkuId",
    "SkuPriceDetails",
    "Tags",
    "x_UsageType",
    "x_SkuDetails",
    "x_PricingSubcategory",
];

/// A usage hour of 2026-10-01 on account 111 unless `set` says otherwise.
fn focus_row(set: &[(&str, &str)]) -> Vec<String> {
    let defaults = [
        ("BillingAccountId", "111"),
        ("BillingPeriodStart", "2026-10-01T00:00:00Z"),
        ("BillingPeriodEnd", "2026-11-01T00:00:00Z"),
        ("ChargePeriodStart", "2026-10-01T00:00:00Z"),
        ("ChargePeriodEnd", "2026-10-01T01:00:00Z"),
        ("ChargeCategory", "Usage"),
        ("PricingCategory", "Standard"),
        ("BilledCost", "1"),
        ("EffectiveCost", "1"),
        ("BillingCurrency", "USD"),
        ("RegionId", "us-east-1"),
        ("SubAccountId", "222"),
        ("ServiceCategory", "Compute"),
    ];
    FOCUS
        .iter()
        .map(|col| {
            set.iter()
                .chain(defaults.iter())
                .find(|(k, _)| k == col)
                .map_or(String::new(), |(_, v)| (*v).to_owned())
        })
        .collect()
}

/// One GPU-hour row of `instance_type` for `team`.
fn gpu_hour(instance_type: &str, team: &str, cost: &str) -> Vec<String> {
    let details = format!(r#"{{"InstanceType":"{instance_type}"}}"#);
    let tags = format!(r#"{{"team":"{team}"}}"#);
    focus_row(&[
        ("ConsumedQuantity", "1"),
        ("ConsumedUnit", "Hrs"),
        ("SkuPriceDetails", &details),
        ("Tags", &tags),
        ("BilledCost", cost),
        ("EffectiveCost", cost),
    ])
}

fn csv_text(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header).unwrap();
    for r in rows {
        w.write_record(r).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

struct Bench {
    dir: tempfile::TempDir,
    pool: Pool,
    source: BillSource,
    _db: Option<TestDb>,
}

impl Bench {
    fn new(provider: BillProvider, format: BillFormat) -> Self {
        let db = TestDb::sqlite();
        let pool = db.pool(0);
        Self::on(pool, provider, format, Some(db))
    }

    fn on(pool: Pool, provider: BillProvider, format: BillFormat, db: Option<TestDb>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let source = BillSource {
            name: "test".into(),
            format,
            provider,
            location: super::BillLocation::Folder(dir.path().to_path_buf()),
            team_tags: vec!["team".into(), "project".into()],
            teams_by_account: BTreeMap::from([
                ("333".to_owned(), "research".to_owned()),
                ("333333333333".to_owned(), "research".to_owned()),
            ]),
            grace_days: provider.grace_days(),
        };
        Self {
            dir,
            pool,
            source,
            _db: db,
        }
    }

    fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    fn focus(&self, rel: &str, rows: &[Vec<String>]) {
        self.write(rel, csv_text(FOCUS, rows));
    }

    fn load(&self, now: &str) -> SourceReport {
        load_source(&self.pool, &self.source, None, t(now))
    }

    fn query(&self, group: &[&str], by: Bucket) -> BillQuery {
        BillQuery {
            since: t("2026-01-01T00:00:00Z").timestamp(),
            until: t("2027-01-01T00:00:00Z").timestamp(),
            by: Some(by),
            group: group.iter().map(|g| (*g).to_owned()).collect(),
            limit: 100_000,
            ..BillQuery::default()
        }
    }

    fn usage(&self, group: &[&str], by: Bucket) -> Vec<UsageRow> {
        let q = self.query(group, by);
        self.pool.read(|s| s.bill_usage(&q)).unwrap()
    }

    fn spend(&self, group: &[&str]) -> Vec<SpendRow> {
        let q = self.query(group, Bucket::Day);
        self.pool.read(|s| s.bill_spend(&q)).unwrap()
    }

    fn commitments(&self) -> Vec<CommitmentRecord> {
        let (since, until) = (
            t("2026-01-01T00:00:00Z").timestamp(),
            t("2027-01-01T00:00:00Z").timestamp(),
        );
        self.pool
            .read(|s| s.bill_commitments(&[], since, until))
            .unwrap()
    }

    /// GPU-hours by the values of the grouped field.
    fn gpu_hours_by(&self, field: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for r in self.usage(&[field], Bucket::Month) {
            *out.entry(r.fields[field].clone()).or_default() += r.gpu_hours;
        }
        out
    }

    fn total_gpu_hours(&self) -> f64 {
        self.usage(&[], Bucket::Month)
            .iter()
            .map(|r| r.gpu_hours)
            .sum()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn one_period(r: &SourceReport) -> &crate::bills::PeriodOutcome {
    assert_eq!(r.periods.len(), 1, "{r:#?}");
    &r.periods[0]
}

on_both_backends! {
fn teams_gpu_hours_and_a_savings_plans_utilization_derived_by_hand(db) {
    let b = Bench::on(db.pool(0), BillProvider::Aws, BillFormat::Focus, None);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bills/aws-focus/focus-2026-10.csv");
    b.write("focus-2026-10.csv", std::fs::read(fixture).unwrap());
    let r = b.load("2026-12-15T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    let p = one_period(&r);
    assert_eq!((p.result.as_str(), p.rows, p.gpu_rows), ("loaded", 11, 5));
    // ml: a p5 on demand (8) + a g5 spot row of 3 hours (3) + a p5 under the
    // savings plan (8); research: a p5 by its account (8); vision: a g6 whose
    // `team` tag is valueless, so `project` names it (1).
    let by_team = b.gpu_hours_by("team");
    assert_eq!(
        by_team,
        BTreeMap::from([
            ("ml".to_owned(), 19.0),
            ("research".to_owned(), 8.0),
            ("vision".to_owned(), 1.0)
        ])
    );
    let sp = b.commitments();
    assert_eq!(sp.len(), 1);
    let sp = &sp[0];
    assert_eq!(sp.kind.as_deref(), Some("savings_plan"));
    assert_eq!(sp.region.as_deref(), Some("us-east-1"));
    assert_eq!(sp.instance_type.as_deref(), Some("p5.48xlarge"));
    // Used 79.11 of the hour's 100.00 commitment.
    assert!(close(sp.utilization.unwrap(), 0.7911), "{sp:?}");
    assert!(close(sp.covered_gpu_hours, 8.0));
    assert_eq!(sp.first_seen, t("2026-10-01T00:00:00Z"));
    assert_eq!(sp.last_seen, Some(t("2026-10-01T02:00:00Z")));
    assert_eq!(
        r.unmapped,
        BTreeMap::from([("p4de.12xlarge".to_owned(), 1)])
    );
}
}

#[test]
fn amortized_purchases_are_not_counted_twice() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus(
        "f.csv",
        &[
            gpu_hour("p5.48xlarge", "ml", "98.32"),
            focus_row(&[
                ("ChargeCategory", "Purchase"),
                ("ChargePeriodEnd", "2027-10-01T00:00:00Z"),
                ("BilledCost", "876000"),
                ("EffectiveCost", "0"),
                ("CommitmentDiscountId", "sp-1"),
                ("CommitmentDiscountType", "Savings Plan"),
            ]),
        ],
    );
    b.load("2026-10-20T00:00:00Z");
    let billed: f64 = b.spend(&[]).iter().map(|s| s.billed_cost).sum();
    let effective: f64 = b.spend(&[]).iter().map(|s| s.effective_cost).sum();
    assert!(close(billed, 876_098.32));
    assert!(close(effective, 98.32));
    // The purchase is not usage, though it says Standard and names no type.
    assert!(close(b.total_gpu_hours(), 8.0));
}

#[test]
fn unused_commitment_rows_look_like_usage_but_are_spend() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus(
        "f.csv",
        &[focus_row(&[
            ("PricingCategory", "Committed"),
            ("CommitmentDiscountId", "ri-1"),
            ("CommitmentDiscountType", "Reserved Instance"),
            ("CommitmentDiscountStatus", "Unused"),
            ("CommitmentDiscountQuantity", "1"),
            ("ConsumedQuantity", "1"),
            ("ConsumedUnit", "Hours"),
            ("SkuPriceDetails", r#"{"InstanceType":"p5.48xlarge"}"#),
            ("EffectiveCost", "60"),
            ("BilledCost", "0"),
        ])],
    );
    b.load("2026-10-20T00:00:00Z");
    assert!(close(b.total_gpu_hours(), 0.0));
    let effective: f64 = b.spend(&[]).iter().map(|s| s.effective_cost).sum();
    assert!(close(effective, 60.0));
    let c = &b.commitments()[0];
    assert_eq!(c.kind.as_deref(), Some("reservation"));
    assert_eq!(c.unused_quantity, Some(1.0));
    assert!(close(c.utilization.unwrap(), 0.0));
}

#[test]
fn commitment_purchase_rows_priced_standard_are_not_on_demand_usage() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus(
        "f.csv",
        &[focus_row(&[
            ("ChargeCategory", "Purchase"),
            ("ConsumedQuantity", "8760"),
            ("ConsumedUnit", "Hours"),
            ("SkuPriceDetails", r#"{"InstanceType":"p5.48xlarge"}"#),
            ("CommitmentDiscountId", "ri-1"),
            ("BilledCost", "500000"),
            ("EffectiveCost", "0"),
        ])],
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert_eq!(one_period(&r).gpu_rows, 0);
    assert!(b.usage(&[], Bucket::Day).is_empty());
}

on_both_backends! {
fn corrections_count_on_the_first_day_of_the_billing_period_and_never_rewrite_usage(db) {
    let b = Bench::on(db.pool(0), BillProvider::Aws, BillFormat::Focus, None);
    b.focus(
        "sep.csv",
        &[focus_row(&[
            ("BillingPeriodStart", "2026-09-01T00:00:00Z"),
            ("BillingPeriodEnd", "2026-10-01T00:00:00Z"),
            ("ChargePeriodStart", "2026-09-15T00:00:00Z"),
            ("ChargePeriodEnd", "2026-09-15T01:00:00Z"),
            ("ConsumedQuantity", "1"),
            ("ConsumedUnit", "Hrs"),
            ("SkuPriceDetails", r#"{"InstanceType":"p5.48xlarge"}"#),
            ("BilledCost", "98.32"),
            ("EffectiveCost", "98.32"),
        ])],
    );
    b.focus(
        "oct.csv",
        &[focus_row(&[
            ("ChargeClass", "Correction"),
            ("ChargePeriodStart", "2026-09-15T00:00:00Z"),
            ("ChargePeriodEnd", "2026-09-15T01:00:00Z"),
            ("ConsumedQuantity", "1"),
            ("ConsumedUnit", "Hrs"),
            ("SkuPriceDetails", r#"{"InstanceType":"p5.48xlarge"}"#),
            ("BilledCost", "-10"),
            ("EffectiveCost", "-10"),
        ])],
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    let spend = b.spend(&[]);
    let days: Vec<(String, f64)> = spend
        .iter()
        .map(|s| (s.start.format("%Y-%m-%d").to_string(), s.billed_cost))
        .collect();
    assert_eq!(
        days,
        [
            ("2026-09-15".to_owned(), 98.32),
            ("2026-10-01".to_owned(), -10.0)
        ]
    );
    // September's GPU-hours stay as billed; the correction is listed under it.
    assert!(close(b.total_gpu_hours(), 8.0));
    let loads = b.pool.read(|s| s.bill_loads(None)).unwrap();
    let sep = loads
        .iter()
        .find(|l| l.billing_period == "2026-09")
        .unwrap();
    assert_eq!(sep.corrections.len(), 1);
    assert_eq!(sep.corrections[0].billed_in, "2026-10");
    assert!(close(sep.corrections[0].billed_cost, -10.0));
    let oct = loads
        .iter()
        .find(|l| l.billing_period == "2026-10")
        .unwrap();
    assert_eq!(oct.corrects[0].corrects, "2026-09");
}
}

on_both_backends! {
fn currencies_are_never_summed(db) {
    let b = Bench::on(db.pool(0), BillProvider::Azure, BillFormat::Focus, None);
    let row = |account: &str, currency: &str, cost: &str| {
        focus_row(&[
            ("BillingAccountId", account),
            ("BillingCurrency", currency),
            ("ConsumedQuantity", "1"),
            ("ConsumedUnit", "Hours"),
            ("x_SkuDetails", r#"{"ServiceType":"Standard_ND96asr_v4"}"#),
            ("BilledCost", cost),
            ("EffectiveCost", cost),
        ])
    };
    b.focus(
        "f.csv",
        &[
            row("eu", "EUR", "25"),
            row("eu", "USD", "27"),
            row("us", "USD", "30"),
        ],
    );
    b.load("2026-10-20T00:00:00Z");
    let rows = b.usage(&[], Bucket::Month);
    let by_currency: Vec<(String, f64, f64)> = rows
        .iter()
        .map(|r| (r.currency.clone(), r.gpu_hours, r.billed_cost))
        .collect();
    assert_eq!(
        by_currency,
        [
            ("EUR".to_owned(), 8.0, 25.0),
            ("USD".to_owned(), 16.0, 57.0)
        ]
    );
    let loads = b.pool.read(|s| s.bill_loads(None)).unwrap();
    let eu = loads.iter().find(|l| l.billing_account == "eu").unwrap();
    assert_eq!(
        eu.totals.len(),
        2,
        "one total per currency: {:?}",
        eu.totals
    );
}
}

#[test]
fn tags_in_every_shape_name_the_team() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    let with_tags = |tags: &str| {
        focus_row(&[
            ("ConsumedQuantity", "1"),
            ("ConsumedUnit", "Hrs"),
            ("x_UsageType", "USE1-BoxUsage:g6.xlarge"),
            ("Tags", tags),
        ])
    };
    b.focus(
        "f.csv",
        &[
            // The exact key wins over one that differs in case.
            with_tags(r#"{"Team":"upper","team":"exact"}"#),
            // Only a differently cased key: it still names the team.
            with_tags(r#"{"TEAM":"loud"}"#),
            // A valueless tag and an empty one name nothing; the next key does.
            with_tags(r#"{"team":true,"project":"vision"}"#),
            with_tags(r#"{"team":"","project":"empty-team"}"#),
            // No tag at all: the account's team, else unallocated.
            focus_row(&[
                ("ConsumedQuantity", "1"),
                ("ConsumedUnit", "Hrs"),
                ("x_UsageType", "USE1-BoxUsage:g6.xlarge"),
                ("SubAccountId", "333"),
            ]),
            with_tags("null"),
        ],
    );
    b.load("2026-10-20T00:00:00Z");
    let teams: Vec<String> = b.gpu_hours_by("team").into_keys().collect();
    assert_eq!(
        teams,
        [
            "empty-team",
            "exact",
            "loud",
            "research",
            "unallocated",
            "vision"
        ]
    );
}

#[test]
fn multi_hour_rows_are_spread_evenly_over_their_hours() {
    let b = Bench::new(BillProvider::Azure, BillFormat::Focus);
    b.focus(
        "f.csv",
        &[
            // A daily row (Azure): 24 instance-hours of an 8-GPU size.
            focus_row(&[
                ("ChargePeriodStart", "2026-10-02T00:00Z"),
                ("ChargePeriodEnd", "2026-10-03T00:00Z"),
                ("ConsumedQuantity", "24"),
                ("ConsumedUnit", "Hours"),
                ("x_SkuDetails", r#"{"ServiceType":"Standard_ND96asr_v4"}"#),
                ("BilledCost", "48"),
                ("EffectiveCost", "48"),
            ]),
            // A quarter hour, starting mid-hour: it lands where it ran.
            focus_row(&[
                ("ChargePeriodStart", "2026-10-01T10:30:00Z"),
                ("ChargePeriodEnd", "2026-10-01T10:45:00Z"),
                ("ConsumedQuantity", "0.25"),
                ("ConsumedUnit", "Hours"),
                ("x_SkuDetails", r#"{"ServiceType":"ND96asr_v4"}"#),
            ]),
        ],
    );
    b.load("2026-10-20T00:00:00Z");
    let hours = b.usage(&[], Bucket::Hour);
    assert_eq!(hours.len(), 25);
    assert_eq!(hours[0].start, t("2026-10-01T10:00:00Z"));
    assert!(close(hours[0].gpu_hours, 2.0));
    for h in &hours[1..] {
        assert!(close(h.instance_hours.unwrap(), 1.0));
        assert!(close(h.gpu_hours, 8.0));
        assert!(close(h.billed_cost, 2.0));
    }
    let by_type = b.gpu_hours_by("instance_type");
    assert_eq!(by_type.keys().collect::<Vec<_>>(), ["Standard_ND96asr_v4"]);
}

#[test]
fn a_row_spanning_more_than_a_month_is_refused_by_column() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus(
        "f.csv",
        &[focus_row(&[
            ("ChargePeriodEnd", "2030-10-01T00:00:00Z"),
            ("ConsumedQuantity", "1"),
            ("ConsumedUnit", "Hrs"),
            ("x_UsageType", "USE1-BoxUsage:g6.xlarge"),
        ])],
    );
    let r = b.load("2026-10-20T00:00:00Z");
    let p = one_period(&r);
    assert_eq!(p.result, "failed");
    assert!(
        p.error
            .as_deref()
            .unwrap()
            .starts_with("f.csv:2: ChargePeriodEnd: a usage row spans"),
        "{p:?}"
    );
}

#[test]
fn aws_reads_only_the_files_its_manifest_lists_beside_a_stale_execution_folder() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    let data = "focus/data/billing_period=2026-10";
    b.focus(
        &format!("{data}/2026-10-02T01:00:00.000Z-old/focus-00001.csv"),
        &[gpu_hour("p5.48xlarge", "ml", "98.32")],
    );
    b.focus(
        &format!("{data}/2026-10-03T01:00:00.000Z-new/focus-00001.csv"),
        &[
            gpu_hour("p5.48xlarge", "ml", "98.32"),
            gpu_hour("p5.48xlarge", "ml", "98.32"),
        ],
    );
    b.write(
        "focus/metadata/billing_period=2026-10/focus-Manifest.json",
        r#"{"executionId":"new","exportArn":"arn:aws:bcm-data-exports:us-east-1:111:export/focus-x",
            "columns":[{"name":"BilledCost","type":"double"}],
            "dataFiles":["s3://bucket/prefix/focus/data/billing_period=2026-10/2026-10-03T01:00:00.000Z-new/focus-00001.csv"],
            "additionalOutputFiles":[]}"#,
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert_eq!((r.files_read, r.files_excluded), (1, 1), "{r:#?}");
    assert!(close(b.total_gpu_hours(), 16.0));
}

#[test]
fn a_manifest_that_lists_a_missing_file_is_not_read_at_all() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus(
        "focus/data/billing_period=2026-10/run/focus-00001.csv",
        &[gpu_hour("p5.48xlarge", "ml", "98.32")],
    );
    b.write(
        "focus/metadata/billing_period=2026-10/focus-Manifest.json",
        r#"{"dataFiles":["s3://b/p/focus/data/billing_period=2026-10/run/focus-00001.csv",
                          "s3://b/p/focus/data/billing_period=2026-10/run/focus-00002.csv"]}"#,
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(r.failed());
    assert!(r.errors[0].contains("focus-00002.csv"), "{:?}", r.errors);
    assert!(b.usage(&[], Bucket::Day).is_empty());
}

#[test]
fn azure_reads_only_the_newest_run_of_an_export_and_month() {
    let b = Bench::new(BillProvider::Azure, BillFormat::Focus);
    let row = |cost: &str| {
        focus_row(&[
            ("ConsumedQuantity", "1"),
            ("ConsumedUnit", "Hours"),
            (
                "x_SkuDetails",
                r#"{"ServiceType":"Standard_NC24ads_A100_v4"}"#,
            ),
            ("BilledCost", cost),
            ("EffectiveCost", cost),
        ])
    };
    for (run, submitted, cost) in [
        ("run-a", "2026-10-05T06:00:00Z", "3.67"),
        ("run-b", "2026-10-06T06:00:00Z", "4.00"),
    ] {
        let dir = format!("exports/focus-daily/20261001-20261031/{run}");
        b.focus(&format!("{dir}/part_0_0001.csv"), &[row(cost)]);
        b.write(
            &format!("{dir}/manifest.json"),
            format!(
                r#"{{"manifestVersion":"2024-04-01","byteCount":100,"blobCount":1,"dataRowCount":1,
                   "exportConfig":{{"exportName":"focus-daily","resourceId":"/subscriptions/x","dataVersion":"1.0r2","type":"FocusCost","timeFrame":"MonthToDate","granularity":"Daily"}},
                   "deliveryConfig":{{"partitionData":true,"dataOverwriteBehavior":"CreateNewReport","fileFormat":"Csv","containerUri":"/x","rootFolderPath":"exports"}},
                   "runInfo":{{"executionType":"Scheduled","submittedTime":"{submitted}","runId":"{run}","startDate":"2026-10-01T00:00:00","endDate":"2026-10-31T00:00:00"}},
                   "blobs":[{{"blobName":"{dir}/part_0_0001.csv","byteCount":100}}]}}"#
            ),
        );
    }
    let r = b.load("2026-10-20T00:00:00Z");
    assert_eq!((r.files_read, r.files_excluded), (1, 1), "{r:#?}");
    let rows = b.usage(&[], Bucket::Month);
    assert!(close(rows[0].billed_cost, 4.0));
}

#[test]
fn null_literals_and_empty_fields_are_both_null() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus(
        "f.csv",
        &[focus_row(&[
            ("ChargeClass", "null"),
            ("CommitmentDiscountStatus", "NULL"),
            ("SkuId", "null"),
            ("ConsumedQuantity", "1"),
            ("ConsumedUnit", "Hrs"),
            ("x_UsageType", "USE1-BoxUsage:g6.xlarge"),
        ])],
    );
    b.load("2026-10-20T00:00:00Z");
    assert!(close(b.total_gpu_hours(), 1.0));
}

#[test]
fn header_drift_a_bom_extra_columns_and_ocis_older_names() {
    let b = Bench::new(BillProvider::Oci, BillFormat::Focus);
    let catalog_sku = (
        "B93311".to_owned(),
        "BM.GPU.H100.8".to_owned(),
        "H100-80GB".to_owned(),
    );
    let gpus = super::gpus::GpuTypes::new(BillProvider::Oci, &[], &[catalog_sku]);
    let text = "\u{feff}BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,PricingCategory,BilledCost,EffectiveCost,BillingCurrency,UsageQuantity,UsageUnit,Provider,Region,SkuId,oci_CompartmentName,x_Whatever\n\
        ocid1.tenancy,2026-10-01T00:00Z,2026-11-01T00:00Z,2026-10-01T00:00:00+00:00,2026-10-01T01:00:00.000+00:00,Usage,Standard,80,80,USD,8,GPU_HOURS_Hours,Oracle,us-ashburn-1,B93311,ml,1\n";
    // OCI meters GPU part numbers in GPU-hours; a unit the file spells its
    // own way is not hours, so the row above is spend only...
    let data = aggregate(&b.source, &gpus, "f.csv", text.as_bytes());
    assert_eq!(data[0].gpu_rows, 0);
    // ...while the documented hour units count.
    let text = text.replace("GPU_HOURS_Hours", "Hours");
    let data = aggregate(&b.source, &gpus, "f.csv", text.as_bytes());
    assert_eq!(data[0].gpu_rows, 1);
    let (key, value) = data[0].usage.iter().next().unwrap();
    assert_eq!(key.instance_type, "BM.GPU.H100.8");
    assert_eq!(key.region, "us-ashburn-1");
    assert_eq!((value.instance_hours, value.gpu_hours), (None, 8.0));
}

/// Reads one file into aggregates, without a store.
fn aggregate(
    source: &BillSource,
    gpus: &super::gpus::GpuTypes,
    name: &str,
    bytes: &[u8],
) -> Vec<super::PeriodData> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), bytes).unwrap();
    let file = super::files::DataFile {
        rel: name.to_owned(),
        fingerprint: String::new(),
    };
    let folder = super::files::LocalFolder {
        root: dir.path().to_path_buf(),
    };
    let mut agg = super::aggregate::Aggregator::new(source, gpus);
    let (_, result) = super::load::read_file(source, gpus, &folder, &file, &mut agg);
    result.unwrap();
    agg.finish()
}

#[test]
fn gcp_counts_gpu_skus_only_never_the_machines_core_and_ram_rows() {
    let b = Bench::new(BillProvider::Gcp, BillFormat::Focus);
    let gpus = super::gpus::GpuTypes::new(
        BillProvider::Gcp,
        &[],
        &[(
            "9A2B-0C1D-2E3F".to_owned(),
            "nvidia-tesla-a100".to_owned(),
            "A100-40GB".to_owned(),
        )],
    );
    let machine = |sku: &str, cost: &str| {
        focus_row(&[
            ("SkuId", sku),
            ("ConsumedQuantity", "3600"),
            ("ConsumedUnit", "Seconds"),
            ("SkuPriceDetails", r#"{"InstanceType":"a2-highgpu-1g"}"#),
            ("PricingCategory", "Committed"),
            (
                "CommitmentDiscountId",
                "projects/p/regions/us-central1/commitments/c1",
            ),
            ("CommitmentDiscountStatus", "Used"),
            ("BilledCost", cost),
            ("EffectiveCost", cost),
        ])
    };
    let text = csv_text(
        FOCUS,
        &[
            machine("CORE-SKU", "0.8"),
            machine("RAM-SKU", "0.2"),
            machine("9A2B-0C1D-2E3F", "2.9"),
        ],
    );
    let data = aggregate(&b.source, &gpus, "f.csv", text.as_bytes());
    let d = &data[0];
    assert_eq!(d.gpu_rows, 1);
    assert!(close(d.gpu_hours, 1.0));
    let (key, value) = d.usage.iter().next().unwrap();
    assert_eq!(
        (key.instance_type.as_str(), key.price_kind),
        ("nvidia-tesla-a100", super::UsageKind::Commit)
    );
    assert!(close(value.billed_cost, 2.9));
    // All three rows are spend, and GPU spend: they price a GPU machine.
    let gpu_spend: f64 = d
        .spend
        .iter()
        .filter(|s| s.gpu)
        .map(|s| s.billed_cost)
        .sum();
    assert!(close(gpu_spend, 3.9));
}

#[test]
fn unmapped_gpu_types_are_reported_by_name_never_guessed() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus(
        "f.csv",
        &[
            gpu_hour("p4de.12xlarge", "ml", "10"),
            gpu_hour("p4de.12xlarge", "ml", "10"),
            focus_row(&[
                ("ConsumedQuantity", "1"),
                ("ConsumedUnit", "Hrs"),
                (
                    "SkuPriceDetails",
                    r#"{"InstanceType":"z9.metal","GpuCount":"4"}"#,
                ),
            ]),
            gpu_hour("m5.xlarge", "ml", "0.19"),
        ],
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert_eq!(
        r.unmapped,
        BTreeMap::from([("p4de.12xlarge".to_owned(), 2), ("z9.metal".to_owned(), 1)])
    );
    assert!(b.usage(&[], Bucket::Day).is_empty());
    let loads = b.pool.read(|s| s.bill_loads(None)).unwrap();
    assert_eq!(loads[0].unmapped["p4de.12xlarge"], 2);
}

#[test]
fn an_unchanged_redelivery_changes_nothing_and_is_not_parsed_again() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus("f.csv", &[gpu_hour("p5.48xlarge", "ml", "98.32")]);
    assert_eq!(one_period(&b.load("2026-10-20T00:00:00Z")).result, "loaded");
    let again = b.load("2026-10-20T06:00:00Z");
    assert_eq!((again.files_read, again.files_skipped), (0, 1));
    assert!(again.periods.is_empty());
    // The same rows written anew (a new modification time) parse, and change nothing.
    std::thread::sleep(std::time::Duration::from_millis(20));
    b.focus("f.csv", &[gpu_hour("p5.48xlarge", "ml", "98.32")]);
    let p = b.load("2026-10-20T12:00:00Z");
    assert_eq!(one_period(&p).result, "unchanged");
    assert_eq!(one_period(&p).generation, Some(1));
}

on_both_backends! {
fn a_growing_open_month_is_an_update_and_a_changed_final_one_a_restatement(db) {
    let b = Bench::on(db.pool(0), BillProvider::Aws, BillFormat::Focus, None);
    b.focus("f.csv", &[gpu_hour("p5.48xlarge", "ml", "98.32")]);
    b.load("2026-10-20T00:00:00Z");
    std::thread::sleep(std::time::Duration::from_millis(20));
    b.focus(
        "f.csv",
        &[
            gpu_hour("p5.48xlarge", "ml", "98.32"),
            gpu_hour("p5.48xlarge", "ml", "98.32"),
        ],
    );
    let grown = b.load("2026-10-21T00:00:00Z");
    assert_eq!(one_period(&grown).result, "updated");
    assert_eq!(one_period(&grown).generation, Some(2));
    assert!(one_period(&grown).deltas.is_none());
    std::thread::sleep(std::time::Duration::from_millis(20));
    b.focus(
        "f.csv",
        &[
            gpu_hour("p5.48xlarge", "ml", "98.32"),
            gpu_hour("p5.48xlarge", "ml", "90.00"),
        ],
    );
    let restated = b.load("2026-12-20T00:00:00Z");
    let p = one_period(&restated);
    assert_eq!((p.result.as_str(), p.generation), ("restated", Some(3)));
    let d = p.deltas.as_ref().unwrap();
    assert_eq!(d.rows, 0);
    assert!(close(d.billed_cost, -8.32));
    assert!(close(d.gpu_hours, 0.0));
    let loads = b.pool.read(|s| s.bill_loads(None)).unwrap();
    assert_eq!(loads[0].restatements.len(), 1);
    assert_eq!(loads[0].restatements[0].state, "final");
    // The usage is the new delivery's, not both.
    assert!(close(b.total_gpu_hours(), 16.0));
}
}

on_both_backends! {
fn a_bad_file_fails_its_period_by_file_line_and_column_and_the_stored_rows_stay(db) {
    let b = Bench::on(db.pool(0), BillProvider::Aws, BillFormat::Focus, None);
    b.focus("oct.csv", &[gpu_hour("p5.48xlarge", "ml", "98.32")]);
    b.load("2026-10-20T00:00:00Z");
    std::thread::sleep(std::time::Duration::from_millis(20));
    b.focus(
        "oct.csv",
        &[
            gpu_hour("p5.48xlarge", "ml", "98.32"),
            gpu_hour("p5.48xlarge", "ml", "9O.00"),
        ],
    );
    let mut nov = gpu_hour("g6.xlarge", "ml", "0.8");
    nov[1] = "2026-11-01T00:00:00Z".into();
    nov[2] = "2026-12-01T00:00:00Z".into();
    nov[3] = "2026-11-02T00:00:00Z".into();
    nov[4] = "2026-11-02T01:00:00Z".into();
    b.focus("nov.csv", &[nov]);
    let r = b.load("2026-11-03T00:00:00Z");
    assert!(r.failed());
    let by_period: BTreeMap<&str, &crate::bills::PeriodOutcome> = r
        .periods
        .iter()
        .map(|p| (p.billing_period.as_str(), p))
        .collect();
    assert_eq!(by_period["2026-11"].result, "loaded");
    assert_eq!(by_period["2026-10"].result, "failed");
    assert_eq!(
        by_period["2026-10"].error.as_deref(),
        Some("oct.csv:3: BilledCost: `9O.00` is not a number")
    );
    // October keeps its one stored hour; November is in.
    assert!(close(b.total_gpu_hours(), 9.0));
    // The bad file is read again next time, not taken as read.
    let again = b.load("2026-11-03T06:00:00Z");
    assert_eq!(again.files_read, 1);
}
}

#[test]
fn a_key_value_cell_that_is_not_an_object_is_an_error_naming_its_column() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus(
        "f.csv",
        &[
            focus_row(&[("Tags", "team=ml")]),
            gpu_hour("g6.xlarge", "ml", "1"),
        ],
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert_eq!(
        one_period(&r).error.as_deref(),
        Some("f.csv:2: Tags: `team=ml` is not a JSON object")
    );
}

#[test]
fn a_missing_required_column_or_a_cut_gzip_is_named_with_its_file() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.write(
        "no-cost.csv",
        "BillingAccountId,BillingPeriodStart\n111,2026-10-01T00:00:00Z\n",
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(
        r.errors[0].starts_with("no-cost.csv: missing the required column"),
        "{r:#?}"
    );

    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(
        &mut gz,
        csv_text(FOCUS, &vec![gpu_hour("g6.xlarge", "ml", "1"); 2000]).as_bytes(),
    )
    .unwrap();
    let bytes = gz.finish().unwrap();
    b.write("whole.csv.gz", &bytes);
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    assert!(close(b.total_gpu_hours(), 2000.0));
    b.write("whole.csv.gz", &bytes[..bytes.len() / 2]);
    let r = b.load("2026-10-20T06:00:00Z");
    assert!(r.failed());
    let e = one_period(&r).error.clone().unwrap();
    assert!(e.starts_with("whole.csv.gz: line "), "{e}");
    assert!(close(b.total_gpu_hours(), 2000.0));
}

on_both_backends! {
fn cur2_negations_are_cost_only_and_fees_amortize_as_aws_does(db) {
    let b = Bench::on(db.pool(0), BillProvider::Aws, BillFormat::Cur2, None);
    let header = [
        "bill_payer_account_id",
        "bill_billing_period_start_date",
        "bill_billing_period_end_date",
        "line_item_usage_account_id",
        "line_item_usage_start_date",
        "line_item_usage_end_date",
        "line_item_line_item_type",
        "line_item_usage_type",
        "line_item_usage_amount",
        "line_item_unblended_cost",
        "line_item_currency_code",
        "product_instance_type",
        "product_region_code",
        "pricing_unit",
        "reservation_reservation_a_r_n",
        "reservation_effective_cost",
        "reservation_unused_amortized_upfront_fee_for_billing_period",
        "reservation_unused_recurring_fee",
        "reservation_unused_quantity",
        "savings_plan_savings_plan_a_r_n",
        "savings_plan_savings_plan_effective_cost",
        "savings_plan_total_commitment_to_date",
        "savings_plan_used_commitment",
        "resource_tags",
    ];
    let sp = "arn:aws:savingsplans::111:savingsplan/sp-1";
    let ri = "arn:aws:ec2:us-east-1:111:reserved-instances/ri-1";
    let line = |kind: &str,
                usage_type: &str,
                amount: &str,
                cost: &str,
                instance: &str,
                extra: &[(usize, &str)]| {
        let mut r: Vec<String> = vec![
            "111",
            "2026-10-01T00:00:00Z",
            "2026-11-01T00:00:00Z",
            "222",
            "2026-10-01T00:00:00Z",
            "2026-10-01T01:00:00Z",
            kind,
            usage_type,
            amount,
            cost,
            "USD",
            instance,
            "us-east-1",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            r#"{"user_team":"ml"}"#,
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        for (i, v) in extra {
            r[*i] = (*v).to_owned();
        }
        r
    };
    let rows = vec![
        line(
            "Usage",
            "USE1-BoxUsage:p5.48xlarge",
            "1",
            "98.32",
            "p5.48xlarge",
            &[(13, "Hrs")],
        ),
        line(
            "SavingsPlanCoveredUsage",
            "USE1-BoxUsage:p5.48xlarge",
            "1",
            "98.32",
            "p5.48xlarge",
            &[(13, "Hrs"), (19, sp), (20, "79.11")],
        ),
        line(
            "SavingsPlanNegation",
            "USE1-BoxUsage:p5.48xlarge",
            "1",
            "-98.32",
            "p5.48xlarge",
            &[(19, sp)],
        ),
        line(
            "SavingsPlanRecurringFee",
            "USE1-ComputeSP:1yrNoUpfront",
            "1",
            "100",
            "",
            &[(19, sp), (21, "100"), (22, "79.11")],
        ),
        line(
            "DiscountedUsage",
            "USE1-BoxUsage:g5.xlarge",
            "2",
            "0",
            "g5.xlarge",
            &[
                (5, "2026-10-01T02:00:00Z"),
                (13, "Hrs"),
                (14, ri),
                (15, "0.8"),
            ],
        ),
        line(
            "RIFee",
            "USE1-HeavyUsage:g5.xlarge",
            "3",
            "0.3",
            "g5.xlarge",
            &[(14, ri), (16, "0.2"), (17, "0.1"), (18, "1")],
        ),
        line("Fee", "", "1", "500", "", &[(14, ri)]),
        line("Tax", "", "", "7", "", &[]),
    ];
    b.write("cur.csv", csv_text(&header, &rows));
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    // On demand 8, savings plan 8, reserved g5 2 hours: 18; the negation adds none.
    assert!(close(b.total_gpu_hours(), 18.0));
    let kinds: BTreeMap<String, (f64, f64, f64)> = b
        .usage(&["price_kind"], Bucket::Month)
        .into_iter()
        .map(|u| {
            (
                u.fields["price_kind"].clone(),
                (u.gpu_hours, u.billed_cost, u.effective_cost),
            )
        })
        .collect();
    assert_eq!(kinds["on_demand"], (8.0, 98.32, 98.32));
    // Covered usage and its negation net to nothing billed; amortized, the plan's rate.
    let (h, billed, effective) = kinds["savings_plan"];
    assert!(close(h, 8.0) && close(billed, 0.0) && close(effective, 79.11));
    assert_eq!(kinds["reserved"], (2.0, 0.0, 0.8));
    // Amortized total: 98.32 + 79.11 + 0 (negation) + 20.89 (unused plan)
    // + 0.8 + 0.3 (unused reservation) + 0 (upfront fee) + 7 (tax).
    let effective: f64 = b.spend(&[]).iter().map(|s| s.effective_cost).sum();
    assert!(close(effective, 206.42), "{effective}");
    // Cash: every line's unblended cost, negation included.
    let billed: f64 = b.spend(&[]).iter().map(|s| s.billed_cost).sum();
    assert!(close(
        billed,
        98.32 + 98.32 - 98.32 + 100.0 + 0.3 + 500.0 + 7.0
    ));
    let c: BTreeMap<String, CommitmentRecord> = b
        .commitments()
        .into_iter()
        .map(|c| (c.kind.clone().unwrap(), c))
        .collect();
    assert!(close(c["savings_plan"].utilization.unwrap(), 0.7911));
    assert_eq!(c["savings_plan"].unit.as_deref(), Some("USD"));
    // The reservation: 2 hours used, 1 unused.
    assert!(close(c["reservation"].utilization.unwrap(), 2.0 / 3.0));
    assert_eq!(c["reservation"].instance_type.as_deref(), Some("g5.xlarge"));
    assert_eq!(b.gpu_hours_by("team").keys().collect::<Vec<_>>(), ["ml"]);
}
}

#[test]
fn parquet_with_map_columns_reads_as_its_csv_twin() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    let bytes = focus_parquet(
        &[
            (0, "Usage", "ml", "p5.48xlarge", 98.32),
            (0, "Usage", "research", "g6.xlarge", 0.8),
            (0, "Usage", "", "g6.xlarge", 0.8),
        ],
        None,
    );
    b.write("focus/data/focus-00001.snappy.parquet", &bytes);
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    assert_eq!(
        b.gpu_hours_by("team"),
        BTreeMap::from([
            ("ml".to_owned(), 8.0),
            ("research".to_owned(), 1.0),
            ("unallocated".to_owned(), 1.0)
        ])
    );
    // A Parquet file cut short fails with its name.
    b.write(
        "focus/data/focus-00001.snappy.parquet",
        &bytes[..bytes.len() / 2],
    );
    let r = b.load("2026-10-20T06:00:00Z");
    assert!(r.failed());
    assert!(
        r.periods[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with("focus/data/focus-00001.snappy.parquet: not a readable Parquet file"),
        "{r:#?}"
    );
}

on_both_backends! {
fn a_period_is_replaced_whole_and_read_back_alike(db) {
    let b = Bench::on(db.pool(0), BillProvider::Aws, BillFormat::Focus, None);
    b.focus(
        "f.csv",
        &[
            gpu_hour("p5.48xlarge", "ml", "98.32"),
            gpu_hour("g6.xlarge", "research", "0.8"),
        ],
    );
    b.load("2026-10-20T00:00:00Z");
    std::thread::sleep(std::time::Duration::from_millis(20));
    b.focus("f.csv", &[gpu_hour("p5.48xlarge", "ml", "98.32")]);
    let r = b.load("2026-10-21T00:00:00Z");
    assert_eq!(one_period(&r).result, "updated");
    assert_eq!(
        b.gpu_hours_by("team"),
        BTreeMap::from([("ml".to_owned(), 8.0)])
    );
    let months = b.usage(&["team"], Bucket::Month);
    assert_eq!(months[0].start, t("2026-10-01T00:00:00Z"));
    let spend = b.spend(&["team"]);
    assert_eq!(spend.len(), 1);
    assert!(close(spend[0].billed_cost, 98.32));
    let loads = b.pool.read(|s| s.bill_loads(None)).unwrap();
    assert_eq!(loads[0].generation, 2);
}
}

on_both_backends! {
fn retention_drops_whole_billing_periods_before_the_cutoffs_month(db) {
    let b = Bench::on(db.pool(0), BillProvider::Aws, BillFormat::Focus, None);
    let mut sep = gpu_hour("p5.48xlarge", "ml", "98.32");
    sep[1] = "2026-09-01T00:00:00Z".into();
    sep[2] = "2026-10-01T00:00:00Z".into();
    sep[3] = "2026-09-30T23:00:00Z".into();
    sep[4] = "2026-10-01T00:00:00Z".into();
    b.focus("sep.csv", &[sep]);
    b.focus("oct.csv", &[gpu_hour("p5.48xlarge", "ml", "98.32")]);
    b.load("2026-10-20T00:00:00Z");
    let retention = crate::store::Retention {
        bills: Some(std::time::Duration::from_secs(10 * 86_400)),
        ..crate::store::Retention::default()
    };
    // 10 days before 2026-10-20 is in October: September goes, October stays.
    let now = t("2026-10-20T00:00:00Z");
    assert_eq!(crate::store::prune(&b.pool, &retention, now, true).unwrap().bill_periods, 1);
    assert_eq!(crate::store::prune(&b.pool, &retention, now, false).unwrap().bill_periods, 1);
    let loads = b.pool.read(|s| s.bill_loads(None)).unwrap();
    assert_eq!(loads.len(), 1);
    assert_eq!(loads[0].billing_period, "2026-10");
    assert!(close(b.total_gpu_hours(), 8.0));
    assert_eq!(crate::store::test_support::count(&b.pool, "bill_usage_days"), 1);
}
}

#[test]
fn azure_spot_reservations_and_savings_plans_read_by_their_own_words() {
    let b = Bench::new(BillProvider::Azure, BillFormat::Focus);
    let row = |set: &[(&str, &str)]| {
        let mut all = vec![
            ("ChargePeriodStart", "2026-10-01T00:00Z"),
            ("ChargePeriodEnd", "2026-10-02T00:00Z"),
            ("ConsumedQuantity", "24"),
            ("ConsumedUnit", "Hours"),
            (
                "x_SkuDetails",
                r#"{"ServiceType":"Standard_NC24ads_A100_v4","VCPUs":24}"#,
            ),
            ("BilledCost", "24"),
            ("EffectiveCost", "24"),
        ];
        all.extend_from_slice(set);
        // Later pairs win: focus_row takes the first match, so put them first.
        all.reverse();
        focus_row(&all)
    };
    let res = "/providers/microsoft.capacity/reservationorders/o1/reservations/r1";
    let sp = "/providers/microsoft.billingbenefits/savingsplanorders/s1";
    b.focus(
        "part_0_0001.csv",
        &[
            // Spot as Azure marks it: Standard pricing with the spot subcategory.
            row(&[("x_PricingSubcategory", "Spot")]),
            row(&[
                ("PricingCategory", "Committed"),
                ("CommitmentDiscountId", res),
                ("CommitmentDiscountType", "Reservation"),
                ("CommitmentDiscountCategory", "Usage"),
                ("CommitmentDiscountStatus", "Used"),
            ]),
            row(&[
                ("PricingCategory", "Committed"),
                ("CommitmentDiscountId", sp),
                ("CommitmentDiscountType", "Savings Plan"),
                ("CommitmentDiscountCategory", "Spend"),
                ("CommitmentDiscountStatus", "Used"),
            ]),
            // A day of the reservation unused: spend, never usage.
            row(&[
                ("PricingCategory", "Committed"),
                ("CommitmentDiscountId", res),
                ("CommitmentDiscountType", "Reservation"),
                ("CommitmentDiscountStatus", "Unused"),
                ("ConsumedQuantity", ""),
                ("BilledCost", "0"),
            ]),
        ],
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    let kinds: BTreeMap<String, f64> = b
        .usage(&["price_kind"], Bucket::Month)
        .into_iter()
        .map(|u| (u.fields["price_kind"].clone(), u.gpu_hours))
        .collect();
    // The A100 v4 size has one GPU: a day of it is 24 GPU-hours, whatever bought it.
    assert_eq!(
        kinds,
        BTreeMap::from([
            ("reserved".to_owned(), 24.0),
            ("savings_plan".to_owned(), 24.0),
            ("spot".to_owned(), 24.0)
        ])
    );
    let c: BTreeMap<String, CommitmentRecord> = b
        .commitments()
        .into_iter()
        .map(|c| (c.id.clone(), c))
        .collect();
    assert_eq!(c[res].kind.as_deref(), Some("reservation"));
    assert_eq!(c[sp].kind.as_deref(), Some("savings_plan"));
    assert_eq!(
        c[res].instance_type.as_deref(),
        Some("Standard_NC24ads_A100_v4")
    );
    // No quantities in the file: utilization by amortized cost, 24 used of 48.
    assert!(close(c[res].utilization.unwrap(), 0.5));
}

#[test]
fn cur2_parquet_tags_are_a_map_whose_user_keys_match_the_team_tags() {
    use std::sync::Arc;

    use arrow_array::builder::{MapBuilder, StringBuilder};
    use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};

    let b = Bench::new(BillProvider::Aws, BillFormat::Cur2);
    let n = 3;
    let text = |v: &str| Arc::new(StringArray::from(vec![v; n])) as ArrayRef;
    let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    // The exact spelling first, then any case; `aws:` keys never name a team.
    for pairs in [
        vec![("user_team", "ml"), ("user_Team", "other")],
        vec![("user_TEAM", "research")],
        vec![("aws_createdBy", "x")],
    ] {
        for (k, v) in pairs {
            tags.keys().append_value(k);
            tags.values().append_value(v);
        }
        tags.append(true).unwrap();
    }
    let batch = RecordBatch::try_from_iter(vec![
        ("bill_payer_account_id", text("111")),
        (
            "bill_billing_period_start_date",
            text("2026-10-01T00:00:00Z"),
        ),
        ("line_item_usage_start_date", text("2026-10-01T00:00:00Z")),
        ("line_item_usage_end_date", text("2026-10-01T01:00:00Z")),
        ("line_item_line_item_type", text("Usage")),
        ("line_item_usage_type", text("USE1-BoxUsage:g6.xlarge")),
        (
            "line_item_usage_amount",
            Arc::new(Float64Array::from(vec![1.0; n])) as ArrayRef,
        ),
        (
            "line_item_unblended_cost",
            Arc::new(Float64Array::from(vec![0.8; n])) as ArrayRef,
        ),
        ("line_item_currency_code", text("USD")),
        ("resource_tags", Arc::new(tags.finish()) as ArrayRef),
    ])
    .unwrap();
    b.write(
        "cur/data/cur-00001.snappy.parquet",
        parquet_bytes(&batch, None),
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    assert_eq!(
        b.gpu_hours_by("team"),
        BTreeMap::from([
            ("ml".to_owned(), 1.0),
            ("research".to_owned(), 1.0),
            ("unallocated".to_owned(), 1.0)
        ])
    );
}

/// A FOCUS Parquet file of one-hour rows `(hour of October, ChargeCategory,
/// team tag, instance type, cost)`, in row groups of `group_rows` rows
/// where given.
fn focus_parquet(rows: &[(i64, &str, &str, &str, f64)], group_rows: Option<usize>) -> Vec<u8> {
    use std::sync::Arc;

    use arrow_array::builder::{MapBuilder, StringBuilder};
    use arrow_array::{
        ArrayRef, Float64Array, RecordBatch, StringArray, TimestampMillisecondArray,
    };

    let n = rows.len();
    let text = |v: &str| Arc::new(StringArray::from(vec![v; n])) as ArrayRef;
    let times =
        |v: Vec<i64>| Arc::new(TimestampMillisecondArray::from(v).with_timezone("UTC")) as ArrayRef;
    let october = t("2026-10-01T00:00:00Z").timestamp_millis();
    let hour = |h: i64| october + h * 3_600_000;
    let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    let mut details = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for (_, _, team, instance, _) in rows {
        tags.keys().append_value("team");
        tags.values().append_value(team);
        tags.append(true).unwrap();
        details.keys().append_value("InstanceType");
        details.values().append_value(instance);
        details.append(true).unwrap();
    }
    let costs = || Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.4))) as ArrayRef;
    let batch = RecordBatch::try_from_iter(vec![
        ("BillingAccountId", text("111")),
        ("BillingPeriodStart", times(vec![october; n])),
        (
            "BillingPeriodEnd",
            times(vec![t("2026-11-01T00:00:00Z").timestamp_millis(); n]),
        ),
        (
            "ChargePeriodStart",
            times(rows.iter().map(|r| hour(r.0)).collect()),
        ),
        (
            "ChargePeriodEnd",
            times(rows.iter().map(|r| hour(r.0 + 1)).collect()),
        ),
        (
            "ChargeCategory",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))) as ArrayRef,
        ),
        ("PricingCategory", text("Standard")),
        ("BilledCost", costs()),
        ("EffectiveCost", costs()),
        ("BillingCurrency", text("USD")),
        (
            "ConsumedQuantity",
            Arc::new(Float64Array::from(vec![1.0; n])) as ArrayRef,
        ),
        ("ConsumedUnit", text("Hrs")),
        ("RegionId", text("us-east-1")),
        ("SubAccountId", text("222")),
        ("SkuPriceDetails", Arc::new(details.finish()) as ArrayRef),
        ("Tags", Arc::new(tags.finish()) as ArrayRef),
    ])
    .unwrap();
    parquet_bytes(&batch, group_rows)
}

/// `batch` as a Parquet file, in row groups of `group_rows` if given.
fn parquet_bytes(batch: &arrow_array::RecordBatch, group_rows: Option<usize>) -> Vec<u8> {
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(group_rows)
        .build();
    let mut bytes = Vec::new();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    bytes
}

/// `rows` g6.xlarge hours of three teams in turn, in row groups of 10, with
/// `ChargeCategory` replaced by `Bogus` on the rows listed in `bad`.
fn hours_of_three_teams(rows: usize, bad: &[usize]) -> Vec<u8> {
    let rows: Vec<(i64, &str, &str, &str, f64)> = (0..rows)
        .map(|r| {
            let category = if bad.contains(&r) { "Bogus" } else { "Usage" };
            let team = ["ml", "research", "infra"][r % 3];
            (i64::try_from(r).unwrap(), category, team, "g6.xlarge", 0.8)
        })
        .collect();
    focus_parquet(&rows, Some(10))
}

#[test]
fn parquet_row_groups_split_between_workers_sum_every_row_once() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    // 7 groups of 10 rows and one of 3: the workers' shares cut a group.
    b.write(
        "focus/data/focus-00001.snappy.parquet",
        hours_of_three_teams(73, &[]),
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    assert_eq!(one_period(&r).rows, 73);
    assert_eq!(
        b.gpu_hours_by("team"),
        BTreeMap::from([
            ("infra".to_owned(), 24.0),
            ("ml".to_owned(), 25.0),
            ("research".to_owned(), 24.0)
        ])
    );
}

#[test]
fn a_parquet_row_that_repeats_a_shape_but_has_a_bad_cost_fails_at_its_line_and_column() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    // Row 40 has the text of rows 37 and 34 before it (three teams in
    // turn), so its shape is known; its cost is not a finite number.
    let rows: Vec<(i64, &str, &str, &str, f64)> = (0..73)
        .map(|r| {
            let cost = if r == 40 { f64::INFINITY } else { 0.8 };
            (
                r,
                "Usage",
                ["ml", "research", "infra"][r as usize % 3],
                "g6.xlarge",
                cost,
            )
        })
        .collect();
    b.write(
        "focus/data/focus-00001.snappy.parquet",
        focus_parquet(&rows, Some(100)),
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(r.failed());
    let error = one_period(&r).error.clone().unwrap();
    assert_eq!(
        error,
        "focus/data/focus-00001.snappy.parquet:42: BilledCost: inf is not a finite number"
    );
}

#[test]
fn parquet_bad_rows_in_both_workers_shares_report_the_first_line() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    // Rows 12 (the first worker's) and 60 (the second's) are bad: row r is
    // on line r + 2, after the header.
    b.write(
        "focus/data/focus-00001.snappy.parquet",
        hours_of_three_teams(73, &[60, 12]),
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(r.failed());
    let error = one_period(&r).error.clone().unwrap();
    assert!(
        error.starts_with("focus/data/focus-00001.snappy.parquet:14: ChargeCategory:"),
        "{error}"
    );
}

/// Rows of every kind the repeat memo must tell apart (teams by exact and
/// loose tag keys and blank values, GPU and other instance types, missing
/// quantities, corrections, commitments, two billing periods, purchases),
/// many repeating an earlier row's text with other amounts, as CSV and as
/// Parquet in each [`Layout`], in row groups that split the memo's epochs.
fn repeated_rows() -> Vec<BTreeMap<&'static str, Option<String>>> {
    let mut seed = 7u64;
    let mut pick = |n: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(seed >> 33).unwrap() % n
    };
    let tags = [
        vec![("team", "ml")],
        vec![("Team", "research")],
        vec![("team", " "), ("project", "infra")],
        vec![("owner", "x")],
        vec![("project", "ml"), ("team", "research")],
    ];
    let types = [
        Some("p5.48xlarge"),
        Some("g6.xlarge"),
        Some("m5.xlarge"),
        None,
    ];
    let json = |pairs: &[(&str, &str)]| {
        serde_json::Value::Object(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
                .collect(),
        )
        .to_string()
    };
    let details = |instance_type: Option<&str>, gpus: bool| {
        let mut details = Vec::new();
        if let Some(t) = instance_type {
            details.push(("InstanceType", t));
        }
        if gpus {
            details.push(("GpuCount", "1"));
        }
        json(&details)
    };
    let templates: Vec<BTreeMap<&'static str, Option<String>>> = (0..15)
        .map(|_| {
            let mut row: BTreeMap<&'static str, Option<String>> = BTreeMap::new();
            let mut set = |k: &'static str, v: Option<&str>| {
                row.insert(k, v.map(str::to_owned));
            };
            set("BillingAccountId", Some(["111", "999"][pick(2)]));
            set(
                "ChargeCategory",
                Some(["Usage", "Usage", "Usage", "Purchase", "Credit"][pick(5)]),
            );
            set("ChargeClass", (pick(9) == 0).then_some("Correction"));
            set(
                "PricingCategory",
                Some(["Standard", "Dynamic", "Committed"][pick(3)]),
            );
            let cost = format!("{}", 0.25 * f64::from(u32::try_from(pick(40)).unwrap()));
            set("BillingCurrency", Some(["USD", "USD", "EUR"][pick(3)]));
            set("ConsumedQuantity", (pick(6) != 0).then_some("1"));
            set("ConsumedUnit", Some(["Hrs", "GB"][pick(2)]));
            if pick(8) == 0 {
                set(
                    "CommitmentDiscountId",
                    Some("arn:aws:savingsplans::111:savingsplan/sp-1"),
                );
                set("CommitmentDiscountType", Some("Savings Plan"));
                set("CommitmentDiscountCategory", Some("Spend"));
                set(
                    "CommitmentDiscountStatus",
                    Some(["Used", "Unused"][pick(2)]),
                );
                set("CommitmentDiscountQuantity", Some(&cost));
            }
            set("RegionId", Some(["us-east-1", "eu-west-1"][pick(2)]));
            set(
                "SubAccountId",
                Some(["222", "333", ""][pick(3)]).filter(|a| !a.is_empty()),
            );
            set("ServiceCategory", Some("Compute"));
            set("SkuId", Some(["SKU1", "SKU2"][pick(2)]));
            set("Tags", Some(&json(&tags[pick(tags.len())])));
            set(
                "SkuPriceDetails",
                Some(&details(types[pick(types.len())], pick(4) == 0)),
            );
            row
        })
        .collect();
    // Templates that differ from another in their tags or SKU details alone,
    // which the memo must tell apart by the team, instance type and GPU
    // count those name.
    let variants: Vec<_> = templates[..4]
        .iter()
        .flat_map(|base| {
            let with = |k: &'static str, v: String| {
                let mut row = base.clone();
                row.insert(k, Some(v));
                row
            };
            let by_tags = tags.iter().map(|tag| with("Tags", json(tag)));
            let by_details = types.iter().flat_map(|ty| {
                [false, true].map(|gpus| with("SkuPriceDetails", details(*ty, gpus)))
            });
            by_tags.chain(by_details).collect::<Vec<_>>()
        })
        .collect();
    let templates = [templates, variants].concat();
    // Each row is one of the templates with its own hour, cost, billing
    // period and, now and then, no quantity.
    (0..900_i64)
        .map(|r| {
            let mut row = templates[pick(templates.len())].clone();
            let hour = r / 7;
            let (period, end) = if pick(5) == 0 {
                ("2026-09-01T00:00:00Z", "2026-10-01T00:00:00Z")
            } else {
                ("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z")
            };
            let start = t(period).timestamp() + hour * 3600;
            let iso = |s: i64| DateTime::from_timestamp(s, 0).unwrap().to_rfc3339();
            let cost = format!("{}", 0.25 * f64::from(u32::try_from(pick(40)).unwrap()));
            for (k, v) in [
                ("BillingPeriodStart", period.to_owned()),
                ("BillingPeriodEnd", end.to_owned()),
                ("ChargePeriodStart", iso(start)),
                ("ChargePeriodEnd", iso(start + 3600)),
                ("BilledCost", cost.clone()),
                ("EffectiveCost", cost),
            ] {
                row.insert(k, Some(v));
            }
            if pick(10) == 0 {
                row.insert("ConsumedQuantity", None);
            }
            row
        })
        .collect()
}

/// How [`repeated_parquet`] writes the key-value cells and amounts.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// Maps of text to text, numbers as doubles.
    Maps,
    /// JSON text, as a CSV has them.
    Json,
    /// BigQuery's lists of key and value structs.
    Lists,
    /// Maps, with the costs as text (such a batch has no shapes).
    TextCosts,
}

fn repeated_parquet(rows: &[BTreeMap<&'static str, Option<String>>], layout: Layout) -> Vec<u8> {
    use std::sync::Arc;

    use arrow_array::builder::{ListBuilder, MapBuilder, StringBuilder, StructBuilder};
    use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray, TimestampSecondArray};
    use arrow_schema::{DataType, Field};

    let get = |r: &BTreeMap<&str, Option<String>>, k: &str| r.get(k).cloned().flatten();
    let object = |v: Option<String>| -> Vec<(String, String)> {
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&v.unwrap()).unwrap();
        object
            .into_iter()
            .map(|(k, v)| (k, v.as_str().unwrap().to_owned()))
            .collect()
    };
    let mut columns: Vec<(&str, ArrayRef)> = Vec::new();
    for &name in FOCUS {
        let values = rows.iter().map(|r| get(r, name));
        let array: ArrayRef = match (name, layout) {
            (
                "BillingPeriodStart" | "BillingPeriodEnd" | "ChargePeriodStart" | "ChargePeriodEnd",
                _,
            ) => Arc::new(
                TimestampSecondArray::from(
                    values
                        .map(|v| v.map(|v| t(&v).timestamp()))
                        .collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            ("BilledCost" | "EffectiveCost", Layout::TextCosts) => {
                Arc::new(StringArray::from(values.collect::<Vec<_>>()))
            }
            (
                "BilledCost" | "EffectiveCost" | "ConsumedQuantity" | "CommitmentDiscountQuantity",
                _,
            ) => Arc::new(Float64Array::from(
                values
                    .map(|v| v.map(|v| v.parse::<f64>().unwrap()))
                    .collect::<Vec<_>>(),
            )),
            ("Tags" | "SkuPriceDetails", Layout::Maps | Layout::TextCosts) => {
                let mut map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
                for v in values {
                    for (k, v) in object(v) {
                        map.keys().append_value(k);
                        map.values().append_value(v);
                    }
                    map.append(true).unwrap();
                }
                Arc::new(map.finish())
            }
            ("Tags" | "SkuPriceDetails", Layout::Lists) => {
                let fields = vec![
                    Field::new("key", DataType::Utf8, true),
                    Field::new("value", DataType::Utf8, true),
                ];
                let mut list = ListBuilder::new(StructBuilder::from_fields(fields, 0));
                for v in values {
                    for (k, v) in object(v) {
                        let entry = list.values();
                        entry
                            .field_builder::<StringBuilder>(0)
                            .unwrap()
                            .append_value(k);
                        entry
                            .field_builder::<StringBuilder>(1)
                            .unwrap()
                            .append_value(v);
                        entry.append(true);
                    }
                    list.append(true);
                }
                Arc::new(list.finish())
            }
            _ => Arc::new(StringArray::from(values.collect::<Vec<_>>())),
        };
        columns.push((name, array));
    }
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    parquet_bytes(&batch, Some(250))
}

#[test]
fn parquet_rows_that_repeat_an_earlier_rows_text_add_exactly_what_their_csv_twins_add() {
    let rows = repeated_rows();
    let csv = Bench::new(BillProvider::Aws, BillFormat::Focus);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            FOCUS
                .iter()
                .map(|c| r.get(c).cloned().flatten().unwrap_or_default())
                .collect()
        })
        .collect();
    csv.focus("focus/data/focus-00001.csv", &cells);
    let a = csv.load("2026-10-20T00:00:00Z");
    assert!(!a.failed(), "{a:#?}");
    assert_eq!(a.periods.len(), 4, "{a:#?}");
    assert!(csv.usage(&[], Bucket::Hour).len() > 20);
    for layout in [Layout::Maps, Layout::Json, Layout::Lists, Layout::TextCosts] {
        let parquet = Bench::new(BillProvider::Aws, BillFormat::Focus);
        parquet.write(
            "focus/data/focus-00001.snappy.parquet",
            repeated_parquet(&rows, layout),
        );
        let b = parquet.load("2026-10-20T00:00:00Z");
        assert!(!b.failed(), "{layout:?}: {b:#?}");
        same_load(&csv, &a, &parquet, &b, layout);
    }
}

/// Asserts that two loads of the same rows found the same periods, usage,
/// spend and commitments.
fn same_load(csv: &Bench, a: &SourceReport, parquet: &Bench, b: &SourceReport, layout: Layout) {
    let counts = |r: &SourceReport| {
        r.periods
            .iter()
            .map(|p| {
                (
                    p.billing_account.clone(),
                    p.billing_period.clone(),
                    p.rows,
                    p.gpu_rows,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(a), counts(b), "{layout:?}");
    // Sums of the same rows in another order differ in their last bits.
    fn rounded(v: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::Number(n) if n.is_f64() => {
                Value::from((n.as_f64().unwrap() * 1e6).round() / 1e6)
            }
            Value::Array(a) => Value::Array(a.into_iter().map(rounded).collect()),
            Value::Object(o) => {
                Value::Object(o.into_iter().map(|(k, v)| (k, rounded(v))).collect())
            }
            other => other,
        }
    }
    let shown = |v: serde_json::Value| rounded(v).to_string();
    let usage = |b: &Bench| {
        shown(
            serde_json::to_value(b.usage(crate::store::bills::USAGE_FIELDS, Bucket::Hour)).unwrap(),
        )
    };
    let spend = |b: &Bench| {
        shown(serde_json::to_value(b.spend(crate::store::bills::SPEND_FIELDS)).unwrap())
    };
    let commitments = |b: &Bench| shown(serde_json::to_value(b.commitments()).unwrap());
    assert_eq!(usage(csv), usage(parquet), "{layout:?}");
    assert_eq!(spend(csv), spend(parquet), "{layout:?}");
    assert_eq!(commitments(csv), commitments(parquet), "{layout:?}");
}

#[test]
fn parquet_rows_of_equal_text_share_a_shape_and_rows_of_one_shape_mean_the_same() {
    use super::charge;
    use super::files::Contents;
    use super::focus::{self, BatchRows, Focus, Shape};
    use super::read::{RowCells, RowFn, Table};

    let rows = repeated_rows();
    // What the shape must tell apart: every text but the amounts and
    // times, and whether there is a quantity.
    let text = |r: &BTreeMap<&'static str, Option<String>>| {
        let mut r = r.clone();
        for k in [
            "BillingPeriodStart",
            "BillingPeriodEnd",
            "ChargePeriodStart",
            "ChargePeriodEnd",
            "BilledCost",
            "EffectiveCost",
            "CommitmentDiscountQuantity",
        ] {
            r.remove(k);
        }
        let quantity = r["ConsumedQuantity"].is_some();
        r.insert("ConsumedQuantity", Some(quantity.to_string()));
        r
    };
    // What the text means: the tags only by the team they give.
    let meaning = |r: &BTreeMap<&'static str, Option<String>>| {
        let mut r = text(r);
        let tags: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r["Tags"].as_deref().unwrap()).unwrap();
        let team = ["team", "project"].iter().find_map(|key| {
            let exact = tags.iter().find(|(k, _)| k == key);
            let loose = || tags.iter().find(|(k, _)| k.eq_ignore_ascii_case(key));
            let v = exact.or_else(loose)?.1.as_str()?.trim();
            (!v.is_empty()).then(|| v.to_owned())
        });
        r.insert("Tags", team);
        r
    };
    let texts: Vec<_> = rows.iter().map(text).collect();
    let meanings: Vec<_> = rows.iter().map(meaning).collect();
    for (layout, shaped) in [
        (Layout::Maps, true),
        (Layout::Json, true),
        (Layout::Lists, true),
        (Layout::TextCosts, false),
    ] {
        let bytes = bytes::Bytes::from(repeated_parquet(&rows, layout));
        let table = Table::open(Contents::Memory(bytes), "x.parquet").unwrap();
        let wanted = charge::resolve("x.parquet", table.header(), focus::COLUMNS).unwrap();
        let team_tags = vec!["team".to_owned(), "project".to_owned()];
        let mut focus = Focus::new(BillProvider::Aws, &team_tags);
        let mut batch = BatchRows::default();
        let (mut serial, mut has_shapes) = (0, false);
        let mut seen: Vec<(u64, Shape, usize)> = Vec::new();
        let mut batches = 0;
        let mut f = |row: &dyn RowCells| {
            let (b, r) = row.batch().unwrap();
            if b.serial() != serial {
                serial = b.serial();
                has_shapes = batch.read(&mut focus, b);
                assert_eq!(has_shapes, shaped, "{layout:?}");
                batches += 1;
            }
            if has_shapes {
                let at = usize::try_from(row.line()).unwrap() - 2;
                seen.push((b.epoch(), batch.shape(r), at));
                assert_eq!(
                    batch.amounts(r).map(|a| a.billed),
                    rows[at]["BilledCost"]
                        .as_deref()
                        .map(|c| c.parse().unwrap()),
                );
            }
            Ok(())
        };
        let mut workers: [&mut RowFn<'_>; 1] = [&mut f];
        table.rows(&wanted, &mut workers).unwrap();
        assert!(batches >= 4, "{layout:?}: {batches} batches");
        if !shaped {
            continue;
        }
        assert_eq!(seen.len(), rows.len());
        let mut shared = 0;
        for (i, (epoch, shape, at)) in seen.iter().enumerate() {
            for (e, s, other) in &seen[..i] {
                if e != epoch {
                    continue;
                }
                if texts[*at] == texts[*other] {
                    assert_eq!(shape, s, "{layout:?}: rows {at} and {other}");
                    shared += 1;
                }
                if shape == s {
                    assert_eq!(
                        meanings[*at], meanings[*other],
                        "{layout:?}: rows {at} and {other}"
                    );
                }
            }
        }
        assert!(shared > 400, "{layout:?}: {shared}");
    }
}
