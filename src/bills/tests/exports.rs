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
    let gpus = crate::bills::gpus::GpuTables::new(vec![gpus.clone()]);
    let mut agg = crate::bills::aggregate::Aggregator::new(source, &gpus);
    let (_, result) =
        crate::bills::load::read_file(source, &gpus, &folder, &file, &mut agg, &Default::default());
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

/// A FOCUS 1.0 file of several providers, as the FinOps Foundation's
/// sample and the FinOps tools that merge exports write it: its own column
/// order, `NULL` for empty text, timestamps without a zone, and instance
/// types only in `ChargeDescription`.
const MIXED_FOCUS_1_0: &str = "\
AvailabilityZone,BilledCost,BillingAccountId,BillingAccountName,BillingCurrency,BillingPeriodEnd,BillingPeriodStart,ChargeCategory,ChargeClass,ChargeDescription,ChargeFrequency,ChargePeriodEnd,ChargePeriodStart,CommitmentDiscountCategory,CommitmentDiscountId,CommitmentDiscountName,CommitmentDiscountStatus,CommitmentDiscountType,ConsumedQuantity,ConsumedUnit,EffectiveCost,PricingCategory,ProviderName,RegionId,ServiceCategory,SkuId,SubAccountId,Tags
us-east-1a,3.248,123456789012,Payer,USD,2026-10-01 00:00:00,2026-09-01 00:00:00,Usage,NULL,$1.624 per On Demand Linux g5.4xlarge Instance Hour,Usage-Based,2026-09-02 02:00:00,2026-09-02 00:00:00,NULL,NULL,NULL,NULL,NULL,2,Hrs,3.248,Standard,AWS,us-east-1,Compute,NULL,123456789012,NULL
us-east-1b,1.14,123456789012,Payer,USD,2026-10-01 00:00:00,2026-09-01 00:00:00,Usage,NULL,$1.14 per On Demand Linux g3.4xlarge Instance Hour,Usage-Based,2026-09-02 01:00:00,2026-09-02 00:00:00,NULL,NULL,NULL,NULL,NULL,1,Hrs,1.14,Standard,AWS,us-east-1,Compute,NULL,123456789012,NULL
NULL,2,123456789012,Payer,USD,2026-10-01 00:00:00,2026-09-01 00:00:00,Usage,NULL,Datadog Pro per host,Recurring,2026-09-03 00:00:00,2026-09-02 00:00:00,NULL,NULL,NULL,NULL,NULL,1,Hosts,2,Standard,Datadog,NULL,Management and Governance,NULL,123456789012,NULL
NULL,5,8611537,Contoso EA,USD,2026-10-01 00:00:00,2026-09-01 00:00:00,Usage,NULL,Hot LRS Data Stored,Usage-Based,2026-09-03 00:00:00,2026-09-02 00:00:00,NULL,NULL,NULL,NULL,NULL,100,1 GB/Month,5,Standard,Microsoft,eastus,Storage,NULL,sub-1,\"{\"\"team\"\":\"\"ml\"\"}\"
NULL,9,8611537,Contoso EA,USD,2026-10-01 00:00:00,2026-09-01 00:00:00,Usage,NULL,NC24ads A100 v4 GPU hours,Usage-Based,2026-09-02 03:00:00,2026-09-02 00:00:00,NULL,NULL,NULL,NULL,NULL,3,Hours,9,Standard,Microsoft,eastus,Compute,NULL,sub-1,NULL
NULL,1,8611537,Contoso EA,USD,2026-10-01 00:00:00,2026-09-01 00:00:00,Tax,NULL,Sales tax,One-Time,2026-10-01 00:00:00,2026-09-01 00:00:00,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1,NULL,NULL,NULL,NULL,NULL,sub-1,NULL
NULL,7,ocid1.tenancy.oc1..aaaa,NULL,USD,2026-10-01 00:00:00,2026-09-01 00:00:00,Usage,NULL,Compute - Standard - E4 - OCPU,Usage-Based,2026-09-02 01:00:00,2026-09-02 00:00:00,NULL,NULL,NULL,NULL,NULL,1,Hours,7,Standard,Oracle,us-ashburn-1,Compute,B93113,ocid1.compartment.oc1..bbbb,NULL
";

