//! Budgets and the rules over the bills, on both store backends: each fires
//! once on crossing, holds while crossed, and re-arms as its rule says.
//! Periods are written into the store as a bills load writes them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::*;
use crate::alerts::evaluate;
use crate::bills::aggregate::{
    Commitment, CommitmentHour, PeriodData, SpendDay, Total, UsageKey, UsageValue,
};
use crate::bills::budgets::{
    BillSourceRef, BillsSetup, BudgetPeriod, BudgetScope, BudgetThreshold, CostBasis,
    budget_statuses,
};
use crate::bills::{BillProvider, UNALLOCATED, UsageKind};
use crate::catalog::Freshness;
use crate::store::Pool;
use crate::store::test_support::{TestDb, on_both_backends};

const DAY: i64 = 86_400;

fn t(s: &str) -> i64 {
    s.parse::<DateTime<Utc>>().unwrap().timestamp()
}

fn oct(day: i64) -> i64 {
    t("2026-10-01T00:00:00Z") + (day - 1) * DAY
}

/// Spend of one team on one day: (day, team, currency, effective); billed
/// is half of it, so a budget on the wrong basis shows.
type Spent = (i64, &'static str, &'static str, f64);

fn period(month_start: i64, month_end: i64, spent: &[Spent]) -> PeriodData {
    let mut totals: BTreeMap<String, Total> = BTreeMap::new();
    let spend = spent
        .iter()
        .map(|(day, team, currency, effective)| {
            let t = totals
                .entry((*currency).to_owned())
                .or_insert_with(|| Total {
                    currency: (*currency).to_owned(),
                    ..Total::default()
                });
            t.rows += 1;
            t.billed_cost += effective / 2.0;
            t.effective_cost += effective;
            SpendDay {
                day: *day,
                provider: String::new(),
                account: "222".into(),
                team: (*team).into(),
                service_category: "Compute".into(),
                charge_category: "Usage".into(),
                gpu: true,
                currency: (*currency).into(),
                billed_cost: effective / 2.0,
                effective_cost: *effective,
            }
        })
        .collect();
    PeriodData {
        billing_account: "111".into(),
        period: DateTime::from_timestamp(month_start, 0)
            .unwrap()
            .format("%Y-%m")
            .to_string(),
        period_start: month_start,
        period_end: month_end,
        rows: spent.len() as u64,
        totals,
        spend,
        ..PeriodData::default()
    }
}

struct Bench {
    pool: Pool,
    bills: BillsSetup,
    rules: Vec<Rule>,
    clock: i64,
}

impl Bench {
    fn new(db: &TestDb, budgets: Vec<BudgetConfig>, rules: Vec<Rule>) -> Self {
        Self {
            pool: db.pool(0),
            bills: BillsSetup {
                budgets,
                sources: vec![BillSourceRef {
                    name: "aws-payer".into(),
                    provider: BillProvider::Aws,
                }],
                proportional: false,
            },
            rules,
            clock: t("2026-10-01T00:00:00Z"),
        }
    }

    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp(self.clock, 0).unwrap()
    }

    fn write(&mut self, source: &str, data: &PeriodData, state: &str) {
        self.clock += 3600;
        let now = self.now();
        let provider = self
            .bills
            .sources
            .iter()
            .find(|s| s.name == source)
            .map_or("aws", |s| s.provider.as_str());
        // Every row billed by the source's provider.
        let mut data = data.clone();
        data.provider_rows = [(provider.to_owned(), data.rows)].into();
        for s in &mut data.spend {
            s.provider = provider.to_owned();
        }
        for c in data.commitments.values_mut() {
            c.provider = provider.to_owned();
        }
        data.usage = data
            .usage
            .into_iter()
            .map(|(k, v)| {
                let provider = provider.to_owned();
                (UsageKey { provider, ..k }, v)
            })
            .collect();
        self.pool
            .write(|s| s.write_bill_period(source, &data, state, now))
            .unwrap();
    }

    /// Evaluates everything; the messages it queued (one channel each).
    fn evaluate(&mut self) -> Vec<serde_json::Value> {
        self.clock += 60;
        let now = self.now();
        let (rules, bills) = (self.rules.clone(), self.bills.clone());
        let before = self.messages().len();
        self.pool
            .write(|s| {
                let fresh = Freshness::read(s, BTreeMap::new(), now)?;
                evaluate(s, &fresh, &rules, &[], &bills)
            })
            .unwrap();
        self.messages().split_off(before)
    }

    fn messages(&self) -> Vec<serde_json::Value> {
        let mut all = self.pool.read(|s| s.message_history(10_000)).unwrap();
        all.sort_by_key(|m| m.id);
        all.into_iter().map(|m| m.payload).collect()
    }

    fn status(&self) -> BudgetStatus {
        let bills = self.bills.clone();
        self.pool
            .read(|s| budget_statuses(s, &bills))
            .unwrap()
            .remove(0)
    }
}

