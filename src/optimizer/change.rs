//! The plan-change test (docs/planning-model.md §7): whether a new result differs
//! from the previous one enough to tell someone. Hourly spot and on-demand
//! counts never count on their own; autoscalers handle those.

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
    result["reserved"]
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
                .collect()
        })
        .unwrap_or_default()
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
    let (old, now) = (portfolio(previous), portfolio(new));
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
    if let (Some(a), Some(b)) = (previous["objective"].as_f64(), new["objective"].as_f64())
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
}
