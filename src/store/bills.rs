//! Billing aggregates: each (source, billing account, billing period) load,
//! its hourly GPU usage, daily spend and commitments, and the answers read
//! back from them. The SQL is written once for both backends against [`Db`];
//! each backend only says how to run a statement.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{StoreError, ts};
use crate::bills::UsageKind;
use crate::bills::aggregate::{PeriodData, Total, UsageKey, UsageValue};
use crate::bills::time::to_utc as utc;

/// A value bound to or read from a statement.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<&str> for Val {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for Val {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<i64> for Val {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<f64> for Val {
    fn from(n: f64) -> Self {
        Self::Real(n)
    }
}

impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// A value `insert_many` binds. Its text is borrowed: a bill period is tens
/// of thousands of rows whose text the aggregate already holds, and copying
/// it into owned values took as long as the insert itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Arg<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(s: &'a str) -> Self {
        Self::Text(s)
    }
}

impl From<i64> for Arg<'_> {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<f64> for Arg<'_> {
    fn from(n: f64) -> Self {
        Self::Real(n)
    }
}

impl<'a, T: Into<Arg<'a>>> From<Option<T>> for Arg<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

impl<'a> From<&'a Val> for Arg<'a> {
    fn from(v: &'a Val) -> Self {
        match v {
            Val::Null => Self::Null,
            Val::Int(n) => Self::Int(*n),
            Val::Real(f) => Self::Real(*f),
            Val::Text(s) => Self::Text(s),
        }
    }
}

impl Val {
    fn text(&self) -> Result<String, StoreError> {
        match self {
            Self::Text(s) => Ok(s.clone()),
            other => Err(StoreError::Corrupt(format!(
                "expected text, found {other:?}"
            ))),
        }
    }

    fn opt_text(&self) -> Result<Option<String>, StoreError> {
        match self {
            Self::Null => Ok(None),
            other => other.text().map(Some),
        }
    }

    fn int(&self) -> Result<i64, StoreError> {
        match self {
            Self::Int(n) => Ok(*n),
            #[allow(clippy::cast_possible_truncation)]
            Self::Real(f) if f.fract() == 0.0 => Ok(*f as i64),
            other => Err(StoreError::Corrupt(format!(
                "expected an integer, found {other:?}"
            ))),
        }
    }

    fn opt_int(&self) -> Result<Option<i64>, StoreError> {
        match self {
            Self::Null => Ok(None),
            other => other.int().map(Some),
        }
    }

    fn real(&self) -> Result<f64, StoreError> {
        self.opt_real().map(|v| v.unwrap_or(0.0))
    }

    fn opt_real(&self) -> Result<Option<f64>, StoreError> {
        match self {
            Self::Null => Ok(None),
            #[allow(clippy::cast_precision_loss)]
            Self::Int(n) => Ok(Some(*n as f64)),
            Self::Real(f) => Ok(Some(*f)),
            Self::Text(t) => Err(StoreError::Corrupt(format!(
                "expected a number, found `{t}`"
            ))),
        }
    }
}

