//! The parts of a schema version 2 document (docs/planning-model.md §10.12):
//! demand classes, owned commitments and hourly spot prices. Classes and
//! owned entries refuse unknown keys, because a misspelt `remaining_hours`
//! or `max_spot_share` would otherwise change a plan without a word.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value, json};

use super::json::{demand, number, share, strings, text};
use super::{
    DemandClass, MAX_CLASSES, MAX_DEMAND_PER_HOUR, Offer, Owned, SpotPrice, ValidationError, err,
};

const CLASS_KEYS: &[&str] = &[
    "id",
    "demand",
    "description",
    "allowed_clouds",
    "allowed_regions",
    "gpu_models",
    "min_gpu_memory_gib",
    "perf",
    "perf_basis",
    "max_spot_share",
    "max_pool_share",
];

const OWNED_KEYS: &[&str] = &["offer", "option", "count", "remaining_hours", "description"];

pub(super) fn known_keys(
    obj: &Map<String, Value>,
    path: &str,
    known: &[&str],
) -> Result<(), ValidationError> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => err(
            format!("{path}.{unknown}"),
            format!("unknown key; known keys: {}", known.join(", ")),
        ),
        None => Ok(()),
    }
}

/// `classes`, or a single `demand` list read as the one class `default`.
pub(super) fn classes(top: &Map<String, Value>) -> Result<Vec<DemandClass>, ValidationError> {
    let list = match (top.get("demand"), top.get("classes")) {
        (Some(_), Some(_)) => return err("classes", "give either `demand` or `classes`, not both"),
        (Some(d), None) => return Ok(vec![DemandClass::default_class(demand("demand", Some(d))?)]),
        (None, Some(Value::Array(items))) if !items.is_empty() => items,
        (None, Some(v)) => {
            return err(
                "classes",
                format!("must be a non-empty list of classes, found {v}"),
            );
        }
        (None, None) => return err("demand", "is required (or `classes`)"),
    };
    if list.len() > MAX_CLASSES {
        return err(
            "classes",
            format!(
                "has {} classes; at most {MAX_CLASSES} are allowed",
                list.len()
            ),
        );
    }
    let mut ids = HashSet::new();
    let mut out: Vec<DemandClass> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let path = format!("classes[{i}]");
        let class = class(&path, item)?;
        if !ids.insert(class.id.clone()) {
            return err(
                format!("{path}.id"),
                format!("`{}` is used by an earlier class", class.id),
            );
        }
        if let Some(first) = out.first()
            && first.demand.len() != class.demand.len()
        {
            return err(
                format!("{path}.demand"),
                format!(
                    "has {} hours but `{}` has {}; every class covers the same hours",
                    class.demand.len(),
                    first.id,
                    first.demand.len()
                ),
            );
        }
        out.push(class);
    }
    Ok(out)
}

pub(super) fn class(path: &str, v: &Value) -> Result<DemandClass, ValidationError> {
    let Some(c) = v.as_object() else {
        return err(path, "must be an object");
    };
    known_keys(c, path, CLASS_KEYS)?;
    let perf = match c.get("perf") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) if m.is_empty() => {
            return err(
                format!("{path}.perf"),
                "must not be empty; leave the key out instead",
            );
        }
        Some(Value::Object(m)) => {
            let mut factors = BTreeMap::new();
            for (model, f) in m {
                let fpath = format!("{path}.perf.{model}");
                let x = number(&fpath, f)?;
                if !(x > 0.0 && x <= MAX_DEMAND_PER_HOUR) {
                    return err(fpath, format!("must be a factor > 0, found {x}"));
                }
                factors.insert(model.clone(), x);
            }
            Some(factors)
        }
        Some(v) => {
            return err(
                format!("{path}.perf"),
                format!("must be an object of factors, found {v}"),
            );
        }
    };
    let overriding = |key: &str| -> Result<Option<Option<f64>>, ValidationError> {
        Ok(c.contains_key(key).then_some(share(c, path, key)?))
    };
    Ok(DemandClass {
        id: text(c, path, "id")?,
        demand: demand(&format!("{path}.demand"), c.get("demand"))?,
        allowed_clouds: strings(c, path, "allowed_clouds")?,
        allowed_regions: strings(c, path, "allowed_regions")?,
        gpu_models: strings(c, path, "gpu_models")?,
        min_gpu_memory_gib: match c.get("min_gpu_memory_gib") {
            None | Some(Value::Null) => None,
            Some(v) => Some(number(&format!("{path}.min_gpu_memory_gib"), v)?),
        },
        perf_basis: match c.get("perf_basis") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) if perf.is_some() => Some(v.clone()),
            Some(_) => {
                return err(
                    format!("{path}.perf_basis"),
                    "must be an object, and goes with perf",
                );
            }
        },
        perf,
        max_spot_share: overriding("max_spot_share")?,
        max_pool_share: overriding("max_pool_share")?,
    })
}

