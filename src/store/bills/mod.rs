//! Billing aggregates: each (source, billing account, billing period) load,
//! its hourly GPU usage, daily spend and commitments, and the answers read
//! back from them ([`read`]); [`write`] writes a load. The SQL is written
//! once for both backends against [`Db`]; each backend only says how to run
//! a statement.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::StoreError;
use super::sql::{Arg, Backend, Db, Val};
use period::{PeriodData, Total, UsageKind};

pub mod period;
mod read;
mod write;

pub(super) use read::*;
pub(super) use write::*;

/// What a load did to a stored period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadResult {
    Loaded,
    Unchanged,
    Updated,
    Restated,
}

/// The change a restatement made, in the period's main currency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deltas {
    pub rows: i64,
    pub billed_cost: f64,
    pub effective_cost: f64,
    pub gpu_hours: f64,
    pub currency: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PeriodWrite {
    pub result: LoadResult,
    pub generation: i64,
    pub deltas: Option<Deltas>,
}

/// A restatement as `bills status` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Restatement {
    pub generation: i64,
    pub at: String,
    pub state: String,
    pub deltas: Deltas,
}

/// Rows that correct a period billed in another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectionRow {
    /// The period that billed them.
    pub billed_in: String,
    /// The period they correct.
    pub corrects: String,
    pub currency: String,
    pub rows: i64,
    pub billed_cost: f64,
    pub effective_cost: f64,
}

/// A stored period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredLoad {
    pub source: String,
    pub billing_account: String,
    pub billing_period: String,
    pub provider: String,
    #[serde(skip)]
    pub period_end: i64,
    /// The state at its last load; readers recompute it for now.
    pub state: String,
    pub generation: i64,
    pub rows: i64,
    pub gpu_rows: i64,
    pub gpu_hours: f64,
    pub totals: Vec<Total>,
    pub unmapped: BTreeMap<String, u64>,
    pub loaded_at: String,
    pub checked_at: String,
    pub restatements: Vec<Restatement>,
    /// Rows billed later that correct this period.
    pub corrections: Vec<CorrectionRow>,
    /// Rows billed in this period that correct earlier ones.
    pub corrects: Vec<CorrectionRow>,
}

/// A file as it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    pub fingerprint: String,
    pub periods: Vec<(String, String)>,
}

/// The grain of an answer's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Hour,
    Day,
    Month,
}

/// Fields usage answers may group by, in their output order.
pub const USAGE_FIELDS: &[&str] = &[
    "team",
    "provider",
    "region",
    "instance_type",
    "gpu_model",
    "price_kind",
    "account",
];

/// Fields spend answers may group by, in their output order.
pub const SPEND_FIELDS: &[&str] = &[
    "team",
    "provider",
    "account",
    "service_category",
    "charge_category",
];

/// Filters and grain of a usage or spend question. `group` holds names
/// from [`USAGE_FIELDS`] or [`SPEND_FIELDS`].
#[derive(Debug, Clone, Default)]
pub struct BillQuery {
    pub since: i64,
    pub until: i64,
    pub by: Option<Bucket>,
    pub group: Vec<String>,
    pub teams: Vec<String>,
    pub providers: Vec<String>,
    pub gpus: Vec<String>,
    pub price_kinds: Vec<String>,
    pub gpu_only: bool,
    /// Sub-accounts or billing accounts (spend only).
    pub accounts: Vec<String>,
    /// Rows an answer may have; more is `TooLarge`.
    pub limit: usize,
}

/// One row of `usage`: fields not grouped on are absent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    pub start: DateTime<Utc>,
    #[serde(flatten)]
    pub fields: BTreeMap<String, String>,
    pub instance_hours: Option<f64>,
    pub gpu_hours: f64,
    pub billed_cost: f64,
    pub effective_cost: f64,
    pub currency: String,
}

/// One row of `spend`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendRow {
    pub start: DateTime<Utc>,
    #[serde(flatten)]
    pub fields: BTreeMap<String, String>,
    pub billed_cost: f64,
    pub effective_cost: f64,
    pub currency: String,
    /// Grouped by team: the figures with the unallocated spend split (see
    /// `[allocation]`); the direct ones otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_billed_cost: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_effective_cost: Option<f64>,
}

