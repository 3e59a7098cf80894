//! Helpers shared by the store's and the sync's tests.

use std::path::Path;

use chrono::{DateTime, Utc};
use gpuplan_providers::{InstanceType, PriceKind, PriceRecord, Snapshot, SpotObservation, Term};
use rusqlite::Connection;

use super::Store;

/// Opens a database stopped at an older schema version, as an older gpuplan left it.
pub fn open_at_version(path: &Path, version: i64) -> Store {
    Store::open_at_version(path, version).unwrap()
}

pub fn conn(store: &Store) -> &Connection {
    &store.conn
}

/// The schema version (`PRAGMA user_version`) of the open database.
pub fn schema_version(store: &Store) -> i64 {
    store
        .conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

pub fn count(store: &Store, table: &str) -> i64 {
    store
        .conn
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// Id of the most recent good run of `source`, if any.
pub fn last_good_run_id(store: &Store, source: &str) -> Option<i64> {
    store
        .conn
        .query_row(
            "SELECT max(id) FROM sync_runs WHERE source = ?1 AND status = 'ok'",
            [source],
            |r| r.get(0),
        )
        .unwrap()
}

pub fn at(hour: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + hour * 3600, 0).unwrap()
}

/// `n` instance types, each with an on-demand and a 1-year commit price (the
/// on-demand price of type i is `base + i`), and two spot observations.
pub fn snapshot(n: usize, base: f64) -> Snapshot {
    let mut s = Snapshot::default();
    for i in 0..n {
        let name = format!("gpu{i}.xlarge");
        s.instance_types.push(InstanceType {
            instance_type: name.clone(),
            gpu_model: "L4".into(),
            gpu_count: 1,
            gpu_memory_gib: Some(24.0),
            vcpus: Some(8),
            memory_gib: Some(32.0),
        });
        let usd = base + i as f64;
        s.prices.push(PriceRecord {
            region: "us-east-1".into(),
            zone: None,
            instance_type: name.clone(),
            price_kind: PriceKind::OnDemand,
            offering_class: None,
            usd_per_hour: usd,
            upfront_usd: 0.0,
            recurring_usd_per_hour: usd,
            source: Some(format!("SKU{i}")),
            available_regions: vec![],
            max_instances: None,
            price_scope: gpuplan_providers::PriceScope::Instance,
        });
        let commit = PriceKind::Commit(Term::OneYear);
        s.prices.push(PriceRecord {
            price_kind: commit,
            usd_per_hour: PriceRecord::effective_hourly(commit, 876.0, usd / 2.0),
            upfront_usd: 876.0,
            recurring_usd_per_hour: usd / 2.0,
            ..s.prices.last().unwrap().clone()
        });
    }
    for h in [0, 1] {
        s.spot_observations.push(SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: base / 3.0 + h as f64,
            observed_at: at(h),
        });
    }
    s
}
