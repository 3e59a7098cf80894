//! Spend by team with its allocated figure: under `[allocation]
//! unallocated = "proportional"`, each day's spend that no tag or account
//! names is split across the teams in proportion to what they spent that
//! day, on each cost basis and in each currency apart. The direct figure
//! stays beside the allocated one, so nothing hides in the split.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, TimeZone, Utc};

use super::UNALLOCATED;
use crate::store::bills::{BillQuery, Bucket, SpendRow};
use crate::store::{Store, StoreError};

/// Daily rows an allocated answer may read before it is bucketed and
/// limited: a year of days for 540 team-and-field combinations. It bounds
/// what one request can make the daemon hold (about 60 MB); more is
/// refused as too large, naming a shorter window or fewer fields.
const MAX_DAILY_ROWS: usize = 200_000;

/// A row's identity apart from its team: day, the other fields, currency.
type Slot = (i64, Vec<(String, String)>, String);

fn slot(r: &SpendRow) -> Slot {
    (
        r.start.timestamp(),
        r.fields
            .iter()
            .filter(|(k, _)| k.as_str() != "team")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        r.currency.clone(),
    )
}

fn team(r: &SpendRow) -> &str {
    r.fields.get("team").map_or(UNALLOCATED, String::as_str)
}

/// Sets the allocated figures of daily rows grouped by team. With
/// `proportional`, a day's unallocated spend moves to the teams with
/// positive spend that day (in that currency, on that basis), each by its
/// share; a team without a row for the unallocated row's other fields gets
/// one, with a direct figure of zero. A day on which no team spent keeps
/// its unallocated spend where it is.
#[must_use]
pub fn allocate(rows: Vec<SpendRow>, proportional: bool) -> Vec<SpendRow> {
    let mut rows: Vec<SpendRow> = rows
        .into_iter()
        .map(|r| SpendRow {
            allocated_billed_cost: Some(r.billed_cost),
            allocated_effective_cost: Some(r.effective_cost),
            ..r
        })
        .collect();
    if !proportional {
        return rows;
    }
    // Per (day, currency): each team's positive spend, on both bases.
    let mut spent: BTreeMap<(i64, String), BTreeMap<String, (f64, f64)>> = BTreeMap::new();
    for r in rows.iter().filter(|r| team(r) != UNALLOCATED) {
        let t = spent
            .entry((r.start.timestamp(), r.currency.clone()))
            .or_default()
            .entry(team(r).to_owned())
            .or_default();
        t.0 += r.billed_cost;
        t.1 += r.effective_cost;
    }
    let mut at: BTreeMap<(Slot, String), usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| ((slot(r), team(r).to_owned()), i))
        .collect();
    let unallocated: Vec<usize> = (0..rows.len())
        .filter(|i| team(&rows[*i]) == UNALLOCATED)
        .collect();
    for u in unallocated {
        let (day, currency) = (rows[u].start.timestamp(), rows[u].currency.clone());
        let Some(teams) = spent.get(&(day, currency)) else {
            continue;
        };
        let amounts = [rows[u].billed_cost, rows[u].effective_cost];
        let u_slot = slot(&rows[u]);
        for (b, amount) in amounts.into_iter().enumerate() {
            let basis = |t: &(f64, f64)| if b == 0 { t.0 } else { t.1 };
            let total: f64 = teams.values().map(basis).filter(|v| *v > 0.0).sum();
            if total <= 0.0 || amount == 0.0 {
                continue;
            }
            for (name, t) in teams {
                let share = basis(t);
                if share <= 0.0 {
                    continue;
                }
                let key = (u_slot.clone(), name.clone());
                let i = *at.entry(key).or_insert_with(|| {
                    let mut fields = rows[u].fields.clone();
                    fields.insert("team".to_owned(), name.clone());
                    rows.push(SpendRow {
                        fields,
                        billed_cost: 0.0,
                        effective_cost: 0.0,
                        allocated_billed_cost: Some(0.0),
                        allocated_effective_cost: Some(0.0),
                        ..rows[u].clone()
                    });
                    rows.len() - 1
                });
                let add = amount * share / total;
                let target = if b == 0 {
                    &mut rows[i].allocated_billed_cost
                } else {
                    &mut rows[i].allocated_effective_cost
                };
                *target = Some(target.unwrap_or(0.0) + add);
            }
            let own = if b == 0 {
                &mut rows[u].allocated_billed_cost
            } else {
                &mut rows[u].allocated_effective_cost
            };
            *own = Some(0.0);
        }
    }
    rows
}

/// The UTC month start of a day.
fn month_of(t: DateTime<Utc>) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(t)
}

/// Sums daily rows into months (or leaves them daily), ordered by bucket,
/// fields and currency as the store orders its answers.
fn bucketed(rows: Vec<SpendRow>, by: Bucket) -> Vec<SpendRow> {
    let mut out: BTreeMap<Slot, SpendRow> = BTreeMap::new();
    for r in rows {
        let start = if by == Bucket::Month {
            month_of(r.start)
        } else {
            r.start
        };
        let key = (
            start.timestamp(),
            r.fields
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            r.currency.clone(),
        );
        let e = out.entry(key).or_insert_with(|| SpendRow {
            start,
            billed_cost: 0.0,
            effective_cost: 0.0,
            allocated_billed_cost: Some(0.0),
            allocated_effective_cost: Some(0.0),
            ..r.clone()
        });
        e.billed_cost += r.billed_cost;
        e.effective_cost += r.effective_cost;
        let add =
            |a: &mut Option<f64>, b: Option<f64>| *a = Some(a.unwrap_or(0.0) + b.unwrap_or(0.0));
        add(&mut e.allocated_billed_cost, r.allocated_billed_cost);
        add(&mut e.allocated_effective_cost, r.allocated_effective_cost);
    }
    out.into_values().collect()
}