fn ml_monthly() -> BudgetConfig {
    BudgetConfig {
        name: "ml-monthly".into(),
        amount: 10_000.0,
        currency: "USD".into(),
        period: BudgetPeriod::Month,
        basis: CostBasis::Effective,
        scope: BudgetScope {
            teams: vec!["ml".into()],
            ..BudgetScope::default()
        },
        thresholds: vec![
            BudgetThreshold {
                percent: 80.0,
                on: ThresholdOn::Actual,
            },
            BudgetThreshold {
                percent: 100.0,
                on: ThresholdOn::Forecast,
            },
        ],
        channels: vec!["ops".into()],
    }
}

/// ml spends 200 a day to the 10th, then 500; web (another team), spend
/// nobody is tagged with, and ml's EUR spend are outside the figures.
fn october(days: i64, ml_from_11: f64) -> Vec<Spent> {
    let mut out = Vec::new();
    for d in 1..=days {
        let ml = if d <= 10 { 200.0 } else { ml_from_11 };
        out.push((oct(d), "ml", "USD", ml));
        out.push((oct(d), "web", "USD", 1000.0));
        out.push((oct(d), UNALLOCATED, "USD", 50.0));
        out.push((oct(d), "ml", "EUR", 10.0));
    }
    out
}

/// The §2.5 rules worked by hand for complete-to day `c` of October: the
/// actual to day c, and the forecast from the mean of days c-6..c (from
/// day 1 at the start of the data).
fn by_hand(c: i64) -> (f64, f64) {
    let ml = |d: i64| if d <= 10 { 200.0 } else { 500.0 };
    let actual: f64 = (1..=c).map(ml).sum();
    let from = (c - 6).max(1);
    let mean = (from..=c).map(ml).sum::<f64>() / (c - from + 1) as f64;
    (actual, actual + mean * (31 - c) as f64)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

on_both_backends! {
/// The budget of the docs, day by day through October: the forecast
/// crosses 100% when the complete-to day is the 14th, the actual crosses
/// 80% on the 22nd, each tells once; a re-delivery that lowers the actual
/// re-arms it and the next crossing tells again; November starts afresh.
fn a_budget_reproduces_day_by_day_and_fires_once_per_crossing(db) {
    let mut b = Bench::new(db, vec![ml_monthly()], Vec::new());
    let (start, end) = (oct(1), t("2026-11-01T00:00:00Z"));
    let mut fired: Vec<(i64, String, f64)> = Vec::new();
    for newest in 1..=31 {
        b.write("aws-payer", &period(start, end, &october(newest, 500.0)), "open");
        let messages = b.evaluate();
        let s = b.status();
        if newest == 1 {
            assert_eq!(s.waiting.as_deref(), Some("no day of the bills is complete yet"));
            assert!(messages.is_empty());
            continue;
        }
        let c = newest - 1;
        let (actual, forecast) = by_hand(c);
        assert_eq!(s.complete_to.unwrap().to_string(), format!("2026-10-{c:02}"));
        assert_eq!(s.period.as_deref(), Some("2026-10"));
        assert!(close(s.actual.unwrap(), actual), "day {c}: {s:?}");
        assert!(close(s.forecast.unwrap(), forecast), "day {c}: {s:?} vs {forecast}");
        assert_eq!(s.days_left, 31 - c);
        assert_eq!(s.days_averaged, c.min(7));
        // ml's EUR spend is reported beside the figures, never converted.
        assert_eq!(s.other_currencies.len(), 1);
        assert!(close(s.other_currencies[0].effective_cost, 10.0 * c as f64));
        for m in messages {
            fired.push((c, m["key"].as_str().unwrap().to_owned(), m["value"].as_f64().unwrap()));
        }
    }
    assert_eq!(fired.len(), 2, "{fired:?}");
    assert_eq!((fired[0].0, fired[0].1.as_str()), (14, "forecast:100:2026-10"));
    assert!(close(fired[0].2, 4000.0 + 2600.0 / 7.0 * 17.0));
    assert_eq!((fired[1].0, fired[1].1.as_str(), fired[1].2), (22, "actual:80:2026-10", 8000.0));
    let m = &b.messages()[1];
    assert_eq!(m["kind"], "budget");
    assert_eq!(m["details"]["complete_to"], "2026-10-22");
    assert_eq!(m["details"]["basis"], "effective");
    assert_eq!(m["details"]["amount"], 10_000.0);
    assert_eq!(m["details"]["percent"], 80.0);
    assert!(m["message"].as_str().unwrap().contains("bills complete to 2026-10-22"));

    // The same delivery again, and an evaluation with nothing new: quiet.
    b.write("aws-payer", &period(start, end, &october(31, 500.0)), "open");
    assert!(b.evaluate().is_empty());
    // A re-delivery that lowers ml's spend from the 11th to 300 puts the
    // actual at 2,000 + 20 x 300 = 8,000 - still crossed; at 250 it is 7,000,
    // below 80%: the threshold re-arms without a message...
    b.write("aws-payer", &period(start, end, &october(31, 300.0)), "open");
    assert!(b.evaluate().is_empty());
    b.write("aws-payer", &period(start, end, &october(31, 250.0)), "open");
    assert!(b.evaluate().is_empty());
    let states = b.pool.read(|s| s.alert_states(Some("budget:ml-monthly"))).unwrap();
    let actual = states.iter().find(|s| s.key == "actual:80:2026-10").unwrap();
    assert!(!actual.fired);
    // ...as the forecast (8,000 + 300, then 7,000 + 250) did one step
    // earlier, and the next crossing tells both again.
    b.write("aws-payer", &period(start, end, &october(31, 500.0)), "open");
    let again: Vec<String> = b
        .evaluate()
        .iter()
        .map(|m| m["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(again, ["actual:80:2026-10", "forecast:100:2026-10"]);

    // November's first complete day: a new period, its thresholds afresh.
    // 500 a day: actual 500 (5%), forecast 500 + 7-day mean 500 x 29 = 15,000.
    let (nov, dec) = (t("2026-11-01T00:00:00Z"), t("2026-12-01T00:00:00Z"));
    let spent: Vec<Spent> = (0..2).map(|d| (nov + d * DAY, "ml", "USD", 500.0)).collect();
    b.write("aws-payer", &period(nov, dec, &spent), "open");
    let s = b.status();
    assert_eq!(s.period.as_deref(), Some("2026-11"));
    assert!(close(s.actual.unwrap(), 500.0));
    assert!(close(s.forecast.unwrap(), 500.0 + 500.0 * 29.0), "{s:?}");
    let november = b.evaluate();
    assert_eq!(november.len(), 1);
    assert_eq!(november[0]["key"], "forecast:100:2026-11");
}

/// The day the data is complete to is the day before the newest day that
/// every source in scope has; a source with nothing loaded holds it back.
fn the_complete_day_waits_for_the_slowest_source(db) {
    let mut budget = ml_monthly();
    budget.scope.teams.clear();
    let mut b = Bench::new(db, vec![budget], Vec::new());
    b.bills.sources.push(BillSourceRef {
        name: "azure-ea".into(),
        provider: BillProvider::Azure,
    });
    let (start, end) = (oct(1), t("2026-11-01T00:00:00Z"));
    b.write("aws-payer", &period(start, end, &october(10, 500.0)), "open");
    assert_eq!(
        b.status().waiting.as_deref(),
        Some("bill source azure-ea has no spend loaded yet")
    );
    let azure: Vec<Spent> = (1..=5).map(|d| (oct(d), "ml", "USD", 100.0)).collect();
    b.write("azure-ea", &period(start, end, &azure), "open");
    let s = b.status();
    assert_eq!(s.complete_to.unwrap().to_string(), "2026-10-04");
    // Every team: (200 + 1000 + 50) x 4 from aws and 100 x 4 from azure.
    assert!(close(s.actual.unwrap(), 1250.0 * 4.0 + 400.0), "{s:?}");
    // A budget of aws alone does not wait for azure.
    b.bills.budgets[0].scope.providers = vec!["aws".into()];
    assert_eq!(b.status().complete_to.unwrap().to_string(), "2026-10-09");
}

/// Proportional allocation gives ml its share of the unallocated spend:
/// ml 200 of the 1,200 the teams spent on day 1 takes 1/6 of the 50.
fn a_team_budget_counts_its_allocated_share_when_allocation_is_proportional(db) {
    let mut b = Bench::new(db, vec![ml_monthly()], Vec::new());
    b.bills.proportional = true;
    let (start, end) = (oct(1), t("2026-11-01T00:00:00Z"));
    b.write("aws-payer", &period(start, end, &october(2, 500.0)), "open");
    let s = b.status();
    assert!(s.allocated);
    assert!(close(s.actual.unwrap(), 200.0 + 50.0 / 6.0), "{s:?}");
}

fn unallocated_spend_fires_holds_and_rearms(db) {
    let rule = rule_over_bills("untagged", RuleKind::UnallocatedSpend, 10.0);
    let mut b = Bench::new(db, Vec::new(), vec![rule]);
    let (start, end) = (oct(1), t("2026-11-01T00:00:00Z"));
    let month = |un: f64| {
        period(start, end, &[(oct(1), "ml", "USD", 90.0), (oct(1), UNALLOCATED, "USD", un), (oct(2), "ml", "USD", 1.0)])
    };
    // 20 of 110 on the complete day (the 1st): 18.2% > 10%.
    b.write("aws-payer", &month(20.0), "open");
    let first = b.evaluate();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["key"], "2026-10/USD");
    assert!(close(first[0]["value"].as_f64().unwrap(), 2000.0 / 110.0));
    assert!(b.evaluate().is_empty(), "holds while crossed");
    // 5 of 95: 5.3%, back below 10% by more than the hysteresis: re-armed.
    b.write("aws-payer", &month(5.0), "open");
    assert!(b.evaluate().is_empty());
    b.write("aws-payer", &month(20.0), "open");
    assert_eq!(b.evaluate().len(), 1);
}

fn commitment_underused_fires_holds_and_rearms(db) {
    let rule = rule_over_bills("idle-ri", RuleKind::CommitmentUnderused, 80.0);
    let mut b = Bench::new(db, Vec::new(), vec![rule]);
    let (start, end) = (oct(1), t("2026-11-01T00:00:00Z"));
    let with_use = |used: f64| {
        let mut p = period(start, end, &[(oct(1), "ml", "USD", used), (oct(2), "ml", "USD", 1.0)]);
        p.commitments.insert(
            "ri-1".into(),
            Commitment {
                id: "ri-1".into(),
                provider: String::new(),
                kind: Some(crate::bills::CommitmentType::Reservation),
                category: Some("usage".into()),
                unit: Some("Hours".into()),
                regions: ["us-east-1".to_owned()].into(),
                instance_types: ["p5.48xlarge".to_owned()].into(),
                untyped_cover: false,
                first_seen: oct(1),
                last_seen: Some(oct(2)),
                currency: "USD".into(),
            },
        );
        for h in 0..10 {
            p.commitment_hours.insert(
                ("ri-1".into(), oct(1) + h * 3600),
                CommitmentHour {
                    used_quantity: Some(if (h as f64) < used { 1.0 } else { 0.0 }),
                    unused_quantity: Some(if (h as f64) < used { 0.0 } else { 1.0 }),
                    ..CommitmentHour::default()
                },
            );
        }
        p
    };
    // 5 of 10 hours used: 50% < 80%.
    b.write("aws-payer", &with_use(5.0), "open");
    let first = b.evaluate();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["key"], "aws-payer/ri-1");
    assert!(close(first[0]["value"].as_f64().unwrap(), 50.0));
    assert!(b.evaluate().is_empty(), "holds while under-used");
    // 9 of 10: 90%, past 80% by more than the hysteresis: re-armed.
    b.write("aws-payer", &with_use(9.0), "open");
    assert!(b.evaluate().is_empty());
    b.write("aws-payer", &with_use(5.0), "open");
    assert_eq!(b.evaluate().len(), 1);
}

fn coverage_below_fires_holds_and_rearms(db) {
    let rule = rule_over_bills("low-cover", RuleKind::CoverageBelow, 50.0);
    let mut b = Bench::new(db, Vec::new(), vec![rule]);
    let (start, end) = (oct(1), t("2026-11-01T00:00:00Z"));
    let with_cover = |reserved_hours: i64| {
        let mut p = period(start, end, &[(oct(1), "ml", "USD", 1.0), (oct(2), "ml", "USD", reserved_hours as f64)]);
        for h in 0..10 {
            let kind = if h < reserved_hours { UsageKind::Reserved } else { UsageKind::OnDemand };
            p.usage.insert(
                UsageKey {
                    start: oct(1) + h * 3600,
                    provider: String::new(),
                    account: "222".into(),
                    team: "ml".into(),
                    region: "us-east-1".into(),
                    instance_type: "p5.48xlarge".into(),
                    gpu_model: "H100-80GB".into(),
                    price_kind: kind,
                    currency: "USD".into(),
                },
                UsageValue {
                    instance_hours: Some(1.0),
                    gpu_hours: 8.0,
                    billed_cost: 1.0,
                    effective_cost: 1.0,
                },
            );
        }
        p
    };
    // 2 of 10 instance-hours covered: 20% < 50%.
    b.write("aws-payer", &with_cover(2), "open");
    let first = b.evaluate();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["key"], "aws/us-east-1/p5.48xlarge");
    assert!(b.evaluate().is_empty());
    b.write("aws-payer", &with_cover(8), "open");
    assert!(b.evaluate().is_empty());
    b.write("aws-payer", &with_cover(2), "open");
    assert_eq!(b.evaluate().len(), 1);
}

/// Restating a final period by more than the rule's percent tells once per
/// restatement; the next restatement is a new one and tells again; an
/// update of an open month is no restatement at all.
fn bill_restated_fires_once_per_restatement(db) {
    let rule = rule_over_bills("restated", RuleKind::BillRestated, 1.0);
    let mut b = Bench::new(db, Vec::new(), vec![rule]);
    b.clock = t("2026-11-20T00:00:00Z");
    let (start, end) = (oct(1), t("2026-11-01T00:00:00Z"));
    let sept = |v: f64| period(start, end, &[(oct(1), "ml", "USD", v), (oct(2), "ml", "USD", 1.0)]);
    b.write("aws-payer", &sept(100.0), "open");
    b.write("aws-payer", &sept(100.5), "open");
    assert!(b.evaluate().is_empty(), "an open month's update is not a restatement");
    b.write("aws-payer", &sept(100.5), "final");
    b.write("aws-payer", &sept(103.0), "final");
    let first = b.evaluate();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(close(first[0]["value"].as_f64().unwrap(), 2.5));
    assert!(close(first[0]["details"]["percent"].as_f64().unwrap(), 250.0 / 101.5));
    assert!(b.evaluate().is_empty(), "holds: the same restatement");
    // 103 -> 103.5: under 1%, quiet; then 103.5 -> 110: tells.
    b.write("aws-payer", &sept(103.5), "final");
    assert!(b.evaluate().is_empty());
    b.write("aws-payer", &sept(110.0), "final");
    assert_eq!(b.evaluate().len(), 1);
}
}

fn rule_over_bills(name: &str, kind: RuleKind, percent: f64) -> Rule {
    Rule {
        name: name.into(),
        kind,
        gpu_models: Vec::new(),
        price_kinds: Vec::new(),
        price_scopes: Vec::new(),
        providers: Vec::new(),
        regions: Vec::new(),
        threshold: None,
        every_offer: false,
        hysteresis: 0.02,
        cooldown: None,
        channels: vec!["ops".into()],
        plans: Vec::new(),
        percent: Some(percent),
        amount: None,
        days: 30,
        min_days: None,
    }
}