/// How a backend runs the statements of this module. Parameters are
/// written `$1`, `$2`, ...
pub(super) trait Db {
    fn exec(&self, sql: &str, params: &[Val]) -> Result<u64, StoreError>;
    fn rows(&self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError>;
    /// Inserts rows into `table (columns)`. The first `shared.len()` columns
    /// take `shared` in every row (bound once a statement: SQLite copies
    /// every text it binds); `values` holds the other columns, row after row.
    fn insert_many(
        &self,
        table: &str,
        columns: &[&str],
        shared: &[Arg<'_>],
        values: &[Arg<'_>],
    ) -> Result<(), StoreError>;
    /// Fails with `Fenced` when the duty this write is for was taken over.
    fn check_fence(&self) -> Result<(), StoreError>;
    /// SQL for the start (Unix seconds) of the UTC month holding `col`.
    fn month_of(&self, col: &str) -> String;
}

/// `INSERT INTO table (columns) VALUES ...` for `rows` rows of
/// [`Db::insert_many`], its parameters numbered after `mark` (`$` or `?`):
/// the `shared` first columns are parameters 1 to `shared` in every row.
pub(super) fn insert_sql(
    table: &str,
    columns: &[&str],
    shared: usize,
    rows: usize,
    mark: char,
) -> String {
    let width = columns.len().saturating_sub(shared);
    let groups: Vec<String> = (0..rows)
        .map(|r| {
            let own = (1..=width).map(|c| shared + r * width + c);
            let marks: Vec<String> = (1..=shared)
                .chain(own)
                .map(|n| format!("{mark}{n}"))
                .collect();
            format!("({})", marks.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO {table} ({}) VALUES {}",
        columns.join(", "),
        groups.join(", ")
    )
}

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
        provider: &str,
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

    /// Per source: the first and last day of stored spend.
    ///
    /// # Errors
    /// On a database error.
    fn bill_spend_span(&self) -> Result<BTreeMap<String, (i64, i64)>, StoreError>;

    /// The catalog's GPU instance types of `provider` (instance type, GPU
    /// model, GPUs) and its per-GPU SKUs (SKU, instance type, GPU model).
    ///
    /// # Errors
    /// On a database error.
    fn gpu_catalog(&self, provider: &str) -> Result<GpuCatalog, StoreError>;
}

pub type GpuCatalog = (
    Vec<crate::bills::gpus::CatalogType>,
    Vec<crate::bills::gpus::CatalogSku>,
);

/// Tolerance for comparing sums of many small costs: float sums of the
/// same rows in the same order are equal, but a digest must not flap on the
/// last bits either.
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6_f64.max(1e-9 * a.abs().max(b.abs()))
}

const CHILD_TABLES: &[&str] = &[
    "bill_usage_hours",
    "bill_usage_days",
    "bill_spend_days",
    "bill_commitments",
    "bill_commitment_hours",
    "bill_corrections",
];

/// The main currency of a period: the one most rows carry.
fn main_total(totals: &[Total]) -> Total {
    totals
        .iter()
        .max_by_key(|t| t.rows)
        .cloned()
        .unwrap_or_default()
}

pub(super) fn write_period(
    db: &dyn Db,
    source: &str,
    provider: &str,
    data: &PeriodData,
    state: &str,
    now: DateTime<Utc>,
) -> Result<PeriodWrite, StoreError> {
    db.check_fence()?;
    let key = [
        Val::from(source),
        Val::from(data.billing_account.as_str()),
        Val::from(data.period.as_str()),
    ];
    let old = db
        .rows(
            "SELECT generation, row_count, gpu_hours, totals_json, state FROM bill_loads
             WHERE source = $1 AND billing_account = $2 AND billing_period = $3",
            &key,
        )?
        .into_iter()
        .next();
    let totals: Vec<Total> = data.totals.values().cloned().collect();
    let totals_json =
        serde_json::to_string(&totals).map_err(|e| StoreError::Corrupt(format!("totals: {e}")))?;
    let unmapped_json = serde_json::to_string(&data.unmapped)
        .map_err(|e| StoreError::Corrupt(format!("unmapped: {e}")))?;
    #[allow(clippy::cast_possible_wrap)]
    let rows = data.rows as i64;
    let (result, generation, deltas) = match &old {
        None => (LoadResult::Loaded, 1, None),
        Some(o) => {
            let generation = o[0].int()?;
            let old_rows = o[1].int()?;
            let old_gpu = o[2].real()?;
            let old_totals: Vec<Total> = serde_json::from_str(&o[3].text()?)
                .map_err(|e| StoreError::Corrupt(format!("bill_loads.totals_json: {e}")))?;
            let unchanged = old_rows == rows
                && same(old_gpu, data.gpu_hours)
                && old_totals.len() == totals.len()
                && old_totals.iter().zip(&totals).all(|(a, b)| {
                    a.currency == b.currency
                        && a.rows == b.rows
                        && same(a.billed_cost, b.billed_cost)
                        && same(a.effective_cost, b.effective_cost)
                });
            if unchanged {
                db.exec(
                    "UPDATE bill_loads SET checked_at = $4, state = $5
                     WHERE source = $1 AND billing_account = $2 AND billing_period = $3",
                    &[
                        key[0].clone(),
                        key[1].clone(),
                        key[2].clone(),
                        ts(now).into(),
                        state.into(),
                    ],
                )?;
                return Ok(PeriodWrite {
                    result: LoadResult::Unchanged,
                    generation,
                    deltas: None,
                });
            }
            let new_main = main_total(&totals);
            let old_main = old_totals
                .iter()
                .find(|t| t.currency == new_main.currency)
                .cloned()
                .unwrap_or_default();
            let deltas = Deltas {
                rows: rows - old_rows,
                billed_cost: new_main.billed_cost - old_main.billed_cost,
                effective_cost: new_main.effective_cost - old_main.effective_cost,
                gpu_hours: data.gpu_hours - old_gpu,
                currency: new_main.currency,
            };
            let result = if state == "open" {
                LoadResult::Updated
            } else {
                LoadResult::Restated
            };
            (result, generation + 1, Some(deltas))
        }
    };
    for table in CHILD_TABLES {
        db.exec(
            &format!(
                "DELETE FROM {table} WHERE source = $1 AND billing_account = $2 AND billing_period = $3"
            ),
            &key,
        )?;
    }
    insert_children(db, source, provider, data)?;
    #[allow(clippy::cast_possible_wrap)]
    let gpu_rows = data.gpu_rows as i64;
    db.exec(
        "INSERT INTO bill_loads (source, billing_account, billing_period, provider, period_start,
             period_end, generation, state, row_count, gpu_rows, gpu_hours, totals_json,
             unmapped_json, loaded_at, checked_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)
         ON CONFLICT (source, billing_account, billing_period) DO UPDATE SET
             provider = excluded.provider, period_start = excluded.period_start,
             period_end = excluded.period_end, generation = excluded.generation,
             state = excluded.state, row_count = excluded.row_count,
             gpu_rows = excluded.gpu_rows, gpu_hours = excluded.gpu_hours,
             totals_json = excluded.totals_json, unmapped_json = excluded.unmapped_json,
             loaded_at = excluded.loaded_at, checked_at = excluded.checked_at",
        &[
            key[0].clone(),
            key[1].clone(),
            key[2].clone(),
            provider.into(),
            data.period_start.into(),
            data.period_end.into(),
            generation.into(),
            state.into(),
            rows.into(),
            gpu_rows.into(),
            data.gpu_hours.into(),
            totals_json.into(),
            unmapped_json.into(),
            ts(now).into(),
        ],
    )?;
    if let (LoadResult::Restated, Some(d)) = (result, &deltas) {
        db.exec(
            "INSERT INTO bill_restatements (source, billing_account, billing_period, generation,
                 restated_at, state, currency, row_count, billed_cost, effective_cost, gpu_hours)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                key[0].clone(),
                key[1].clone(),
                key[2].clone(),
                generation.into(),
                ts(now).into(),
                state.into(),
                d.currency.as_str().into(),
                d.rows.into(),
                d.billed_cost.into(),
                d.effective_cost.into(),
                d.gpu_hours.into(),
            ],
        )?;
    }
    Ok(PeriodWrite {
        result,
        generation,
        deltas,
    })
}

