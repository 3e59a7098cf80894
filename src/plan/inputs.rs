//! The files a catalog plan is made from, each checked cell by cell so an
//! error names the file and line:
//! - the demand CSV: `hour,<column>[,<column>…]` (consecutive hour numbers)
//!   or `timestamp,<column>…` (consecutive UTC hours). One column is one
//!   class of GPUs per hour; several columns are several classes, in work
//!   units per hour, described by a classes file;
//! - the classes file (TOML, or JSON by its `.json` name): per class its
//!   filters, perf map and share overrides;
//! - the owned-reservations CSV: what is already bought.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::optimizer::{DemandClass, MAX_CLASSES, MAX_DEMAND_PER_HOUR, MAX_OWNED, Owned};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct InputError {
    pub file: String,
    /// 1-based; 0 when the error is about the file as a whole.
    pub line: usize,
    pub message: String,
}

/// One column of hourly demand, with the first hour's time when the file gave times.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    pub gpus: Vec<f64>,
    pub start: Option<DateTime<Utc>>,
}

/// Every column of a demand CSV, by header name, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct DemandTable {
    pub columns: Vec<(String, Vec<f64>)>,
    pub start: Option<DateTime<Utc>>,
}

/// Rows a demand or usage file may have: ten years of hours.
pub const MAX_ROWS: usize = 87_600;

fn read(path: &Path) -> Result<(String, String), InputError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| InputError {
        file: file.clone(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    Ok((file, text))
}

/// Reads a one-column demand or usage CSV.
///
/// # Errors
/// The first problem, naming file and line.
pub fn read_demand(path: &Path) -> Result<Demand, InputError> {
    let (file, text) = read(path)?;
    parse_demand(&file, &text)
}

/// Parses one-column demand CSV text; `file` names it in errors.
///
/// # Errors
/// The first problem, naming file and line; several columns are refused.
pub fn parse_demand(file: &str, text: &str) -> Result<Demand, InputError> {
    let table = parse_demand_table(file, text)?;
    match <[_; 1]>::try_from(table.columns) {
        Ok([(_, gpus)]) => Ok(Demand {
            gpus,
            start: table.start,
        }),
        Err(columns) => Err(InputError {
            file: file.to_owned(),
            line: 1,
            message: format!(
                "{} demand columns; this input takes one (`hour,gpus`)",
                columns.len()
            ),
        }),
    }
}

/// Reads a demand CSV with one or more columns.
///
/// # Errors
/// The first problem, naming file and line.
pub fn read_demand_table(path: &Path) -> Result<DemandTable, InputError> {
    let (file, text) = read(path)?;
    parse_demand_table(&file, &text)
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M")
                .ok()
                .map(|t| t.and_utc())
        })
        .or_else(|| {
            NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M")
                .ok()
                .map(|t| t.and_utc())
        })
}

/// The lines of a CSV text that carry something, numbered from 1: blank
/// lines and `#` comments are left out.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// Parses demand CSV text with one or more columns; `file` names it in errors.
///
/// # Errors
/// The first problem, naming file and line.
pub fn parse_demand_table(file: &str, text: &str) -> Result<DemandTable, InputError> {
    let fail = |line: usize, message: String| InputError {
        file: file.to_owned(),
        line,
        message,
    };
    let mut lines = content_lines(text);
    let expected =
        "expected `hour,gpus`, `timestamp,gpus`, or one column per class (`hour,train,infer`)";
    let Some((header_line, header)) = lines.next() else {
        return Err(fail(1, format!("empty file; {expected}")));
    };
    let names: Vec<String> = header.split(',').map(|c| c.trim().to_owned()).collect();
    let by_time = match names[0].to_ascii_lowercase().as_str() {
        "hour" => false,
        "timestamp" => true,
        _ => return Err(fail(header_line, format!("header `{header}`: {expected}"))),
    };
    let names = &names[1..];
    if names.is_empty() || names.iter().any(String::is_empty) {
        return Err(fail(header_line, format!("header `{header}`: {expected}")));
    }
    if names.len() > MAX_CLASSES {
        return Err(fail(
            header_line,
            format!(
                "{} demand columns; at most {MAX_CLASSES} classes are allowed",
                names.len()
            ),
        ));
    }
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(fail(header_line, format!("column `{name}` appears twice")));
        }
    }
    let mut columns: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut start = None;
    let mut previous: Option<(i64, usize)> = None;
    let mut rows = 0;
    for (line, row) in lines {
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        if cells.len() != names.len() + 1 {
            return Err(fail(
                line,
                format!(
                    "expected {} columns, found {}",
                    names.len() + 1,
                    cells.len()
                ),
            ));
        }
        let hour = if by_time {
            let t = parse_time(cells[0]).ok_or_else(|| {
                fail(
                    line,
                    format!(
                        "timestamp `{}` is not an RFC 3339 or `YYYY-MM-DD HH:MM` time",
                        cells[0]
                    ),
                )
            })?;
            start.get_or_insert(t);
            t.timestamp().div_euclid(3600)
        } else {
            cells[0]
                .parse::<i64>()
                .map_err(|_| fail(line, format!("hour `{}` is not a whole number", cells[0])))?
        };
        if let Some((prev, prev_line)) = previous
            && prev.checked_add(1) != Some(hour)
        {
            return Err(fail(
                line,
                format!(
                    "hours must be consecutive: this row follows line {prev_line} but is {} hour(s) after it",
                    i128::from(hour) - i128::from(prev)
                ),
            ));
        }
        if rows == MAX_ROWS {
            return Err(fail(
                line,
                format!("more than {MAX_ROWS} rows (ten years of hours)"),
            ));
        }
        previous = Some((hour, line));
        rows += 1;
        for ((name, cell), column) in names.iter().zip(&cells[1..]).zip(&mut columns) {
            let value = cell
                .parse::<f64>()
                .ok()
                .filter(|g| (0.0..=MAX_DEMAND_PER_HOUR).contains(g))
                .ok_or_else(|| {
                    fail(
                        line,
                        format!(
                            "{name} `{cell}` is not a number between 0 and {MAX_DEMAND_PER_HOUR}"
                        ),
                    )
                })?;
            column.push(value);
        }
    }
    if rows == 0 {
        return Err(fail(
            header_line,
            "no demand rows after the header".to_owned(),
        ));
    }
    Ok(DemandTable {
        columns: names.iter().cloned().zip(columns).collect(),
        start,
    })
}

