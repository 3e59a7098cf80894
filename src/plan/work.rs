//! A class's `perf` named as a workload (`perf =
//! "mlperf-inference-v6.1/llama2-70b-99.9/offline"`, or `spec:bf16`) instead
//! of a map: the planner turns it into the map of factors the model takes,
//! one per GPU model the workload measures, and records in `perf_basis`
//! which row each factor came from.

use serde_json::{Map, Value, json};

use crate::facts::{self, DEFAULT_REFERENCE};
use crate::optimizer::ValidationError;

fn invalid(path: String, message: impl Into<String>) -> ValidationError {
    ValidationError {
        path,
        message: message.into(),
    }
}

/// Resolves one class document in place. A class with a map (or none) is
/// left as it is.
///
/// # Errors
/// An unknown workload, a reference without a figure in it, or
/// `perf_reference` without a workload, named under `path`.
pub fn resolve_class(path: &str, class: &mut Map<String, Value>) -> Result<(), ValidationError> {
    let reference = match class.remove("perf_reference") {
        None | Some(Value::Null) => None,
        Some(Value::String(r)) => Some(r),
        Some(v) => {
            return Err(invalid(
                format!("{path}.perf_reference"),
                format!("must be a GPU model like {DEFAULT_REFERENCE}, found {v}"),
            ));
        }
    };
    let Some(Value::String(workload)) = class.get("perf").cloned() else {
        return match reference {
            Some(_) => Err(invalid(
                format!("{path}.perf_reference"),
                "goes with perf naming a workload",
            )),
            None => Ok(()),
        };
    };
    let facts = facts::builtin().map_err(|e| invalid(format!("{path}.perf"), e.to_string()))?;
    let reference = reference.unwrap_or_else(|| DEFAULT_REFERENCE.to_owned());
    let work = facts
        .work(&workload, &reference)
        .map_err(|e| invalid(format!("{path}.perf"), e))?;
    // Every model and form the workload has a figure for.
    let candidates: Vec<(String, Option<String>)> = if work.is_estimate() {
        facts
            .gpus
            .iter()
            .map(|g| (g.gpu_model.clone(), g.gpu_form_factor.clone()))
            .collect()
    } else {
        facts
            .perf
            .iter()
            .filter(|r| r.workload == workload)
            .map(|r| (r.gpu_model.clone(), r.gpu_form_factor.clone()))
            .collect()
    };
    let mut perf = Map::new();
    let mut factors = Map::new();
    for (model, form) in candidates {
        let key = match &form {
            Some(f) => format!("{model}/{f}"),
            None => model.clone(),
        };
        if perf.contains_key(&key) {
            continue;
        }
        let Some(f) = work.factor(&model, form.as_deref()) else {
            continue;
        };
        perf.insert(key.clone(), json!(f.factor));
        factors.insert(key, json!({"factor": f.factor, "row": f.row}));
    }
    if perf.is_empty() {
        return Err(invalid(
            format!("{path}.perf"),
            format!("{workload} gives no factor for any GPU model"),
        ));
    }
    let reference_row = work.reference_row().cloned();
    class.insert("perf".to_owned(), Value::Object(perf));
    class.insert(
        "perf_basis".to_owned(),
        json!({
            "workload": workload,
            "reference": work.reference(),
            "estimate": work.is_estimate(),
            "reference_row": reference_row,
            "factors": factors,
        }),
    );
    Ok(())
}

/// Resolves the classes of a problem document (`classes`, a list) in place.
///
/// # Errors
/// As [`resolve_class`], naming the class by its index.
pub fn resolve_problem(doc: &mut Value) -> Result<(), ValidationError> {
    if let Some(Value::Array(classes)) = doc.get_mut("classes") {
        for (i, class) in classes.iter_mut().enumerate() {
            if let Value::Object(c) = class {
                resolve_class(&format!("classes[{i}]"), c)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: &str = "mlperf-inference-v6.1/llama2-70b-99.9/offline";

    fn class(doc: Value) -> Result<Map<String, Value>, ValidationError> {
        let Value::Object(mut c) = doc else {
            unreachable!()
        };
        resolve_class("classes.infer", &mut c)?;
        Ok(c)
    }

    #[test]
    fn a_named_workload_becomes_a_map_of_factors_with_the_rows_behind_them() {
        let c = class(json!({"perf": W, "perf_reference": "B300"})).unwrap();
        let facts = facts::builtin().unwrap();
        let best = |model: &str| {
            facts
                .perf
                .iter()
                .filter(|r| r.workload == W && r.gpu_model == model)
                .map(|r| r.value)
                .fold(0.0, f64::max)
        };
        let perf = c["perf"].as_object().unwrap();
        assert_eq!(perf["B300"], 1.0);
        let b200 = perf["B200"].as_f64().unwrap();
        assert!((b200 - best("B200") / best("B300")).abs() < 1e-12);
        let basis = &c["perf_basis"];
        assert_eq!(
            (basis["workload"].as_str(), basis["reference"].as_str()),
            (Some(W), Some("B300"))
        );
        assert_eq!(basis["factors"]["B200"]["row"]["submitter"], "CoreWeave");
        assert_eq!(basis["reference_row"]["value"].as_f64(), Some(best("B300")));
        assert!(!c.contains_key("perf_reference"));
        // The model takes it as any perf map.
        let mut doc = c.clone();
        doc.insert("id".into(), json!("infer"));
        doc.insert("demand".into(), json!([1.0]));
        let parsed =
            crate::optimizer::DemandClass::from_json("classes.infer", &Value::Object(doc)).unwrap();
        assert_eq!(parsed.perf.unwrap()["B300"], 1.0);
        assert!(parsed.perf_basis.is_some());
    }

    #[test]
    fn a_map_stays_and_a_wrong_workload_or_reference_is_named() {
        let c = class(json!({"perf": {"L4": 0.5}})).unwrap();
        assert_eq!(c["perf"], json!({"L4": 0.5}));
        assert!(!c.contains_key("perf_basis"));
        let e = class(json!({"perf": "mlperf/none/offline"})).unwrap_err();
        assert_eq!(e.path, "classes.infer.perf");
        assert!(e.message.contains(W), "{}", e.message);
        // The default reference (an H100) has no row in this round.
        let e = class(json!({"perf": W})).unwrap_err();
        assert!(
            e.message.contains("has no row") && e.message.contains("B300"),
            "{}",
            e.message
        );
        let e = class(json!({"perf": {"L4": 1}, "perf_reference": "B300"})).unwrap_err();
        assert_eq!(e.path, "classes.infer.perf_reference");
    }

    #[test]
    fn problem_documents_resolve_each_class_by_its_index() {
        let mut doc = json!({"classes": [{"id": "a", "demand": [1]}, {"id": "b", "demand": [1], "perf": "spec:bf16x"}]});
        let e = resolve_problem(&mut doc).unwrap_err();
        assert_eq!(e.path, "classes[1].perf");
    }
}