/// The columns of `bill_usage_hours` and `bill_usage_days`, those every row
/// of a load shares first.
const USAGE_COLUMNS: &[&str] = &[
    "source",
    "billing_account",
    "billing_period",
    "provider",
    "start",
    "account",
    "team",
    "region",
    "instance_type",
    "gpu_model",
    "price_kind",
    "currency",
    "instance_hours",
    "gpu_hours",
    "billed_cost",
    "effective_cost",
];

fn insert_children(
    db: &dyn Db,
    source: &str,
    provider: &str,
    data: &PeriodData,
) -> Result<(), StoreError> {
    let head = [
        Arg::from(source),
        Arg::from(data.billing_account.as_str()),
        Arg::from(data.period.as_str()),
    ];
    let with_provider = [head[0], head[1], head[2], Arg::from(provider)];
    let mut hours: Vec<(&UsageKey, &UsageValue)> = data.usage.iter().collect();
    hours.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut values = Vec::with_capacity(hours.len() * (USAGE_COLUMNS.len() - with_provider.len()));
    for (k, v) in &hours {
        usage_row(&mut values, k.start, k, v);
    }
    db.insert_many("bill_usage_hours", USAGE_COLUMNS, &with_provider, &values)?;

    // A day's key is its hours' key at the day's start: (day, the hour's key
    // less its start) orders days as their keys would.
    let mut days: HashMap<(i64, DayKey<'_>), (&UsageKey, UsageValue)> = HashMap::new();
    for (k, v) in hours {
        let (_, d) = days
            .entry((k.start.div_euclid(86_400) * 86_400, DayKey(k)))
            .or_insert_with(|| (k, UsageValue::default()));
        if let Some(h) = v.instance_hours {
            d.instance_hours = Some(d.instance_hours.unwrap_or(0.0) + h);
        }
        d.gpu_hours += v.gpu_hours;
        d.billed_cost += v.billed_cost;
        d.effective_cost += v.effective_cost;
    }
    let mut days: Vec<_> = days.into_iter().collect();
    days.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    values.clear();
    for ((start, _), (k, v)) in &days {
        usage_row(&mut values, *start, k, v);
    }
    db.insert_many("bill_usage_days", USAGE_COLUMNS, &with_provider, &values)?;

    let mut values = Vec::with_capacity(data.spend.len() * 9);
    for s in &data.spend {
        values.extend([
            Arg::from(s.day),
            s.account.as_str().into(),
            s.team.as_str().into(),
            s.service_category.as_str().into(),
            s.charge_category.as_str().into(),
            i64::from(s.gpu).into(),
            s.currency.as_str().into(),
            s.billed_cost.into(),
            s.effective_cost.into(),
        ]);
    }
    db.insert_many(
        "bill_spend_days",
        &[
            "source",
            "billing_account",
            "billing_period",
            "provider",
            "start",
            "account",
            "team",
            "service_category",
            "charge_category",
            "gpu",
            "currency",
            "billed_cost",
            "effective_cost",
        ],
        &with_provider,
        &values,
    )?;

    let json = |set: &BTreeSet<String>| serde_json::to_string(set).unwrap_or_else(|_| "[]".into());
    let sets: Vec<(String, String)> = data
        .commitments
        .values()
        .map(|c| (json(&c.regions), json(&c.instance_types)))
        .collect();
    let mut values = Vec::new();
    for (c, (regions, types)) in data.commitments.values().zip(&sets) {
        values.extend([
            Arg::from(c.id.as_str()),
            c.kind.map(|k| k.as_str()).into(),
            c.category.as_deref().into(),
            c.unit.as_deref().into(),
            regions.as_str().into(),
            types.as_str().into(),
            i64::from(c.untyped_cover).into(),
            c.first_seen.into(),
            c.last_seen.into(),
            c.currency.as_str().into(),
        ]);
    }
    db.insert_many(
        "bill_commitments",
        &[
            "source",
            "billing_account",
            "billing_period",
            "provider",
            "commitment_id",
            "kind",
            "category",
            "unit",
            "regions_json",
            "instance_types_json",
            "untyped_cover",
            "first_seen",
            "last_seen",
            "currency",
        ],
        &with_provider,
        &values,
    )?;

    let mut values = Vec::with_capacity(data.commitment_hours.len() * 8);
    for ((id, start), h) in &data.commitment_hours {
        values.extend([
            Arg::from(id.as_str()),
            (*start).into(),
            h.used_quantity.into(),
            h.unused_quantity.into(),
            h.used_cost.into(),
            h.unused_cost.into(),
            h.covered_instance_hours.into(),
            h.covered_gpu_hours.into(),
        ]);
    }
    db.insert_many(
        "bill_commitment_hours",
        &[
            "source",
            "billing_account",
            "billing_period",
            "commitment_id",
            "start",
            "used_quantity",
            "unused_quantity",
            "used_cost",
            "unused_cost",
            "covered_instance_hours",
            "covered_gpu_hours",
        ],
        &head,
        &values,
    )?;

    let mut values = Vec::new();
    for c in &data.corrections {
        #[allow(clippy::cast_possible_wrap)]
        values.extend([
            Arg::from(c.corrects.as_str()),
            c.currency.as_str().into(),
            (c.rows as i64).into(),
            c.billed_cost.into(),
            c.effective_cost.into(),
        ]);
    }
    db.insert_many(
        "bill_corrections",
        &[
            "source",
            "billing_account",
            "billing_period",
            "corrects",
            "currency",
            "row_count",
            "billed_cost",
            "effective_cost",
        ],
        &head,
        &values,
    )
}

/// Appends the row of `bill_usage_hours` or `bill_usage_days` for key `k`
/// at `start`, less the columns a load's rows share.
fn usage_row<'a>(out: &mut Vec<Arg<'a>>, start: i64, k: &'a UsageKey, v: &UsageValue) {
    out.extend([
        Arg::from(start),
        k.account.as_str().into(),
        k.team.as_str().into(),
        k.region.as_str().into(),
        k.instance_type.as_str().into(),
        k.gpu_model.as_str().into(),
        k.price_kind.as_str().into(),
        k.currency.as_str().into(),
        v.instance_hours.into(),
        v.gpu_hours.into(),
        v.billed_cost.into(),
        v.effective_cost.into(),
    ]);
}