/// A commitment over a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitmentRecord {
    pub id: String,
    pub provider: String,
    pub source: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub category: Option<String>,
    pub unit: Option<String>,
    pub region: Option<String>,
    pub instance_type: Option<String>,
    pub first_seen: DateTime<Utc>,
    pub last_seen: Option<DateTime<Utc>>,
    pub used_quantity: Option<f64>,
    pub unused_quantity: Option<f64>,
    pub utilization: Option<f64>,
    pub covered_instance_hours: f64,
    pub covered_gpu_hours: f64,
    pub currency: String,
}

/// One day of a commitment's use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitmentDay {
    pub source: String,
    pub id: String,
    pub day: i64,
    pub used_quantity: Option<f64>,
    pub unused_quantity: Option<f64>,
    pub used_cost: f64,
    pub unused_cost: f64,
}

impl CommitmentDay {
    /// Used over used + unused: quantities where the bill has them, else cost.
    #[must_use]
    pub fn utilization(&self) -> Option<f64> {
        let (used, unused) = match (self.used_quantity, self.unused_quantity) {
            (None, None) => (self.used_cost, self.unused_cost),
            (u, n) => (u.unwrap_or(0.0), n.unwrap_or(0.0)),
        };
        (used + unused > 0.0).then(|| used / (used + unused))
    }
}

/// A commitment's latest hour in the bills.
#[derive(Debug, Clone, PartialEq)]
pub struct LatestCommitmentHour {
    pub source: String,
    pub id: String,
    pub start: i64,
    pub used_quantity: Option<f64>,
    pub unused_quantity: Option<f64>,
    pub used_cost: f64,
    pub unused_cost: f64,
}

/// The days a source's spend covers, and whose rows they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendSpan {
    /// The first and the last day (midnight UTC).
    pub first: i64,
    pub last: i64,
    /// The first and last day of each provider its rows name.
    pub providers: BTreeMap<String, (i64, i64)>,
}

/// Committed share of one instance type's usage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageRow {
    pub provider: String,
    pub region: String,
    pub instance_type: String,
    pub on_demand_hours: f64,
    pub covered_hours: f64,
    pub coverage: Option<f64>,
}

/// Billing aggregates, on either backend.
pub trait Bills {
    /// Every stored period (of one source, when given), with its
    /// restatements and the corrections billed against it.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn bill_loads(&self, source: Option<&str>) -> Result<Vec<StoredLoad>, StoreError>;

    /// The files of `source` read so far, by path under its folder.
    ///
    /// # Errors
    /// On a database error.
    fn bill_files(&self, source: &str) -> Result<BTreeMap<String, FileRecord>, StoreError>;

    /// Replaces one period's aggregates in one transaction, unless its digest
    /// is unchanged. `state` is the period's state now.
    ///
    /// # Errors
    /// On a database error, or `Fenced` when the duty was taken over.
    fn write_bill_period(
        &mut self,
        source: &str,
        data: &PeriodData,
        state: &str,
        now: DateTime<Utc>,
    ) -> Result<PeriodWrite, StoreError>;

    /// Records the files read (and forgets `removed`), in one transaction.
    ///
    /// # Errors
    /// On a database error, or `Fenced`.
    fn record_bill_files(
        &mut self,
        source: &str,
        files: &[(String, FileRecord)],
        removed: &[String],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Hourly, daily or monthly GPU usage.
    ///
    /// # Errors
    /// On a database error; `TooLarge` past the query's limit.
    fn bill_usage(&self, q: &BillQuery) -> Result<Vec<UsageRow>, StoreError>;

    /// Daily or monthly spend.
    ///
    /// # Errors
    /// On a database error; `TooLarge` past the query's limit.
    fn bill_spend(&self, q: &BillQuery) -> Result<Vec<SpendRow>, StoreError>;

    /// Commitments seen in `[since, until)`, with their use over it.
    ///
    /// # Errors
    /// On a database error.
    fn bill_commitments(
        &self,
        providers: &[String],
        since: i64,
        until: i64,
    ) -> Result<Vec<CommitmentRecord>, StoreError>;

    /// Coverage per (provider, region, instance type) over `[since, until)`.
    ///
    /// # Errors
    /// On a database error.
    fn bill_coverage(
        &self,
        providers: &[String],
        since: i64,
        until: i64,
    ) -> Result<Vec<CoverageRow>, StoreError>;

    /// How many stored billing periods are older than `before` (`2024-01`).
    ///
    /// # Errors
    /// On a database error.
    fn count_bill_periods_before(&self, before: &str) -> Result<u64, StoreError>;

    /// Deletes every billing period older than `before`, with all its
    /// aggregates, in one transaction; how many went.
    ///
    /// # Errors
    /// On a database error (nothing is deleted).
    fn prune_bill_periods_before(&mut self, before: &str) -> Result<u64, StoreError>;

    /// The first and last hour of GPU usage stored from any source.
    ///
    /// # Errors
    /// On a database error.
    fn bill_usage_span(&self) -> Result<Option<(i64, i64)>, StoreError>;

    /// Per commitment: its latest stored hour, summed over the periods that
    /// hold it.
    ///
    /// # Errors
    /// On a database error.
    fn bill_commitment_latest(&self) -> Result<Vec<LatestCommitmentHour>, StoreError>;

    /// Each commitment's use per UTC day over `[since, until)`.
    ///
    /// # Errors
    /// On a database error.
    fn bill_commitment_days(
        &self,
        since: i64,
        until: i64,
    ) -> Result<Vec<CommitmentDay>, StoreError>;

    /// Per source: the first and last day of stored spend, and the
    /// providers its rows name.
    ///
    /// # Errors
    /// On a database error.
    fn bill_spend_span(&self) -> Result<BTreeMap<String, SpendSpan>, StoreError>;

    /// The catalog's GPU instance types of `provider` (instance type, GPU
    /// model, GPUs) and its per-GPU SKUs (SKU, instance type, GPU model).
    ///
    /// # Errors
    /// On a database error.
    fn gpu_catalog(&self, provider: &str) -> Result<GpuCatalog, StoreError>;
}

impl<B: Backend> Bills for B {
    fn bill_loads(&self, source: Option<&str>) -> Result<Vec<StoredLoad>, StoreError> {
        self.on_conn(|db| loads(db, source))
    }

