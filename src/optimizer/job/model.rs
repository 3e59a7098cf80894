//! A version 4 problem (docs/planning-model.md §12): a job of a fixed amount
//! of work, a deadline, perhaps a budget and a carbon cap, and the offers
//! that may do it. [`JobProblem::from_json`] checks every rule of §12.9.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::optimizer::ValidationError;

/// The longest deadline, hours (90 days).
pub const MAX_HOURS: usize = 2160;
/// The most offers one problem may list.
pub const MAX_OFFERS: usize = 1000;
/// The most nodes a gang may have.
pub const MAX_NODES: u32 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    /// The cheapest plan by the deadline, then the earliest finish.
    Cost,
    /// The earliest finish, then the cheapest.
    Time,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// Independent tasks: any mix of offers and hours.
    Bag,
    /// One homogeneous cluster of up to `nodes_max` instances of one offer.
    Gang {
        nodes_max: u32,
        /// Efficiency kept per doubling of nodes.
        scaling: f64,
        /// The exact total of GPUs, when given.
        gpus: Option<f64>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Reference GPU-hours.
    pub work: f64,
    pub shape: Shape,
    pub reference: Option<String>,
    pub min_gpu_memory_gib: Option<f64>,
    pub needs: Vec<String>,
    pub checkpoint_hours: f64,
    pub restart_hours: f64,
    pub budget_usd: Option<f64>,
}

/// How an offer is bought.
#[derive(Debug, Clone, PartialEq)]
pub enum Purchase {
    OnDemand(Hourly),
    Spot {
        hourly: Hourly,
        interruptions_per_hour: f64,
    },
    /// Capacity for a fixed span, bought whole and paid up front.
    Window {
        start_hour: usize,
        hours: usize,
        instances: u64,
        upfront_usd: f64,
    },
}

/// The price and caps of an on-demand or spot offer.
#[derive(Debug, Clone, PartialEq)]
pub struct Hourly {
    pub usd_per_hour: f64,
    pub max_instances: Option<u64>,
    /// A cap per hour (`None`: no cap that hour).
    pub available: Option<Vec<Option<u64>>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JobOffer {
    pub id: String,
    pub gpu_model: String,
    pub gpu_form_factor: Option<String>,
    /// GPUs per instance, or the share of one.
    pub gpu_count: f64,
    pub gpu_memory_gib: f64,
    pub capabilities: Vec<String>,
    pub purchase: Purchase,
    pub kgco2e_per_hour: Option<f64>,
}

impl JobOffer {
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self.purchase {
            Purchase::OnDemand(_) => "on_demand",
            Purchase::Spot { .. } => "spot",
            Purchase::Window { .. } => "window",
        }
    }

    /// The perf key that rates this offer and its factor: `MODEL/form`
    /// first, then `MODEL`.
    #[must_use]
    pub fn perf_in<'a>(&self, perf: &'a BTreeMap<String, f64>) -> Option<(&'a str, f64)> {
        let with_form = self
            .gpu_form_factor
            .as_ref()
            .and_then(|f| perf.get_key_value(&format!("{}/{f}", self.gpu_model)));
        with_form
            .or_else(|| perf.get_key_value(&self.gpu_model))
            .map(|(k, v)| (k.as_str(), *v))
    }
}

/// `carbon`: a cap on the job's emissions, a price on them, or both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Carbon {
    pub max_kg: Option<f64>,
    pub usd_per_tonne: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JobProblem {
    pub name: Option<String>,
    pub start: Option<DateTime<Utc>>,
    /// H: the deadline, hours after `start`.
    pub hours: usize,
    pub objective: Objective,
    pub job: Job,
    pub offers: Vec<JobOffer>,
    pub perf: BTreeMap<String, f64>,
    pub carbon: Option<Carbon>,
}

fn err<T>(path: impl Into<String>, message: impl Into<String>) -> Result<T, ValidationError> {
    Err(ValidationError {
        path: path.into(),
        message: message.into(),
    })
}

/// A finite number (never a bool).
fn number(path: &str, v: &Value) -> Result<f64, ValidationError> {
    match v.as_f64() {
        Some(x) if !v.is_boolean() && x.is_finite() => Ok(x),
        _ => err(path, format!("must be a finite number, found {v}")),
    }
}

