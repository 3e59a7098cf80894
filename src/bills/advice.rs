//! The steady on-demand GPU load of each team, out of the bills: the load
//! that ran on demand in nearly every hour of the window, which a
//! reservation or commitment would have covered for less.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::time::{DAY, HOUR, floor_day, to_utc};
use crate::store::bills::{BillQuery, Bucket};
use crate::store::{Store, StoreError};

/// Days of complete bills `advise` reads by default.
pub const DEFAULT_DAYS: u32 = 30;

/// The share of hours the steady load ran in: the load is the 10th
/// percentile of the hourly on-demand GPUs, which 90% of hours reached.
pub const STEADY_PERCENTILE: f64 = 0.10;

/// One team's on-demand load on one GPU model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SteadyLoad {
    pub team: String,
    pub gpu_model: String,
    pub from: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub hours: usize,
    pub on_demand_gpu_hours: f64,
    /// GPUs on demand in at least 90% of the window's hours.
    pub steady_gpus: f64,
    /// What the on-demand hours cost as billed (effective), when in one
    /// currency; `None` with several.
    pub on_demand_cost: Option<f64>,
    pub currency: Option<String>,
}

impl SteadyLoad {
    /// The billed on-demand price of one GPU-hour.
    #[must_use]
    pub fn per_gpu_hour(&self) -> Option<f64> {
        self.on_demand_cost
            .filter(|_| self.on_demand_gpu_hours > 0.0)
            .map(|c| c / self.on_demand_gpu_hours)
    }
}

/// The largest level that all but a `p` share of `values` reach: with
/// `p` = 0.1, the level at least 90% of them are at or above.
fn quantile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let at = ((values.len() as f64 * p).floor() as usize).min(values.len() - 1);
    values[at]
}

/// Each team's (of `teams`, or every team) on-demand GPU load per GPU model
/// over the last `days` complete days of the bills; `None` when the bills
/// hold no complete day of usage.
///
/// # Errors
/// On a store error.
pub fn steady_on_demand(
    store: &dyn Store,
    teams: &[String],
    days: u32,
) -> Result<Option<Vec<SteadyLoad>>, StoreError> {
    let Some((first, last)) = store.bill_usage_span()? else {
        return Ok(None);
    };
    let until = floor_day(last);
    if until <= first {
        return Ok(None);
    }
    let from = first.max(until - i64::from(days) * DAY);
    let hours = usize::try_from((until - from) / HOUR).unwrap_or(0);
    let q = BillQuery {
        since: from,
        until,
        by: Some(Bucket::Hour),
        group: vec!["team".to_owned(), "gpu_model".to_owned()],
        teams: teams.to_vec(),
        price_kinds: vec!["on_demand".to_owned()],
        limit: hours.saturating_mul(10_000).max(1),
        ..BillQuery::default()
    };
    struct Acc {
        gpus: Vec<f64>,
        cost: BTreeMap<String, f64>,
    }
    let mut by: BTreeMap<(String, String), Acc> = BTreeMap::new();
    for r in store.bill_usage(&q)? {
        let key = (
            r.fields.get("team").cloned().unwrap_or_default(),
            r.fields.get("gpu_model").cloned().unwrap_or_default(),
        );
        let acc = by.entry(key).or_insert_with(|| Acc {
            gpus: vec![0.0; hours],
            cost: BTreeMap::new(),
        });
        let at = usize::try_from((r.start.timestamp() - from) / HOUR).unwrap_or(usize::MAX);
        if let Some(h) = acc.gpus.get_mut(at) {
            *h += r.gpu_hours;
        }
        *acc.cost.entry(r.currency).or_default() += r.effective_cost;
    }
    Ok(Some(
        by.into_iter()
            .map(|((team, gpu_model), mut acc)| {
                let total: f64 = acc.gpus.iter().sum();
                let single = (acc.cost.len() == 1)
                    .then(|| acc.cost.pop_first())
                    .flatten();
                SteadyLoad {
                    team,
                    gpu_model,
                    from: to_utc(from),
                    until: to_utc(until),
                    hours,
                    on_demand_gpu_hours: total,
                    steady_gpus: quantile(&mut acc.gpus, STEADY_PERCENTILE),
                    on_demand_cost: single.as_ref().map(|(_, c)| *c),
                    currency: single.map(|(c, _)| c),
                }
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steady_load_is_what_ninety_percent_of_hours_reached() {
        // 10 hours: one at 0, nine at 4 or more: 90% of hours ran >= 4.
        let mut v = vec![0.0, 4.0, 5.0, 4.0, 8.0, 4.0, 4.0, 6.0, 4.0, 4.0];
        assert_eq!(quantile(&mut v, STEADY_PERCENTILE), 4.0);
        // Two idle hours of 10 are more than 10%: nothing is steady.
        let mut v: Vec<f64> = [0.0, 0.0].into_iter().chain([4.0; 8]).collect();
        assert_eq!(quantile(&mut v, STEADY_PERCENTILE), 0.0);
        // Two of 20 are the 10%: the rest is steady.
        let mut v: Vec<f64> = [0.0, 0.0].into_iter().chain([4.0; 18]).collect();
        assert_eq!(quantile(&mut v, STEADY_PERCENTILE), 4.0);
        assert_eq!(quantile(&mut [], 0.1), 0.0);
    }
}
