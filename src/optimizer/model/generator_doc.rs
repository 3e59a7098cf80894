//! The `scenario_generator` block of a version 3 document
//! (docs/planning-model.md §11.11): demand paths, spot pools and shocks, each
//! object checked field by field.

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value};

const GENERATOR_KEYS: &[&str] = &["seed", "count", "demand", "spot", "description"];
const DEMAND_KEYS: &[&str] = &[
    "residuals",
    "block_hours",
    "bucket_hours",
    "level",
    "range_levels",
    "description",
];
const SPOT_KEYS: &[&str] = &["pools", "shocks", "description"];
const CHAIN_KEYS: &[&str] = &["pool", "p_down", "p_up", "initial", "description"];
const SHOCK_KEYS: &[&str] = &["id", "pools", "p_down", "p_up", "initial", "description"];

use super::generator::{Chain, DemandPaths, Generator, Initial, Residuals};
use super::json::number;
use super::v2::known_keys;
use super::v3::{MAX_SCENARIOS, class_index, known_pool, probability_like, whole};
use super::{DemandClass, ValidationError, err};

pub(super) fn generator(
    v: &Value,
    classes: &[DemandClass],
    pools: &BTreeSet<&str>,
) -> Result<Generator, ValidationError> {
    let Some(g) = v.as_object() else {
        return err(
            "scenario_generator",
            format!("must be an object, found {v}"),
        );
    };
    known_keys(g, "scenario_generator", GENERATOR_KEYS)?;
    let seed = match g.get("seed") {
        None => return err("scenario_generator.seed", "is required"),
        v => whole("scenario_generator.seed", v, 0, (1 << 53) - 1, 0)?,
    };
    let count = match g.get("count") {
        None => return err("scenario_generator.count", "is required"),
        v => whole("scenario_generator.count", v, 1, MAX_SCENARIOS as u64, 1)? as usize,
    };
    let demand = match g.get("demand") {
        None | Some(Value::Null) => None,
        Some(Value::Object(d)) => Some(demand_paths(d, classes)?),
        Some(v) => {
            return err(
                "scenario_generator.demand",
                format!("must be an object, found {v}"),
            );
        }
    };
    let (mut chains, mut shocks) = (Vec::new(), Vec::new());
    match g.get("spot") {
        None | Some(Value::Null) => {}
        Some(Value::Object(s)) => {
            known_keys(s, "scenario_generator.spot", SPOT_KEYS)?;
            for (i, c) in list(s.get("pools"), "scenario_generator.spot.pools")?
                .iter()
                .enumerate()
            {
                let path = format!("scenario_generator.spot.pools[{i}]");
                let Some(c) = c.as_object() else {
                    return err(path, "must be an object");
                };
                known_keys(c, &path, CHAIN_KEYS)?;
                let pool = match c.get("pool") {
                    Some(Value::String(p)) => p.clone(),
                    Some(v) => {
                        return err(
                            format!("{path}.pool"),
                            format!("must be a string, found {v}"),
                        );
                    }
                    None => return err(format!("{path}.pool"), "is required"),
                };
                known_pool(pools, &format!("{path}.pool"), &pool)?;
                if chains.iter().any(|(p, _)| *p == pool) {
                    return err(
                        format!("{path}.pool"),
                        format!("`{pool}` already has a chain"),
                    );
                }
                chains.push((pool, chain(c, &path)?));
            }
            let mut ids = HashSet::new();
            for (i, c) in list(s.get("shocks"), "scenario_generator.spot.shocks")?
                .iter()
                .enumerate()
            {
                let path = format!("scenario_generator.spot.shocks[{i}]");
                let Some(c) = c.as_object() else {
                    return err(path, "must be an object");
                };
                known_keys(c, &path, SHOCK_KEYS)?;
                match c.get("id") {
                    Some(Value::String(id)) if !id.is_empty() => {
                        if !ids.insert(id.clone()) {
                            return err(
                                format!("{path}.id"),
                                format!("`{id}` is used by an earlier shock"),
                            );
                        }
                    }
                    Some(v) => {
                        return err(
                            format!("{path}.id"),
                            format!("must be a non-empty string, found {v}"),
                        );
                    }
                    None => return err(format!("{path}.id"), "is required"),
                }
                let members = match c.get("pools") {
                    Some(Value::Array(items)) if !items.is_empty() => items,
                    Some(v) => {
                        return err(
                            format!("{path}.pools"),
                            format!("must be a non-empty list of pools, found {v}"),
                        );
                    }
                    None => return err(format!("{path}.pools"), "is required"),
                };
                let mut names: Vec<String> = Vec::with_capacity(members.len());
                for (j, p) in members.iter().enumerate() {
                    let ppath = format!("{path}.pools[{j}]");
                    let Some(p) = p.as_str() else {
                        return err(ppath, format!("must be a string, found {p}"));
                    };
                    known_pool(pools, &ppath, p)?;
                    if names.iter().any(|n| n == p) {
                        return err(ppath, format!("`{p}` is listed twice"));
                    }
                    names.push(p.to_owned());
                }
                shocks.push((names, chain(c, &path)?));
            }
        }
        Some(v) => {
            return err(
                "scenario_generator.spot",
                format!("must be an object, found {v}"),
            );
        }
    }
    Ok(Generator {
        seed,
        count,
        demand,
        pools: chains,
        shocks,
    })
}

fn list<'a>(v: Option<&'a Value>, path: &str) -> Result<&'a [Value], ValidationError> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(v) => err(path, format!("must be a list, found {v}")),
    }
}

