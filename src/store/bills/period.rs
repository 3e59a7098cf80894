//! What the catalog keeps of a billing period: hourly GPU usage, daily
//! spend, commitments and their hourly use, corrections and totals. The
//! bill reader (`bills::aggregate`) builds it; the store writes and reads
//! it, so the store owns its shape.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;
use serde::Serialize;

/// The reading of export files that makes a period, raised when the same
/// files come to mean other aggregates (2: each row under the provider it
/// names). A period stored by an older reading is rewritten from its files
/// at the next sync, which is not a restatement.
pub const READER: i64 = 2;

/// How a GPU usage row was bought, as `usage` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageKind {
    OnDemand,
    Spot,
    Reserved,
    SavingsPlan,
    Commit,
}

impl UsageKind {
    pub const ALL: [Self; 5] = [
        Self::OnDemand,
        Self::Spot,
        Self::Reserved,
        Self::SavingsPlan,
        Self::Commit,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => "on_demand",
            Self::Spot => "spot",
            Self::Reserved => "reserved",
            Self::SavingsPlan => "savings_plan",
            Self::Commit => "commit",
        }
    }

    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether a commitment paid for this usage (what coverage counts).
    #[must_use]
    pub fn is_covered(self) -> bool {
        matches!(self, Self::Reserved | Self::SavingsPlan | Self::Commit)
    }
}

/// The kind of a commitment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitmentType {
    Reservation,
    SavingsPlan,
    Commit,
}

impl CommitmentType {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reservation => "reservation",
            Self::SavingsPlan => "savings_plan",
            Self::Commit => "commit",
        }
    }

    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Reservation, Self::SavingsPlan, Self::Commit]
            .into_iter()
            .find(|k| k.as_str() == s)
    }

    /// The usage kind of rows this commitment covers.
    #[must_use]
    pub fn usage_kind(self) -> UsageKind {
        match self {
            Self::Reservation => UsageKind::Reserved,
            Self::SavingsPlan => UsageKind::SavingsPlan,
            Self::Commit => UsageKind::Commit,
        }
    }
}

/// One hour (or, in the daily rollup, one day) of GPU usage.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct UsageKey {
    /// Unix seconds of the hour's (or day's) start.
    pub start: i64,
    /// The provider that billed the row (FOCUS names one per row).
    pub provider: String,
    pub account: String,
    pub team: String,
    pub region: String,
    pub instance_type: String,
    pub gpu_model: String,
    pub price_kind: UsageKind,
    pub currency: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UsageValue {
    /// `None` for per-GPU SKUs, which bill GPU-hours only.
    pub instance_hours: Option<f64>,
    pub gpu_hours: f64,
    pub billed_cost: f64,
    pub effective_cost: f64,
}

/// One day of spend at one grain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendDay {
    pub day: i64,
    pub provider: String,
    pub account: String,
    pub team: String,
    pub service_category: String,
    pub charge_category: String,
    /// The row names a GPU instance type or GPU SKU.
    pub gpu: bool,
    pub currency: String,
    pub billed_cost: f64,
    pub effective_cost: f64,
}

/// A commitment as one billing period's rows show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Commitment {
    pub id: String,
    pub provider: String,
    pub kind: Option<CommitmentType>,
    pub category: Option<String>,
    pub unit: Option<String>,
    /// Every region its rows name.
    pub regions: BTreeSet<String>,
    /// Every instance type its covered rows name.
    pub instance_types: BTreeSet<String>,
    /// Some covered row named no instance type.
    pub untyped_cover: bool,
    pub first_seen: i64,
    pub last_seen: Option<i64>,
    pub currency: String,
}

/// One hour of a commitment's use.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CommitmentHour {
    pub used_quantity: Option<f64>,
    pub unused_quantity: Option<f64>,
    pub used_cost: f64,
    pub unused_cost: f64,
    pub covered_instance_hours: f64,
    pub covered_gpu_hours: f64,
}

/// Rows billed in this period that correct an earlier one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Correction {
    /// The corrected period (`2026-09`).
    pub corrects: String,
    pub currency: String,
    pub rows: u64,
    pub billed_cost: f64,
    pub effective_cost: f64,
}

/// A period's sums in one currency.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Total {
    pub currency: String,
    pub rows: u64,
    pub billed_cost: f64,
    pub effective_cost: f64,
}

/// Everything kept of one (source, billing account, billing period).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeriodData {
    pub billing_account: String,
    /// `2026-10`: the month the period starts in.
    pub period: String,
    pub period_start: i64,
    pub period_end: i64,
    pub rows: u64,
    pub gpu_rows: u64,
    pub gpu_hours: f64,
    /// By currency, never summed across.
    pub totals: BTreeMap<String, Total>,
    pub usage: HashMap<UsageKey, UsageValue>,
    pub spend: Vec<SpendDay>,
    pub commitments: BTreeMap<String, Commitment>,
    pub commitment_hours: BTreeMap<(String, i64), CommitmentHour>,
    pub corrections: Vec<Correction>,
    /// Rows of GPU instance types no table places, by type.
    pub unmapped: BTreeMap<String, u64>,
    /// Rows per provider that billed them: a multi-provider FOCUS file
    /// names one per row.
    pub provider_rows: BTreeMap<String, u64>,
}

impl PeriodData {
    /// The provider a load is listed under: the one that billed most of its
    /// rows (a billing account's marketplace rows may name their sellers).
    #[must_use]
    pub fn provider(&self) -> &str {
        self.provider_rows
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map_or("", |(p, _)| p)
    }
}
