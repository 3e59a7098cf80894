//! The planning problem (docs/planning-model.md §2, §4.1) and its validation. Input
//! is checked field by field so every error names the field it is about.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// Hours a problem may span: a (leap) year. Every variable is per hour, so
/// this bounds the model a request can make the solver build.
pub const MAX_HORIZON_HOURS: usize = 8784;

/// Offers a problem may hold.
pub const MAX_OFFERS: usize = 2000;

/// GPUs one hour may ask for; more is a typo, not a fleet.
pub const MAX_DEMAND_PER_HOUR: f64 = 1_000_000.0;

/// A problem that passed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub name: Option<String>,
    /// GPUs needed per hour; `T = demand.len() >= 1`.
    pub demand: Vec<f64>,
    pub offers: Vec<Offer>,
    pub policy: Policy,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub id: String,
    pub cloud: String,
    pub region: String,
    pub instance_type: String,
    pub gpu_model: String,
    pub gpu_memory_gib: Option<f64>,
    pub gpus_per_instance: u32,
    pub on_demand_price: Option<f64>,
    pub spot_price: Option<f64>,
    pub spot_interruption_rate: f64,
    pub spot_pool: String,
    pub max_spot_instances: Option<f64>,
    pub max_on_demand_instances: Option<f64>,
    pub max_reserved_instances: Option<f64>,
    pub reserved: Vec<ReservedOption>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReservedOption {
    pub id: String,
    pub term_hours: f64,
    pub hourly_price: f64,
    pub upfront: f64,
}

impl ReservedOption {
    /// `r_kj = hourly_price + upfront / term_hours`.
    #[must_use]
    pub fn effective_hourly(&self) -> f64 {
        self.hourly_price + self.upfront / self.term_hours
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub max_spot_share: Option<f64>,
    pub max_pool_share: Option<f64>,
    pub spot_overhead_factor: f64,
    pub integer_reserved: bool,
    pub integer_hourly: bool,
    pub budget: Option<f64>,
    pub allowed_clouds: Option<Vec<String>>,
    pub allowed_regions: Option<Vec<String>>,
    pub gpu_models: Option<Vec<String>>,
    pub min_gpu_memory_gib: Option<f64>,
    pub alert_cost_change_pct: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_spot_share: None,
            max_pool_share: None,
            spot_overhead_factor: 0.0,
            integer_reserved: true,
            integer_hourly: false,
            budget: None,
            allowed_clouds: None,
            allowed_regions: None,
            gpu_models: None,
            min_gpu_memory_gib: None,
            alert_cost_change_pct: 5.0,
        }
    }
}

impl Offer {
    /// Spot yield `γ_k = (1 − ρ_k) / (1 + h)`.
    #[must_use]
    pub fn spot_yield(&self, overhead: f64) -> f64 {
        (1.0 - self.spot_interruption_rate) / (1.0 + overhead)
    }
}

/// Why a problem was refused, naming the field (`offers[2].gpus_per_instance`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ValidationError {
    pub path: String,
    pub message: String,
}

fn err<T>(path: impl Into<String>, message: impl Into<String>) -> Result<T, ValidationError> {
    Err(ValidationError {
        path: path.into(),
        message: message.into(),
    })
}

const POLICY_KEYS: &[&str] = &[
    "max_spot_share",
    "max_pool_share",
    "spot_overhead_factor",
    "integer_reserved",
    "integer_hourly",
    "budget",
    "allowed_clouds",
    "allowed_regions",
    "gpu_models",
    "min_gpu_memory_gib",
    "alert_cost_change_pct",
];

