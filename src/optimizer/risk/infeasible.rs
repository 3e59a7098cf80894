//! Why a version 3 problem has no plan (§11.10): the checks run before
//! solving, and the one run when the extensive form proves infeasible.

use serde_json::{Value, json};

use super::super::model::Stochastic;
use super::super::setup::Setup;
use super::super::{OptimizeError, SolveOptions, checks};
use super::extensive::Part;

/// Check 1 (§11.10): classes with demand in some scenario and no offer.
pub(super) fn no_eligible(setup: &Setup<'_>, st: &Stochastic) -> Option<Value> {
    let ids = |c: usize| -> Vec<&str> {
        st.scenarios
            .iter()
            .filter(|s| s.demand[c].iter().any(|d| *d > 0.0))
            .map(|s| s.id.as_str())
            .collect()
    };
    let empty: Vec<usize> = (0..setup.classes.len())
        .filter(|c| setup.classes[*c].eligible == 0 && !ids(*c).is_empty())
        .collect();
    let first = *empty.first()?;
    let name = |c: usize| setup.problem.classes[c].id.as_str();
    Some(json!({
        "kind": "no_eligible_offers",
        "class": name(first),
        "classes": empty.iter().map(|c| name(*c)).collect::<Vec<_>>(),
        "scenarios": ids(first),
    }))
}

/// A per-scenario check's report (§11.10): the first short scenario's own
/// report with its id, and `scenarios` listing what `entries` gives for
/// every short scenario, in input order. `short` is per group.
fn per_scenario(
    short: &[Option<Value>],
    group_of: &[usize],
    st: &Stochastic,
    entries: impl Fn(&str, &Value) -> Vec<Value>,
) -> Option<Value> {
    let mut first: Option<Value> = None;
    let mut all = Vec::new();
    for (s, g) in st.scenarios.iter().zip(group_of) {
        let Some(why) = &short[*g] else {
            continue;
        };
        if first.is_none() {
            let mut doc = why.clone();
            doc["scenario"] = json!(s.id);
            first = Some(doc);
        }
        all.extend(entries(&s.id, why));
    }
    let mut doc = first?;
    doc["scenarios"] = json!(all);
    Some(doc)
}

/// Check 2 (§11.10): the version 2 capacity check in every scenario.
pub(super) fn capacity(setups: &[Setup<'_>], group_of: &[usize], st: &Stochastic) -> Option<Value> {
    let short: Vec<Option<Value>> = setups.iter().map(checks::capacity).collect();
    let mut doc = per_scenario(&short, group_of, st, |id, why| {
        why["classes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                json!({"scenario": id, "class": c["class"], "hours": c["hours"],
                       "max_shortfall": c["max_shortfall"]})
            })
            .collect()
    })?;
    doc.as_object_mut()?.remove("classes");
    Some(doc)
}

/// Check 3 (§11.10), once the extensive form has no plan: the scenarios
/// whose own continuous problem is infeasible; `None` means integrality.
pub(super) fn shared_capacity(
    parts: &[Part<'_>],
    group_of: &[usize],
    st: &Stochastic,
    opts: &SolveOptions,
) -> Result<Option<Value>, OptimizeError> {
    let short: Vec<Option<Value>> = parts
        .iter()
        .map(|p| checks::shared_capacity(&p.setup, opts))
        .collect::<Result<_, _>>()?;
    Ok(per_scenario(&short, group_of, st, |id, why| {
        vec![json!({"scenario": id, "hours": why["hours"]})]
    }))
}