/// A usage key less its start, ordered as the key is.
struct DayKey<'a>(&'a UsageKey);

impl DayKey<'_> {
    #[allow(clippy::type_complexity)]
    fn rest(&self) -> (&str, &str, &str, &str, &str, UsageKind, &str) {
        let k = self.0;
        (
            &k.account,
            &k.team,
            &k.region,
            &k.instance_type,
            &k.gpu_model,
            k.price_kind,
            &k.currency,
        )
    }
}

impl PartialEq for DayKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.rest() == other.rest()
    }
}

impl Eq for DayKey<'_> {}

impl std::hash::Hash for DayKey<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rest().hash(state);
    }
}

impl PartialOrd for DayKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DayKey<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rest().cmp(&other.rest())
    }
}

pub(super) fn loads(db: &dyn Db, source: Option<&str>) -> Result<Vec<StoredLoad>, StoreError> {
    let src = [Val::from(source)];
    let mut restatements: HashMap<(String, String, String), Vec<Restatement>> = HashMap::new();
    for r in db.rows(
        "SELECT source, billing_account, billing_period, generation, restated_at, state, currency,
                row_count, billed_cost, effective_cost, gpu_hours
         FROM bill_restatements WHERE CAST($1 AS TEXT) IS NULL OR source = $1
         ORDER BY source, billing_account, billing_period, generation",
        &src,
    )? {
        restatements
            .entry((r[0].text()?, r[1].text()?, r[2].text()?))
            .or_default()
            .push(Restatement {
                generation: r[3].int()?,
                at: r[4].text()?,
                state: r[5].text()?,
                deltas: Deltas {
                    currency: r[6].text()?,
                    rows: r[7].int()?,
                    billed_cost: r[8].real()?,
                    effective_cost: r[9].real()?,
                    gpu_hours: r[10].real()?,
                },
            });
    }
    let mut corrections: HashMap<(String, String, String), Vec<CorrectionRow>> = HashMap::new();
    let mut corrects: HashMap<(String, String, String), Vec<CorrectionRow>> = HashMap::new();
    for r in db.rows(
        "SELECT source, billing_account, corrects, billing_period, currency, row_count,
                billed_cost, effective_cost
         FROM bill_corrections WHERE CAST($1 AS TEXT) IS NULL OR source = $1
         ORDER BY source, billing_account, corrects, billing_period, currency",
        &src,
    )? {
        let (source, account) = (r[0].text()?, r[1].text()?);
        let row = CorrectionRow {
            corrects: r[2].text()?,
            billed_in: r[3].text()?,
            currency: r[4].text()?,
            rows: r[5].int()?,
            billed_cost: r[6].real()?,
            effective_cost: r[7].real()?,
        };
        corrects
            .entry((source.clone(), account.clone(), row.billed_in.clone()))
            .or_default()
            .push(row.clone());
        corrections
            .entry((source, account, row.corrects.clone()))
            .or_default()
            .push(row);
    }
    let mut out = Vec::new();
    for r in db.rows(
        "SELECT source, billing_account, billing_period, provider, period_end, state, generation,
                row_count, gpu_rows, gpu_hours, totals_json, unmapped_json, loaded_at, checked_at
         FROM bill_loads WHERE CAST($1 AS TEXT) IS NULL OR source = $1
         ORDER BY source, billing_account, billing_period",
        &src,
    )? {
        let key = (r[0].text()?, r[1].text()?, r[2].text()?);
        out.push(StoredLoad {
            restatements: restatements.remove(&key).unwrap_or_default(),
            corrections: corrections.remove(&key).unwrap_or_default(),
            corrects: corrects.remove(&key).unwrap_or_default(),
            source: key.0,
            billing_account: key.1,
            billing_period: key.2,
            provider: r[3].text()?,
            period_end: r[4].int()?,
            state: r[5].text()?,
            generation: r[6].int()?,
            rows: r[7].int()?,
            gpu_rows: r[8].int()?,
            gpu_hours: r[9].real()?,
            totals: serde_json::from_str(&r[10].text()?)
                .map_err(|e| StoreError::Corrupt(format!("bill_loads.totals_json: {e}")))?,
            unmapped: serde_json::from_str(&r[11].text()?)
                .map_err(|e| StoreError::Corrupt(format!("bill_loads.unmapped_json: {e}")))?,
            loaded_at: r[12].text()?,
            checked_at: r[13].text()?,
        });
    }
    Ok(out)
}

