//! `[[budgets]]` and `[allocation]`: spend limits over the bills, and how
//! spend no tag or account names is shared among teams.

use super::*;
use crate::bills::budgets::{
    AllocationConfig, BudgetConfig, BudgetPeriod, BudgetScope, BudgetThreshold, CostBasis,
    ThresholdOn,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    name: Option<String>,
    amount: Option<f64>,
    currency: Option<String>,
    period: Option<String>,
    basis: Option<String>,
    #[serde(default)]
    teams: Vec<String>,
    #[serde(default)]
    providers: Vec<String>,
    #[serde(default)]
    accounts: Vec<String>,
    #[serde(default)]
    gpu_only: bool,
    #[serde(default)]
    thresholds: Vec<RawThreshold>,
    #[serde(default)]
    channels: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawThreshold {
    percent: Option<f64>,
    on: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAllocation {
    unallocated: Option<String>,
}

/// The most budgets a config may hold: each is evaluated after every load.
const MAX_BUDGETS: usize = 200;

fn one_of<T: Copy>(
    c: &mut Checker,
    path: String,
    value: Option<&str>,
    default: T,
    names: &[(&str, T)],
) -> T {
    match value {
        None => default,
        Some(v) => names
            .iter()
            .find(|(n, _)| *n == v)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| {
                let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                c.fail(path, format!("`{v}` is not one of: {}", all.join(", ")));
                default
            }),
    }
}

pub(super) fn validate_allocation(raw: RawAllocation, c: &mut Checker) -> AllocationConfig {
    AllocationConfig {
        proportional: one_of(
            c,
            "allocation.unallocated".into(),
            raw.unallocated.as_deref(),
            false,
            &[("keep", false), ("proportional", true)],
        ),
    }
}

/// `[[budgets]]`; `channels` are the names `[alerts.channels]` defines.
pub(super) fn validate(
    raw: Vec<RawBudget>,
    channels: &BTreeMap<String, ChannelConfig>,
    c: &mut Checker,
) -> Vec<BudgetConfig> {
    if raw.len() > MAX_BUDGETS {
        c.fail("budgets", format!("more than {MAX_BUDGETS} budgets"));
        return Vec::new();
    }
    let mut out: Vec<BudgetConfig> = Vec::new();
    for (i, b) in raw.into_iter().enumerate() {
        let label = match &b.name {
            Some(n) if !n.trim().is_empty() => format!("budgets[{i}] ({n})"),
            _ => format!("budgets[{i}]"),
        };
        let at = |key: &str| format!("{label}.{key}");
        let name = b.name.clone().unwrap_or_default();
        if name.trim().is_empty() {
            c.fail(at("name"), "missing; every budget needs a name");
        } else if name.len() > 100 || name.chars().any(char::is_control) {
            c.fail(at("name"), "at most 100 printable characters");
        } else if out.iter().any(|o| o.name == name) {
            c.fail(at("name"), format!("`{name}` names another budget too"));
        }
        let amount = match b.amount {
            Some(a) if a.is_finite() && a > 0.0 => a,
            Some(a) => {
                c.fail(at("amount"), format!("{a} is not an amount > 0"));
                1.0
            }
            None => {
                c.fail(at("amount"), "missing; the budget's amount in its currency");
                1.0
            }
        };
        let currency = match b.currency.as_deref() {
            Some(cur) if cur.len() == 3 && cur.chars().all(|ch| ch.is_ascii_uppercase()) => {
                cur.to_owned()
            }
            Some(cur) => {
                c.fail(
                    at("currency"),
                    format!("`{cur}` is not an ISO 4217 code such as USD"),
                );
                String::new()
            }
            None => {
                c.fail(at("currency"), "missing; an ISO 4217 code such as USD");
                String::new()
            }
        };
        let period = one_of(
            c,
            at("period"),
            b.period.as_deref(),
            BudgetPeriod::Month,
            &[
                ("month", BudgetPeriod::Month),
                ("quarter", BudgetPeriod::Quarter),
                ("year", BudgetPeriod::Year),
            ],
        );
        let basis = one_of(
            c,
            at("basis"),
            b.basis.as_deref(),
            CostBasis::Effective,
            &[
                ("effective", CostBasis::Effective),
                ("billed", CostBasis::Billed),
            ],
        );
        for (j, p) in b.providers.iter().enumerate() {
            if crate::bills::BillProvider::parse(p).is_none() {
                c.fail(
                    format!("{label}.providers[{j}]"),
                    format!("`{p}` is not a bill provider; one of: aws, azure, gcp, oci"),
                );
            }
        }
        for (key, list) in [("teams", &b.teams), ("accounts", &b.accounts)] {
            for (j, v) in list.iter().enumerate() {
                if v.trim().is_empty() {
                    c.fail(format!("{label}.{key}[{j}]"), "must not be empty");
                }
            }
        }
        let mut thresholds = Vec::new();
        for (j, t) in b.thresholds.iter().enumerate() {
            let at = |key: &str| format!("{label}.thresholds[{j}].{key}");
            let percent = match t.percent {
                Some(p) if p.is_finite() && p > 0.0 && p <= 1000.0 => p,
                Some(p) => {
                    c.fail(at("percent"), format!("{p} is not a percent in (0, 1000]"));
                    continue;
                }
                None => {
                    c.fail(
                        at("percent"),
                        "missing; the share of the amount, in percent",
                    );
                    continue;
                }
            };
            let on = one_of(
                c,
                at("on"),
                t.on.as_deref(),
                ThresholdOn::Actual,
                &[
                    ("actual", ThresholdOn::Actual),
                    ("forecast", ThresholdOn::Forecast),
                ],
            );
            if thresholds
                .iter()
                .any(|x: &BudgetThreshold| x.on == on && x.percent == percent)
            {
                c.fail(at("percent"), "the same threshold is listed twice");
            }
            thresholds.push(BudgetThreshold { percent, on });
        }
        if !thresholds.is_empty() && b.channels.is_empty() {
            c.fail(
                at("channels"),
                "thresholds need at least one channel of [alerts.channels] to tell",
            );
        }
        for (j, ch) in b.channels.iter().enumerate() {
            if !channels.contains_key(ch) {
                c.fail(
                    format!("{label}.channels[{j}]"),
                    format!("no channel `{ch}` in [alerts.channels]"),
                );
            }
        }
        out.push(BudgetConfig {
            name,
            amount,
            currency,
            period,
            basis,
            scope: BudgetScope {
                teams: b.teams,
                providers: b.providers,
                accounts: b.accounts,
                gpu_only: b.gpu_only,
            },
            thresholds,
            channels: b.channels,
        });
    }
    out
}
