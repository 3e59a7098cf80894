//! The plan-change test (docs/planning-model.md §7, and §10.10 for v2): whether
//! a new result differs from the previous one enough to tell someone. Hourly
//! spot and on-demand counts never count on their own; autoscalers handle
//! those. Buying what the previous plan recommended is not a change either:
//! those reservations move from `reserved` to `owned`, and their cost from
//! `objective` to `sunk_cost`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanChange {
    pub changed: bool,
    pub reasons: Vec<String>,
    /// `"offer/option"` -> (previous count, new count), for entries that differ.
    pub reserved_diff: BTreeMap<String, (f64, f64)>,
}

fn portfolio(result: &Value) -> BTreeMap<String, f64> {
    counts(result, "reserved")
}

/// `"offer/option"` -> count, summed over the entries of `result[key]`.
fn counts(result: &Value, key: &str) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    let entries = result[key]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| {
                    let count = e["count"].as_f64()?;
                    (count > 0.0).then(|| {
                        (
                            format!(
                                "{}/{}",
                                e["offer"].as_str().unwrap_or(""),
                                e["option"].as_str().unwrap_or("")
                            ),
                            count,
                        )
                    })
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for (key, count) in entries {
        *out.entry(key).or_default() += count;
    }
    out
}

/// What the previous result still asks to buy: its recommendation less what
/// was bought since (owned counts that grew).
fn outstanding(previous: &Value, new: &Value) -> BTreeMap<String, f64> {
    let (owned_before, owned_now) = (counts(previous, "owned"), counts(new, "owned"));
    let mut expected = portfolio(previous);
    for (key, count) in expected.iter_mut() {
        let before = owned_before.get(key).copied().unwrap_or(0.0);
        let bought = (owned_now.get(key).copied().unwrap_or(0.0) - before).max(0.0);
        *count = (*count - bought).max(0.0);
    }
    expected.retain(|_, c| *c > 0.0);
    expected
}

/// `objective + sunk_cost`, the cost compared (sunk cost 0 when absent); for
/// a v3 plan `expected_cost + sunk_cost`, since its objective may be a
/// risk-adjusted figure or a shortfall (§11.12).
fn cost(result: &Value) -> Option<f64> {
    let cost = result["expected_cost"]
        .as_f64()
        .or_else(|| result["objective"].as_f64())?;
    Some(cost + result["sunk_cost"].as_f64().unwrap_or(0.0))
}

/// Compares result documents `previous` and `new`; `cost_change_pct` is the
/// policy's `alert_cost_change_pct`.
#[must_use]
pub fn compare(previous: &Value, new: &Value, cost_change_pct: f64) -> PlanChange {
    let mut reasons = Vec::new();
    if previous["status"] != new["status"] {
        reasons.push(format!(
            "status changed from {} to {}",
            previous["status"], new["status"]
        ));
    }
    let (old, now) = (outstanding(previous, new), portfolio(new));
    let mut reserved_diff = BTreeMap::new();
    for key in old.keys().chain(now.keys()) {
        let (a, b) = (
            old.get(key).copied().unwrap_or(0.0),
            now.get(key).copied().unwrap_or(0.0),
        );
        if (a - b).abs() > 1e-6 {
            reserved_diff.insert(key.clone(), (a, b));
        }
    }
    if !reserved_diff.is_empty() {
        reasons.push(format!(
            "reserved portfolio changed in {} entr{}",
            reserved_diff.len(),
            if reserved_diff.len() == 1 { "y" } else { "ies" }
        ));
    }
    if let (Some(a), Some(b)) = (cost(previous), cost(new))
        && (b - a).abs() > cost_change_pct / 100.0 * a.abs()
    {
        reasons.push(format!(
            "cost changed from {a:.2} to {b:.2} (more than {cost_change_pct}%)"
        ));
    }
    PlanChange {
        changed: !reasons.is_empty(),
        reasons,
        reserved_diff,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn result(status: &str, objective: Option<f64>, reserved: &[(&str, &str, f64)]) -> Value {
        json!({
            "status": status,
            "objective": objective,
            "reserved": reserved.iter().map(|(o, j, c)| json!({"offer": o, "option": j, "count": c})).collect::<Vec<_>>(),
            "hourly": {"spot_instances": {"a": [1, 2]}}
        })
    }

    #[test]
    fn status_portfolio_and_cost_beyond_the_threshold_are_changes() {
        let base = result("optimal", Some(1000.0), &[("a", "1y", 2.0)]);
        assert!(!compare(&base, &base, 5.0).changed);
        // Hourly differences alone never alert.
        let mut hourly = base.clone();
        hourly["hourly"]["spot_instances"]["a"] = json!([3, 4]);
        assert!(!compare(&base, &hourly, 5.0).changed);
        // Within 5% of cost: no change; beyond: change.
        assert!(
            !compare(
                &base,
                &result("optimal", Some(1049.0), &[("a", "1y", 2.0)]),
                5.0
            )
            .changed
        );
        let c = compare(
            &base,
            &result("optimal", Some(1051.0), &[("a", "1y", 2.0)]),
            5.0,
        );
        assert!(c.changed && c.reasons[0].contains("cost"));
        let c = compare(
            &base,
            &result("optimal", Some(1000.0), &[("a", "1y", 3.0)]),
            5.0,
        );
        assert_eq!(c.reserved_diff.get("a/1y"), Some(&(2.0, 3.0)));
        let c = compare(&base, &result("infeasible", None, &[]), 5.0);
        assert!(c.changed && c.reasons[0].contains("status"));
    }

    fn owning(mut doc: Value, owned: &[(&str, &str, f64)], sunk: f64) -> Value {
        doc["owned"] = owned
            .iter()
            .map(|(o, j, c)| json!({"offer": o, "option": j, "count": c}))
            .collect();
        doc["sunk_cost"] = json!(sunk);
        doc
    }

    #[test]
    fn buying_what_was_recommended_is_not_a_change() {
        // P recommended 4 new on top of 6 owned; the user bought them, so N
        // owns 10, recommends nothing new, and the cost moved to sunk cost.
        let p = owning(
            result("optimal", Some(30.0), &[("a2", "1y", 4.0)]),
            &[("a2", "1y", 6.0)],
            45.0,
        );
        let n = owning(
            result("optimal", Some(0.0), &[]),
            &[("a2", "1y", 10.0)],
            75.0,
        );
        let c = compare(&p, &n, 5.0);
        assert!(!c.changed, "{c:?}");
        // Bought only 3: one is still outstanding and N asks for it.
        let n = owning(
            result("optimal", Some(7.5), &[("a2", "1y", 1.0)]),
            &[("a2", "1y", 9.0)],
            67.5,
        );
        assert!(!compare(&p, &n, 5.0).changed);
        // The old reservation expired and was dropped from the list: the
        // renewal N recommends is a change, because someone has to act.
        let n = owning(
            result("optimal", Some(75.0), &[("a2", "1y", 10.0)]),
            &[],
            0.0,
        );
        let c = compare(&p, &n, 5.0);
        assert!(c.changed);
        assert_eq!(c.reserved_diff.get("a2/1y"), Some(&(4.0, 10.0)));
        // Without owned entries it is exactly the v1 rule.
        let v1 = result("optimal", Some(30.0), &[("a2", "1y", 4.0)]);
        assert!(!compare(&v1, &v1, 5.0).changed);
    }
}