impl Problem {
    /// The problem as a planning-model JSON document (`--write-problem`, saved plans).
    #[must_use]
    pub fn to_json(&self) -> Value {
        let p = self;
        let offers: Vec<serde_json::Value> = p
            .offers
            .iter()
            .map(|o| {
                serde_json::json!({
                    "id": o.id, "cloud": o.cloud, "region": o.region, "instance_type": o.instance_type,
                    "gpu_model": o.gpu_model, "gpu_memory_gib": o.gpu_memory_gib, "gpus_per_instance": o.gpus_per_instance,
                    "on_demand_price": o.on_demand_price, "spot_price": o.spot_price,
                    "spot_interruption_rate": o.spot_interruption_rate, "spot_pool": o.spot_pool,
                    "max_spot_instances": o.max_spot_instances, "max_on_demand_instances": o.max_on_demand_instances,
                    "max_reserved_instances": o.max_reserved_instances,
                    "reserved": o.reserved.iter().map(|r| serde_json::json!({"id": r.id, "term_hours": r.term_hours,
                        "hourly_price": r.hourly_price, "upfront": r.upfront})).collect::<Vec<_>>(),
                })
            })
            .collect();
        let pol = &p.policy;
        serde_json::json!({
            "schema_version": 1, "name": p.name, "demand": p.demand, "offers": offers,
            "policy": {"max_spot_share": pol.max_spot_share, "max_pool_share": pol.max_pool_share,
                       "spot_overhead_factor": pol.spot_overhead_factor, "integer_reserved": pol.integer_reserved,
                       "integer_hourly": pol.integer_hourly, "budget": pol.budget,
                       "allowed_clouds": pol.allowed_clouds, "allowed_regions": pol.allowed_regions,
                       "gpu_models": pol.gpu_models,
                       "min_gpu_memory_gib": pol.min_gpu_memory_gib, "alert_cost_change_pct": pol.alert_cost_change_pct}
        })
    }

    /// Validates a problem document (docs/planning-model.md §4.1). Unknown top-level
    /// and offer keys are ignored (they carry notes); unknown policy keys are
    /// errors, so a typo cannot silently disable a policy.
    ///
    /// # Errors
    /// The first violation, naming its field.
    pub fn from_json(doc: &Value) -> Result<Self, ValidationError> {
        let Some(top) = doc.as_object() else {
            return err("(document)", "must be a JSON object");
        };
        match top.get("schema_version") {
            None | Some(Value::Null) => {}
            Some(v) if v.as_u64() == Some(1) => {}
            Some(v) => return err("schema_version", format!("must be 1, found {v}")),
        }
        let name = match top.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => return err("name", format!("must be a string, found {v}")),
        };
        let demand = demand(top.get("demand"))?;
        let offers = match top.get("offers") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| offer(&format!("offers[{i}]"), v))
                .collect::<Result<Vec<_>, _>>()?,
            None => return err("offers", "is required (a list of offers)"),
            Some(v) => return err("offers", format!("must be a list, found {v}")),
        };
        let mut ids = HashSet::new();
        for (i, o) in offers.iter().enumerate() {
            if !ids.insert(o.id.as_str()) {
                return err(
                    format!("offers[{i}].id"),
                    format!("`{}` is used by an earlier offer", o.id),
                );
            }
        }
        let policy = match top.get("policy") {
            None | Some(Value::Null) => Policy::default(),
            Some(Value::Object(p)) => policy(p)?,
            Some(v) => return err("policy", format!("must be an object, found {v}")),
        };
        let problem = Self {
            name,
            demand,
            offers,
            policy,
        };
        problem.check_size()?;
        Ok(problem)
    }

    /// Refuses a problem larger than the solver is allowed to build: more than
    /// [`MAX_HORIZON_HOURS`] hours or [`MAX_OFFERS`] offers. Problems built from
    /// the catalog are checked with this too.
    ///
    /// # Errors
    /// Names `demand` or `offers` and the allowed range.
    pub fn check_size(&self) -> Result<(), ValidationError> {
        let hours = self.demand.len();
        if hours > MAX_HORIZON_HOURS {
            return err(
                "demand",
                format!(
                    "has {hours} hours; a horizon of 1 to {MAX_HORIZON_HOURS} hours is allowed"
                ),
            );
        }
        let offers = self.offers.len();
        if offers > MAX_OFFERS {
            return err(
                "offers",
                format!(
                    "has {offers} offers; at most {MAX_OFFERS} are allowed (narrow the GPU, cloud or region filters)"
                ),
            );
        }
        Ok(())
    }
}