pub(super) fn files(db: &dyn Db, source: &str) -> Result<BTreeMap<String, FileRecord>, StoreError> {
    let mut out = BTreeMap::new();
    for r in db.rows(
        "SELECT path, fingerprint, periods_json FROM bill_files WHERE source = $1",
        &[source.into()],
    )? {
        let periods: Vec<(String, String)> = serde_json::from_str(&r[2].text()?)
            .map_err(|e| StoreError::Corrupt(format!("bill_files.periods_json: {e}")))?;
        out.insert(
            r[0].text()?,
            FileRecord {
                fingerprint: r[1].text()?,
                periods,
            },
        );
    }
    Ok(out)
}

pub(super) fn record_files(
    db: &dyn Db,
    source: &str,
    files: &[(String, FileRecord)],
    removed: &[String],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    db.check_fence()?;
    for path in removed {
        db.exec(
            "DELETE FROM bill_files WHERE source = $1 AND path = $2",
            &[source.into(), path.as_str().into()],
        )?;
    }
    for (path, f) in files {
        let periods = serde_json::to_string(&f.periods)
            .map_err(|e| StoreError::Corrupt(format!("periods: {e}")))?;
        db.exec(
            "INSERT INTO bill_files (source, path, fingerprint, periods_json, read_at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (source, path) DO UPDATE SET fingerprint = excluded.fingerprint,
                 periods_json = excluded.periods_json, read_at = excluded.read_at",
            &[
                source.into(),
                path.as_str().into(),
                f.fingerprint.as_str().into(),
                periods.into(),
                ts(now).into(),
            ],
        )?;
    }
    Ok(())
}

/// `col IN ($n, ...)` for a non-empty list, binding its values.
fn any_of(col: &str, values: &[String], params: &mut Vec<Val>, sql: &mut String) {
    if values.is_empty() {
        return;
    }
    let marks: Vec<String> = values
        .iter()
        .map(|v| {
            params.push(v.as_str().into());
            format!("${}", params.len())
        })
        .collect();
    sql.push_str(&format!(" AND {col} IN ({})", marks.join(", ")));
}

/// A GPU model or its family (`H100` matches `H100-80GB`), as the price
/// filters match them.
fn gpu_of(values: &[String], params: &mut Vec<Val>, sql: &mut String) {
    if values.is_empty() {
        return;
    }
    let tests: Vec<String> = values
        .iter()
        .map(|v| {
            let v = v.trim().to_ascii_lowercase();
            params.push(v.clone().into());
            params.push(format!("{v}-%").into());
            format!(
                "lower(gpu_model) = ${} OR lower(gpu_model) LIKE ${}",
                params.len() - 1,
                params.len()
            )
        })
        .collect();
    sql.push_str(&format!(" AND ({})", tests.join(" OR ")));
}

/// A grouped row: its bucket, grouped fields, currency and sums.
type Grouped = (i64, BTreeMap<String, String>, String, Vec<Val>);

