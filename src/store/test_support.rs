//! Helpers shared by the store's and the sync's tests.

use chrono::{DateTime, Utc};
use gpuplan_providers::{
    InstanceType, PriceKind, PriceRecord, Scope, Snapshot, SpotObservation, Term,
};
use tempfile::TempDir;

use super::scratch::ScratchDatabase;
use super::{Location, Pool, WriteStats};

/// A fresh, empty catalog on one backend, removed when dropped.
pub enum TestDb {
    Sqlite(TempDir),
    Postgres(Box<ScratchDatabase>),
}

impl TestDb {
    pub fn sqlite() -> Self {
        Self::Sqlite(tempfile::tempdir().unwrap())
    }

    /// `None` (the test is skipped) when no PostgreSQL server is configured.
    pub fn postgres() -> Option<Self> {
        ScratchDatabase::create().map(|db| Self::Postgres(Box::new(db)))
    }

    pub fn location(&self) -> Location {
        match self {
            Self::Sqlite(dir) => Location::Sqlite(dir.path().join("catalog.db")),
            Self::Postgres(db) => {
                Location::Postgres(gpuplan_providers::secret::Secret::new(db.url()))
            }
        }
    }

    pub fn pool(&self, readers: usize) -> Pool {
        Pool::open(&self.location(), readers).unwrap()
    }

    /// Whether spot writes leave new observations in `spot_recent`
    /// (SQLite), rather than write them into the history (PostgreSQL).
    pub fn writes_recent(&self) -> bool {
        matches!(self, Self::Sqlite(_))
    }
}

/// Defines each test once, as `name::sqlite` and `name::postgres`.
macro_rules! on_both_backends {
    ($(#[doc = $doc:literal])* fn $name:ident($db:ident) $body:block $($rest:tt)*) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(#[doc = $doc])*
            fn body($db: &crate::store::test_support::TestDb) $body

            #[test]
            fn sqlite() {
                body(&crate::store::test_support::TestDb::sqlite());
            }

            #[test]
            fn postgres() {
                if let Some(db) = crate::store::test_support::TestDb::postgres() {
                    body(&db);
                }
            }
        }
        on_both_backends!($($rest)*);
    };
    () => {};
}
pub(crate) use on_both_backends;

pub fn count(pool: &Pool, table: &str) -> i64 {
    pool.raw_i64(&format!("SELECT count(*) FROM {table}"))
        .unwrap_or(0)
}

/// Spot observations stored, in the history and in `spot_recent`.
pub fn spot_rows(pool: &Pool) -> i64 {
    count(pool, "spot_observations") + count(pool, "spot_recent")
}

/// Every row of `spot_recent` moved into the history at once, as the spot
/// writes move them a few series at a time.
pub fn move_recent_to_history(pool: &Pool) {
    pool.raw_execute(
        "INSERT INTO spot_observations (series_id, observed_at, usd_per_hour, fx_rate)
         SELECT series_id, observed_at, usd_per_hour, fx_rate FROM spot_recent;
         DELETE FROM spot_recent;
         UPDATE catalog_state SET spot_recent_rows = 0;",
    );
}

/// The history's rows after `after` of the series `series` selects
/// (`WHERE series_id ...`), moved into `spot_recent` and counted there: as
/// SQLite's writes leave new observations, and as a PostgreSQL store copied
/// from SQLite holds them. Every row moved is newer than what stays.
pub fn hold_in_recent(pool: &Pool, series: &str, after: DateTime<Utc>) {
    let rows = format!(
        "FROM spot_observations WHERE series_id {series} AND observed_at > {}",
        after.timestamp_micros()
    );
    pool.raw_execute(&format!(
        "INSERT INTO spot_recent (series_id, observed_at, usd_per_hour, fx_rate)
         SELECT series_id, observed_at, usd_per_hour, fx_rate {rows};
         DELETE {rows};
         UPDATE catalog_state SET spot_recent_rows = (SELECT count(*) FROM spot_recent);"
    ));
}

/// Id of the most recent good run of `source`, if any.
pub fn last_good_run_id(pool: &Pool, source: &str) -> Option<i64> {
    pool.raw_i64(&format!(
        "SELECT max(id) FROM sync_runs WHERE source = '{source}' AND status = 'ok'"
    ))
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
            gpu_form_factor: None,
            instance_type: name.clone(),
            gpu_model: "L4".into(),
            gpu_count: 1.0,
            gpu_memory_gib: Some(24.0),
            vcpus: Some(8),
            memory_gib: Some(32.0),
            mig_profile: None,
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
            window: None,
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

/// Writes `snap` as a full sync of `aws` at `hour`.
pub fn sync(pool: &Pool, snap: &Snapshot, hour: i64) -> WriteStats {
    pool.write(|s| {
        let run = s.begin_run("aws", Scope::Full, at(hour)).unwrap();
        s.write_snapshot(run, "aws", snap, &[], at(hour), at(hour))
            .unwrap()
    })
}

/// A Capacity Block of `count` instances of `gpu0.xlarge` (see [`snapshot`])
/// for the 24 hours from `hour_start`, at `fee` in all.
pub fn block(hour_start: i64, count: u32, fee: f64) -> PriceRecord {
    let window = gpuplan_providers::Window {
        start: at(hour_start),
        end: at(hour_start + 24),
        instance_count: count,
    };
    PriceRecord {
        region: "us-east-1".into(),
        zone: Some("us-east-1a".into()),
        instance_type: "gpu0.xlarge".into(),
        price_kind: PriceKind::CapacityBlock,
        offering_class: None,
        usd_per_hour: fee / (f64::from(count) * 24.0),
        upfront_usd: fee,
        recurring_usd_per_hour: 0.0,
        source: Some(format!("cb-{hour_start}-{count}")),
        available_regions: Vec::new(),
        max_instances: None,
        price_scope: gpuplan_providers::PriceScope::Instance,
        window: Some(window),
    }
}

/// A SQLite catalog in a temp dir holding `snap` as a full sync of `aws`
/// at hour 0 wrote it.
pub fn synced(snap: &Snapshot) -> (TempDir, super::SqliteStore) {
    use super::Writes as _;
    let dir = tempfile::tempdir().unwrap();
    let mut store = super::SqliteStore::open(&dir.path().join("c.db")).unwrap();
    let run = store
        .begin_run("aws", gpuplan_providers::Scope::Full, at(0))
        .unwrap();
    store
        .write_snapshot(run, "aws", snap, &[], at(0), at(0))
        .unwrap();
    (dir, store)
}