/// A JSON integer (a number without a fraction) in `range`.
fn integer(
    path: &str,
    v: &Value,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ValidationError> {
    match v.as_u64() {
        Some(n) if range.contains(&n) => Ok(n),
        _ => err(
            path,
            format!(
                "must be a whole number from {} to {}, found {v}",
                range.start(),
                range.end()
            ),
        ),
    }
}

fn optional<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

fn at_least(path: &str, v: &Value, min: f64) -> Result<f64, ValidationError> {
    let x = number(path, v)?;
    if x < min {
        return err(path, format!("must be >= {min}, found {x}"));
    }
    Ok(x)
}

fn positive(path: &str, v: &Value) -> Result<f64, ValidationError> {
    let x = number(path, v)?;
    if x <= 0.0 {
        return err(path, format!("must be > 0, found {x}"));
    }
    Ok(x)
}

fn strings(path: &str, v: Option<&Value>) -> Result<Vec<String>, ValidationError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| match s.as_str() {
                Some(s) if !s.is_empty() => Ok(s.to_owned()),
                _ => err(
                    format!("{path}[{i}]"),
                    format!("must be a non-empty string, found {s}"),
                ),
            })
            .collect(),
        Some(v) => err(path, format!("must be a list of strings, found {v}")),
    }
}

fn only_known(o: &Map<String, Value>, path: &str, known: &[&str]) -> Result<(), ValidationError> {
    match o.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => err(format!("{path}.{k}"), "unknown key"),
        None => Ok(()),
    }
}

const JOB_KEYS: &[&str] = &[
    "shape",
    "work",
    "reference",
    "min_gpu_memory_gib",
    "needs",
    "checkpoint_hours",
    "restart_hours",
    "budget_usd",
    "nodes_max",
    "scaling",
    "gpus",
    "description",
];

const OFFER_KEYS: &[&str] = &[
    "id",
    "gpu_model",
    "gpu_form_factor",
    "gpu_count",
    "gpu_memory_gib",
    "capabilities",
    "kind",
    "usd_per_hour",
    "max_instances",
    "available",
    "interruptions_per_hour",
    "window",
    "kgco2e_per_hour",
    "cloud",
    "region",
    "zone",
    "instance_type",
    "description",
];

fn job(v: Option<&Value>, perf: &BTreeMap<String, f64>) -> Result<Job, ValidationError> {
    let Some(Value::Object(o)) = v else {
        return err("job", "is required: an object with shape and work");
    };
    only_known(o, "job", JOB_KEYS)?;
    let gang = match o.get("shape").and_then(Value::as_str) {
        Some("bag") => false,
        Some("gang") => true,
        _ => return err("job.shape", "must be \"bag\" or \"gang\""),
    };
    let work = match o.get("work") {
        Some(v) => positive("job.work", v)?,
        None => return err("job.work", "is required (reference GPU-hours)"),
    };
    let reference = match optional(o, "reference") {
        None => None,
        Some(Value::String(r)) if perf.contains_key(r) => Some(r.clone()),
        Some(v) => return err("job.reference", format!("must be a key of perf, found {v}")),
    };
    let shape = if gang {
        Shape::Gang {
            nodes_max: match o.get("nodes_max") {
                Some(v) => u32::try_from(integer("job.nodes_max", v, 1..=u64::from(MAX_NODES))?)
                    .unwrap_or(MAX_NODES),
                None => return err("job.nodes_max", "is required for shape gang (1 to 4096)"),
            },
            scaling: match optional(o, "scaling") {
                None => 1.0,
                Some(v) => {
                    let s = positive("job.scaling", v)?;
                    if s > 1.0 {
                        return err("job.scaling", format!("must be in (0, 1], found {s}"));
                    }
                    s
                }
            },
            gpus: optional(o, "gpus")
                .map(|v| positive("job.gpus", v))
                .transpose()?,
        }
    } else {
        if let Some(k) = ["nodes_max", "scaling", "gpus"]
            .into_iter()
            .find(|k| o.contains_key(*k))
        {
            return err(format!("job.{k}"), "only for shape gang");
        }
        Shape::Bag
    };
    Ok(Job {
        work,
        shape,
        reference,
        min_gpu_memory_gib: optional(o, "min_gpu_memory_gib")
            .map(|v| at_least("job.min_gpu_memory_gib", v, 0.0))
            .transpose()?,
        needs: strings("job.needs", o.get("needs"))?,
        checkpoint_hours: optional(o, "checkpoint_hours")
            .map_or(Ok(1.0), |v| positive("job.checkpoint_hours", v))?,
        restart_hours: optional(o, "restart_hours")
            .map_or(Ok(0.25), |v| at_least("job.restart_hours", v, 0.0))?,
        budget_usd: optional(o, "budget_usd")
            .map(|v| at_least("job.budget_usd", v, 0.0))
            .transpose()?,
    })
}