/// Runs a grouped query over `table`: the bucket, the grouped fields, the
/// currency, then `sums`, ordered the same way. One row more than the limit
/// means `TooLarge`.
fn grouped(
    db: &dyn Db,
    table_hours: &str,
    table_days: &str,
    q: &BillQuery,
    sums: &[&str],
    what: &'static str,
) -> Result<Vec<Grouped>, StoreError> {
    let (table, bucket) = match q.by.unwrap_or(Bucket::Day) {
        Bucket::Hour => (table_hours, "start".to_owned()),
        Bucket::Day => (table_days, "start".to_owned()),
        Bucket::Month => (table_days, db.month_of("start")),
    };
    let mut params: Vec<Val> = vec![q.since.into(), q.until.into()];
    let mut filter = String::from("start >= $1 AND start < $2");
    any_of("team", &q.teams, &mut params, &mut filter);
    any_of("provider", &q.providers, &mut params, &mut filter);
    gpu_of(&q.gpus, &mut params, &mut filter);
    any_of("price_kind", &q.price_kinds, &mut params, &mut filter);
    if q.gpu_only {
        filter.push_str(" AND gpu = 1");
    }
    if !q.accounts.is_empty() {
        let (mut sub, mut billing) = (String::new(), String::new());
        any_of("account", &q.accounts, &mut params, &mut sub);
        any_of("billing_account", &q.accounts, &mut params, &mut billing);
        let or = |t: &str| t.trim_start_matches(" AND ").to_owned();
        filter.push_str(&format!(" AND ({} OR {})", or(&sub), or(&billing)));
    }
    let mut cols = vec!["b".to_owned()];
    cols.extend(q.group.iter().cloned());
    cols.push("currency".to_owned());
    let keys = cols[1..].join(", ");
    let sum_sql: Vec<String> = sums.iter().map(|s| format!("SUM({s})")).collect();
    params.push(i64::try_from(q.limit + 1).unwrap_or(i64::MAX).into());
    let sql = format!(
        "SELECT b, {keys}, {sums} FROM (SELECT {bucket} AS b, * FROM {table} WHERE {filter}) t
         GROUP BY b, {keys} ORDER BY b, {keys} LIMIT ${}",
        params.len(),
        sums = sum_sql.join(", "),
    );
    let rows = db.rows(&sql, &params)?;
    if rows.len() > q.limit {
        return Err(StoreError::TooLarge {
            what,
            limit: q.limit,
        });
    }
    let n = q.group.len();
    rows.into_iter()
        .map(|r| {
            let mut fields = BTreeMap::new();
            for (i, name) in q.group.iter().enumerate() {
                fields.insert(name.clone(), r[1 + i].text()?);
            }
            Ok((r[0].int()?, fields, r[1 + n].text()?, r[2 + n..].to_vec()))
        })
        .collect()
}

pub(super) fn usage(db: &dyn Db, q: &BillQuery) -> Result<Vec<UsageRow>, StoreError> {
    grouped(
        db,
        "bill_usage_hours",
        "bill_usage_days",
        q,
        &[
            "instance_hours",
            "gpu_hours",
            "billed_cost",
            "effective_cost",
        ],
        "usage rows",
    )?
    .into_iter()
    .map(|(start, fields, currency, sums)| {
        Ok(UsageRow {
            start: utc(start),
            fields,
            instance_hours: sums[0].opt_real()?,
            gpu_hours: sums[1].real()?,
            billed_cost: sums[2].real()?,
            effective_cost: sums[3].real()?,
            currency,
        })
    })
    .collect()
}

pub(super) fn spend(db: &dyn Db, q: &BillQuery) -> Result<Vec<SpendRow>, StoreError> {
    let q = BillQuery {
        by: Some(match q.by {
            Some(Bucket::Month) => Bucket::Month,
            _ => Bucket::Day,
        }),
        ..q.clone()
    };
    grouped(
        db,
        "bill_spend_days",
        "bill_spend_days",
        &q,
        &["billed_cost", "effective_cost"],
        "spend rows",
    )?
    .into_iter()
    .map(|(start, fields, currency, sums)| {
        Ok(SpendRow {
            start: utc(start),
            fields,
            billed_cost: sums[0].real()?,
            effective_cost: sums[1].real()?,
            currency,
            allocated_billed_cost: None,
            allocated_effective_cost: None,
        })
    })
    .collect()
}

/// What every period of one commitment says about it.
#[derive(Default)]
struct Seen {
    provider: String,
    kind: Option<String>,
    category: Option<String>,
    unit: Option<String>,
    regions: BTreeSet<String>,
    instance_types: BTreeSet<String>,
    untyped_cover: bool,
    first_seen: Option<i64>,
    last_seen: Option<i64>,
    currency: String,
}

