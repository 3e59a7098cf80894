//! The planning problem (docs/planning-model.md §2, §4.1, and §10 for schema
//! version 2) and its validation. Input is checked field by field so every
//! error names the field it is about.

mod generator;
mod v2;
mod v3;

pub use generator::{DemandPaths, Ranges, Residuals, SplitMix64, half_width};
pub use v3::{MAX_SCENARIO_HOURS, MAX_SCENARIOS, Measure, Risk, Scenario, Stochastic};

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

/// Hours a problem may span: a (leap) year. Every variable is per hour, so
/// this bounds the model a request can make the solver build.
pub const MAX_HORIZON_HOURS: usize = 8784;

/// Offers a problem may hold.
pub const MAX_OFFERS: usize = 2000;

/// GPUs one hour may ask for; more is a typo, not a fleet.
pub const MAX_DEMAND_PER_HOUR: f64 = 1_000_000.0;

/// Demand classes a problem may hold; each adds a row per hour.
pub const MAX_CLASSES: usize = 32;

/// Owned commitment entries a problem may hold.
pub const MAX_OWNED: usize = 10_000;

/// A problem that passed validation. Version 1 problems have exactly one
/// class, `default`, with no filters and no perf map, and nothing owned.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// 1, 2 or 3: which rules and which result shape apply.
    pub schema_version: u32,
    pub name: Option<String>,
    /// At least one; every class's demand has the horizon's length.
    pub classes: Vec<DemandClass>,
    pub offers: Vec<Offer>,
    pub owned: Vec<Owned>,
    pub policy: Policy,
    /// Scenarios and the risk objective: version 3 only.
    pub stochastic: Option<Box<Stochastic>>,
}

/// A workload with its own demand, in its own work units per hour (§10.2).
#[derive(Debug, Clone, PartialEq)]
pub struct DemandClass {
    pub id: String,
    pub demand: Vec<f64>,
    pub allowed_clouds: Option<Vec<String>>,
    pub allowed_regions: Option<Vec<String>>,
    pub gpu_models: Option<Vec<String>>,
    pub min_gpu_memory_gib: Option<f64>,
    /// Work units per GPU-hour by GPU model; `None` means 1 for every model.
    pub perf: Option<BTreeMap<String, f64>>,
    /// `Some` overrides the policy's share, even with `Some(None)` (no cap).
    pub max_spot_share: Option<Option<f64>>,
    pub max_pool_share: Option<Option<f64>>,
}

impl DemandClass {
    /// Validates one class document (§10.12); errors are named under `path`.
    ///
    /// # Errors
    /// The first violation, naming its field.
    pub fn from_json(path: &str, doc: &Value) -> Result<Self, ValidationError> {
        v2::class(path, doc)
    }

    /// Whether this is the class of a version 1 problem: `default`, with no
    /// filters, perf map or share overrides.
    #[must_use]
    pub fn is_plain(&self) -> bool {
        self.id == "default"
            && self.allowed_clouds.is_none()
            && self.allowed_regions.is_none()
            && self.gpu_models.is_none()
            && self.min_gpu_memory_gib.is_none()
            && self.perf.is_none()
            && self.max_spot_share.is_none()
            && self.max_pool_share.is_none()
    }

    /// The single class of a version 1 problem.
    #[must_use]
    pub fn default_class(demand: Vec<f64>) -> Self {
        Self {
            id: "default".to_owned(),
            demand,
            allowed_clouds: None,
            allowed_regions: None,
            gpu_models: None,
            min_gpu_memory_gib: None,
            perf: None,
            max_spot_share: None,
            max_pool_share: None,
        }
    }
}

/// Reservations already bought (§10.3): capacity at no decision cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Owned {
    pub offer: String,
    pub option: String,
    pub count: f64,
    /// Hours left; `None` lasts the whole horizon.
    pub remaining_hours: Option<u64>,
}

/// The expected spot price of an offer: none, one for every hour, or one per
/// hour with `None` where spot cannot be had (§10.3).
#[derive(Debug, Clone, PartialEq)]
pub enum SpotPrice {
    None,
    Flat(f64),
    Hourly(Vec<Option<f64>>),
}

