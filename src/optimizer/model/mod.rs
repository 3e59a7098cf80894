//! The planning problem (docs/planning-model.md §2, §4.1, and §10 for schema
//! version 2) and its validation. Input is checked field by field so every
//! error names the field it is about.

mod generator;
mod generator_doc;
mod json;
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
    /// What the perf map rests on when the planner built it from a named
    /// workload (the rows behind each factor); echoed in the class's report.
    pub perf_basis: Option<Value>,
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
            perf_basis: None,
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
    /// Memory per GPU, or a slice's own: what a class's `min_gpu_memory_gib` checks.
    pub gpu_memory_gib: Option<f64>,
    /// GPUs per instance, or the share of one GPU a slice rents.
    pub gpus_per_instance: f64,
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
}

#[cfg(test)]
mod tests;
