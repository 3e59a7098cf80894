//! AWS's catalog as the aws source stores it, written straight into a
//! test's SQLite file: the p5 type and Capacity Blocks of it.

use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use gpuplan::store::{SqliteStore, Writes as _};
use gpuplan_providers::{InstanceType, PriceKind, PriceRecord, PriceScope, Snapshot, Window};

/// `p5.48xlarge`: eight H100-80GB SXM.
pub fn p5() -> InstanceType {
    InstanceType {
        gpu_form_factor: Some(gpuplan_providers::FormFactor::Sxm),
        instance_type: "p5.48xlarge".into(),
        gpu_model: "H100-80GB".into(),
        gpu_count: 8.0,
        gpu_memory_gib: Some(80.0),
        vcpus: Some(192),
        memory_gib: Some(2048.0),
        mig_profile: None,
    }
}

/// Midnight (UTC) two days from now: where the blocks start.
pub fn start() -> DateTime<Utc> {
    (Utc::now() + Duration::days(2))
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
}

/// A block of one p5 in us-east-1a from [`start`] for `hours`, at
/// `usd_per_gpu_hour`.
pub fn p5_block(hours: i64, usd_per_gpu_hour: f64) -> PriceRecord {
    let start = start();
    PriceRecord {
        region: "us-east-1".into(),
        zone: Some("us-east-1a".into()),
        instance_type: "p5.48xlarge".into(),
        price_kind: PriceKind::CapacityBlock,
        offering_class: None,
        usd_per_hour: usd_per_gpu_hour * 8.0,
        upfront_usd: usd_per_gpu_hour * 8.0 * hours as f64,
        recurring_usd_per_hour: 0.0,
        source: Some(format!("cb-{hours}")),
        available_regions: Vec::new(),
        max_instances: None,
        price_scope: PriceScope::Instance,
        window: Some(Window {
            start,
            end: start + Duration::hours(hours),
            instance_count: 1,
        }),
    }
}

/// Writes `snapshot` into the SQLite catalog at `path` as a sync of `aws`
/// (of the snapshot's scope) at `at`.
pub fn write(path: &Path, snapshot: &Snapshot, at: DateTime<Utc>) {
    let mut store = SqliteStore::open(path).unwrap();
    let run = store.begin_run("aws", snapshot.scope, at).unwrap();
    store
        .write_snapshot(run, "aws", snapshot, &[], at, at)
        .unwrap();
}