/// A spend answer. Grouped by team, its rows carry the allocated figures
/// too: the split is computed over every team (a `teams` filter applies
/// after it, so a team's share does not depend on which teams were asked
/// for). Other answers are the store's as they are.
///
/// # Errors
/// On a store error, or `TooLarge` past the query's limit.
pub fn spend(
    store: &dyn Store,
    q: &BillQuery,
    proportional: bool,
) -> Result<Vec<SpendRow>, StoreError> {
    if !q.group.iter().any(|g| g == "team") {
        return store.bill_spend(q);
    }
    let daily = BillQuery {
        by: Some(Bucket::Day),
        teams: Vec::new(),
        limit: MAX_DAILY_ROWS,
        ..q.clone()
    };
    let rows = allocate(store.bill_spend(&daily)?, proportional);
    let rows: Vec<SpendRow> = bucketed(rows, q.by.unwrap_or(Bucket::Day))
        .into_iter()
        .filter(|r| q.teams.is_empty() || q.teams.iter().any(|t| t == team(r)))
        .collect();
    if rows.len() > q.limit {
        return Err(StoreError::TooLarge {
            what: "spend rows",
            limit: q.limit,
        });
    }
    Ok(rows)
}

/// The unallocated share of an answer's spend, per currency: (unallocated,
/// total) on the effective basis.
#[must_use]
pub fn unallocated_share(rows: &[SpendRow]) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for r in rows {
        let e = out.entry(r.currency.clone()).or_default();
        if team(r) == UNALLOCATED {
            e.0 += r.effective_cost;
        }
        e.1 += r.effective_cost;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(day: i64, team: &str, service: &str, billed: f64, effective: f64) -> SpendRow {
        SpendRow {
            start: Utc.timestamp_opt(day * 86_400, 0).unwrap(),
            fields: [
                ("team".to_owned(), team.to_owned()),
                ("service_category".to_owned(), service.to_owned()),
            ]
            .into(),
            billed_cost: billed,
            effective_cost: effective,
            currency: "USD".into(),
            allocated_billed_cost: None,
            allocated_effective_cost: None,
        }
    }

    fn figure(rows: &[SpendRow], day: i64, team: &str, service: &str) -> (f64, f64, f64, f64) {
        let r = rows
            .iter()
            .find(|r| {
                r.start.timestamp() == day * 86_400
                    && super::team(r) == team
                    && r.fields["service_category"] == service
            })
            .unwrap_or_else(|| panic!("no row {day} {team} {service}"));
        (
            r.billed_cost,
            r.effective_cost,
            r.allocated_billed_cost.unwrap(),
            r.allocated_effective_cost.unwrap(),
        )
    }

    #[test]
    fn proportional_splits_a_days_unallocated_spend_by_each_teams_share() {
        // Day 0: ml spent 30 effective, web 10; 8 unallocated splits 6 / 2.
        // Billed: ml 0 (all on a savings plan), web 10: web takes all 4.
        // Day 1: nobody spent: the 5 stays unallocated.
        let rows = vec![
            row(0, "ml", "Compute", 0.0, 30.0),
            row(0, "web", "Compute", 10.0, 10.0),
            row(0, UNALLOCATED, "Storage", 4.0, 8.0),
            row(1, UNALLOCATED, "Storage", 5.0, 5.0),
        ];
        let out = allocate(rows, true);
        assert_eq!(figure(&out, 0, "ml", "Compute"), (0.0, 30.0, 0.0, 30.0));
        // New rows with a direct figure of zero carry the shares.
        assert_eq!(figure(&out, 0, "ml", "Storage"), (0.0, 0.0, 0.0, 6.0));
        assert_eq!(figure(&out, 0, "web", "Storage"), (0.0, 0.0, 4.0, 2.0));
        assert_eq!(
            figure(&out, 0, UNALLOCATED, "Storage"),
            (4.0, 8.0, 0.0, 0.0)
        );
        assert_eq!(
            figure(&out, 1, UNALLOCATED, "Storage"),
            (5.0, 5.0, 5.0, 5.0)
        );
        let sum = |f: fn(&SpendRow) -> f64| out.iter().map(f).sum::<f64>();
        assert_eq!(sum(|r| r.effective_cost), 53.0);
        assert_eq!(sum(|r| r.allocated_effective_cost.unwrap()), 53.0);
        assert_eq!(sum(|r| r.allocated_billed_cost.unwrap()), 19.0);
    }

    #[test]
    fn keep_shows_the_direct_figure_as_allocated() {
        let out = allocate(vec![row(0, UNALLOCATED, "Storage", 4.0, 8.0)], false);
        assert_eq!(
            figure(&out, 0, UNALLOCATED, "Storage"),
            (4.0, 8.0, 4.0, 8.0)
        );
    }

    #[test]
    fn currencies_are_split_apart() {
        let mut eur = row(0, UNALLOCATED, "Storage", 9.0, 9.0);
        eur.currency = "EUR".into();
        let out = allocate(vec![row(0, "ml", "Compute", 1.0, 1.0), eur], true);
        let e = out.iter().find(|r| r.currency == "EUR").unwrap();
        assert_eq!(e.allocated_effective_cost, Some(9.0));
        assert_eq!(out.len(), 2);
    }
}
