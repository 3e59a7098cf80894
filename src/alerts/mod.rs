//! Alerts: rules evaluated against the catalog after each sync, a state per
//! (rule, key) so a crossing fires once, and an outbox that the delivery task
//! drains (see [`deliver`]).
//!
//! A threshold alert fires when its value crosses the threshold, stays quiet
//! while it remains crossed, and re-arms only once the value moves back past
//! the threshold by the rule's hysteresis (2% by default). A cooldown, when
//! set, also keeps a key quiet for that long after it fired. The state change
//! and the queued messages are written in one transaction.

pub mod bills;
pub mod channels;
pub mod deliver;
pub mod rules;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use gpuplan_providers::PriceKind;
use serde_json::{Value, json};

use crate::alerts::rules::{Rule, RuleKind, Threshold};
use crate::catalog::{self, CatalogRecord, Freshness, PriceFilter};
use crate::fingerprint::fingerprint;
use crate::store::{AlertState, NewMessage, Store, StoreError};

/// One thing a rule watches, as it stands now.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub key: String,
    pub value: f64,
    /// The alert condition holds.
    pub active: bool,
    /// The value is back past the threshold by the hysteresis.
    pub rearm: bool,
    pub message: String,
    pub details: Value,
}

/// `*` and `?` globs, matched against the whole text.
#[must_use]
pub fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    go(&p, &t)
}

fn any_glob(patterns: &[String], text: &str) -> bool {
    patterns.is_empty() || patterns.iter().any(|p| glob(p, text))
}

/// Per offer: the cheapest spot price, and the cheapest term price with its kind.
type SpotVsCommitted = (Option<f64>, Option<(f64, String)>);

fn offer_key(r: &CatalogRecord) -> String {
    format!("{}/{}/{}", r.provider, r.region, r.instance_type)
}

/// Whether `v` has crossed threshold `t` (below it, or above it when `below` is
/// false), and whether it is back past `t` by the hysteresis share `h`, which
/// re-arms a fired key.
fn crossing(below: bool, v: f64, t: f64, h: f64) -> (bool, bool) {
    if below {
        (v < t, v >= t * (1.0 + h))
    } else {
        (v > t, v <= t * (1.0 - h))
    }
}

