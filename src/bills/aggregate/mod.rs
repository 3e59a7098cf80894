//! Folding a billing period's charges ([`fold`]) into what gpuplan keeps
//! of it: hourly GPU usage, daily spend, commitments and their hourly use,
//! corrections, and the digest that tells an unchanged re-delivery from a
//! restatement. The kept shape is the store's (`store::bills::period`).

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;

use super::charge::{Amounts, Category, Charge, Pricing, TimeUnit};
use super::gpus::{GpuTables, Placement};
use super::time::{HOUR, floor_day, floor_hour, period_name};
use super::{BillProvider, BillSource, UNALLOCATED, UsageKind};

mod fold;

pub use crate::store::bills::period::{
    Commitment, CommitmentHour, Correction, PeriodData, SpendDay, Total, UsageKey, UsageValue,
};
pub use fold::{Aggregator, Plain};

/// The longest span a usage row may be spread over: a month of hours. A
/// longer one is not usage any export writes, and would cost a slot per hour.
pub const MAX_SPREAD_HOURS: i64 = 31 * 24;