impl SpotPrice {
    /// The price in hour `t`.
    #[must_use]
    pub fn at(&self, t: usize) -> Option<f64> {
        match self {
            SpotPrice::None => None,
            SpotPrice::Flat(p) => Some(*p),
            SpotPrice::Hourly(v) => v.get(t).copied().flatten(),
        }
    }

    #[must_use]
    pub fn is_none(&self) -> bool {
        match self {
            SpotPrice::None => true,
            SpotPrice::Flat(_) => false,
            SpotPrice::Hourly(v) => v.iter().all(Option::is_none),
        }
    }
}

impl From<Option<f64>> for SpotPrice {
    fn from(p: Option<f64>) -> Self {
        p.map_or(SpotPrice::None, SpotPrice::Flat)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub id: String,
    pub cloud: String,
    pub region: String,
    pub instance_type: String,
    pub gpu_model: String,
    /// `sxm`, `pcie` or `nvl`, where the model is sold in several forms.
    pub gpu_form_factor: Option<String>,
    pub gpu_memory_gib: Option<f64>,
    pub gpus_per_instance: u32,
    pub on_demand_price: Option<f64>,
    pub spot_price: SpotPrice,
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
    /// The factor a class's `perf` map gives this offer: the key of its
    /// model and form factor (`H100-80GB/sxm`) wins over its model's.
    #[must_use]
    pub fn perf_in(&self, perf: &BTreeMap<String, f64>) -> Option<f64> {
        self.gpu_form_factor
            .as_ref()
            .and_then(|f| perf.get(&format!("{}/{f}", self.gpu_model)))
            .or_else(|| perf.get(&self.gpu_model))
            .copied()
    }

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
    /// A version 1 problem: one class of GPUs per hour, nothing owned.
    #[must_use]
    pub fn v1(name: Option<String>, demand: Vec<f64>, offers: Vec<Offer>, policy: Policy) -> Self {
        Self {
            schema_version: 1,
            name,
            classes: vec![DemandClass::default_class(demand)],
            offers,
            owned: Vec::new(),
            policy,
            stochastic: None,
        }
    }

    /// A problem of `classes` with `owned` entries: version 1 when it is one
    /// plain class and nothing owned (so its result keeps the v1 shape),
    /// else version 2.
    #[must_use]
    pub fn from_parts(
        name: Option<String>,
        classes: Vec<DemandClass>,
        offers: Vec<Offer>,
        owned: Vec<Owned>,
        policy: Policy,
    ) -> Self {
        let plain = matches!(&classes[..], [c] if c.is_plain());
        Self {
            schema_version: if plain && owned.is_empty() { 1 } else { 2 },
            name,
            classes,
            offers,
            owned,
            policy,
            stochastic: None,
        }
    }

    /// Scenario `s` of a version 3 problem as the version 2 problem it is
    /// once the reservations are fixed (§11.2): its own demand, and no spot
    /// price where its pool is unavailable.
    #[must_use]
    pub fn scenario(&self, s: &Scenario) -> Problem {
        let hours = self.horizon();
        let classes = self
            .classes
            .iter()
            .zip(&s.demand)
            .map(|(c, d)| DemandClass {
                demand: d.clone(),
                ..c.clone()
            })
            .collect();
        let offers = self
            .offers
            .iter()
            .map(|o| match s.available.get(&o.spot_pool) {
                Some(up) if !o.spot_price.is_none() => Offer {
                    spot_price: SpotPrice::Hourly(
                        (0..hours)
                            .map(|t| if up[t] { o.spot_price.at(t) } else { None })
                            .collect(),
                    ),
                    ..o.clone()
                },
                _ => o.clone(),
            })
            .collect();
        Problem {
            schema_version: 2,
            name: self.name.clone(),
            classes,
            offers,
            owned: self.owned.clone(),
            policy: self.policy.clone(),
            stochastic: None,
        }
    }

    /// `T`, the number of hours planned.
    #[must_use]
    pub fn horizon(&self) -> usize {
        self.classes.first().map_or(0, |c| c.demand.len())
    }

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
                    "gpu_model": o.gpu_model, "gpu_form_factor": o.gpu_form_factor, "gpu_memory_gib": o.gpu_memory_gib, "gpus_per_instance": o.gpus_per_instance,
                    "on_demand_price": o.on_demand_price, "spot_price": v2::spot_price_json(&o.spot_price),
                    "spot_interruption_rate": o.spot_interruption_rate, "spot_pool": o.spot_pool,
                    "max_spot_instances": o.max_spot_instances, "max_on_demand_instances": o.max_on_demand_instances,
                    "max_reserved_instances": o.max_reserved_instances,
                    "reserved": o.reserved.iter().map(|r| serde_json::json!({"id": r.id, "term_hours": r.term_hours,
                        "hourly_price": r.hourly_price, "upfront": r.upfront})).collect::<Vec<_>>(),
                })
            })
            .collect();
        let pol = &p.policy;
        let mut doc = serde_json::json!({
            "schema_version": p.schema_version, "name": p.name, "offers": offers,
            "policy": {"max_spot_share": pol.max_spot_share, "max_pool_share": pol.max_pool_share,
                       "spot_overhead_factor": pol.spot_overhead_factor, "integer_reserved": pol.integer_reserved,
                       "integer_hourly": pol.integer_hourly, "budget": pol.budget,
                       "allowed_clouds": pol.allowed_clouds, "allowed_regions": pol.allowed_regions,
                       "gpu_models": pol.gpu_models,
                       "min_gpu_memory_gib": pol.min_gpu_memory_gib, "alert_cost_change_pct": pol.alert_cost_change_pct}
        });
        if p.schema_version >= 2 {
            doc["classes"] = p.classes.iter().map(v2::class_json).collect();
            doc["owned"] = p.owned.iter().map(v2::owned_json).collect();
            if let Some(st) = &p.stochastic {
                for (k, v) in &st.source {
                    doc[k] = v.clone();
                }
            }
        } else {
            doc["demand"] = serde_json::json!(p.classes[0].demand);
        }
        doc
    }

    /// Validates a problem document (docs/planning-model.md §4.1, §10.12). Unknown
    /// top-level and offer keys are ignored (they carry notes); unknown policy,
    /// class and owned keys are errors, so a typo cannot silently disable a
    /// policy or drop a commitment.
    ///
    /// # Errors
    /// The first violation, naming its field.
    pub fn from_json(doc: &Value) -> Result<Self, ValidationError> {
        let Some(top) = doc.as_object() else {
            return err("(document)", "must be a JSON object");
        };
        let schema_version = match top.get("schema_version") {
            None | Some(Value::Null) => 1,
            Some(v) if v.as_u64() == Some(1) => 1,
            Some(v) if v.as_u64() == Some(2) => 2,
            Some(v) if v.as_u64() == Some(3) => 3,
            Some(v) => return err("schema_version", format!("must be 1, 2 or 3, found {v}")),
        };
        if schema_version < 3 {
            // Ignoring them would present a risk-neutral plan as a risk-aware one.
            for key in v3::V3_KEYS {
                if top.contains_key(key) {
                    return err(key, "requires \"schema_version\": 3");
                }
            }
        }
        if schema_version == 1 {
            // Planning without them silently would leave commitments or
            // workloads out of the plan without telling anyone.
            for key in ["classes", "owned"] {
                if top.contains_key(key) {
                    return err(key, "requires \"schema_version\": 2");
                }
            }
        }
        let name = match top.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => return err("name", format!("must be a string, found {v}")),
        };
        let classes = if schema_version == 1 {
            vec![DemandClass::default_class(demand(
                "demand",
                top.get("demand"),
            )?)]
        } else {
            v2::classes(top)?
        };
        let hours = classes[0].demand.len();
        let offers = match top.get("offers") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| offer(&format!("offers[{i}]"), v, schema_version, hours))
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
        let owned = if schema_version == 1 {
            Vec::new()
        } else {
            v2::owned(top.get("owned"), &offers)?
        };
        let policy = match top.get("policy") {
            None | Some(Value::Null) => Policy::default(),
            Some(Value::Object(p)) => policy(p)?,
            Some(v) => return err("policy", format!("must be an object, found {v}")),
        };
        let stochastic = if schema_version == 3 {
            Some(Box::new(v3::stochastic(
                top,
                &classes,
                &offers,
                policy.budget.is_some(),
            )?))
        } else {
            None
        };
        let problem = Self {
            schema_version,
            name,
            classes,
            offers,
            owned,
            policy,
            stochastic,
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
        let hours = self.horizon();
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
        if self.classes.len() > MAX_CLASSES {
            return err(
                "classes",
                format!(
                    "has {} classes; at most {MAX_CLASSES} are allowed",
                    self.classes.len()
                ),
            );
        }
        if self.owned.len() > MAX_OWNED {
            return err(
                "owned",
                format!(
                    "has {} entries; at most {MAX_OWNED} are allowed",
                    self.owned.len()
                ),
            );
        }
        Ok(())
    }
}