fn demand(v: Option<&Value>) -> Result<Vec<f64>, ValidationError> {
    let Some(Value::Array(items)) = v else {
        return err("demand", "must be a non-empty list of GPUs per hour");
    };
    if items.is_empty() {
        return err("demand", "must not be empty");
    }
    items
        .iter()
        .enumerate()
        .map(|(t, d)| match d.as_f64() {
            Some(x) if (0.0..=MAX_DEMAND_PER_HOUR).contains(&x) => Ok(x),
            _ => err(
                format!("demand[{t}]"),
                format!("must be a number between 0 and {MAX_DEMAND_PER_HOUR}, found {d}"),
            ),
        })
        .collect()
}

fn number(path: &str, v: &Value) -> Result<f64, ValidationError> {
    match v.as_f64() {
        Some(x) if x.is_finite() => Ok(x),
        _ => err(path, format!("must be a number, found {v}")),
    }
}

/// An optional number `>= 0` (null or absent is `None`).
fn non_negative(
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<f64>, ValidationError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let x = number(&format!("{path}.{key}"), v)?;
            if x < 0.0 {
                return err(format!("{path}.{key}"), format!("must be >= 0, found {x}"));
            }
            Ok(Some(x))
        }
    }
}

fn share(obj: &Map<String, Value>, path: &str, key: &str) -> Result<Option<f64>, ValidationError> {
    let v = non_negative(obj, path, key)?;
    if v.is_some_and(|x| x > 1.0) {
        return err(format!("{path}.{key}"), "must be between 0 and 1");
    }
    Ok(v)
}

fn text(obj: &Map<String, Value>, path: &str, key: &str) -> Result<String, ValidationError> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(v) => err(
            format!("{path}.{key}"),
            format!("must be a non-empty string, found {v}"),
        ),
        None => err(format!("{path}.{key}"), "is required"),
    }
}

fn offer(path: &str, v: &Value) -> Result<Offer, ValidationError> {
    let Some(o) = v.as_object() else {
        return err(path, "must be an object");
    };
    let id = text(o, path, "id")?;
    let cloud = text(o, path, "cloud")?;
    let region = text(o, path, "region")?;
    let instance_type = text(o, path, "instance_type")?;
    let gpu_model = text(o, path, "gpu_model")?;
    let gpus_per_instance = match o.get("gpus_per_instance") {
        Some(v) if !v.is_boolean() => match v.as_u64() {
            Some(n) if n >= 1 && n <= u64::from(u32::MAX) => n as u32,
            _ => {
                return err(
                    format!("{path}.gpus_per_instance"),
                    format!("must be an integer >= 1, found {v}"),
                );
            }
        },
        Some(v) => {
            return err(
                format!("{path}.gpus_per_instance"),
                format!("must be an integer >= 1, found {v}"),
            );
        }
        None => return err(format!("{path}.gpus_per_instance"), "is required"),
    };
    let gpu_memory_gib = match o.get("gpu_memory_gib") {
        None | Some(Value::Null) => None,
        Some(v) => Some(number(&format!("{path}.gpu_memory_gib"), v)?),
    };
    let rate = non_negative(o, path, "spot_interruption_rate")?.unwrap_or(0.0);
    if rate > 1.0 {
        return err(
            format!("{path}.spot_interruption_rate"),
            "must be between 0 and 1",
        );
    }
    let spot_pool = match o.get("spot_pool") {
        None | Some(Value::Null) => format!("{cloud}/{region}/{instance_type}"),
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(v) => {
            return err(
                format!("{path}.spot_pool"),
                format!("must be a non-empty string, found {v}"),
            );
        }
    };
    let reserved = match o.get("reserved") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            let mut ids = HashSet::new();
            for (j, r) in items.iter().enumerate() {
                let rpath = format!("{path}.reserved[{j}]");
                let Some(r) = r.as_object() else {
                    return err(rpath, "must be an object");
                };
                let rid = text(r, &rpath, "id")?;
                if !ids.insert(rid.clone()) {
                    return err(
                        format!("{rpath}.id"),
                        format!("`{rid}` is used by an earlier option of this offer"),
                    );
                }
                let term_hours = match r.get("term_hours") {
                    Some(v) => number(&format!("{rpath}.term_hours"), v)?,
                    None => return err(format!("{rpath}.term_hours"), "is required"),
                };
                if term_hours <= 0.0 {
                    return err(
                        format!("{rpath}.term_hours"),
                        format!("must be > 0, found {term_hours}"),
                    );
                }
                out.push(ReservedOption {
                    id: rid,
                    term_hours,
                    hourly_price: non_negative(r, &rpath, "hourly_price")?.unwrap_or(0.0),
                    upfront: non_negative(r, &rpath, "upfront")?.unwrap_or(0.0),
                });
            }
            out
        }
        Some(v) => {
            return err(
                format!("{path}.reserved"),
                format!("must be a list, found {v}"),
            );
        }
    };
    Ok(Offer {
        id,
        cloud,
        region,
        instance_type,
        gpu_model,
        gpu_memory_gib,
        gpus_per_instance,
        on_demand_price: non_negative(o, path, "on_demand_price")?,
        spot_price: non_negative(o, path, "spot_price")?,
        spot_interruption_rate: rate,
        spot_pool,
        max_spot_instances: non_negative(o, path, "max_spot_instances")?,
        max_on_demand_instances: non_negative(o, path, "max_on_demand_instances")?,
        max_reserved_instances: non_negative(o, path, "max_reserved_instances")?,
        reserved,
    })
}

