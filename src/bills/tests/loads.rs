//! Loads into the catalog: redeliveries, updates and restatements, bad
//! files, CUR 2.0, periods replaced whole and retention.

use super::parquet_rows::{focus_parquet, parquet_bytes};
use super::*;

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

/// A bad cell is named by its physical line whatever the file's line ends
/// (Azure writes CRLF) and however many lines a quoted cell spans before it.
#[test]
fn a_bad_cell_names_its_line_with_crlf_ends_and_quoted_newlines() {
    let bad = |text: String| {
        let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
        b.write("oct.csv", text);
        let r = b.load("2026-10-20T00:00:00Z");
        one_period(&r).error.clone().unwrap_or_default()
    };
    let rows = [
        gpu_hour("p5.48xlarge", "ml", "98.32"),
        gpu_hour("p5.48xlarge", "ml", "9O.00"),
    ];
    let lf = csv_text(FOCUS, &rows);
    assert_eq!(
        bad(lf.clone()),
        "oct.csv:3: BilledCost: `9O.00` is not a number"
    );
    assert_eq!(
        bad(lf.replace('\n', "\r\n")),
        "oct.csv:3: BilledCost: `9O.00` is not a number"
    );
    // A cell over three lines on the good row (a description column the
    // reader does not use) puts the bad one on line 5.
    let mut header = FOCUS.to_vec();
    header.push("ChargeDescription");
    let mut long = rows.to_vec();
    for r in &mut long {
        r.push("GPU hours".into());
    }
    let at = header.len() - 1;
    long[0][at] = "first\nsecond\nthird".into();
    let text = csv_text(&header, &long);
    assert_eq!(
        bad(text.clone()),
        "oct.csv:5: BilledCost: `9O.00` is not a number"
    );
    assert_eq!(
        bad(text.replace('\n', "\r\n")),
        "oct.csv:5: BilledCost: `9O.00` is not a number"
    );
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
    // What the log says names the failed period, not an empty list.
    assert_eq!(
        r.problems(),
        ["111 2026-10: oct.csv:3: BilledCost: `9O.00` is not a number"]
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
    assert!(!r.errors[0].contains("looks like"), "{r:#?}");

    // A file of another export says which it looks like.
    let b = Bench::new(BillProvider::Aws, BillFormat::Cur2);
    b.focus("focus.csv", &[gpu_hour("g6.xlarge", "ml", "1")]);
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(
        r.errors[0].ends_with("; the header looks like a FOCUS export: set `format = \"focus\"`"),
        "{r:#?}"
    );
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.write(
        "legacy.csv",
        "identity/LineItemId,lineItem/UsageStartDate,lineItem/UnblendedCost\nabc,2026-10-01T00:00:00Z,1.0\n",
    );
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(
        r.errors[0].contains("the header looks like a legacy AWS Cost and Usage Report (CUR 1.0), which gpuplan does not read"),
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

/// The rule docs/bills.md states: a bad cell fails its period where it
/// would change a figure. `Tags` is read only for teams, so one that is not
/// JSON fails the load where `team_tags` is set and is not read otherwise;
/// only GPU usage is spread over its hours, so only a GPU row spanning more
/// than a month fails, and other spend counts on its first day.
#[test]
fn bad_cells_fail_only_where_they_would_change_a_figure() {
    let untagged = focus_row(&[
        ("ConsumedQuantity", "1"),
        ("ConsumedUnit", "Hrs"),
        ("SkuPriceDetails", r#"{"InstanceType":"p5.48xlarge"}"#),
        ("Tags", "team=ml"),
        ("BilledCost", "98"),
        ("EffectiveCost", "98"),
    ]);
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus("oct.csv", std::slice::from_ref(&untagged));
    let r = b.load("2026-10-20T00:00:00Z");
    let e = one_period(&r).error.clone().unwrap_or_default();
    assert!(e.starts_with("oct.csv:2: Tags: "), "{r:#?}");
    let mut b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.source.team_tags.clear();
    b.focus("oct.csv", &[untagged]);
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    assert!(close(b.total_gpu_hours(), 8.0));

    let long = |details: &str| {
        focus_row(&[
            ("ChargePeriodEnd", "2026-11-10T00:00:00Z"),
            ("ServiceCategory", "Storage"),
            ("SkuPriceDetails", details),
            ("ConsumedQuantity", "40"),
            ("ConsumedUnit", "Hrs"),
            ("BilledCost", "40"),
            ("EffectiveCost", "40"),
        ])
    };
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus("oct.csv", &[long("")]);
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    let spend = b.spend(&[]);
    assert_eq!(spend.len(), 1);
    assert_eq!(spend[0].start, t("2026-10-01T00:00:00Z"));
    assert!(close(spend[0].billed_cost, 40.0));
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    b.focus("oct.csv", &[long(r#"{"InstanceType":"p5.48xlarge"}"#)]);
    let r = b.load("2026-10-20T00:00:00Z");
    let e = one_period(&r).error.clone().unwrap_or_default();
    assert!(e.contains("more than a month"), "{r:#?}");
}

/// The progress line's counts: every file to read and read, their bytes,
/// every row (more than a worker counts before it adds its share) and each
/// period written; a second load of unchanged files reads none.
#[test]
fn a_load_tallies_files_bytes_rows_and_periods() {
    use std::sync::atomic::Ordering::Relaxed;
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    let oct = csv_text(FOCUS, &vec![gpu_hour("g6.xlarge", "ml", "1"); 9000]);
    let small = csv_text(FOCUS, &vec![gpu_hour("g6.xlarge", "ml", "2"); 3]);
    b.write("oct-1.csv", &oct);
    b.write("oct-2.csv", &small);
    let tally = crate::bills::load::Tally::default();
    let r = b.load_with("2026-10-20T00:00:00Z", &tally);
    assert!(!r.failed(), "{r:#?}");
    assert_eq!(tally.files.load(Relaxed), 2);
    assert_eq!(tally.files_read.load(Relaxed), 2);
    assert_eq!(tally.bytes.load(Relaxed), (oct.len() + small.len()) as u64);
    assert_eq!(tally.rows.load(Relaxed), 9003);
    assert_eq!(tally.periods.load(Relaxed), r.periods.len() as u64);
    assert!(!r.periods.is_empty());

    let again = crate::bills::load::Tally::default();
    b.load_with("2026-10-20T06:00:00Z", &again);
    assert_eq!(again.files_read.load(Relaxed), 0);
}