/// What a rule watches now. `sources` are the enabled sources; `seen` the keys
/// a `new_offer` rule already knows.
///
/// # Errors
/// On a store error.
pub fn observe(
    store: &dyn Store,
    fresh: &Freshness,
    rule: &Rule,
    sources: &[String],
) -> Result<Vec<Observation>, StoreError> {
    let h = rule.hysteresis;
    match rule.kind {
        // Plan changes are events of the plan runner (see [`plan_changed`]);
        // the kinds over the bills are observed by [`bills::observe`].
        RuleKind::PlanChanged
        | RuleKind::UnallocatedSpend
        | RuleKind::CommitmentUnderused
        | RuleKind::CoverageBelow
        | RuleKind::BillRestated
        | RuleKind::Budget => Ok(Vec::new()),
        RuleKind::PriceBelow | RuleKind::PriceAbove => {
            let below = rule.kind == RuleKind::PriceBelow;
            let filter = PriceFilter {
                gpus: rule.gpu_models.clone(),
                kinds: rule.price_kinds.clone(),
                scopes: rule.price_scopes.clone(),
                ..PriceFilter::default()
            };
            let (per_gpu, t) = match rule.threshold {
                Some(Threshold::PerGpuHour(t)) => (true, t),
                Some(Threshold::PerInstanceHour(t)) => (false, t),
                None => return Ok(Vec::new()),
            };
            let records: Vec<CatalogRecord> = catalog::prices(store, fresh, &filter)?
                .into_iter()
                .filter(|r| {
                    any_glob(&rule.providers, &r.provider) && any_glob(&rule.regions, &r.region)
                })
                .collect();
            let value = |r: &CatalogRecord| {
                if per_gpu {
                    r.usd_per_gpu_hour
                } else {
                    r.usd_per_hour
                }
            };
            let unit = if per_gpu { "USD/GPU-hour" } else { "USD/hour" };
            let observe = |key: String, r: &CatalogRecord| {
                let v = value(r);
                let (active, rearm) = crossing(below, v, t, h);
                Observation {
                    key,
                    value: v,
                    active,
                    rearm,
                    message: format!(
                        "{} {} in {} ({} x {}) is {v:.4} {unit}, {} the threshold {t}",
                        r.instance_type,
                        r.price_kind,
                        r.zone.as_deref().unwrap_or(&r.region),
                        gpuplan_providers::gpu::count_label(r.gpu_count),
                        r.gpu_model,
                        if below { "below" } else { "above" }
                    ),
                    details: json!({"offer": r, "threshold": t, "unit": unit}),
                }
            };
            if rule.every_offer {
                Ok(records
                    .iter()
                    .map(|r| {
                        let key = format!(
                            "{}/{}/{}",
                            offer_key(r),
                            r.zone.as_deref().unwrap_or("-"),
                            r.price_kind
                        );
                        observe(key, r)
                    })
                    .collect())
            } else {
                // Prices are sorted per GPU-hour; per instance-hour, find the cheapest.
                let cheapest = records.iter().min_by(|a, b| value(a).total_cmp(&value(b)));
                Ok(cheapest
                    .map(|r| observe("cheapest".to_owned(), r))
                    .into_iter()
                    .collect())
            }
        }
        RuleKind::SpotAboveCommitted => {
            let filter = PriceFilter {
                gpus: rule.gpu_models.clone(),
                scopes: rule.price_scopes.clone(),
                ..PriceFilter::default()
            };
            let mut offers: BTreeMap<String, SpotVsCommitted> = BTreeMap::new();
            for r in catalog::prices(store, fresh, &filter)? {
                if !(any_glob(&rule.providers, &r.provider) && any_glob(&rule.regions, &r.region)) {
                    continue;
                }
                let entry = offers.entry(offer_key(&r)).or_default();
                match r.price_kind.parse::<PriceKind>() {
                    Ok(PriceKind::Spot) => {
                        entry.0 = Some(
                            entry
                                .0
                                .map_or(r.usd_per_hour, |s: f64| s.min(r.usd_per_hour)),
                        )
                    }
                    Ok(k)
                        if k.term().is_some()
                            && entry.1.as_ref().is_none_or(|(c, _)| r.usd_per_hour < *c) =>
                    {
                        entry.1 = Some((r.usd_per_hour, r.price_kind.clone()));
                    }
                    _ => {}
                }
            }
            Ok(offers
                .into_iter()
                .filter_map(|(key, (spot, committed))| {
                    let (spot, (c, kind)) = (spot?, committed?);
                    Some(Observation {
                        message: format!("spot for {key} costs {spot:.4} USD/hour, more than its {kind} price {c:.4}"),
                        details: json!({"offer": key, "spot_usd_per_hour": spot, "committed_usd_per_hour": c, "committed_kind": kind}),
                        active: crossing(false, spot, c, h).0,
                        rearm: crossing(false, spot, c, h).1,
                        value: spot,
                        key,
                    })
                })
                .collect())
        }
        RuleKind::SyncFailed => Ok(store
            .latest_runs()?
            .into_iter()
            .filter(|(source, _, _)| sources.contains(source) && any_glob(&rule.providers, source))
            .map(|(source, status, error)| {
                let failed = status == "failed";
                Observation {
                    message: format!(
                        "sync of {source} failed: {}",
                        error.as_deref().unwrap_or("unknown error")
                    ),
                    details: json!({"source": source, "error": error}),
                    active: failed,
                    rearm: !failed,
                    value: f64::from(u8::from(failed)),
                    key: source,
                }
            })
            .collect()),
        RuleKind::Stale => Ok(sources
            .iter()
            .filter(|s| any_glob(&rule.providers, s))
            .map(|source| {
                let stale = fresh.is_stale(source);
                let age = fresh
                    .last_good
                    .get(source)
                    .map(|t| (fresh.now - *t).num_minutes());
                Observation {
                    key: source.clone(),
                    value: age.map_or(f64::INFINITY, |m| m as f64),
                    active: stale,
                    rearm: !stale,
                    message: match age {
                        Some(m) => {
                            format!("data from {source} is stale: last good sync {m} minutes ago")
                        }
                        None => {
                            format!("data from {source} is stale: it never synced successfully")
                        }
                    },
                    details: json!({"source": source, "age_minutes": age}),
                }
            })
            .collect()),
        RuleKind::SuspiciousPrice => suspicious(store, fresh, rule, sources),
        RuleKind::WindowOffered => windows_offered(store, fresh, rule),
        RuleKind::NewOffer => {
            let filter = PriceFilter {
                gpus: rule.gpu_models.clone(),
                scopes: rule.price_scopes.clone(),
                ..PriceFilter::default()
            };
            let mut seen = BTreeSet::new();
            let mut out = Vec::new();
            for r in catalog::prices(store, fresh, &filter)? {
                let key = offer_key(&r);
                if !(any_glob(&rule.providers, &r.provider)
                    && any_glob(&rule.regions, &r.region)
                    && seen.insert(key.clone()))
                {
                    continue;
                }
                out.push(Observation {
                    message: format!(
                        "new GPU offer: {} x {} as {} in {} ({})",
                        gpuplan_providers::gpu::count_label(r.gpu_count),
                        r.gpu_model,
                        r.instance_type,
                        r.region,
                        r.provider
                    ),
                    details: json!({"offer": r}),
                    active: true,
                    rearm: false,
                    value: r.usd_per_hour,
                    key,
                });
            }
            Ok(out)
        }
    }
}