fn strings(p: &Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, ValidationError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                _ => err(
                    format!("policy.{key}[{i}]"),
                    format!("must be a string, found {v}"),
                ),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(v) => err(
            format!("policy.{key}"),
            format!("must be a list of strings or null, found {v}"),
        ),
    }
}

fn flag(p: &Map<String, Value>, key: &str, default: bool) -> Result<bool, ValidationError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => err(
            format!("policy.{key}"),
            format!("must be true or false, found {v}"),
        ),
    }
}

fn policy(p: &Map<String, Value>) -> Result<Policy, ValidationError> {
    if let Some(unknown) = p.keys().find(|k| !POLICY_KEYS.contains(&k.as_str())) {
        return err(
            format!("policy.{unknown}"),
            format!("unknown policy key; known keys: {}", POLICY_KEYS.join(", ")),
        );
    }
    let defaults = Policy::default();
    Ok(Policy {
        max_spot_share: share(p, "policy", "max_spot_share")?,
        max_pool_share: share(p, "policy", "max_pool_share")?,
        spot_overhead_factor: non_negative(p, "policy", "spot_overhead_factor")?.unwrap_or(0.0),
        integer_reserved: flag(p, "integer_reserved", defaults.integer_reserved)?,
        integer_hourly: flag(p, "integer_hourly", defaults.integer_hourly)?,
        budget: non_negative(p, "policy", "budget")?,
        allowed_clouds: strings(p, "allowed_clouds")?,
        allowed_regions: strings(p, "allowed_regions")?,
        gpu_models: strings(p, "gpu_models")?,
        min_gpu_memory_gib: match p.get("min_gpu_memory_gib") {
            None | Some(Value::Null) => None,
            Some(v) => Some(number("policy.min_gpu_memory_gib", v)?),
        },
        alert_cost_change_pct: non_negative(p, "policy", "alert_cost_change_pct")?
            .unwrap_or(defaults.alert_cost_change_pct),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    use proptest::prelude::*;

    /// Any JSON value, nested a few levels.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|x| json!(x)),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("demand".to_owned()),
                        Just("offers".to_owned()),
                        Just("policy".to_owned()),
                        Just("id".to_owned()),
                        Just("gpus_per_instance".to_owned()),
                        Just("reserved".to_owned()),
                        Just("term_hours".to_owned()),
                        Just("max_spot_share".to_owned()),
                        "[a-z_]{1,8}",
                    ],
                    inner,
                    0..6,
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A valid problem with random offers, prices, caps and policy filters.
    fn any_problem() -> impl Strategy<Value = Problem> {
        let names = || prop::sample::select(vec!["aws", "azure", "gcp"]);
        let offer = (
            names(),
            prop::sample::select(vec!["r1", "r2"]),
            prop::sample::select(vec!["H100-80GB", "L4"]),
            1u32..=8,
            prop::option::of(0.5f64..50.0),
            prop::option::of((0.1f64..20.0, 0.0f64..1.0)),
            prop::option::of(0.0f64..10.0),
            prop::option::of((0.1f64..30.0, 0.0f64..5000.0)),
        )
            .prop_map(
                |(cloud, region, gpu, gpus, od, spot, cap, reserved)| Offer {
                    id: String::new(),
                    cloud: cloud.to_owned(),
                    region: region.to_owned(),
                    instance_type: format!("{gpu}x{gpus}"),
                    gpu_model: gpu.to_owned(),
                    gpu_memory_gib: Some(if gpu == "L4" { 24.0 } else { 80.0 }),
                    gpus_per_instance: gpus,
                    on_demand_price: od.or(Some(60.0)),
                    spot_price: spot.map(|s| s.0),
                    spot_interruption_rate: spot.map_or(0.0, |s| s.1),
                    spot_pool: format!("{cloud}/{region}"),
                    max_spot_instances: cap,
                    max_on_demand_instances: None,
                    max_reserved_instances: cap,
                    reserved: reserved
                        .map(|(h, up)| ReservedOption {
                            id: "1y".to_owned(),
                            term_hours: 8760.0,
                            hourly_price: h,
                            upfront: up,
                        })
                        .into_iter()
                        .collect(),
                },
            );
        let list = |items: Vec<&'static str>| {
            prop::option::of(prop::sample::subsequence(items, 0..=2))
                .prop_map(|l| l.map(|v| v.into_iter().map(str::to_owned).collect()))
        };
        (
            prop::collection::vec(offer, 1..5),
            prop::collection::vec(0.0f64..40.0, 1..6),
            prop::option::of(0.0f64..=1.0),
            list(vec!["aws", "azure", "gcp"]),
            list(vec!["r1", "r2"]),
            list(vec!["H100-80GB", "L4"]),
            prop::option::of(0.0f64..100.0),
        )
            .prop_map(
                |(mut offers, demand, share, clouds, regions, gpus, memory)| {
                    for (i, o) in offers.iter_mut().enumerate() {
                        o.id = format!("o{i}");
                    }
                    Problem {
                        name: Some("round trip".to_owned()),
                        demand,
                        offers,
                        policy: Policy {
                            max_spot_share: share,
                            allowed_clouds: clouds,
                            allowed_regions: regions,
                            gpu_models: gpus,
                            min_gpu_memory_gib: memory,
                            ..Policy::default()
                        },
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A saved problem is the problem: its document reads back equal, and
        /// solves to the same result.
        #[test]
        fn a_problem_survives_its_own_document(p in any_problem()) {
            let back = Problem::from_json(&p.to_json()).unwrap();
            prop_assert_eq!(&back, &p);
            let opts = crate::optimizer::SolveOptions::default();
            let solve = |q: &Problem| {
                crate::optimizer::solve(q, &opts)
                    .map(|r| {
                        let mut doc = serde_json::to_value(r).unwrap();
                        // Wall-clock timings differ from run to run.
                        doc.as_object_mut().unwrap().remove("timings");
                        doc
                    })
                    .map_err(|e| e.to_string())
            };
            prop_assert_eq!(solve(&back), solve(&p));
        }
    }

    proptest! {
        /// `POST /v1/plans` and `--problem` bodies: a problem or an error
        /// naming its field, never a panic.
        #[test]
        fn any_document_is_a_problem_or_an_error_naming_its_field(
            doc in any_json(),
            field in prop::sample::select(vec!["demand", "offers", "policy", "schema_version", "name"]),
            value in any_json(),
        ) {
            let mut mutated = base();
            mutated[field] = value;
            for d in [doc, mutated] {
                if let Err(e) = Problem::from_json(&d) {
                    prop_assert!(!e.path.is_empty() && !e.message.is_empty(), "{e}");
                }
            }
        }
    }

    fn base() -> Value {
        json!({
            "schema_version": 1,
            "demand": [16, 16, 16],
            "offers": [{"id": "a", "cloud": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge",
                        "gpu_model": "H100-80GB", "gpu_memory_gib": 80, "gpus_per_instance": 8,
                        "on_demand_price": 80.0, "note": "ignored",
                        "reserved": [{"id": "1y", "term_hours": 8760, "hourly_price": 25.0, "upfront": 219000.0}]}],
            "extra": "ignored"
        })
    }

    fn error_path(mutate: impl FnOnce(&mut Value)) -> String {
        let mut doc = base();
        mutate(&mut doc);
        Problem::from_json(&doc).unwrap_err().path
    }

    #[test]
    fn a_valid_problem_parses_with_defaults() {
        let p = Problem::from_json(&base()).unwrap();
        assert_eq!(p.offers[0].spot_pool, "aws/us-east-1/p5.48xlarge");
        assert!((p.offers[0].reserved[0].effective_hourly() - 50.0).abs() < 1e-12);
        assert_eq!(p.policy, Policy::default());
    }

    #[test]
    fn every_rule_of_the_schema_names_its_field() {
        assert_eq!(
            error_path(|d| d["schema_version"] = json!(2)),
            "schema_version"
        );
        assert_eq!(error_path(|d| d["demand"] = json!([])), "demand");
        assert_eq!(error_path(|d| d["demand"][1] = json!(-1)), "demand[1]");
        assert_eq!(error_path(|d| d["demand"][2] = json!("x")), "demand[2]");
        assert_eq!(error_path(|d| d["demand"][0] = json!(1e300)), "demand[0]");
        assert_eq!(
            error_path(|d| d["demand"] = json!(vec![1; MAX_HORIZON_HOURS + 1])),
            "demand"
        );
        assert_eq!(
            error_path(|d| {
                let o = d["offers"][0].clone();
                d["offers"] = (0..=MAX_OFFERS)
                    .map(|i| {
                        let mut o = o.clone();
                        o["id"] = json!(format!("o{i}"));
                        o
                    })
                    .collect();
            }),
            "offers"
        );
        assert_eq!(
            error_path(|d| d["offers"][0]["gpus_per_instance"] = json!(true)),
            "offers[0].gpus_per_instance"
        );
        assert_eq!(
            error_path(|d| d["offers"][0]["gpus_per_instance"] = json!(1.5)),
            "offers[0].gpus_per_instance"
        );
        assert_eq!(
            error_path(|d| d["offers"][0]["gpus_per_instance"] = json!(0)),
            "offers[0].gpus_per_instance"
        );
        assert_eq!(
            error_path(|d| d["offers"][0]["cloud"] = json!("")),
            "offers[0].cloud"
        );
        assert_eq!(
            error_path(|d| d["offers"][0]["on_demand_price"] = json!(-1)),
            "offers[0].on_demand_price"
        );
        assert_eq!(
            error_path(|d| d["offers"][0]["spot_interruption_rate"] = json!(1.5)),
            "offers[0].spot_interruption_rate"
        );
        assert_eq!(
            error_path(|d| d["offers"][0]["max_spot_instances"] = json!(-2)),
            "offers[0].max_spot_instances"
        );
        assert_eq!(
            error_path(|d| d["offers"][0]["reserved"][0]["term_hours"] = json!(0)),
            "offers[0].reserved[0].term_hours"
        );
        assert_eq!(
            error_path(|d| {
                let r = d["offers"][0]["reserved"][0].clone();
                d["offers"][0]["reserved"].as_array_mut().unwrap().push(r);
            }),
            "offers[0].reserved[1].id"
        );
        assert_eq!(
            error_path(|d| {
                let o = d["offers"][0].clone();
                d["offers"].as_array_mut().unwrap().push(o);
            }),
            "offers[1].id"
        );
        assert_eq!(
            error_path(|d| d["policy"] = json!({"max_spot_shar": 0.5})),
            "policy.max_spot_shar"
        );
        assert_eq!(
            error_path(|d| d["policy"] = json!({"max_pool_share": 1.5})),
            "policy.max_pool_share"
        );
        assert_eq!(
            error_path(|d| d["policy"] = json!({"budget": -1})),
            "policy.budget"
        );
        assert_eq!(
            error_path(|d| d["policy"] = json!({"integer_hourly": 1})),
            "policy.integer_hourly"
        );
    }
}
