//! Budgets over the bills: a period's actual spend in scope up to the last
//! complete day, its forecast to the period's end, and each threshold's
//! state. The figures follow the data, not the clock: bills arrive a day or
//! so late, so the day they are complete to is the day before the newest
//! day every source of the budget's scope has delivered.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use serde::Serialize;

use crate::bills::BillProvider;
use crate::bills::allocation;
use crate::store::bills::{BillQuery, Bucket};
use crate::store::{AlertState, Store, StoreError};

/// The calendar a budget resets on (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    Month,
    Quarter,
    Year,
}

/// Which cost a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostBasis {
    /// Amortized: commitments spread over the hours they cover.
    Effective,
    /// Cash: what the invoice charges when.
    Billed,
}

impl CostBasis {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Effective => "effective",
            Self::Billed => "billed",
        }
    }
}

/// What a threshold compares against the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThresholdOn {
    Actual,
    Forecast,
}

impl ThresholdOn {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Actual => "actual",
            Self::Forecast => "forecast",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetThreshold {
    pub percent: f64,
    pub on: ThresholdOn,
}

/// Which spend a budget counts; an empty list matches everything.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BudgetScope {
    pub teams: Vec<String>,
    pub providers: Vec<String>,
    /// Sub-accounts or billing accounts.
    pub accounts: Vec<String>,
    pub gpu_only: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetConfig {
    pub name: String,
    pub amount: f64,
    pub currency: String,
    pub period: BudgetPeriod,
    pub basis: CostBasis,
    pub scope: BudgetScope,
    pub thresholds: Vec<BudgetThreshold>,
    pub channels: Vec<String>,
}

/// `[allocation]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocationConfig {
    /// Split each day's unallocated spend across teams in proportion to
    /// their allocated spend (`unallocated = "proportional"`), or keep it
    /// as its own line (`"keep"`, the default).
    pub proportional: bool,
}

/// The bills as budgets, answers and alerts take them: the budgets, the
/// enabled bill sources and the allocation mode.
#[derive(Debug, Clone, Default)]
pub struct BillsSetup {
    pub budgets: Vec<BudgetConfig>,
    pub sources: Vec<BillSourceRef>,
    /// `[allocation] unallocated = "proportional"`.
    pub proportional: bool,
}

const DAY: i64 = 86_400;
/// Complete days the forecast averages.
pub const FORECAST_DAYS: i64 = 7;

/// A bill source as budgets see it: its name and whose bills it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillSourceRef {
    pub name: String,
    pub provider: BillProvider,
}

/// The days of data a question can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataDays {
    /// The first day any source in scope has (midnight UTC).
    pub first: i64,
    /// The last day every source in scope has completely.
    pub complete_to: i64,
}

/// The complete days of `sources` (every one when `providers` is empty,
/// else those whose configured provider is listed or whose rows name one:
/// a multi-provider FOCUS file counts for each provider it holds, by the
/// days of that provider's rows); `Err` says why there are none.
///
/// # Errors
/// A store error (outer), or why no day is complete yet (inner).
pub fn data_days(
    store: &dyn Store,
    sources: &[BillSourceRef],
    providers: &[String],
) -> Result<Result<DataDays, String>, StoreError> {
    let spans = store.bill_spend_span()?;
    let listed = |p: &str| providers.iter().any(|l| l == p);
    let in_scope: Vec<&BillSourceRef> = sources
        .iter()
        .filter(|s| {
            providers.is_empty()
                || listed(s.provider.as_str())
                || spans
                    .get(&s.name)
                    .is_some_and(|span| span.providers.keys().any(|p| listed(p)))
        })
        .collect();
    if in_scope.is_empty() {
        return Ok(Err(
            "no bill source of its providers is configured".to_owned()
        ));
    }
    let mut first = i64::MAX;
    let mut newest = i64::MAX;
    for s in in_scope {
        let Some(span) = spans.get(&s.name) else {
            return Ok(Err(format!(
                "bill source {} has no spend loaded yet",
                s.name
            )));
        };
        // The listed providers' days where the rows name them; else the
        // source's (its provider billed nothing those days).
        let (lo, hi) = span
            .providers
            .iter()
            .filter(|(p, _)| !providers.is_empty() && listed(p))
            .map(|(_, days)| *days)
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
            .unwrap_or((span.first, span.last));
        first = first.min(lo);
        newest = newest.min(hi);
    }
    let complete_to = newest - DAY;
    if complete_to < first {
        return Ok(Err("no day of the bills is complete yet".to_owned()));
    }
    Ok(Ok(DataDays { first, complete_to }))
}