fn hourly(o: &Map<String, Value>, path: &str, hours: usize) -> Result<Hourly, ValidationError> {
    let usd_per_hour = match o.get("usd_per_hour") {
        Some(v) => at_least(&format!("{path}.usd_per_hour"), v, 0.0)?,
        None => {
            return err(
                format!("{path}.usd_per_hour"),
                "is required for on_demand and spot",
            );
        }
    };
    let max_instances = optional(o, "max_instances")
        .map(|v| integer(&format!("{path}.max_instances"), v, 0..=u64::MAX))
        .transpose()?;
    let available = match optional(o, "available") {
        None => None,
        Some(Value::Array(caps)) => {
            if caps.len() != hours {
                return err(
                    format!("{path}.available"),
                    format!(
                        "must have exactly {hours} entries (one per hour), found {}",
                        caps.len()
                    ),
                );
            }
            Some(
                caps.iter()
                    .enumerate()
                    .map(|(h, c)| match c {
                        Value::Null => Ok(None),
                        c => integer(&format!("{path}.available[{h}]"), c, 0..=u64::MAX).map(Some),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            )
        }
        Some(v) => {
            return err(
                format!("{path}.available"),
                format!("must be a list or null, found {v}"),
            );
        }
    };
    if o.contains_key("window") {
        return err(format!("{path}.window"), "only for kind window");
    }
    Ok(Hourly {
        usd_per_hour,
        max_instances,
        available,
    })
}

fn window(o: &Map<String, Value>, path: &str) -> Result<Purchase, ValidationError> {
    for k in [
        "usd_per_hour",
        "max_instances",
        "available",
        "interruptions_per_hour",
    ] {
        if o.contains_key(k) {
            return err(format!("{path}.{k}"), "not for kind window");
        }
    }
    let Some(Value::Object(w)) = o.get("window") else {
        return err(
            format!("{path}.window"),
            "is required for kind window: start_hour, hours, instances, upfront_usd",
        );
    };
    let at = |k: &str| format!("{path}.window.{k}");
    only_known(
        w,
        &format!("{path}.window"),
        &[
            "start_hour",
            "hours",
            "instances",
            "upfront_usd",
            "description",
        ],
    )?;
    let field = |k: &str| {
        w.get(k).ok_or_else(|| ValidationError {
            path: at(k),
            message: "is required".into(),
        })
    };
    let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    Ok(Purchase::Window {
        start_hour: as_usize(integer(
            &at("start_hour"),
            field("start_hour")?,
            0..=u64::MAX,
        )?),
        hours: as_usize(integer(&at("hours"), field("hours")?, 1..=u64::MAX)?),
        instances: integer(&at("instances"), field("instances")?, 1..=u64::MAX)?,
        upfront_usd: at_least(&at("upfront_usd"), field("upfront_usd")?, 0.0)?,
    })
}

fn offer(i: usize, v: &Value, hours: usize) -> Result<JobOffer, ValidationError> {
    let path = format!("offers[{i}]");
    let Value::Object(o) = v else {
        return err(path, "must be an object");
    };
    only_known(o, &path, OFFER_KEYS)?;
    let text = |k: &str| match o.get(k).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s.to_owned()),
        _ => err(format!("{path}.{k}"), "must be a non-empty string"),
    };
    let gpu_form_factor = match optional(o, "gpu_form_factor") {
        None => None,
        Some(Value::String(f)) if !f.is_empty() => Some(f.clone()),
        Some(v) => {
            return err(
                format!("{path}.gpu_form_factor"),
                format!("must be a non-empty string or null, found {v}"),
            );
        }
    };
    let kind = o.get("kind").and_then(Value::as_str);
    let purchase = match kind {
        Some("on_demand") | Some("spot") => {
            let hourly = hourly(o, &path, hours)?;
            if kind == Some("spot") {
                Purchase::Spot {
                    hourly,
                    interruptions_per_hour: optional(o, "interruptions_per_hour")
                        .map_or(Ok(0.0), |v| {
                            at_least(&format!("{path}.interruptions_per_hour"), v, 0.0)
                        })?,
                }
            } else {
                if o.contains_key("interruptions_per_hour") {
                    return err(
                        format!("{path}.interruptions_per_hour"),
                        "only for kind spot",
                    );
                }
                Purchase::OnDemand(hourly)
            }
        }
        Some("window") => window(o, &path)?,
        _ => {
            return err(
                format!("{path}.kind"),
                "must be \"on_demand\", \"spot\" or \"window\"",
            );
        }
    };
    Ok(JobOffer {
        id: text("id")?,
        gpu_model: text("gpu_model")?,
        gpu_form_factor,
        gpu_count: match o.get("gpu_count") {
            Some(v) => positive(&format!("{path}.gpu_count"), v)?,
            None => return err(format!("{path}.gpu_count"), "is required"),
        },
        gpu_memory_gib: match o.get("gpu_memory_gib") {
            Some(v) => at_least(&format!("{path}.gpu_memory_gib"), v, 0.0)?,
            None => return err(format!("{path}.gpu_memory_gib"), "is required"),
        },
        capabilities: strings(&format!("{path}.capabilities"), o.get("capabilities"))?,
        purchase,
        kgco2e_per_hour: optional(o, "kgco2e_per_hour")
            .map(|v| at_least(&format!("{path}.kgco2e_per_hour"), v, 0.0))
            .transpose()?,
    })
}