/// Per class id, its settings as the classes file gives them.
pub type ClassSpecs = Vec<(String, Map<String, Value>)>;

/// Reads a classes file: `[classes.<id>]` tables in TOML, or
/// `{"classes": {"<id>": {…}}}` in a `.json` file.
///
/// # Errors
/// Unreadable or malformed files, naming the file.
pub fn read_classes(path: &Path) -> Result<ClassSpecs, InputError> {
    let (file, text) = read(path)?;
    let fail = |message: String| InputError {
        file: file.clone(),
        line: 0,
        message,
    };
    let doc: Value = if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        serde_json::from_str(&text).map_err(|e| fail(format!("not JSON: {e}")))?
    } else {
        let table: toml::Table = text.parse().map_err(|e| fail(format!("not TOML: {e}")))?;
        serde_json::to_value(table).map_err(|e| fail(e.to_string()))?
    };
    let Some(top) = doc.as_object() else {
        return Err(fail("must be a table with `classes`".to_owned()));
    };
    if let Some(other) = top.keys().find(|k| *k != "classes") {
        return Err(fail(format!(
            "unknown key `{other}`; the file holds `classes` only"
        )));
    }
    let Some(Value::Object(classes)) = top.get("classes") else {
        return Err(fail(
            "needs `classes`, a table of classes by id (`[classes.train]`)".to_owned(),
        ));
    };
    classes
        .iter()
        .map(|(id, v)| match v {
            Value::Object(settings) => Ok((id.clone(), settings.clone())),
            _ => Err(fail(format!("classes.{id} must be a table"))),
        })
        .collect()
}

