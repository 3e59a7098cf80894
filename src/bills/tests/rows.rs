//! What a bill row means: usage, purchases, commitments, corrections,
//! currencies, tags and rows that span hours.

use super::*;

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