fn chain(c: &Map<String, Value>, path: &str) -> Result<Chain, ValidationError> {
    let rate = |key: &str| -> Result<f64, ValidationError> {
        let p = format!("{path}.{key}");
        match c.get(key) {
            None => err(p, "is required"),
            v => probability_like(&p, v, 0.0),
        }
    };
    let initial = match c.get("initial") {
        None | Some(Value::Null) => Initial::Stationary,
        Some(Value::String(s)) if s == "stationary" => Initial::Stationary,
        Some(Value::String(s)) if s == "up" => Initial::Up,
        Some(Value::String(s)) if s == "down" => Initial::Down,
        Some(v) => {
            return err(
                format!("{path}.initial"),
                format!("must be \"stationary\", \"up\" or \"down\", found {v}"),
            );
        }
    };
    Ok(Chain {
        p_down: rate("p_down")?,
        p_up: rate("p_up")?,
        initial,
    })
}

fn demand_paths(
    d: &Map<String, Value>,
    classes: &[DemandClass],
) -> Result<DemandPaths, ValidationError> {
    let at = "scenario_generator.demand";
    known_keys(d, at, DEMAND_KEYS)?;
    let residuals = match d.get("residuals") {
        Some(Value::Object(m)) if !m.is_empty() => m,
        Some(v) => {
            return err(
                format!("{at}.residuals"),
                format!("must be a non-empty object {{class: matrix}}, found {v}"),
            );
        }
        None => return err(format!("{at}.residuals"), "is required"),
    };
    let mut out: Vec<Residuals> = Vec::with_capacity(residuals.len());
    let mut shape: Option<(usize, usize, String)> = None;
    for (cid, m) in residuals {
        let path = format!("{at}.residuals.{cid}");
        let class = class_index(classes, &path, cid)?;
        let rows = match m {
            Value::Array(rows) if !rows.is_empty() => rows,
            _ => {
                return err(
                    path,
                    format!(
                        "must be a non-empty list of folds, each a list of errors per lead hour, found {m}"
                    ),
                );
            }
        };
        let mut errors = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let rpath = format!("{path}[{i}]");
            let cells = match row {
                Value::Array(cells) if !cells.is_empty() => cells,
                _ => {
                    return err(
                        rpath,
                        format!("must be a non-empty list of errors, found {row}"),
                    );
                }
            };
            if cells.len() > super::MAX_HORIZON_HOURS {
                return err(
                    rpath,
                    format!(
                        "has {} lead hours; at most {}",
                        cells.len(),
                        super::MAX_HORIZON_HOURS
                    ),
                );
            }
            let values = cells
                .iter()
                .enumerate()
                .map(|(h, e)| number(&format!("{rpath}[{h}]"), e))
                .collect::<Result<Vec<f64>, _>>()?;
            if let Some(first) = errors.first().map(Vec::len)
                && first != values.len()
            {
                return err(
                    rpath,
                    format!(
                        "has {} lead hours; the first fold has {first}",
                        values.len()
                    ),
                );
            }
            errors.push(values);
        }
        if errors.len() > MAX_SCENARIOS {
            return err(
                path,
                format!("has {} folds; at most {MAX_SCENARIOS}", errors.len()),
            );
        }
        let (k, h) = (errors.len(), errors[0].len());
        match &shape {
            Some((k0, h0, first)) if (*k0, *h0) != (k, h) => {
                return err(
                    path,
                    format!(
                        "is {k} × {h}; `{first}` is {k0} × {h0}, and every class shares the fold draws"
                    ),
                );
            }
            Some(_) => {}
            None => shape = Some((k, h, cid.clone())),
        }
        out.push(Residuals { class, errors });
    }
    let block_hours = whole(
        &format!("{at}.block_hours"),
        d.get("block_hours"),
        1,
        1 << 32,
        24,
    )? as usize;
    let bucket_hours = match d.get("bucket_hours") {
        None | Some(Value::Null) => None,
        v => Some(whole(&format!("{at}.bucket_hours"), v, 1, 1 << 32, 1)? as usize),
    };
    let open_level = |path: &str, v: &Value| -> Result<f64, ValidationError> {
        let x = number(path, v)?;
        if x <= 0.0 || x >= 1.0 {
            return err(path, format!("must be strictly between 0 and 1, found {x}"));
        }
        Ok(x)
    };
    let level = match d.get("level") {
        None | Some(Value::Null) => 0.8,
        Some(v) => open_level(&format!("{at}.level"), v)?,
    };
    let range_levels = match d.get("range_levels") {
        None | Some(Value::Null) => vec![level],
        Some(Value::Array(items)) if !items.is_empty() && items.len() <= 11 => {
            let mut out: Vec<f64> = Vec::with_capacity(items.len());
            for (i, v) in items.iter().enumerate() {
                let path = format!("{at}.range_levels[{i}]");
                let x = open_level(&path, v)?;
                if out.contains(&x) {
                    return err(path, format!("{x} is listed twice"));
                }
                out.push(x);
            }
            out
        }
        Some(v) => {
            return err(
                format!("{at}.range_levels"),
                format!("must be a list of 1 to 11 distinct levels in (0, 1), found {v}"),
            );
        }
    };
    let paths = DemandPaths {
        residuals: out,
        block_hours,
        bucket_hours,
        level,
        range_levels,
    };
    if let Err(few) = paths.check() {
        let n = few.scores as f64;
        return err(
            format!("{at}.level"),
            format!(
                "too few residuals for level {level}: class `{}` has {} scores in bucket {}, which allow a level of at most {}",
                classes[few.class].id,
                few.scores,
                few.bucket,
                n / (n + 1.0)
            ),
        );
    }
    Ok(paths)
}