/// The budget period holding `day`: its name, start and end (exclusive).
#[must_use]
pub fn period_of(period: BudgetPeriod, day: i64) -> (String, i64, i64) {
    let d = Utc.timestamp_opt(day, 0).single().unwrap_or_default();
    let (y, m) = (d.year(), d.month());
    let (name, first_month, months) = match period {
        BudgetPeriod::Month => (format!("{y}-{m:02}"), m, 1),
        BudgetPeriod::Quarter => {
            let q = (m - 1) / 3;
            (format!("{y}-Q{}", q + 1), q * 3 + 1, 3)
        }
        BudgetPeriod::Year => (format!("{y}"), 1, 12),
    };
    let start = |y: i32, m: u32| {
        let (y, m) = (
            y + i32::try_from((m - 1) / 12).unwrap_or(0),
            (m - 1) % 12 + 1,
        );
        Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0)
            .single()
            .map_or(0, |t| t.timestamp())
    };
    (name, start(y, first_month), start(y, first_month + months))
}

/// A threshold as it stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdStatus {
    pub percent: f64,
    pub on: ThresholdOn,
    /// `ok` or `crossed`.
    pub state: &'static str,
    /// When it last told its channels, in this period.
    pub fired_at: Option<DateTime<Utc>>,
}

/// Spend in scope in a currency other than the budget's: left out of the
/// figures, never converted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OtherCurrency {
    pub currency: String,
    pub billed_cost: f64,
    pub effective_cost: f64,
}

/// A budget's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetStatus {
    pub name: String,
    pub amount: f64,
    pub currency: String,
    pub basis: CostBasis,
    /// `2026-10`, `2026-Q4` or `2026`; absent until a day is complete.
    pub period: Option<String>,
    pub period_start: Option<NaiveDate>,
    /// The period's last day.
    pub period_end: Option<NaiveDate>,
    pub complete_to: Option<NaiveDate>,
    pub actual: Option<f64>,
    pub forecast: Option<f64>,
    pub actual_percent: Option<f64>,
    pub forecast_percent: Option<f64>,
    /// The mean daily spend the forecast extends, over `days_averaged` days.
    pub daily_mean: Option<f64>,
    pub days_averaged: i64,
    /// Days of the period after `complete_to`.
    pub days_left: i64,
    /// The team figures include their share of unallocated spend.
    pub allocated: bool,
    pub other_currencies: Vec<OtherCurrency>,
    pub thresholds: Vec<ThresholdStatus>,
    /// Why there are no figures yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// The alert-state rule under which a budget's thresholds are kept.
#[must_use]
pub fn rule_name(budget: &str) -> String {
    format!("budget:{budget}")
}

/// A threshold's state key within its period.
#[must_use]
pub fn threshold_key(on: ThresholdOn, percent: f64, period: &str) -> String {
    format!("{}:{percent}:{period}", on.as_str())
}

fn date(t: i64) -> Option<NaiveDate> {
    DateTime::from_timestamp(t, 0).map(|d| d.date_naive())
}

/// (billed, effective) per (day, currency).
type DailySpend = BTreeMap<(i64, String), (f64, f64)>;

/// Daily spend in scope, in every currency: (billed, effective) per
/// (day, currency), the teams' figures allocated as `[allocation]` says.
fn daily_spend(
    store: &dyn Store,
    budget: &BudgetConfig,
    since: i64,
    until: i64,
    proportional: bool,
) -> Result<DailySpend, StoreError> {
    let scope = &budget.scope;
    let q = BillQuery {
        since,
        until,
        by: Some(Bucket::Day),
        group: vec!["team".to_owned()],
        teams: scope.teams.clone(),
        providers: scope.providers.clone(),
        gpu_only: scope.gpu_only,
        accounts: scope.accounts.clone(),
        limit: usize::MAX / 2,
        ..BillQuery::default()
    };
    let rows = allocation::spend(store, &q, proportional)?;
    let mut out = DailySpend::new();
    for r in rows {
        let e = out
            .entry((r.start.timestamp(), r.currency.clone()))
            .or_default();
        e.0 += r.allocated_billed_cost.unwrap_or(r.billed_cost);
        e.1 += r.allocated_effective_cost.unwrap_or(r.effective_cost);
    }
    Ok(out)
}