/// The classes of a catalog plan: a one-column table alone is the single
/// class of a v1 plan; otherwise every column needs a class in `specs` and
/// every class a column.
///
/// # Errors
/// A column without a class or a class without a column, or a bad class
/// setting, naming the file and the class.
pub fn demand_classes(
    table: DemandTable,
    demand_file: &str,
    specs: Option<(&str, &ClassSpecs)>,
) -> Result<Vec<DemandClass>, InputError> {
    let Some((classes_file, specs)) = specs else {
        return match <[_; 1]>::try_from(table.columns) {
            Ok([(_, demand)]) => Ok(vec![DemandClass::default_class(demand)]),
            Err(columns) => Err(InputError {
                file: demand_file.to_owned(),
                line: 1,
                message: format!(
                    "{} demand columns ({}); several classes need a classes file (--classes) describing each",
                    columns.len(),
                    columns
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        };
    };
    let in_classes = |message: String| InputError {
        file: classes_file.to_owned(),
        line: 0,
        message,
    };
    if let Some((id, _)) = specs
        .iter()
        .find(|(id, _)| !table.columns.iter().any(|(n, _)| n == id))
    {
        return Err(in_classes(format!(
            "class `{id}` has no column in {demand_file}"
        )));
    }
    table
        .columns
        .into_iter()
        .map(|(name, demand)| {
            let Some((_, settings)) = specs.iter().find(|(id, _)| *id == name) else {
                return Err(InputError {
                    file: demand_file.to_owned(),
                    line: 1,
                    message: format!("column `{name}` is not a class of {classes_file}"),
                });
            };
            let mut doc = settings.clone();
            for key in ["id", "demand"] {
                if doc.contains_key(key) {
                    return Err(in_classes(format!(
                        "classes.{name}.{key}: comes from the demand file, not from here"
                    )));
                }
            }
            doc.insert("id".to_owned(), json!(name));
            doc.insert("demand".to_owned(), json!(demand));
            super::work::resolve_class(&format!("classes.{name}"), &mut doc)
                .map_err(|e| in_classes(e.to_string()))?;
            DemandClass::from_json(&format!("classes.{name}"), &Value::Object(doc))
                .map_err(|e| in_classes(e.to_string()))
        })
        .collect()
}

/// The classes of a catalog plan from a demand CSV and, when it has several
/// columns, the classes file describing them.
///
/// # Errors
/// As [`read_demand_table`], [`read_classes`] and [`demand_classes`].
pub fn read_catalog_classes(
    demand: &Path,
    classes: Option<&Path>,
) -> Result<Vec<DemandClass>, InputError> {
    let table = read_demand_table(demand)?;
    let specs = match classes {
        Some(path) => Some((path.display().to_string(), read_classes(path)?)),
        None => None,
    };
    demand_classes(
        table,
        &demand.display().to_string(),
        specs.as_ref().map(|(f, s)| (f.as_str(), s)),
    )
}

/// One owned reservation as a user writes it: the offer by its id
/// (`provider/region/instance_type`) or by those three parts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnedEntry {
    pub offer: Option<String>,
    pub provider: Option<String>,
    pub region: Option<String>,
    pub instance_type: Option<String>,
    pub option: String,
    pub count: f64,
    pub remaining_hours: Option<u64>,
}

impl OwnedEntry {
    /// The entry with its offer id settled and its numbers checked.
    ///
    /// # Errors
    /// What is missing or out of range.
    pub fn resolve(self) -> Result<Owned, String> {
        let offer = match (self.offer, self.provider, self.region, self.instance_type) {
            (Some(id), None, None, None) if !id.trim().is_empty() => id,
            (None, Some(p), Some(r), Some(t))
                if ![&p, &r, &t].iter().any(|s| s.trim().is_empty()) =>
            {
                format!("{p}/{r}/{t}")
            }
            _ => {
                return Err(
                    "name the offer by `offer` (provider/region/instance_type) or by `provider`, `region` and `instance_type`"
                        .to_owned(),
                );
            }
        };
        if self.option.trim().is_empty() {
            return Err("`option` must name a reserved option, e.g. reserved_1y".to_owned());
        }
        if !(0.0..=MAX_DEMAND_PER_HOUR).contains(&self.count) {
            return Err(format!(
                "`count` {} is out of range; allowed: 0 to {MAX_DEMAND_PER_HOUR}",
                self.count
            ));
        }
        Ok(Owned {
            offer,
            option: self.option,
            count: self.count,
            remaining_hours: self.remaining_hours,
        })
    }
}

/// Reads an owned-reservations CSV: a header naming `option`, `count`,
/// `remaining_hours` (optional; empty cells last the whole horizon) and
/// either `offer` or `provider,region,instance_type`.
///
/// # Errors
/// The first problem, naming file and line.
pub fn read_owned(path: &Path) -> Result<Vec<Owned>, InputError> {
    let (file, text) = read(path)?;
    parse_owned(&file, &text)
}

/// Parses owned-reservations CSV text; `file` names it in errors.
///
/// # Errors
/// The first problem, naming file and line.
pub fn parse_owned(file: &str, text: &str) -> Result<Vec<Owned>, InputError> {
    let fail = |line: usize, message: String| InputError {
        file: file.to_owned(),
        line,
        message,
    };
    let mut lines = content_lines(text);
    let Some((header_line, header)) = lines.next() else {
        return Err(fail(
            1,
            "empty file; expected a header such as `offer,option,count,remaining_hours`".to_owned(),
        ));
    };
    const KNOWN: &[&str] = &[
        "offer",
        "provider",
        "region",
        "instance_type",
        "option",
        "count",
        "remaining_hours",
    ];
    let names: Vec<String> = header
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    if let Some(unknown) = names.iter().find(|n| !KNOWN.contains(&n.as_str())) {
        return Err(fail(
            header_line,
            format!("unknown column `{unknown}`; known: {}", KNOWN.join(", ")),
        ));
    }
    let mut out = Vec::new();
    for (line, row) in lines {
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        if cells.len() != names.len() {
            return Err(fail(
                line,
                format!("expected {} columns, found {}", names.len(), cells.len()),
            ));
        }
        if out.len() == MAX_OWNED {
            return Err(fail(line, format!("more than {MAX_OWNED} entries")));
        }
        let cell: BTreeMap<&str, &str> = names
            .iter()
            .map(String::as_str)
            .zip(cells.iter().copied())
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let text = |key: &str| cell.get(key).map(|v| (*v).to_owned());
        let count = match cell.get("count") {
            Some(v) => v
                .parse::<f64>()
                .map_err(|_| fail(line, format!("count `{v}` is not a number")))?,
            None => return Err(fail(line, "count is required".to_owned())),
        };
        let remaining_hours = match cell.get("remaining_hours") {
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                fail(
                    line,
                    format!("remaining_hours `{v}` is not a whole number of hours"),
                )
            })?),
            None => None,
        };
        let entry = OwnedEntry {
            offer: text("offer"),
            provider: text("provider"),
            region: text("region"),
            instance_type: text("instance_type"),
            option: text("option").unwrap_or_default(),
            count,
            remaining_hours,
        };
        out.push(entry.resolve().map_err(|m| fail(line, m))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
