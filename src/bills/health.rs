//! How well what a team bought is used, as gauges can show it: per bill
//! source and commitment type, the lowest utilization of any commitment
//! over the last complete days of the bills.

use std::collections::BTreeMap;

use crate::bills::budgets::{self, BillSourceRef};
use crate::bills::time::DAY;
use crate::store::{Store, StoreError};

/// Complete days the utilization is taken over, as `commitment_underused`
/// rules do by default.
pub const DAYS: i64 = 7;

/// The commitments of one source and type.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitmentHealth {
    pub source: String,
    /// `type` as the bill names it (`Reservation`, `SavingsPlan`, ...), or
    /// `commitment` when it names none.
    pub kind: String,
    /// Commitments with a utilization in the window.
    pub count: usize,
    /// The lowest of their utilizations, 0 to 1.
    pub lowest_utilization: f64,
}

/// Per (source, type), over the [`DAYS`] days up to the last complete one;
/// empty while no day is complete.
///
/// # Errors
/// On a store error.
pub fn commitment_health(
    store: &dyn Store,
    sources: &[BillSourceRef],
) -> Result<Vec<CommitmentHealth>, StoreError> {
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let Ok(days) = budgets::data_days(store, sources, &[])? else {
        return Ok(Vec::new());
    };
    let until = days.complete_to + DAY;
    let since = (until - DAYS * DAY).max(days.first);
    let mut out: BTreeMap<(String, String), CommitmentHealth> = BTreeMap::new();
    for c in store.bill_commitments(&[], since, until)? {
        let Some(used) = c.utilization.filter(|u| u.is_finite()) else {
            continue;
        };
        let kind = c.kind.clone().unwrap_or_else(|| "commitment".to_owned());
        let entry = out
            .entry((c.source.clone(), kind.clone()))
            .or_insert(CommitmentHealth {
                source: c.source.clone(),
                kind,
                count: 0,
                lowest_utilization: f64::INFINITY,
            });
        entry.count += 1;
        entry.lowest_utilization = entry.lowest_utilization.min(used);
    }
    Ok(out.into_values().collect())
}