pub(super) fn commitments(
    db: &dyn Db,
    providers: &[String],
    since: i64,
    until: i64,
) -> Result<Vec<CommitmentRecord>, StoreError> {
    let mut params: Vec<Val> = Vec::new();
    let mut filter = String::from("1 = 1");
    any_of("provider", providers, &mut params, &mut filter);
    let mut seen: BTreeMap<(String, String), Seen> = BTreeMap::new();
    for r in db.rows(
        &format!(
            "SELECT source, commitment_id, provider, kind, category, unit, regions_json,
                    instance_types_json, untyped_cover, first_seen, last_seen, currency
             FROM bill_commitments WHERE {filter}
             ORDER BY source, commitment_id, billing_period"
        ),
        &params,
    )? {
        let s = seen.entry((r[0].text()?, r[1].text()?)).or_default();
        s.provider = r[2].text()?;
        s.kind = s.kind.take().or(r[3].opt_text()?);
        s.category = s.category.take().or(r[4].opt_text()?);
        s.unit = s.unit.take().or(r[5].opt_text()?);
        let set = |v: &Val| -> Result<BTreeSet<String>, StoreError> {
            serde_json::from_str(&v.text()?)
                .map_err(|e| StoreError::Corrupt(format!("bill_commitments: {e}")))
        };
        s.regions.extend(set(&r[6])?);
        s.instance_types.extend(set(&r[7])?);
        s.untyped_cover |= r[8].int()? == 1;
        let first = r[9].int()?;
        s.first_seen = Some(s.first_seen.map_or(first, |f| f.min(first)));
        if let Some(last) = r[10].opt_int()? {
            s.last_seen = Some(s.last_seen.map_or(last, |l| l.max(last)));
        }
        s.currency = r[11].text()?;
    }
    let mut used: HashMap<(String, String), Vec<Val>> = HashMap::new();
    for r in db.rows(
        "SELECT source, commitment_id, SUM(used_quantity), SUM(unused_quantity), SUM(used_cost),
                SUM(unused_cost), SUM(covered_instance_hours), SUM(covered_gpu_hours)
         FROM bill_commitment_hours WHERE start >= $1 AND start < $2
         GROUP BY source, commitment_id",
        &[since.into(), until.into()],
    )? {
        used.insert((r[0].text()?, r[1].text()?), r[2..].to_vec());
    }
    let mut out = Vec::new();
    for ((source, id), s) in seen {
        let sums = used.remove(&(source.clone(), id.clone()));
        let first_seen = s.first_seen.unwrap_or_default();
        let bought_in_window = (since..until).contains(&first_seen);
        let Some(sums) = sums.or_else(|| bought_in_window.then(|| vec![Val::Null; 6])) else {
            continue;
        };
        let used_q = sums[0].opt_real()?;
        let unused_q = sums[1].opt_real()?;
        let (used_c, unused_c) = (sums[2].real()?, sums[3].real()?);
        let utilization = if used_q.is_some() || unused_q.is_some() {
            let (u, n) = (used_q.unwrap_or(0.0), unused_q.unwrap_or(0.0));
            (u + n > 0.0).then(|| u / (u + n))
        } else {
            (used_c + unused_c > 0.0).then(|| used_c / (used_c + unused_c))
        };
        let single = |set: &BTreeSet<String>| {
            (set.len() == 1)
                .then(|| set.iter().next().cloned())
                .flatten()
        };
        out.push(CommitmentRecord {
            id,
            provider: s.provider,
            source,
            kind: s.kind,
            category: s.category,
            unit: s.unit,
            region: single(&s.regions),
            instance_type: if s.untyped_cover {
                None
            } else {
                single(&s.instance_types)
            },
            first_seen: utc(first_seen),
            last_seen: s.last_seen.map(utc),
            used_quantity: used_q,
            unused_quantity: unused_q,
            utilization,
            covered_instance_hours: sums[4].real()?,
            covered_gpu_hours: sums[5].real()?,
            currency: s.currency,
        });
    }
    Ok(out)
}

pub(super) fn coverage(
    db: &dyn Db,
    providers: &[String],
    since: i64,
    until: i64,
) -> Result<Vec<CoverageRow>, StoreError> {
    let mut params: Vec<Val> = vec![since.into(), until.into()];
    let mut filter = String::from("start >= $1 AND start < $2 AND price_kind <> 'spot'");
    any_of("provider", providers, &mut params, &mut filter);
    let mut rows: BTreeMap<(String, String, String), (f64, f64)> = BTreeMap::new();
    for r in db.rows(
        &format!(
            "SELECT provider, region, instance_type, price_kind,
                    SUM(COALESCE(instance_hours, gpu_hours))
             FROM bill_usage_days WHERE {filter}
             GROUP BY provider, region, instance_type, price_kind"
        ),
        &params,
    )? {
        let e = rows
            .entry((r[0].text()?, r[1].text()?, r[2].text()?))
            .or_default();
        let hours = r[4].real()?;
        if r[3].text()? == "on_demand" {
            e.0 += hours;
        } else {
            e.1 += hours;
        }
    }
    Ok(rows
        .into_iter()
        .map(
            |((provider, region, instance_type), (on_demand, covered))| CoverageRow {
                provider,
                region,
                instance_type,
                on_demand_hours: on_demand,
                covered_hours: covered,
                coverage: (on_demand + covered > 0.0).then(|| covered / (on_demand + covered)),
            },
        )
        .collect())
}

