//! Alerts over the bills: budget thresholds, the unallocated share of a
//! month's spend, under-used commitments, low coverage and restatements.
//! Their windows end at the last complete day of the bills, not at the
//! clock, so a late export never reads as a drop.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{Observation, any_glob, crossing};
use crate::alerts::rules::{Rule, RuleKind};
use crate::bills::allocation;
use crate::bills::budgets::{self, BillsSetup, BudgetConfig, BudgetStatus, DataDays, ThresholdOn};
use crate::bills::time::day_name as day;
use crate::store::bills::{BillQuery, Bucket};
use crate::store::{Store, StoreError};

const DAY: i64 = 86_400;

/// The state-machine rule of a budget's thresholds: they fire on crossing
/// and re-arm as soon as the figure is back below (no hysteresis: only a
/// restatement lowers a period's spend).
#[must_use]
pub fn budget_rule(b: &BudgetConfig) -> Rule {
    Rule {
        name: budgets::rule_name(&b.name),
        kind: RuleKind::Budget,
        gpu_models: Vec::new(),
        price_kinds: Vec::new(),
        price_scopes: Vec::new(),
        providers: b.scope.providers.clone(),
        regions: Vec::new(),
        threshold: None,
        every_offer: false,
        hysteresis: 0.0,
        cooldown: None,
        channels: b.channels.clone(),
        plans: Vec::new(),
        percent: None,
        amount: None,
        days: 0,
        min_days: None,
    }
}

/// What a budget's thresholds watch, one observation per threshold keyed
/// by its period: a new period starts every threshold afresh, and a figure
/// back below a threshold re-arms it.
#[must_use]
pub fn budget_observations(status: &BudgetStatus) -> Vec<Observation> {
    let (Some(period), Some(actual), Some(forecast)) =
        (&status.period, status.actual, status.forecast)
    else {
        return Vec::new();
    };
    let basis = status.basis.as_str();
    let complete_to = status
        .complete_to
        .map(|d| d.to_string())
        .unwrap_or_default();
    let cur = &status.currency;
    status
        .thresholds
        .iter()
        .map(|t| {
            let figure = match t.on {
                ThresholdOn::Actual => actual,
                ThresholdOn::Forecast => forecast,
            };
            let word = t.on.as_str();
            let crossed = t.state == "crossed";
            let pct = 100.0 * figure / status.amount;
            Observation {
                key: budgets::threshold_key(t.on, t.percent, period),
                value: figure,
                active: crossed,
                rearm: !crossed,
                message: format!(
                    "budget {name}: {word} {figure:.2} {cur} is {pct:.1}% of {amount:.2} {cur} \
                     (threshold {tp}% on {word}; {basis} cost, {period}); actual {actual:.2}, \
                     forecast {forecast:.2}; bills complete to {complete_to}",
                    name = status.name,
                    amount = status.amount,
                    tp = t.percent,
                ),
                details: json!({
                    "budget": status.name,
                    "period": period,
                    "threshold": {"percent": t.percent, "on": t.on},
                    "actual": actual,
                    "forecast": forecast,
                    "amount": status.amount,
                    "currency": cur,
                    "percent": pct,
                    "basis": basis,
                    "complete_to": complete_to,
                    "allocated": status.allocated,
                }),
            }
        })
        .collect()
}

/// What a rule over the bills watches now.
///
/// # Errors
/// On a store error.
pub fn observe(
    store: &dyn Store,
    rule: &Rule,
    bills: &BillsSetup,
    now: DateTime<Utc>,
) -> Result<Vec<Observation>, StoreError> {
    let Ok(days) = budgets::data_days(store, &bills.sources, &[])? else {
        return Ok(Vec::new());
    };
    let h = rule.hysteresis;
    let until = days.complete_to + DAY;
    let since = (until - i64::from(rule.days) * DAY).max(days.first);
    let percent = rule.percent.unwrap_or(0.0);
    match rule.kind {
        RuleKind::UnallocatedSpend => unallocated(store, rule, bills, days),
        RuleKind::CommitmentUnderused => Ok(store
            .bill_commitments(&[], since, until)?
            .into_iter()
            .filter(|c| any_glob(&rule.providers, &c.provider))
            .filter(|c| c.region.as_deref().is_none_or(|r| any_glob(&rule.regions, r)))
            .filter_map(|c| {
                let used = 100.0 * c.utilization?;
                let (active, rearm) = crossing(true, used, percent, h);
                Some(Observation {
                    key: format!("{}/{}", c.source, c.id),
                    value: used,
                    active,
                    rearm,
                    message: format!(
                        "commitment {} ({}) was {used:.1}% used from {} to {}, below {percent}%",
                        c.id,
                        c.kind.as_deref().unwrap_or("commitment"),
                        day(since),
                        day(days.complete_to),
                    ),
                    details: json!({"commitment": c, "since": day(since), "complete_to": day(days.complete_to), "percent": percent}),
                })
            })
            .collect()),
        RuleKind::CoverageBelow => Ok(store
            .bill_coverage(&[], since, until)?
            .into_iter()
            .filter(|c| any_glob(&rule.providers, &c.provider) && any_glob(&rule.regions, &c.region))
            .filter_map(|c| {
                let covered = 100.0 * c.coverage?;
                let (active, rearm) = crossing(true, covered, percent, h);
                Some(Observation {
                    key: format!("{}/{}/{}", c.provider, c.region, c.instance_type),
                    value: covered,
                    active,
                    rearm,
                    message: format!(
                        "{} in {} ({}) was {covered:.1}% covered by commitments from {} to {} ({:.0} of {:.0} instance-hours), below {percent}%",
                        c.instance_type,
                        c.region,
                        c.provider,
                        day(since),
                        day(days.complete_to),
                        c.covered_hours,
                        c.covered_hours + c.on_demand_hours,
                    ),
                    details: json!({"coverage": c, "since": day(since), "complete_to": day(days.complete_to), "percent": percent}),
                })
            })
            .collect()),
        RuleKind::BillRestated => restated(store, rule, bills, now),
        _ => Ok(Vec::new()),
    }
}