/// A budget's figures now. `states` are the alert states of its rule.
///
/// # Errors
/// On a store error.
pub fn status(
    store: &dyn Store,
    budget: &BudgetConfig,
    sources: &[BillSourceRef],
    proportional: bool,
    states: &[AlertState],
) -> Result<BudgetStatus, StoreError> {
    let mut out = BudgetStatus {
        name: budget.name.clone(),
        amount: budget.amount,
        currency: budget.currency.clone(),
        basis: budget.basis,
        period: None,
        period_start: None,
        period_end: None,
        complete_to: None,
        actual: None,
        forecast: None,
        actual_percent: None,
        forecast_percent: None,
        daily_mean: None,
        days_averaged: 0,
        days_left: 0,
        allocated: proportional && !budget.scope.teams.is_empty(),
        other_currencies: Vec::new(),
        thresholds: budget
            .thresholds
            .iter()
            .map(|t| ThresholdStatus {
                percent: t.percent,
                on: t.on,
                state: "ok",
                fired_at: None,
            })
            .collect(),
        waiting: None,
    };
    let days = match data_days(store, sources, &budget.scope.providers)? {
        Ok(d) => d,
        Err(why) => {
            out.waiting = Some(why);
            return Ok(out);
        }
    };
    let (period, start, end) = period_of(budget.period, days.complete_to);
    let averaged_from = (days.complete_to - (FORECAST_DAYS - 1) * DAY).max(days.first);
    let until = days.complete_to + DAY;
    let spend = daily_spend(store, budget, start.min(averaged_from), until, proportional)?;
    let pick = |v: &(f64, f64)| match budget.basis {
        CostBasis::Billed => v.0,
        CostBasis::Effective => v.1,
    };
    let mut actual = 0.0;
    let mut averaged = 0.0;
    let mut others: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for ((day, currency), v) in &spend {
        if *currency != budget.currency {
            if *day >= start {
                let o = others.entry(currency.clone()).or_default();
                o.0 += v.0;
                o.1 += v.1;
            }
            continue;
        }
        if *day >= start {
            actual += pick(v);
        }
        if *day >= averaged_from {
            averaged += pick(v);
        }
    }
    let days_averaged = (until - averaged_from) / DAY;
    let days_left = (end - until) / DAY;
    #[allow(clippy::cast_precision_loss)]
    let mean = averaged / days_averaged as f64;
    #[allow(clippy::cast_precision_loss)]
    let forecast = actual + mean * days_left as f64;
    let percent = |v: f64| 100.0 * v / budget.amount;
    for t in &mut out.thresholds {
        let figure = match t.on {
            ThresholdOn::Actual => actual,
            ThresholdOn::Forecast => forecast,
        };
        if figure >= budget.amount * t.percent / 100.0 {
            t.state = "crossed";
        }
        let key = threshold_key(t.on, t.percent, &period);
        t.fired_at = states
            .iter()
            .find(|s| s.key == key)
            .and_then(|s| s.last_fired_at);
    }
    out.period = Some(period);
    out.period_start = date(start);
    out.period_end = date(end - DAY);
    out.complete_to = date(days.complete_to);
    out.actual = Some(actual);
    out.forecast = Some(forecast);
    out.actual_percent = Some(percent(actual));
    out.forecast_percent = Some(percent(forecast));
    out.daily_mean = Some(mean);
    out.days_averaged = days_averaged;
    out.days_left = days_left;
    out.other_currencies = others
        .into_iter()
        .map(|(currency, (b, e))| OtherCurrency {
            currency,
            billed_cost: b,
            effective_cost: e,
        })
        .collect();
    Ok(out)
}

/// Each budget's figures, with the states of its thresholds.
///
/// # Errors
/// On a store error.
pub fn budget_statuses(
    store: &dyn Store,
    bills: &BillsSetup,
) -> Result<Vec<BudgetStatus>, StoreError> {
    bills
        .budgets
        .iter()
        .map(|b| {
            let states = store.alert_states(Some(&rule_name(&b.name)))?;
            status(store, b, &bills.sources, bills.proportional, &states)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> i64 {
        s.parse::<DateTime<Utc>>().unwrap().timestamp()
    }

    #[test]
    fn periods_are_utc_calendar_months_quarters_and_years() {
        let d = at("2026-11-15T00:00:00Z");
        assert_eq!(
            period_of(BudgetPeriod::Month, d),
            (
                "2026-11".into(),
                at("2026-11-01T00:00:00Z"),
                at("2026-12-01T00:00:00Z")
            )
        );
        assert_eq!(
            period_of(BudgetPeriod::Quarter, d),
            (
                "2026-Q4".into(),
                at("2026-10-01T00:00:00Z"),
                at("2027-01-01T00:00:00Z")
            )
        );
        assert_eq!(
            period_of(BudgetPeriod::Year, d),
            (
                "2026".into(),
                at("2026-01-01T00:00:00Z"),
                at("2027-01-01T00:00:00Z")
            )
        );
        assert_eq!(
            period_of(BudgetPeriod::Month, at("2026-12-31T00:00:00Z")).2,
            at("2027-01-01T00:00:00Z")
        );
    }
}