/// The key of a window offering: the offer, its instance count and its
/// window, the end last (see [`window_ended`]).
fn window_key(r: &CatalogRecord) -> Option<String> {
    let (start, end, count) = (r.window_start?, r.window_end?, r.instance_count?);
    Some(format!(
        "{}/{}/x{count}/{}..{}",
        offer_key(r),
        r.zone.as_deref().unwrap_or("-"),
        start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    ))
}

/// Whether the window a [`window_key`] names ended before `now`: such an
/// offering can never be listed again, so its state may go.
fn window_ended(key: &str, now: DateTime<Utc>) -> bool {
    key.rsplit_once("..")
        .and_then(|(_, end)| DateTime::parse_from_rfc3339(end).ok())
        .is_some_and(|end| end < now)
}

/// Every priced window on offer that is long and cheap enough: each one is
/// a key that fires once, when first seen (a window that vanishes and comes
/// back does not fire again).
fn windows_offered(
    store: &dyn Store,
    fresh: &Freshness,
    rule: &Rule,
) -> Result<Vec<Observation>, StoreError> {
    let filter = PriceFilter {
        gpus: rule.gpu_models.clone(),
        kinds: rule.price_kinds.clone(),
        scopes: rule.price_scopes.clone(),
        ..PriceFilter::default()
    };
    let min_hours = rule.min_days.unwrap_or(0.0) * 24.0;
    let mut out = Vec::new();
    for r in catalog::prices(store, fresh, &filter)? {
        let (Some(key), Some(hours)) = (window_key(&r), r.window_hours) else {
            continue;
        };
        let (value, unit) = match rule.threshold {
            Some(Threshold::PerInstanceHour(_)) => (r.usd_per_hour, "USD/hour"),
            _ => (r.usd_per_gpu_hour, "USD/GPU-hour"),
        };
        let cheap_enough = match rule.threshold {
            Some(Threshold::PerGpuHour(t) | Threshold::PerInstanceHour(t)) => value <= t,
            None => true,
        };
        if !(cheap_enough
            && hours >= min_hours
            && r.window_end.is_some_and(|end| end > fresh.now)
            && any_glob(&rule.providers, &r.provider)
            && any_glob(&rule.regions, &r.region))
        {
            continue;
        }
        out.push(Observation {
            message: format!(
                "{} window of {} x {} ({} x {}) in {}: {} to {} UTC ({hours:.1} hours), {:.2} USD up front, {value:.4} {unit}",
                r.price_kind,
                r.instance_count.unwrap_or(0),
                r.instance_type,
                gpuplan_providers::gpu::count_label(r.gpu_count),
                r.gpu_model,
                r.zone.as_deref().unwrap_or(&r.region),
                r.window_start.map(|t| t.format("%Y-%m-%d %H:%M").to_string()).unwrap_or_default(),
                r.window_end.map(|t| t.format("%Y-%m-%d %H:%M").to_string()).unwrap_or_default(),
                r.upfront_usd,
            ),
            details: json!({"offer": r, "threshold": rule.threshold.map(|(Threshold::PerGpuHour(t) | Threshold::PerInstanceHour(t))| t), "unit": unit, "min_days": rule.min_days}),
            active: true,
            rearm: false,
            value,
            key,
        });
    }
    Ok(out)
}

/// How far back a `suspicious_price` rule looks for runs: alerts are
/// evaluated after each sync, so this only matters after a pause.
const SUSPICIOUS_LOOKBACK_DAYS: i64 = 7;