    fn bill_files(&self, source: &str) -> Result<BTreeMap<String, FileRecord>, StoreError> {
        self.on_conn(|db| files(db, source))
    }

    fn write_bill_period(
        &mut self,
        source: &str,
        data: &PeriodData,
        state: &str,
        now: DateTime<Utc>,
    ) -> Result<PeriodWrite, StoreError> {
        self.in_transaction(|db| write_period(db, source, data, state, now))
    }

    fn record_bill_files(
        &mut self,
        source: &str,
        files: &[(String, FileRecord)],
        removed: &[String],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.in_transaction(|db| record_files(db, source, files, removed, now))
    }

    fn bill_usage(&self, q: &BillQuery) -> Result<Vec<UsageRow>, StoreError> {
        self.on_conn(|db| usage(db, q))
    }

    fn bill_spend(&self, q: &BillQuery) -> Result<Vec<SpendRow>, StoreError> {
        self.on_conn(|db| spend(db, q))
    }

    fn bill_commitments(
        &self,
        providers: &[String],
        since: i64,
        until: i64,
    ) -> Result<Vec<CommitmentRecord>, StoreError> {
        self.on_conn(|db| commitments(db, providers, since, until))
    }

    fn bill_coverage(
        &self,
        providers: &[String],
        since: i64,
        until: i64,
    ) -> Result<Vec<CoverageRow>, StoreError> {
        self.on_conn(|db| coverage(db, providers, since, until))
    }

    fn count_bill_periods_before(&self, before: &str) -> Result<u64, StoreError> {
        self.on_conn(|db| count_periods_before(db, before))
    }

    fn prune_bill_periods_before(&mut self, before: &str) -> Result<u64, StoreError> {
        self.in_transaction(|db| prune_periods_before(db, before))
    }

    fn bill_usage_span(&self) -> Result<Option<(i64, i64)>, StoreError> {
        self.on_conn(usage_span)
    }

    fn bill_commitment_latest(&self) -> Result<Vec<LatestCommitmentHour>, StoreError> {
        self.on_conn(commitment_latest)
    }

    fn bill_commitment_days(
        &self,
        since: i64,
        until: i64,
    ) -> Result<Vec<CommitmentDay>, StoreError> {
        self.on_conn(|db| commitment_days(db, since, until))
    }

    fn bill_spend_span(&self) -> Result<BTreeMap<String, SpendSpan>, StoreError> {
        self.on_conn(spend_span)
    }

    fn gpu_catalog(&self, provider: &str) -> Result<GpuCatalog, StoreError> {
        self.on_conn(|db| gpu_catalog(db, provider))
    }
}

/// The catalog's GPU instance types of a provider (instance type, GPU
/// model, GPUs) and its per-GPU SKUs (SKU, instance type, GPU model).
pub type GpuCatalog = (Vec<(String, String, f64)>, Vec<(String, String, String)>);
