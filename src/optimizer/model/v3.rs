//! The parts of a schema version 3 document (docs/planning-model.md §11.11):
//! scenarios, or the generator that makes them, and the risk objective.
//! Every object refuses unknown keys: a misspelt `p_down` or `lambda` would
//! otherwise present a risk-neutral plan as a risk-aware one.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::{Map, Value};

use super::generator::Ranges;
use super::generator_doc::generator;
use super::json::{demand, number};
use super::v2::known_keys;
use super::{DemandClass, Offer, ValidationError, err};

/// Scenarios a problem may hold (§11.11).
pub const MAX_SCENARIOS: usize = 1000;

/// Scenario-hours (`N·T`) a problem may hold: 1000 × 168 or 200 × 720.
pub const MAX_SCENARIO_HOURS: usize = 200_000;

/// The λ values solved when `risk.frontier` is not given.
const DEFAULT_FRONTIER: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];

/// Top-level keys only a version 3 document may have.
pub(super) const V3_KEYS: [&str; 3] = ["scenarios", "scenario_generator", "risk"];

const SCENARIO_KEYS: &[&str] = &[
    "id",
    "probability",
    "demand",
    "classes",
    "spot_available",
    "description",
];

const RISK_KEYS: &[&str] = &["lambda", "beta", "measure", "frontier", "flat_tolerance"];

/// What the risk is measured on (§11.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// `L_ω = C_ω`.
    Cost,
    /// `L_ω = C_ω − B_ω`: savings lost against the scenario's baseline.
    SavingsShortfall,
}

impl Measure {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Measure::Cost => "cost",
            Measure::SavingsShortfall => "savings_shortfall",
        }
    }
}

/// The risk objective `(1−λ)·E[L] + λ·CVaR_β[L]` and its frontier.
#[derive(Debug, Clone, PartialEq)]
pub struct Risk {
    pub lambda: f64,
    pub beta: f64,
    pub measure: Measure,
    /// The λ values solved: the frontier list and `lambda`, ascending, without repeats.
    pub frontier: Vec<f64>,
    pub flat_tolerance: f64,
}

impl Default for Risk {
    fn default() -> Self {
        Self {
            lambda: 0.0,
            beta: 0.95,
            measure: Measure::Cost,
            frontier: DEFAULT_FRONTIER.to_vec(),
            flat_tolerance: 0.01,
        }
    }
}

/// One scenario: its probability, demand per class and hour, and the pools
/// that are unavailable in some hour (`available[pool][t]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub id: String,
    pub probability: f64,
    pub demand: Vec<Vec<f64>>,
    pub available: BTreeMap<String, Vec<bool>>,
}

/// The version 3 part of a problem.
#[derive(Debug, Clone, PartialEq)]
pub struct Stochastic {
    pub scenarios: Vec<Scenario>,
    pub risk: Risk,
    /// The demand ranges, when the generator made demand paths (§11.7.4).
    pub ranges: Option<Ranges>,
    /// The document's `scenarios`, `scenario_generator` and `risk` as given,
    /// so a saved problem keeps its generator rather than its draws.
    pub source: Map<String, Value>,
}

/// Reads the version 3 keys of `top`, for a problem of `classes` and `offers`.
pub(super) fn stochastic(
    top: &Map<String, Value>,
    classes: &[DemandClass],
    offers: &[Offer],
    has_budget: bool,
) -> Result<Stochastic, ValidationError> {
    let hours = classes[0].demand.len();
    let pools: BTreeSet<&str> = offers.iter().map(|o| o.spot_pool.as_str()).collect();
    let base: Vec<Vec<f64>> = classes.iter().map(|c| c.demand.clone()).collect();
    let risk = match top.get("risk") {
        None | Some(Value::Null) => Risk::default(),
        Some(Value::Object(r)) => risk(r)?,
        Some(v) => return err("risk", format!("must be an object, found {v}")),
    };
    if has_budget && risk.measure == Measure::SavingsShortfall {
        return err(
            "policy.budget",
            "cannot be combined with risk.measure \"savings_shortfall\": that objective is not a cost",
        );
    }
    let (scenarios, ranges) = match (top.get("scenarios"), top.get("scenario_generator")) {
        (Some(s), Some(g)) if !s.is_null() && !g.is_null() => {
            return err(
                "scenario_generator",
                "give either `scenarios` or `scenario_generator`, not both",
            );
        }
        (Some(s), _) if !s.is_null() => (explicit(s, classes, &pools)?, None),
        (_, Some(g)) if !g.is_null() => {
            let generator = generator(g, classes, &pools)?;
            let ranges = generator.demand.as_ref().map(|d| {
                let ids: Vec<String> = classes.iter().map(|c| c.id.clone()).collect();
                d.ranges(&ids, &base)
            });
            let n = generator.count;
            let scenarios = generator
                .generate(&base)
                .into_iter()
                .enumerate()
                .map(|(i, g)| Scenario {
                    id: format!("s{i}"),
                    probability: 1.0 / n as f64,
                    demand: g.demand,
                    available: g.available,
                })
                .collect();
            (scenarios, ranges)
        }
        _ => (
            vec![Scenario {
                id: "nominal".to_owned(),
                probability: 1.0,
                demand: base,
                available: BTreeMap::new(),
            }],
            None,
        ),
    };
    if scenarios.len() * hours > MAX_SCENARIO_HOURS {
        return err(
            "scenarios",
            format!(
                "{} scenarios of {hours} hours make {} scenario-hours; at most {MAX_SCENARIO_HOURS} are allowed",
                scenarios.len(),
                scenarios.len() * hours
            ),
        );
    }
    let source = V3_KEYS
        .iter()
        .filter_map(|k| top.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    Ok(Stochastic {
        scenarios,
        risk,
        ranges,
        source,
    })
}

pub(super) fn probability_like(
    path: &str,
    v: Option<&Value>,
    default: f64,
) -> Result<f64, ValidationError> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(v) => {
            let x = number(path, v)?;
            if !(0.0..=1.0).contains(&x) {
                return err(path, format!("must be between 0 and 1, found {x}"));
            }
            Ok(x)
        }
    }
}

