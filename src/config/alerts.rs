//! `[alerts]`: channels, rules and scheduled plans.

use super::*;

#[derive(Debug, Clone, Default)]
pub struct AlertsConfig {
    /// Scheduled plans by name (`[alerts.plans.NAME]`).
    pub plans: BTreeMap<String, ScheduledPlan>,
    pub channels: BTreeMap<String, ChannelConfig>,
    pub rules: Vec<Rule>,
    /// Backoff of deliveries to a receiver that fails.
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// How long one delivery may take before it counts as failed.
    pub timeout: Duration,
}

/// A plan the daemon re-solves on a schedule, alerting `plan_changed` rules
/// when its result changes (docs/planning-model.md §7).
#[derive(Debug, Clone)]
pub struct ScheduledPlan {
    /// Hourly demand (CSV), or past usage to forecast from.
    pub input: PlanInput,
    /// With a demand CSV of several columns: the classes file describing them.
    pub classes: Option<PathBuf>,
    /// Owned reservations (CSV); `None` takes `[planner.owned]`.
    pub owned: Option<PathBuf>,
    pub schedule: Schedule,
    pub gpus: Vec<String>,
    pub clouds: Vec<String>,
    pub regions: Vec<String>,
    pub countries: Vec<String>,
    pub policy: crate::optimizer::Policy,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PlanInput {
    Demand(PathBuf),
    Usage {
        path: PathBuf,
        horizon_hours: usize,
    },
    /// Past usage from the bills' hourly GPU-hours.
    Bills {
        teams: Vec<String>,
        days: u32,
        horizon_hours: usize,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAlerts {
    retry_initial_secs: Option<f64>,
    retry_max_secs: Option<f64>,
    timeout_secs: Option<f64>,
    #[serde(default)]
    channels: BTreeMap<String, RawChannel>,
    #[serde(default)]
    rules: Vec<RawRule>,
    #[serde(default)]
    plans: BTreeMap<String, RawPlan>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlan {
    demand: Option<String>,
    usage: Option<String>,
    usage_from_bills: Option<bool>,
    #[serde(default)]
    teams: Vec<String>,
    usage_days: Option<i64>,
    classes: Option<String>,
    owned: Option<String>,
    horizon_hours: Option<i64>,
    schedule: Option<String>,
    #[serde(default)]
    gpu: Vec<String>,
    #[serde(default)]
    clouds: Vec<String>,
    #[serde(default)]
    regions: Vec<String>,
    #[serde(default)]
    countries: Vec<String>,
    policy: Option<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawChannel {
    #[serde(rename = "type")]
    kind: String,
    url: Option<String>,
    url_env: Option<String>,
    secret_env: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    name: String,
    kind: String,
    #[serde(default)]
    gpu_models: Vec<String>,
    #[serde(default)]
    price_kinds: Vec<String>,
    price_scopes: Option<Vec<String>>,
    #[serde(default)]
    providers: Vec<String>,
    #[serde(default)]
    regions: Vec<String>,
    usd_per_gpu_hour: Option<f64>,
    usd_per_hour: Option<f64>,
    #[serde(rename = "match")]
    matching: Option<String>,
    hysteresis_pct: Option<f64>,
    cooldown_secs: Option<f64>,
    #[serde(default)]
    channels: Vec<String>,
    #[serde(default)]
    plans: Vec<String>,
    percent: Option<f64>,
    amount: Option<f64>,
    days: Option<i64>,
    min_days: Option<f64>,
}

pub(super) fn validate_plans(
    raw: BTreeMap<String, RawPlan>,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> BTreeMap<String, ScheduledPlan> {
    let mut plans = BTreeMap::new();
    for (name, p) in raw {
        let at = |key: &str| format!("alerts.plans.{name}.{key}");
        let horizon_hours = match p.horizon_hours.unwrap_or(168) {
            h @ 1..=8784 => h as usize,
            h => {
                c.fail(
                    at("horizon_hours"),
                    format!("{h} is not between 1 and 8784"),
                );
                continue;
            }
        };
        let from_bills = p.usage_from_bills.unwrap_or(false);
        if !from_bills && (!p.teams.is_empty() || p.usage_days.is_some()) {
            c.fail(
                at(if p.teams.is_empty() {
                    "usage_days"
                } else {
                    "teams"
                }),
                "goes with usage_from_bills = true",
            );
            continue;
        }
        let input = match (&p.demand, &p.usage, from_bills) {
            (Some(d), None, false) => PlanInput::Demand(resolve(d)),
            (None, Some(u), false) => PlanInput::Usage {
                path: resolve(u),
                horizon_hours,
            },
            (None, None, true) => PlanInput::Bills {
                teams: p.teams.clone(),
                days: c.bounded(
                    &at("usage_days"),
                    p.usage_days,
                    crate::plan::from_bills::DEFAULT_DAYS,
                    1..=3660,
                ),
                horizon_hours,
            },
            _ => {
                c.fail(
                    format!("alerts.plans.{name}"),
                    "give exactly one of demand (hourly demand CSV), usage (past usage CSV) or usage_from_bills = true",
                );
                continue;
            }
        };
        if p.classes.is_some() && p.demand.is_none() {
            c.fail(
                at("classes"),
                "goes with demand (a CSV with one column per class), not with usage",
            );
            continue;
        }
        // The policy uses the planning model's keys and rules (docs/planning-model.md §4.1).
        let policy_json = serde_json::to_value(p.policy.unwrap_or_default()).unwrap_or_default();
        let policy = match crate::optimizer::Problem::from_json(
            &serde_json::json!({"demand": [0], "offers": [], "policy": policy_json}),
        ) {
            Ok(problem) => problem.policy,
            Err(e) => {
                c.fail(format!("alerts.plans.{name}.{}", e.path), e.message);
                continue;
            }
        };
        plans.insert(
            name.clone(),
            ScheduledPlan {
                input,
                classes: p.classes.as_deref().map(resolve),
                owned: p.owned.as_deref().map(resolve),
                schedule: c.schedule(
                    &at("schedule"),
                    p.schedule.as_deref().or(Some("0 0 6 * * *")),
                ),
                gpus: p.gpu,
                clouds: p.clouds,
                regions: p.regions,
                countries: p.countries,
                policy,
            },
        );
    }
    plans
}

/// The days a rule over the bills looks back on by default.
fn default_days(kind: RuleKind) -> u32 {
    match kind {
        RuleKind::CommitmentUnderused | RuleKind::BillRestated => 7,
        _ => 30,
    }
}

/// `percent`, `amount` and `days`: the thresholds of the kinds over the
/// bills, refused on the others.
fn bill_rule_fields(
    r: &RawRule,
    kind: RuleKind,
    label: &str,
    c: &mut Checker,
) -> (Option<f64>, Option<f64>, u32) {
    let at = |key: &str| format!("{label}.{key}");
    if !kind.over_bills() {
        for (key, set) in [
            ("percent", r.percent.is_some()),
            ("amount", r.amount.is_some()),
            ("days", r.days.is_some()),
        ] {
            if set {
                c.fail(
                    at(key),
                    format!(
                        "a {} rule has no {key}; the rules over the bills do",
                        r.kind
                    ),
                );
            }
        }
        return (None, None, 0);
    }
    let percent = match r.percent {
        Some(p) if p.is_finite() && p > 0.0 && p <= 100.0 => Some(p),
        Some(p) => {
            c.fail(at("percent"), format!("{p} is not a percent in (0, 100]"));
            None
        }
        None => None,
    };
    let amount = match r.amount {
        Some(a) if kind == RuleKind::BillRestated && a.is_finite() && a > 0.0 => Some(a),
        Some(a) if kind == RuleKind::BillRestated => {
            c.fail(at("amount"), format!("{a} is not an amount > 0"));
            None
        }
        Some(_) => {
            c.fail(at("amount"), "only bill_restated rules take an amount");
            None
        }
        None => None,
    };
    if percent.is_none() && amount.is_none() && r.percent.is_none() {
        c.fail(
            at("percent"),
            if kind == RuleKind::BillRestated {
                "a bill_restated rule needs percent or amount (the change that fires it)"
            } else {
                "missing; the percent threshold the rule compares against"
            },
        );
    }
    let days = c.bounded(&at("days"), r.days, default_days(kind), 1..=366);
    (percent, amount, days)
}

pub(super) fn validate_alerts(
    raw: RawAlerts,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> AlertsConfig {
    let plans = validate_plans(raw.plans, c, resolve);
    let mut channels = BTreeMap::new();
    for (name, ch) in raw.channels {
        let at = |key: &str| format!("alerts.channels.{name}.{key}");
        let url = |c: &mut Checker| match (&ch.url, &ch.url_env) {
            (Some(u), None) if is_http_url(u) => ChannelUrl::Inline(Secret::new(u.clone())),
            (Some(u), None) => {
                c.fail(
                    at("url"),
                    format!("`{}` is not an http(s) URL", Redaction::Origin.show(u)),
                );
                ChannelUrl::Inline(Secret::new(String::new()))
            }
            (None, Some(var)) if !var.trim().is_empty() => ChannelUrl::Env(var.trim().to_owned()),
            (None, Some(_)) => {
                c.fail(at("url_env"), "must name an environment variable");
                ChannelUrl::Env(String::new())
            }
            (Some(_), Some(_)) => {
                c.fail(at("url"), "give url or url_env, not both");
                ChannelUrl::Env(String::new())
            }
            (None, None) => {
                c.fail(
                    at("url"),
                    format!(
                        "a {} channel needs url_env (the environment variable holding its URL) or url",
                        ch.kind
                    ),
                );
                ChannelUrl::Env(String::new())
            }
        };
        let channel = match ch.kind.as_str() {
            "webhook" => ChannelConfig::Webhook {
                url: url(c),
                secret_env: ch.secret_env.clone(),
            },
            "slack" => ChannelConfig::Slack { url: url(c) },
            "log" => ChannelConfig::Log,
            other => {
                c.fail(
                    at("type"),
                    format!("`{other}` is not a channel type; expected webhook, slack or log"),
                );
                continue;
            }
        };
        if (ch.url.is_some() || ch.url_env.is_some()) && ch.kind == "log" {
            c.fail(at("url"), "a log channel has no URL");
        }
        if ch.secret_env.is_some() && ch.kind != "webhook" {
            c.fail(
                at("secret_env"),
                "only webhook channels sign their messages",
            );
        }
        channels.insert(name, channel);
    }
    let mut rules: Vec<Rule> = Vec::new();
    for (i, r) in raw.rules.into_iter().enumerate() {
        let label = if r.name.is_empty() {
            format!("alerts.rules[{i}]")
        } else {
            format!("alerts.rules[{i}] ({})", r.name)
        };
        let at = |key: &str| format!("{label}.{key}");
        if r.name.trim().is_empty() {
            c.fail(at("name"), "must not be empty");
        } else if rules.iter().any(|x| x.name == r.name) {
            c.fail(at("name"), format!("`{}` names another rule too", r.name));
        }
        let Some(kind) = RuleKind::NAMES
            .iter()
            .find(|(n, _)| *n == r.kind)
            .map(|(_, k)| *k)
        else {
            let names: Vec<&str> = RuleKind::NAMES.iter().map(|(n, _)| *n).collect();
            c.fail(
                at("kind"),
                format!(
                    "`{}` is not a rule kind; expected one of: {}",
                    r.kind,
                    names.join(", ")
                ),
            );
            continue;
        };
        let price_kinds = r
            .price_kinds
            .iter()
            .enumerate()
            .filter_map(|(j, k)| {
                k.parse()
                    .map_err(|e: gpuplan_providers::snapshot::UnknownName| {
                        c.fail(format!("{label}.price_kinds[{j}]"), e.to_string())
                    })
                    .ok()
            })
            .collect();
        let price_scopes = match &r.price_scopes {
            // A wrong price of a GPU alone (GCP's accelerator SKUs) is as
            // wrong as an instance's.
            None if kind == RuleKind::SuspiciousPrice => Vec::new(),
            None => vec![gpuplan_providers::PriceScope::Instance],
            Some(list) => list
                .iter()
                .enumerate()
                .filter_map(|(j, k)| {
                    k.parse()
                        .map_err(|e: String| c.fail(format!("{label}.price_scopes[{j}]"), e))
                        .ok()
                })
                .collect(),
        };
        let threshold = match (r.usd_per_gpu_hour, r.usd_per_hour) {
            (Some(v), None) => Some(Threshold::PerGpuHour(v)),
            (None, Some(v)) => Some(Threshold::PerInstanceHour(v)),
            (Some(_), Some(_)) => {
                c.fail(
                    at("usd_per_hour"),
                    "give usd_per_gpu_hour or usd_per_hour, not both",
                );
                None
            }
            (None, None) => None,
        };
        let needs_threshold = matches!(kind, RuleKind::PriceBelow | RuleKind::PriceAbove);
        // A window rule's price cap is optional: without one, every window
        // long enough is news.
        let takes_threshold = needs_threshold || kind == RuleKind::WindowOffered;
        if needs_threshold && threshold.is_none() {
            c.fail(
                at("usd_per_gpu_hour"),
                format!("a {} rule needs usd_per_gpu_hour or usd_per_hour", r.kind),
            );
        }
        if !takes_threshold && threshold.is_some() {
            c.fail(
                at("usd_per_gpu_hour"),
                format!("a {} rule has no threshold", r.kind),
            );
        }
        if let Some(Threshold::PerGpuHour(v) | Threshold::PerInstanceHour(v)) = threshold
            && !(v.is_finite() && v >= 0.0)
        {
            c.fail(at("usd_per_gpu_hour"), format!("{v} is not a price >= 0"));
        }
        let every_offer = match r.matching.as_deref() {
            None | Some("cheapest") => false,
            Some("every") => true,
            Some(other) => {
                c.fail(
                    at("match"),
                    format!("`{other}` is not a match mode; expected \"cheapest\" or \"every\""),
                );
                false
            }
        };
        let hysteresis = r.hysteresis_pct.unwrap_or(2.0);
        if !(0.0..=100.0).contains(&hysteresis) {
            c.fail(
                at("hysteresis_pct"),
                format!("{hysteresis} is not a percentage between 0 and 100"),
            );
        }
        let cooldown = r
            .cooldown_secs
            .map(|s| c.seconds(&at("cooldown_secs"), Some(s), 1.0));
        if !r.plans.is_empty() && kind != RuleKind::PlanChanged {
            c.fail(
                at("plans"),
                format!("only plan_changed rules watch plans, not {}", r.kind),
            );
        }
        for (j, plan) in r.plans.iter().enumerate() {
            if !plans.contains_key(plan) {
                c.fail(
                    format!("{label}.plans[{j}]"),
                    format!("no scheduled plan `{plan}` in [alerts.plans]"),
                );
            }
        }
        if r.channels.is_empty() {
            c.fail(
                at("channels"),
                "name at least one channel of [alerts.channels]",
            );
        }
        for (j, ch) in r.channels.iter().enumerate() {
            if !channels.contains_key(ch) {
                c.fail(
                    format!("{label}.channels[{j}]"),
                    format!("no channel `{ch}` in [alerts.channels]"),
                );
            }
        }
        let min_days = match r.min_days {
            Some(_) if kind != RuleKind::WindowOffered => {
                c.fail(
                    at("min_days"),
                    format!("a {} rule has no min_days; window_offered rules do", r.kind),
                );
                None
            }
            Some(d) if d.is_finite() && d > 0.0 && d <= 366.0 => Some(d),
            Some(d) => {
                c.fail(
                    at("min_days"),
                    format!("{d} is not a number of days in (0, 366]"),
                );
                None
            }
            None => None,
        };
        let (percent, amount, days) = bill_rule_fields(&r, kind, &label, c);
        rules.push(Rule {
            name: r.name,
            kind,
            gpu_models: r.gpu_models,
            price_kinds,
            price_scopes,
            providers: r.providers,
            regions: r.regions,
            threshold,
            every_offer,
            hysteresis: hysteresis / 100.0,
            cooldown,
            channels: r.channels,
            plans: r.plans,
            percent,
            amount,
            days,
            min_days,
        });
    }
    AlertsConfig {
        plans,
        channels,
        rules,
        retry_initial: c.seconds("alerts.retry_initial_secs", raw.retry_initial_secs, 5.0),
        retry_max: c.seconds("alerts.retry_max_secs", raw.retry_max_secs, 600.0),
        timeout: c.seconds("alerts.timeout_secs", raw.timeout_secs, 10.0),
    }
}