impl JobProblem {
    /// Reads and checks a `"schema_version": 4, "kind": "job"` document.
    ///
    /// # Errors
    /// The first rule of §12.9 the document breaks, naming the field.
    pub fn from_json(doc: &Value) -> Result<Self, ValidationError> {
        let Value::Object(top) = doc else {
            return err("", "a problem must be a JSON object");
        };
        if top.get("kind").and_then(Value::as_str) != Some("job") {
            return err("kind", "schema_version 4 requires \"kind\": \"job\"");
        }
        let start = match optional(top, "start") {
            None => None,
            Some(Value::String(s)) => Some(
                DateTime::parse_from_rfc3339(s)
                    .map_err(|_| ValidationError {
                        path: "start".into(),
                        message: format!("must be an RFC 3339 time with an offset, such as 2025-07-01T00:00:00Z, found {s}"),
                    })?
                    .with_timezone(&Utc),
            ),
            Some(v) => return err("start", format!("must be an RFC 3339 time, found {v}")),
        };
        let hours = match top.get("hours") {
            Some(v) => {
                usize::try_from(integer("hours", v, 1..=MAX_HOURS as u64)?).unwrap_or(MAX_HOURS)
            }
            None => {
                return err(
                    "hours",
                    "is required: the deadline, in hours from start (1 to 2160)",
                );
            }
        };
        let perf = match top.get("perf") {
            Some(Value::Object(m)) if !m.is_empty() => {
                let mut out = BTreeMap::new();
                for (k, v) in m {
                    if k.is_empty() {
                        return err("perf", "keys must be non-empty");
                    }
                    out.insert(k.clone(), positive(&format!("perf.{k}"), v)?);
                }
                out
            }
            _ => {
                return err(
                    "perf",
                    "is required: a non-empty object of factors by GPU model",
                );
            }
        };
        let objective = match optional(top, "objective").map(Value::as_str) {
            None | Some(Some("cost")) => Objective::Cost,
            Some(Some("time")) => Objective::Time,
            Some(_) => return err("objective", "must be \"cost\" or \"time\""),
        };
        let carbon = match optional(top, "carbon") {
            None => None,
            Some(Value::Object(c)) => {
                only_known(c, "carbon", &["max_kg", "usd_per_tonne", "description"])?;
                let max_kg = optional(c, "max_kg")
                    .map(|v| at_least("carbon.max_kg", v, 0.0))
                    .transpose()?;
                let usd_per_tonne = optional(c, "usd_per_tonne")
                    .map(|v| at_least("carbon.usd_per_tonne", v, 0.0))
                    .transpose()?;
                if max_kg.is_none() && usd_per_tonne.is_none() {
                    return err("carbon", "needs max_kg or usd_per_tonne");
                }
                Some(Carbon {
                    max_kg,
                    usd_per_tonne,
                })
            }
            Some(v) => return err("carbon", format!("must be an object or null, found {v}")),
        };
        let job = job(top.get("job"), &perf)?;
        let offers = match top.get("offers") {
            Some(Value::Array(list)) if list.len() <= MAX_OFFERS => list
                .iter()
                .enumerate()
                .map(|(i, o)| offer(i, o, hours))
                .collect::<Result<Vec<_>, _>>()?,
            Some(Value::Array(list)) => {
                return err(
                    "offers",
                    format!("at most {MAX_OFFERS} offers, found {}", list.len()),
                );
            }
            _ => return err("offers", "is required: a list of offers"),
        };
        let mut ids = BTreeSet::new();
        for (i, o) in offers.iter().enumerate() {
            if !ids.insert(o.id.as_str()) {
                return err(
                    format!("offers[{i}].id"),
                    format!("`{}` is not unique", o.id),
                );
            }
        }
        Ok(Self {
            name: top.get("name").and_then(Value::as_str).map(str::to_owned),
            start,
            hours,
            objective,
            job,
            offers,
            perf,
            carbon,
        })
    }
}
