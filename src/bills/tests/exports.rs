//! Which files of an export count (manifests, runs), and how their
//! columns and cells are read, on each cloud.

use super::*;

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
    let gpus = crate::bills::gpus::GpuTypes::new(BillProvider::Oci, &[], &[catalog_sku]);
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
    gpus: &crate::bills::gpus::GpuTypes,
    name: &str,
    bytes: &[u8],
) -> Vec<crate::bills::PeriodData> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), bytes).unwrap();
    let file = crate::bills::files::DataFile {
        rel: name.to_owned(),
        fingerprint: String::new(),
    };
    let folder = crate::bills::files::LocalFolder {
        root: dir.path().to_path_buf(),
    };
    let mut agg = crate::bills::aggregate::Aggregator::new(source, gpus);
    let (_, result) = crate::bills::load::read_file(source, gpus, &folder, &file, &mut agg);
    result.unwrap();
    agg.finish()
}

#[test]
fn gcp_counts_gpu_skus_only_never_the_machines_core_and_ram_rows() {
    let b = Bench::new(BillProvider::Gcp, BillFormat::Focus);
    let gpus = crate::bills::gpus::GpuTypes::new(
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
        ("nvidia-tesla-a100", crate::bills::UsageKind::Commit)
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
    // Every sync reports them: one that reads nothing new too.
    let again = b.load("2026-10-20T06:00:00Z");
    assert_eq!((again.files_read, again.files_skipped), (0, 1));
    assert_eq!(again.unmapped, r.unmapped);
}
