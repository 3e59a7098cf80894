//! The planning problem as a JSON document: reading and checking one
//! (every error names its field), and writing one back.

use super::*;

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
                    "gpu_model": o.gpu_model, "gpu_form_factor": o.gpu_form_factor, "gpu_memory_gib": o.gpu_memory_gib, "gpus_per_instance": gpuplan_providers::gpu::count_json(o.gpus_per_instance),
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
            Some(v) => {
                return err(
                    "schema_version",
                    format!("must be 1, 2 or 3, or 4 for a job, found {v}"),
                );
            }
        };
        // Planning an hourly demand for what the user meant as a job would
        // answer a question nobody asked.
        if top.contains_key("job") {
            return err(
                "job",
                "requires \"schema_version\": 4 and \"kind\": \"job\"",
            );
        }
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

pub(super) fn demand(path: &str, v: Option<&Value>) -> Result<Vec<f64>, ValidationError> {
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

pub(super) fn number(path: &str, v: &Value) -> Result<f64, ValidationError> {
    match v.as_f64() {
        Some(x) if x.is_finite() => Ok(x),
        _ => err(path, format!("must be a number, found {v}")),
    }
}

/// An optional number `>= 0` (null or absent is `None`).
pub(super) fn non_negative(
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

pub(super) fn share(
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<f64>, ValidationError> {
    let v = non_negative(obj, path, key)?;
    if v.is_some_and(|x| x > 1.0) {
        return err(format!("{path}.{key}"), "must be between 0 and 1");
    }
    Ok(v)
}

pub(super) fn text(
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<String, ValidationError> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(v) => err(
            format!("{path}.{key}"),
            format!("must be a non-empty string, found {v}"),
        ),
        None => err(format!("{path}.{key}"), "is required"),
    }
}

pub(super) fn offer(
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
    // A share of one GPU (0.125 for an eighth) is an offer like any other.
    let gpus_per_instance = match o.get("gpus_per_instance") {
        Some(v) => match v.as_f64() {
            Some(n) if !v.is_boolean() && n.is_finite() && n > 0.0 => n,
            _ => {
                return err(
                    format!("{path}.gpus_per_instance"),
                    format!("must be a number > 0 (GPUs, or a share of one), found {v}"),
                );
            }
        },
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

pub(super) fn strings(
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

pub(super) fn flag(
    p: &Map<String, Value>,
    key: &str,
    default: bool,
) -> Result<bool, ValidationError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => err(
            format!("policy.{key}"),
            format!("must be true or false, found {v}"),
        ),
    }
}

pub(super) fn policy(p: &Map<String, Value>) -> Result<Policy, ValidationError> {
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