fn risk(r: &Map<String, Value>) -> Result<Risk, ValidationError> {
    known_keys(r, "risk", RISK_KEYS)?;
    let defaults = Risk::default();
    let lambda = probability_like("risk.lambda", r.get("lambda"), defaults.lambda)?;
    let beta = probability_like("risk.beta", r.get("beta"), defaults.beta)?;
    if beta >= 1.0 {
        return err(
            "risk.beta",
            "must be below 1 (CVaR at 1 is the worst case alone)",
        );
    }
    let measure = match r.get("measure") {
        None | Some(Value::Null) => Measure::Cost,
        Some(Value::String(s)) if s == "cost" => Measure::Cost,
        Some(Value::String(s)) if s == "savings_shortfall" => Measure::SavingsShortfall,
        Some(v) => {
            return err(
                "risk.measure",
                format!("must be \"cost\" or \"savings_shortfall\", found {v}"),
            );
        }
    };
    let mut frontier = match r.get("frontier") {
        None | Some(Value::Null) => defaults.frontier,
        Some(Value::Array(items)) if (1..=11).contains(&items.len()) => {
            let mut out: Vec<f64> = Vec::with_capacity(items.len());
            for (i, v) in items.iter().enumerate() {
                let path = format!("risk.frontier[{i}]");
                let x = probability_like(&path, Some(v), 0.0)?;
                if out.contains(&x) {
                    return err(path, format!("{x} is listed twice"));
                }
                out.push(x);
            }
            out
        }
        Some(v) => {
            return err(
                "risk.frontier",
                format!("must be a list of 1 to 11 distinct values in [0, 1], found {v}"),
            );
        }
    };
    if !frontier.contains(&lambda) {
        frontier.push(lambda);
    }
    frontier.sort_by(f64::total_cmp);
    let flat_tolerance = match r.get("flat_tolerance") {
        None | Some(Value::Null) => defaults.flat_tolerance,
        Some(v) => {
            let x = number("risk.flat_tolerance", v)?;
            if x < 0.0 {
                return err("risk.flat_tolerance", format!("must be >= 0, found {x}"));
            }
            x
        }
    };
    Ok(Risk {
        lambda,
        beta,
        measure,
        frontier,
        flat_tolerance,
    })
}

pub(super) fn class_index(
    classes: &[DemandClass],
    path: &str,
    id: &str,
) -> Result<usize, ValidationError> {
    classes.iter().position(|c| c.id == id).map_or_else(
        || err(path, format!("`{id}` is not a class of this problem")),
        Ok,
    )
}

pub(super) fn known_pool(
    pools: &BTreeSet<&str>,
    path: &str,
    pool: &str,
) -> Result<(), ValidationError> {
    if pools.contains(pool) {
        Ok(())
    } else {
        err(
            path,
            format!("`{pool}` is not the spot_pool of any offer in this problem"),
        )
    }
}

