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
    "ProviderName",
    "ChargeDescription",
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
        self.load_with(now, &Default::default())
    }

    fn load_with(&self, now: &str, tally: &crate::bills::load::Tally) -> SourceReport {
        load_source(&self.pool, &self.source, None, t(now), tally)
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

mod exports;
mod loads;
mod parquet_rows;
mod rows;