/// `owned`: each entry names an offer of the file and one of its options.
pub(super) fn owned(v: Option<&Value>, offers: &[Offer]) -> Result<Vec<Owned>, ValidationError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(v) => return err("owned", format!("must be a list, found {v}")),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let path = format!("owned[{i}]");
            let Some(e) = item.as_object() else {
                return err(path, "must be an object");
            };
            known_keys(e, &path, OWNED_KEYS)?;
            let offer = text(e, &path, "offer")?;
            let Some(o) = offers.iter().find(|o| o.id == offer) else {
                return err(
                    format!("{path}.offer"),
                    format!("`{offer}` is not an offer of this problem"),
                );
            };
            let option = text(e, &path, "option")?;
            if !o.reserved.iter().any(|r| r.id == option) {
                return err(
                    format!("{path}.option"),
                    format!("`{option}` is not a reserved option of offer `{offer}`"),
                );
            }
            let count = match e.get("count") {
                Some(v) => number(&format!("{path}.count"), v)?,
                None => return err(format!("{path}.count"), "is required"),
            };
            if !(0.0..=MAX_DEMAND_PER_HOUR).contains(&count) {
                return err(
                    format!("{path}.count"),
                    format!("must be between 0 and {MAX_DEMAND_PER_HOUR}, found {count}"),
                );
            }
            let remaining_hours = match e.get("remaining_hours") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_f64() {
                    Some(h) if (0.0..=1e9).contains(&h) && h.fract() == 0.0 => Some(h as u64),
                    _ => {
                        return err(
                            format!("{path}.remaining_hours"),
                            format!("must be a whole number of hours >= 0, found {v}"),
                        );
                    }
                },
            };
            Ok(Owned {
                offer,
                option,
                count,
                remaining_hours,
            })
        })
        .collect()
}

/// A `spot_price` list: one entry per hour, a price or null.
pub(super) fn hourly_spot_price(
    path: &str,
    items: &[Value],
    hours: usize,
) -> Result<SpotPrice, ValidationError> {
    if items.len() != hours {
        return err(
            path,
            format!(
                "has {} entries; a list needs one per hour ({hours})",
                items.len()
            ),
        );
    }
    items
        .iter()
        .enumerate()
        .map(|(t, v)| match v {
            Value::Null => Ok(None),
            v => match v.as_f64() {
                Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
                _ => err(
                    format!("{path}[{t}]"),
                    format!("must be a price >= 0 or null, found {v}"),
                ),
            },
        })
        .collect::<Result<Vec<_>, _>>()
        .map(SpotPrice::Hourly)
}

pub(super) fn spot_price_json(p: &SpotPrice) -> Value {
    match p {
        SpotPrice::None => Value::Null,
        SpotPrice::Flat(x) => json!(x),
        SpotPrice::Hourly(v) => json!(v),
    }
}

pub(super) fn class_json(c: &DemandClass) -> Value {
    let mut doc = json!({
        "id": c.id, "demand": c.demand,
        "allowed_clouds": c.allowed_clouds, "allowed_regions": c.allowed_regions,
        "gpu_models": c.gpu_models, "min_gpu_memory_gib": c.min_gpu_memory_gib,
        "perf": c.perf,
    });
    if let Some(basis) = &c.perf_basis {
        doc["perf_basis"] = basis.clone();
    }
    if let Some(s) = c.max_spot_share {
        doc["max_spot_share"] = json!(s);
    }
    if let Some(s) = c.max_pool_share {
        doc["max_pool_share"] = json!(s);
    }
    doc
}

pub(super) fn owned_json(e: &Owned) -> Value {
    json!({"offer": e.offer, "option": e.option, "count": e.count, "remaining_hours": e.remaining_hours})
}