fn explicit(
    v: &Value,
    classes: &[DemandClass],
    pools: &BTreeSet<&str>,
) -> Result<Vec<Scenario>, ValidationError> {
    let items = match v {
        Value::Array(items) if !items.is_empty() => items,
        _ => return err("scenarios", format!("must be a non-empty list, found {v}")),
    };
    if items.len() > MAX_SCENARIOS {
        return err(
            "scenarios",
            format!(
                "has {} scenarios; at most {MAX_SCENARIOS} are allowed",
                items.len()
            ),
        );
    }
    let hours = classes[0].demand.len();
    let mut out = Vec::with_capacity(items.len());
    let mut ids = HashSet::new();
    let mut given: Vec<Option<f64>> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("scenarios[{i}]");
        let Some(s) = item.as_object() else {
            return err(path, "must be an object");
        };
        known_keys(s, &path, SCENARIO_KEYS)?;
        let id = match s.get("id") {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            Some(v) => {
                return err(
                    format!("{path}.id"),
                    format!("must be a non-empty string, found {v}"),
                );
            }
            None => return err(format!("{path}.id"), "is required"),
        };
        if !ids.insert(id.clone()) {
            return err(
                format!("{path}.id"),
                format!("`{id}` is used by an earlier scenario"),
            );
        }
        given.push(match s.get("probability") {
            None | Some(Value::Null) => None,
            Some(v) => {
                let p = number(&format!("{path}.probability"), v)?;
                if p <= 0.0 {
                    return err(
                        format!("{path}.probability"),
                        format!("must be > 0, found {p}"),
                    );
                }
                Some(p)
            }
        });
        let mut demand_of: Vec<Vec<f64>> = classes.iter().map(|c| c.demand.clone()).collect();
        match (s.get("demand"), s.get("classes")) {
            (Some(_), Some(_)) => {
                return err(
                    format!("{path}.classes"),
                    "give either `demand` or `classes`, not both",
                );
            }
            (Some(d), None) => {
                if classes.len() != 1 {
                    return err(
                        format!("{path}.demand"),
                        "is allowed only with one class; give `classes` {id: demand}",
                    );
                }
                demand_of[0] = hourly(&format!("{path}.demand"), d, hours)?;
            }
            (None, Some(Value::Object(m))) => {
                for (cid, d) in m {
                    let cpath = format!("{path}.classes.{cid}");
                    let c = class_index(classes, &cpath, cid)?;
                    demand_of[c] = hourly(&cpath, d, hours)?;
                }
            }
            (None, Some(v)) => {
                return err(
                    format!("{path}.classes"),
                    format!("must be an object {{class: demand}}, found {v}"),
                );
            }
            (None, None) => {}
        }
        let mut available = BTreeMap::new();
        match s.get("spot_available") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (pool, a) in m {
                    let apath = format!("{path}.spot_available.{pool}");
                    known_pool(pools, &apath, pool)?;
                    let path_of = availability(&apath, a, hours)?;
                    if path_of.iter().any(|up| !up) {
                        available.insert(pool.clone(), path_of);
                    }
                }
            }
            Some(v) => {
                return err(
                    format!("{path}.spot_available"),
                    format!("must be an object {{pool: 0 | 1 | [0 or 1 per hour]}}, found {v}"),
                );
            }
        }
        out.push(Scenario {
            id,
            probability: 0.0,
            demand: demand_of,
            available,
        });
    }
    let n = out.len();
    if given.iter().all(Option::is_none) {
        for s in &mut out {
            s.probability = 1.0 / n as f64;
        }
    } else if let Some(i) = given.iter().position(Option::is_none) {
        return err(
            format!("scenarios[{i}].probability"),
            "is missing; give a probability for every scenario or for none",
        );
    } else {
        let sum: f64 = given.iter().flatten().sum();
        if (sum - 1.0).abs() > 1e-6 {
            return err("scenarios", format!("probabilities sum to {sum}, not 1"));
        }
        for (s, p) in out.iter_mut().zip(given) {
            s.probability = p.unwrap_or(0.0) / sum;
        }
    }
    Ok(out)
}

fn hourly(path: &str, v: &Value, hours: usize) -> Result<Vec<f64>, ValidationError> {
    let d = demand(path, Some(v))?;
    if d.len() != hours {
        return err(
            path,
            format!("has {} hours; the problem's demand has {hours}", d.len()),
        );
    }
    Ok(d)
}

fn bit(path: &str, v: &Value) -> Result<bool, ValidationError> {
    match v.as_u64() {
        Some(0) if !v.is_boolean() => Ok(false),
        Some(1) if !v.is_boolean() => Ok(true),
        _ => err(path, format!("must be 0 or 1, found {v}")),
    }
}

fn availability(path: &str, v: &Value, hours: usize) -> Result<Vec<bool>, ValidationError> {
    match v {
        Value::Array(items) => {
            if items.len() != hours {
                return err(
                    path,
                    format!(
                        "has {} hours; the problem's demand has {hours}",
                        items.len()
                    ),
                );
            }
            items
                .iter()
                .enumerate()
                .map(|(t, a)| bit(&format!("{path}[{t}]"), a))
                .collect()
        }
        _ => Ok(vec![bit(path, v)?; hours]),
    }
}

pub(super) fn whole(
    path: &str,
    v: Option<&Value>,
    min: u64,
    max: u64,
    default: u64,
) -> Result<u64, ValidationError> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (min..=max).contains(&n) && !v.is_boolean() => Ok(n),
            _ => err(
                path,
                format!("must be an integer from {min} to {max}, found {v}"),
            ),
        },
    }
}