/// What a load stored, by provider: spend, GPU-hours by instance type,
/// and each billing account's provider.
fn by_provider(b: &Bench) -> (BTreeMap<String, f64>, BTreeMap<(String, String), f64>) {
    let mut spend = BTreeMap::new();
    for r in b.spend(&["provider"]) {
        *spend.entry(r.fields["provider"].clone()).or_default() += r.billed_cost;
    }
    let mut gpu = BTreeMap::new();
    for r in b.usage(&["provider", "instance_type"], Bucket::Month) {
        let key = (
            r.fields["provider"].clone(),
            r.fields["instance_type"].clone(),
        );
        *gpu.entry(key).or_default() += r.gpu_hours;
    }
    (spend, gpu)
}

#[test]
fn each_row_of_a_multi_provider_focus_file_counts_for_the_provider_it_names() {
    // The config says azure: rows that name their provider are theirs, a
    // row that names none (the tax) is the config's.
    let b = Bench::new(BillProvider::Azure, BillFormat::Focus);
    b.write("focus/mixed.csv", MIXED_FOCUS_1_0);
    let r = b.load("2026-10-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    let (spend, gpu) = by_provider(&b);
    let expected: BTreeMap<String, f64> = [
        ("Datadog", 2.0),
        ("aws", 4.388),
        ("azure", 15.0),
        ("oci", 7.0),
    ]
    .into_iter()
    .map(|(p, v)| (p.to_owned(), v))
    .collect();
    assert_eq!(
        spend.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (p, v) in &expected {
        assert!(close(spend[p], *v), "{p}: {spend:?}");
    }
    // AWS's instance types come from the descriptions (one GPU each); the
    // Azure row that says GPU but names no type is reported, not dropped.
    let aws = |t: &str| ("aws".to_owned(), t.to_owned());
    assert_eq!(gpu.len(), 2, "{gpu:?}");
    assert!(close(gpu[&aws("g5.4xlarge")], 2.0));
    assert!(close(gpu[&aws("g3.4xlarge")], 1.0));
    assert_eq!(
        r.unmapped,
        BTreeMap::from([("NC24ads A100 v4 GPU hours".to_owned(), 1)])
    );
    // A load is listed under the provider of most of its rows: the payer's
    // marketplace row does not make it Datadog's.
    let loads = b.pool.read(|s| s.bill_loads(None)).unwrap();
    let providers: BTreeMap<&str, &str> = loads
        .iter()
        .map(|l| (l.billing_account.as_str(), l.provider.as_str()))
        .collect();
    assert_eq!(
        providers,
        BTreeMap::from([
            ("123456789012", "aws"),
            ("8611537", "azure"),
            ("ocid1.tenancy.oc1..aaaa", "oci"),
        ])
    );
    // A question about one provider finds its rows in the mixed source.
    let mut q = b.query(&[], Bucket::Month);
    q.providers = vec!["oci".into()];
    let oci: f64 = b
        .pool
        .read(|s| s.bill_spend(&q))
        .unwrap()
        .iter()
        .map(|r| r.billed_cost)
        .sum();
    assert!(close(oci, 7.0));
    // Budgets: this source, configured as azure, is in the scope of an aws
    // budget since its rows name aws, and of a gcp one not at all...
    let sources = [crate::bills::budgets::BillSourceRef {
        name: "test".into(),
        provider: BillProvider::Azure,
    }];
    let days = |providers: &[&str]| {
        let providers: Vec<String> = providers.iter().map(|p| (*p).to_owned()).collect();
        b.pool
            .read(|s| crate::bills::budgets::data_days(s, &sources, &providers))
            .unwrap()
    };
    // ...and complete by the days of the scope's own rows: aws billed on
    // one day only, so none is complete; azure's rows span two.
    assert_eq!(
        days(&["aws"]).unwrap_err(),
        "no day of the bills is complete yet"
    );
    let azure = days(&["azure"]).unwrap();
    assert_eq!(azure.complete_to, t("2026-09-01T00:00:00Z").timestamp());
    assert_eq!(
        days(&["gcp"]).unwrap_err(),
        "no bill source of its providers is configured"
    );
}

#[test]
fn focus_1_3_names_the_service_provider_and_keeps_provider_name_as_the_older_spelling() {
    let b = Bench::new(BillProvider::Aws, BillFormat::Focus);
    // The 1.3 sample writes both names; a marketplace seller is the
    // service provider while AWS hosts and invoices it.
    let text = "\
ProviderName,PublisherName,ServiceProviderName,HostProviderName,InvoiceIssuerName,BillingAccountId,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeDescription,BilledCost,EffectiveCost,BillingCurrency,ConsumedQuantity,ConsumedUnit,RegionId,ServiceCategory,SkuPriceDetails,SubAccountId\r
AWS,AWS,AWS,AWS,AWS,100000000001,2026-05-01T00:00:00Z,2026-06-01T00:00:00Z,2026-05-01T02:00:00Z,2026-05-01T03:00:00Z,Usage,$98.32 per On Demand Linux p5.48xlarge Instance Hour,98.32,98.32,USD,1.0000,Hours,us-east-1,Compute,\"{\"\"InstanceType\"\":\"\"p5.48xlarge\"\"}\",200000000011\r
AWS,Snowflake,Snowflake,AWS,AWS,100000000001,2026-05-01T00:00:00Z,2026-06-01T00:00:00Z,2026-05-01T00:00:00Z,2026-05-02T00:00:00Z,Usage,Snowflake credits,40,40,USD,10,Credits,us-east-1,Databases,,200000000011\r
";
    b.write("focus/data/focus-00001.csv", text);
    let r = b.load("2026-05-20T00:00:00Z");
    assert!(!r.failed(), "{r:#?}");
    let (spend, gpu) = by_provider(&b);
    assert_eq!(spend.len(), 2, "{spend:?}");
    assert!(close(spend["aws"], 98.32) && close(spend["Snowflake"], 40.0));
    assert!(close(
        gpu[&("aws".to_owned(), "p5.48xlarge".to_owned())],
        8.0
    ));
}

#[test]
fn periods_an_older_reading_stored_are_rewritten_by_the_next_sync_and_not_restated() {
    let b = Bench::new(BillProvider::Azure, BillFormat::Focus);
    b.write("focus/mixed.csv", MIXED_FOCUS_1_0);
    let first = b.load("2026-10-20T00:00:00Z");
    assert!(!first.failed(), "{first:#?}");
    let (spend, gpu) = by_provider(&b);
    // The store as the first reading left it, migrated: every row under the
    // configured provider, marked as made by reading 1, its files forgotten.
    b.pool.raw_execute(
        "UPDATE bill_loads SET reader = 1, provider = 'azure';
         UPDATE bill_spend_days SET provider = 'azure';
         UPDATE bill_usage_hours SET provider = 'azure';
         UPDATE bill_usage_days SET provider = 'azure';
         DELETE FROM bill_files;",
    );
    assert_eq!(by_provider(&b).0.len(), 1);
    // The closed period is rewritten from its file, as an update.
    let r = b.load("2026-10-21T00:00:00Z");
    assert_eq!(r.files_read, 1, "{r:#?}");
    assert!(r.periods.iter().all(|p| p.result == "updated"), "{r:#?}");
    assert_eq!(by_provider(&b), (spend, gpu));
    let loads = b.pool.read(|s| s.bill_loads(None)).unwrap();
    assert!(
        loads.iter().all(|l| l.restatements.is_empty()),
        "{loads:#?}"
    );
    assert!(loads.iter().any(|l| l.provider == "aws"));
    // And then it is as any other: unchanged files are not read.
    let again = b.load("2026-10-22T00:00:00Z");
    assert_eq!((again.files_read, again.files_skipped), (0, 1));
}