/// The suspicious prices each recent sync run stored, one observation per
/// run with the rows the rule matches: it fires once, when first seen. A row
/// an earlier run already reported (AWS's full and spot-only syncs may both
/// bring the same new spot price) is not reported again.
fn suspicious(
    store: &dyn Store,
    fresh: &Freshness,
    rule: &Rule,
    sources: &[String],
) -> Result<Vec<Observation>, StoreError> {
    let since = fresh.now - chrono::Duration::days(SUSPICIOUS_LOOKBACK_DAYS);
    let matches = |p: &crate::store::SuspiciousPrice| {
        (rule.gpu_models.is_empty()
            || rule
                .gpu_models
                .iter()
                .any(|g| catalog::gpu_matches(&p.gpu_model, g)))
            && (rule.price_kinds.is_empty()
                || rule
                    .price_kinds
                    .iter()
                    .any(|k| k.to_string() == p.price_kind))
            && (rule.price_scopes.is_empty()
                || rule
                    .price_scopes
                    .iter()
                    .any(|s| s.as_str() == p.price_scope))
            && any_glob(&rule.regions, &p.region)
    };
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    for run in store.suspicious_runs(since)? {
        if !(sources.contains(&run.source) && any_glob(&rule.providers, &run.source)) {
            continue;
        }
        let rows: Vec<_> = run
            .stats
            .suspicious
            .iter()
            .filter(|p| matches(p))
            .filter(|p| {
                reported.insert((
                    run.source.clone(),
                    p.region.clone(),
                    p.zone.clone(),
                    p.instance_type.clone(),
                    p.price_kind.clone(),
                    p.offering_class.clone(),
                    p.usd_per_hour.to_bits(),
                ))
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        const SHOWN: usize = 5;
        let mut listed: Vec<String> = rows.iter().take(SHOWN).map(ToString::to_string).collect();
        if rows.len() > SHOWN {
            listed.push(format!("and {} more", rows.len() - SHOWN));
        }
        out.push(Observation {
            key: format!("{}/run/{}", run.source, run.id),
            value: rows.len() as f64,
            active: true,
            rearm: false,
            message: format!(
                "{}: sync run {} stored {} suspicious price(s), far below their previous price or the catalog's median: {}",
                run.source,
                run.id,
                rows.len(),
                listed.join("; ")
            ),
            details: json!({"source": run.source, "run_id": run.id,
                            "finished_at": run.finished_at, "prices": rows}),
        });
    }
    Ok(out)
}

/// What to write for one rule: new states and the messages they queue.
#[derive(Debug, Default)]
pub struct Decisions {
    pub states: Vec<AlertState>,
    pub messages: Vec<NewMessage>,
    /// States to delete, as (rule, key): windows that have ended.
    pub forget: Vec<(String, String)>,
}

/// Applies the state machine to one rule's observations. Pure: given the
/// previous states and the time, it returns what changed.
#[must_use]
pub fn decide(
    rule: &Rule,
    previous: &[AlertState],
    observations: &[Observation],
    now: DateTime<Utc>,
) -> Decisions {
    let prev: BTreeMap<&str, &AlertState> = previous.iter().map(|s| (s.key.as_str(), s)).collect();
    let mut out = Decisions::default();
    // A new_offer rule's first evaluation only learns what exists.
    let seeding = rule.kind == RuleKind::NewOffer && previous.is_empty();
    if rule.kind == RuleKind::WindowOffered {
        out.forget = previous
            .iter()
            .filter(|s| window_ended(&s.key, now) && !observations.iter().any(|o| o.key == s.key))
            .map(|s| (s.rule.clone(), s.key.clone()))
            .collect();
    }
    for o in observations {
        let state = prev.get(o.key.as_str());
        let fired = state.is_some_and(|s| s.fired);
        let cooling = state
            .and_then(|s| s.last_fired_at)
            .zip(rule.cooldown)
            .is_some_and(|(at, cd)| (now - at).to_std().unwrap_or_default() < cd);
        let next = |fired: bool, last_fired_at| AlertState {
            rule: rule.name.clone(),
            key: o.key.clone(),
            fired,
            last_value: Some(o.value),
            changed_at: now,
            last_fired_at,
        };
        if fired {
            if o.rearm {
                out.states
                    .push(next(false, state.and_then(|s| s.last_fired_at)));
            }
        } else if o.active && seeding {
            out.states.push(next(true, None));
        } else if o.active && !cooling {
            out.states.push(next(true, Some(now)));
            let payload = json!({
                "rule": rule.name,
                "kind": rule.kind.as_str(),
                "key": o.key,
                "value": o.value,
                "message": o.message,
                "fired_at": now,
                "details": o.details,
            });
            push_messages(&mut out, rule, &o.key, &payload, now);
        }
    }
    out
}

/// Messages for the `plan_changed` rules watching scheduled plan `plan`, after
/// its new result changed against the previous one. The state row per (rule,
/// plan) records when it last fired, for cooldowns.
#[must_use]
pub fn plan_changed(
    rules: &[Rule],
    previous: &[AlertState],
    plan: &str,
    change: &crate::optimizer::PlanChange,
    result: &Value,
    now: DateTime<Utc>,
) -> Decisions {
    let mut out = Decisions::default();
    for rule in rules.iter().filter(|r| {
        r.kind == RuleKind::PlanChanged && (r.plans.is_empty() || r.plans.iter().any(|p| p == plan))
    }) {
        let cooling = previous
            .iter()
            .find(|s| s.rule == rule.name && s.key == plan)
            .and_then(|s| s.last_fired_at)
            .zip(rule.cooldown)
            .is_some_and(|(at, cd)| (now - at).to_std().unwrap_or_default() < cd);
        if !change.changed || cooling {
            continue;
        }
        let objective = result["objective"].as_f64();
        out.states.push(AlertState {
            rule: rule.name.clone(),
            key: plan.to_owned(),
            fired: false,
            last_value: objective,
            changed_at: now,
            last_fired_at: Some(now),
        });
        let message = format!(
            "plan {plan} changed: {}; cost now {}",
            change.reasons.join("; "),
            objective.map_or_else(|| "n/a (infeasible)".to_owned(), |o| format!("{o:.2} USD"))
        );
        let payload = json!({
            "rule": rule.name, "kind": rule.kind.as_str(), "key": plan, "value": objective,
            "message": message, "fired_at": now,
            "details": {"reasons": change.reasons, "reserved_diff": change.reserved_diff,
                        "status": result["status"], "savings_pct": result["savings_pct"]},
        });
        push_messages(&mut out, rule, plan, &payload, now);
    }
    out
}

/// One message per channel of `rule`, each with its own stable idempotency key.
fn push_messages(out: &mut Decisions, rule: &Rule, key: &str, payload: &Value, now: DateTime<Utc>) {
    for channel in &rule.channels {
        let id = format!("{}|{key}|{}|{channel}", rule.name, now.timestamp_micros());
        let idempotency_key = format!("gpuplan-{}", fingerprint(id.as_bytes()));
        let mut payload = payload.clone();
        payload["idempotency_key"] = json!(idempotency_key);
        out.messages.push(NewMessage {
            idempotency_key,
            rule: rule.name.clone(),
            channel: channel.clone(),
            payload,
        });
    }
}

/// Evaluates every rule and budget and writes the outcome; returns how
/// many messages it queued.
///
/// # Errors
/// On a store error (nothing of this evaluation is written).
pub fn evaluate(
    store: &mut dyn Store,
    fresh: &Freshness,
    rules: &[Rule],
    sources: &[String],
    over_bills: &crate::bills::budgets::BillsSetup,
) -> Result<usize, StoreError> {
    let mut all = Decisions::default();
    let mut add = |rule: &Rule, observations: &[Observation], store: &dyn Store| {
        let previous = store.alert_states(Some(&rule.name))?;
        let d = decide(rule, &previous, observations, fresh.now);
        all.states.extend(d.states);
        all.messages.extend(d.messages);
        all.forget.extend(d.forget);
        Ok::<(), StoreError>(())
    };
    for rule in rules {
        let observations = if rule.kind.over_bills() {
            bills::observe(store, rule, over_bills, fresh.now)?
        } else {
            observe(store, fresh, rule, sources)?
        };
        add(rule, &observations, store)?;
    }
    for budget in over_bills
        .budgets
        .iter()
        .filter(|b| !b.thresholds.is_empty())
    {
        let status = crate::bills::budgets::status(
            store,
            budget,
            &over_bills.sources,
            over_bills.proportional,
            &[],
        )?;
        add(
            &bills::budget_rule(budget),
            &bills::budget_observations(&status),
            store,
        )?;
    }
    let queued = all.messages.len();
    if !(all.states.is_empty() && all.forget.is_empty()) {
        store.apply_alerts(&all.states, &all.messages, &all.forget, fresh.now)?;
    }
    Ok(queued)
}

#[cfg(test)]
mod tests;