pub(super) fn count_periods_before(db: &dyn Db, before: &str) -> Result<u64, StoreError> {
    let rows = db.rows(
        "SELECT count(*) FROM bill_loads WHERE billing_period < $1",
        &[before.into()],
    )?;
    Ok(rows.first().map_or(Ok(0), |r| r[0].int())?.unsigned_abs())
}

pub(super) fn prune_periods_before(db: &dyn Db, before: &str) -> Result<u64, StoreError> {
    let n = count_periods_before(db, before)?;
    for table in CHILD_TABLES
        .iter()
        .chain(&["bill_restatements", "bill_loads"])
    {
        db.exec(
            &format!("DELETE FROM {table} WHERE billing_period < $1"),
            &[before.into()],
        )?;
    }
    Ok(n)
}

/// The first and last hour of stored GPU usage.
pub(super) fn usage_span(db: &dyn Db) -> Result<Option<(i64, i64)>, StoreError> {
    let rows = db.rows("SELECT min(start), max(start) FROM bill_usage_hours", &[])?;
    match rows.first() {
        Some(r) => Ok(r[0].opt_int()?.zip(r[1].opt_int()?)),
        None => Ok(None),
    }
}

pub(super) fn commitment_days(
    db: &dyn Db,
    since: i64,
    until: i64,
) -> Result<Vec<CommitmentDay>, StoreError> {
    db.rows(
        "SELECT source, commitment_id, (start / 86400) * 86400 AS day, SUM(used_quantity),
                SUM(unused_quantity), SUM(used_cost), SUM(unused_cost)
         FROM bill_commitment_hours WHERE start >= $1 AND start < $2
         GROUP BY source, commitment_id, (start / 86400) * 86400
         ORDER BY source, commitment_id, day",
        &[since.into(), until.into()],
    )?
    .into_iter()
    .map(|r| {
        Ok(CommitmentDay {
            source: r[0].text()?,
            id: r[1].text()?,
            day: r[2].int()?,
            used_quantity: r[3].opt_real()?,
            unused_quantity: r[4].opt_real()?,
            used_cost: r[5].real()?,
            unused_cost: r[6].real()?,
        })
    })
    .collect()
}

pub(super) fn commitment_latest(db: &dyn Db) -> Result<Vec<LatestCommitmentHour>, StoreError> {
    db.rows(
        "SELECT h.source, h.commitment_id, h.start, SUM(h.used_quantity), SUM(h.unused_quantity),
                SUM(h.used_cost), SUM(h.unused_cost)
         FROM bill_commitment_hours h
         JOIN (SELECT source, commitment_id, max(start) AS last
               FROM bill_commitment_hours GROUP BY source, commitment_id) l
           ON h.source = l.source AND h.commitment_id = l.commitment_id AND h.start = l.last
         GROUP BY h.source, h.commitment_id, h.start
         ORDER BY h.source, h.commitment_id",
        &[],
    )?
    .into_iter()
    .map(|r| {
        Ok(LatestCommitmentHour {
            source: r[0].text()?,
            id: r[1].text()?,
            start: r[2].int()?,
            used_quantity: r[3].opt_real()?,
            unused_quantity: r[4].opt_real()?,
            used_cost: r[5].real()?,
            unused_cost: r[6].real()?,
        })
    })
    .collect()
}

/// Per source, the first and last day of stored spend.
pub(super) fn spend_span(db: &dyn Db) -> Result<BTreeMap<String, (i64, i64)>, StoreError> {
    db.rows(
        "SELECT source, min(start), max(start) FROM bill_spend_days GROUP BY source",
        &[],
    )?
    .into_iter()
    .map(|r| Ok((r[0].text()?, (r[1].int()?, r[2].int()?))))
    .collect()
}

pub(super) fn gpu_catalog(db: &dyn Db, provider: &str) -> Result<GpuCatalog, StoreError> {
    let types = db
        .rows(
            "SELECT instance_type, gpu_model, gpu_count FROM instance_types
             WHERE provider = $1 AND gpu_count > 0",
            &[provider.into()],
        )?
        .into_iter()
        .map(|r| {
            Ok((
                r[0].text()?,
                r[1].text()?,
                u32::try_from(r[2].int()?).unwrap_or(0),
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    let skus = db
        .rows(
            "SELECT DISTINCT v.source, s.instance_type, t.gpu_model
             FROM price_versions v
             JOIN price_series s ON s.id = v.series_id
             JOIN instance_types t ON t.provider = s.provider AND t.instance_type = s.instance_type
             WHERE s.provider = $1 AND v.source IS NOT NULL AND v.source <> ''
               AND t.gpu_count > 0 AND v.withdrawn = 0",
            &[provider.into()],
        )?
        .into_iter()
        .map(|r| Ok((r[0].text()?, r[1].text()?, r[2].text()?)))
        .collect::<Result<_, StoreError>>()?;
    Ok((types, skus))
}
