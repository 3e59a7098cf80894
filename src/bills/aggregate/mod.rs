//! What gpuplan keeps of a billing period: hourly GPU usage, daily spend,
//! commitments and their hourly use, corrections, and the digest that tells
//! an unchanged re-delivery from a restatement; [`fold`] folds charges into
//! it.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;

use serde::Serialize;

use super::charge::{Amounts, Category, Charge, Pricing, TimeUnit};
use super::gpus::{GpuTypes, Placement};
use super::time::{HOUR, floor_day, floor_hour, period_name};
use super::{BillProvider, BillSource, CommitmentType, UNALLOCATED, UsageKind};

mod fold;

pub use fold::{Aggregator, Plain};

/// The longest span a usage row may be spread over: a month of hours. A
/// longer one is not usage any export writes, and would cost a slot per hour.
pub const MAX_SPREAD_HOURS: i64 = 31 * 24;

/// One hour (or, in the daily rollup, one day) of GPU usage.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct UsageKey {
    /// Unix seconds of the hour's (or day's) start.
    pub start: i64,
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
}