/// The unallocated share of the month holding the last complete day, per
/// currency, on the effective basis.
fn unallocated(
    store: &dyn Store,
    rule: &Rule,
    bills: &BillsSetup,
    days: DataDays,
) -> Result<Vec<Observation>, StoreError> {
    let (month, start, _) =
        budgets::period_of(crate::bills::budgets::BudgetPeriod::Month, days.complete_to);
    let spans = store.bill_spend_span()?;
    let q = BillQuery {
        since: start,
        until: days.complete_to + DAY,
        by: Some(Bucket::Month),
        group: vec!["team".to_owned()],
        // The sources' providers: as configured, and as their rows name
        // them (a FOCUS file may hold several).
        providers: bills
            .sources
            .iter()
            .flat_map(|s| {
                let named = spans
                    .get(&s.name)
                    .into_iter()
                    .flat_map(|span| span.providers.keys().cloned());
                std::iter::once(s.provider.as_str().to_owned()).chain(named)
            })
            .filter(|p| any_glob(&rule.providers, p))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        limit: usize::MAX / 2,
        ..BillQuery::default()
    };
    if q.providers.is_empty() {
        return Ok(Vec::new());
    }
    let rows = allocation::spend(store, &q, false)?;
    let percent = rule.percent.unwrap_or(100.0);
    Ok(allocation::unallocated_share(&rows)
        .into_iter()
        .filter(|(_, (_, total))| *total > 0.0)
        .map(|(currency, (un, total))| {
            let share = 100.0 * un / total;
            let (active, rearm) = crossing(false, share, percent, rule.hysteresis);
            Observation {
                key: format!("{month}/{currency}"),
                value: share,
                active,
                rearm,
                message: format!(
                    "{share:.1}% of {month}'s spend ({un:.2} of {total:.2} {currency}, effective cost, to {}) names no team, above {percent}%",
                    day(days.complete_to)
                ),
                details: json!({"period": month, "currency": currency, "unallocated": un, "total": total, "percent": share, "threshold": percent, "complete_to": day(days.complete_to)}),
            }
        })
        .collect())
}

/// Restatements of closing or final periods in the last `days` days that
/// changed the effective cost by more than the rule's percent or amount.
/// Each fires once: its key names the generation it made.
fn restated(
    store: &dyn Store,
    rule: &Rule,
    bills: &BillsSetup,
    now: DateTime<Utc>,
) -> Result<Vec<Observation>, StoreError> {
    let recent = now - chrono::Duration::days(i64::from(rule.days));
    let mut out = Vec::new();
    for load in store.bill_loads(None)? {
        if !bills.sources.iter().any(|s| s.name == load.source)
            || !any_glob(&rule.providers, &load.provider)
        {
            continue;
        }
        let Some(latest) = load.restatements.iter().max_by_key(|r| r.generation) else {
            continue;
        };
        // The figure after each restatement, walking back from the stored one.
        let mut after = load
            .totals
            .iter()
            .find(|t| t.currency == latest.deltas.currency)
            .map_or(0.0, |t| t.effective_cost);
        let mut restatements = load.restatements.clone();
        restatements.sort_by_key(|r| std::cmp::Reverse(r.generation));
        for r in restatements {
            let before = after - r.deltas.effective_cost;
            after = before;
            let at: Option<DateTime<Utc>> = r.at.parse().ok();
            if at.is_none_or(|t| t < recent) {
                continue;
            }
            let change = r.deltas.effective_cost;
            let pct = if before.abs() > 0.0 {
                100.0 * change.abs() / before.abs()
            } else {
                f64::INFINITY
            };
            let by_pct = rule.percent.is_some_and(|p| pct > p);
            let by_amount = rule.amount.is_some_and(|a| change.abs() > a);
            out.push(Observation {
                key: format!(
                    "{}/{}/{}/{}",
                    load.source, load.billing_account, load.billing_period, r.generation
                ),
                value: change,
                active: by_pct || by_amount,
                rearm: false,
                message: format!(
                    "{} {} of {} ({}) was restated: effective cost {before:.2} -> {:.2} {} ({change:+.2}, {}), {} rows",
                    r.state,
                    load.billing_period,
                    load.billing_account,
                    load.source,
                    before + change,
                    r.deltas.currency,
                    if pct.is_finite() { format!("{pct:+.1}%") } else { "from zero".to_owned() },
                    r.deltas.rows,
                ),
                details: json!({
                    "source": load.source, "billing_account": load.billing_account,
                    "billing_period": load.billing_period, "generation": r.generation,
                    "state": r.state, "deltas": r.deltas, "before": before,
                    "percent": if pct.is_finite() { json!(pct) } else { Value::Null },
                }),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
