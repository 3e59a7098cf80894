//! Parquet exports: row groups split between workers, and rows that
//! repeat an earlier row's text.

use super::*;

/// A FOCUS Parquet file of one-hour rows `(hour of October, ChargeCategory,
/// team tag, instance type, cost)`, in row groups of `group_rows` rows
/// where given.
pub(super) fn focus_parquet(
    rows: &[(i64, &str, &str, &str, f64)],
    group_rows: Option<usize>,
) -> Vec<u8> {
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
pub(super) fn parquet_bytes(
    batch: &arrow_array::RecordBatch,
    group_rows: Option<usize>,
) -> Vec<u8> {
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
    let mut seed = 11u64;
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
    // Two texts of one meaning, a GPU word, and neither.
    let descriptions = [
        Some("$1.624 per On Demand Linux g5.4xlarge Instance Hour"),
        Some("$1.212 per On Demand Linux g5.4xlarge Instance Hour"),
        Some("NVIDIA GPU hours"),
        Some("Storage"),
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
            set(
                "ProviderName",
                Some(["AWS", "Amazon Web Services", "", "", "", "Datadog"][pick(6)])
                    .filter(|p| !p.is_empty()),
            );
            set("ChargeDescription", descriptions[pick(descriptions.len())]);
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
            let by_description = descriptions
                .iter()
                .flatten()
                .map(|d| with("ChargeDescription", (*d).to_owned()));
            let by_details = types.iter().flat_map(|ty| {
                [false, true].map(|gpus| with("SkuPriceDetails", details(*ty, gpus)))
            });
            by_tags
                .chain(by_details)
                .chain(by_description)
                .collect::<Vec<_>>()
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
    let hours = csv.usage(&[], Bucket::Hour).len();
    assert!(hours > 20, "{hours}");
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
    use crate::bills::charge;
    use crate::bills::files::Contents;
    use crate::bills::focus::{self, BatchRows, Focus, Shape};
    use crate::bills::read::{RowCells, RowFn, Table};

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
        // The provider by the cloud it names, the description by the type
        // and GPU word it gives.
        let provider = r["ProviderName"]
            .as_deref()
            .map(|p| charge::RowProvider::named(p).name().to_owned());
        r.insert("ProviderName", provider);
        let told = r["ChargeDescription"]
            .as_deref()
            .map(charge::described)
            .unwrap_or_default();
        let told = format!("{:?} {}", told.instance_type, told.gpu);
        r.insert("ChargeDescription", Some(told));
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
        let wanted = charge::resolve(
            "x.parquet",
            table.header(),
            focus::COLUMNS,
            BillFormat::Focus,
        )
        .unwrap();
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