fn demand(path: &str, v: Option<&Value>) -> Result<Vec<f64>, ValidationError> {
    let Some(Value::Array(items)) = v else {
        return err(path, "must be a non-empty list of demand per hour");
    };
    if items.is_empty() {
        return err(path, "must not be empty");
    }
    if items.len() > MAX_HORIZON_HOURS {
        return err(
            path,
            format!(
                "has {} hours; a horizon of 1 to {MAX_HORIZON_HOURS} hours is allowed",
                items.len()
            ),
        );
    }
    items
        .iter()
        .enumerate()
        .map(|(t, d)| match d.as_f64() {
            Some(x) if (0.0..=MAX_DEMAND_PER_HOUR).contains(&x) => Ok(x),
            _ => err(
                format!("{path}[{t}]"),
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

fn offer(
    path: &str,
    v: &Value,
    schema_version: u32,
    hours: usize,
) -> Result<Offer, ValidationError> {
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
    let gpu_form_factor = match o.get("gpu_form_factor") {
        None | Some(Value::Null) => None,
        Some(Value::String(f)) if matches!(f.as_str(), "sxm" | "pcie" | "nvl") => Some(f.clone()),
        Some(v) => {
            return err(
                format!("{path}.gpu_form_factor"),
                format!("must be \"sxm\", \"pcie\", \"nvl\" or null, found {v}"),
            );
        }
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
        gpu_form_factor,
        gpu_memory_gib,
        gpus_per_instance,
        on_demand_price: non_negative(o, path, "on_demand_price")?,
        spot_price: match o.get("spot_price") {
            Some(Value::Array(items)) if schema_version >= 2 => {
                v2::hourly_spot_price(&format!("{path}.spot_price"), items, hours)?
            }
            Some(Value::Array(_)) => {
                return err(
                    format!("{path}.spot_price"),
                    "an hourly list of spot prices requires \"schema_version\": 2",
                );
            }
            _ => non_negative(o, path, "spot_price")?.into(),
        },
        spot_interruption_rate: rate,
        spot_pool,
        max_spot_instances: non_negative(o, path, "max_spot_instances")?,
        max_on_demand_instances: non_negative(o, path, "max_on_demand_instances")?,
        max_reserved_instances: non_negative(o, path, "max_reserved_instances")?,
        reserved,
    })
}

fn strings(
    p: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<Vec<String>>, ValidationError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                _ => err(
                    format!("{path}.{key}[{i}]"),
                    format!("must be a string, found {v}"),
                ),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(v) => err(
            format!("{path}.{key}"),
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
        allowed_clouds: strings(p, "policy", "allowed_clouds")?,
        allowed_regions: strings(p, "policy", "allowed_regions")?,
        gpu_models: strings(p, "policy", "gpu_models")?,
        min_gpu_memory_gib: match p.get("min_gpu_memory_gib") {
            None | Some(Value::Null) => None,
            Some(v) => Some(number("policy.min_gpu_memory_gib", v)?),
        },
        alert_cost_change_pct: non_negative(p, "policy", "alert_cost_change_pct")?
            .unwrap_or(defaults.alert_cost_change_pct),
    })
}

#[cfg(test)]
mod tests;
