//! Demand to plan from, out of the bills: the hourly GPU-hours of every
//! price kind together (however it was bought, it is what ran), for the
//! teams and GPUs asked, up to the last complete hour of the bills.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::bills::time::{DAY, HOUR, floor_day, to_utc};
use crate::plan::inputs::Demand;
use crate::store::bills::{BillQuery, Bucket};
use crate::store::{Store, StoreError};

/// Hours of history a forecast from the bills reads by default: four weeks,
/// so each hour of the week is seen four times.
pub const DEFAULT_DAYS: u32 = 28;

/// The past usage a forecast is made from, and which hours it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BillsUsage {
    #[serde(skip)]
    pub demand: Demand,
    /// The first hour used.
    pub from: DateTime<Utc>,
    /// The end (exclusive) of the last complete hour: the start of the
    /// newest day in the bills, which may still be arriving.
    pub until: DateTime<Utc>,
    pub hours: usize,
    pub teams: Vec<String>,
    pub gpus: Vec<String>,
}

/// Why there is no usage to plan from.
#[derive(Debug, thiserror::Error)]
pub enum DemandError {
    #[error("the bills hold no GPU usage yet; run `gpuplan bills sync`")]
    NoUsage,
    #[error("the bills hold no complete day of GPU usage yet (only {0})")]
    NoCompleteDay(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads the hourly GPU-hours of `teams` on `gpus` (all when empty) over the
/// last `days` complete days of the bills.
///
/// # Errors
/// `NoUsage` when nothing is loaded, a store error otherwise.
pub fn usage_from_bills(
    store: &dyn Store,
    teams: &[String],
    gpus: &[String],
    days: u32,
) -> Result<BillsUsage, DemandError> {
    let (first, last) = store.bill_usage_span()?.ok_or(DemandError::NoUsage)?;
    let until = floor_day(last);
    if until <= first {
        return Err(DemandError::NoCompleteDay(
            to_utc(last).format("%Y-%m-%d").to_string(),
        ));
    }
    let from = first.max(until - i64::from(days) * DAY);
    let q = BillQuery {
        since: from,
        until,
        by: Some(Bucket::Hour),
        teams: teams.to_vec(),
        gpus: gpus.to_vec(),
        limit: usize::try_from((until - from) / HOUR)
            .unwrap_or(usize::MAX)
            .saturating_mul(8)
            .max(1),
        ..BillQuery::default()
    };
    let hours = usize::try_from((until - from) / HOUR).unwrap_or(0);
    let mut gpus_per_hour = vec![0.0; hours];
    // Rows come per currency; hours add across them, costs never do.
    for row in store.bill_usage(&q)? {
        let at = usize::try_from((row.start.timestamp() - from) / HOUR).unwrap_or(usize::MAX);
        if let Some(h) = gpus_per_hour.get_mut(at) {
            *h += row.gpu_hours;
        }
    }
    Ok(BillsUsage {
        demand: Demand {
            gpus: gpus_per_hour,
            start: Some(to_utc(from)),
        },
        from: to_utc(from),
        until: to_utc(until),
        hours,
        teams: teams.to_vec(),
        gpus: gpus.to_vec(),
    })
}
