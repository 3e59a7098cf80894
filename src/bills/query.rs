//! The questions people ask of the bills, checked the same way for the CLI
//! and the HTTP API: a bounded window, a known grain and group fields, a row
//! limit. Each refusal names its parameter.

use chrono::{DateTime, Utc};

use super::UsageKind;
use super::time::DAY;
use crate::store::bills::{BillQuery, Bucket, SPEND_FIELDS, USAGE_FIELDS};

/// A refused parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {message}")]
pub struct QueryError {
    pub parameter: String,
    pub message: String,
}

fn refuse(parameter: &str, message: impl Into<String>) -> QueryError {
    QueryError {
        parameter: parameter.to_owned(),
        message: message.into(),
    }
}

/// The raw parameters of a usage, spend, commitments or coverage question.
#[derive(Debug, Clone, Default)]
pub struct Params {
    pub since: Option<String>,
    pub until: Option<String>,
    pub by: Option<String>,
    /// Comma-separated lists, each entry one or more fields.
    pub group: Vec<String>,
    pub teams: Vec<String>,
    pub providers: Vec<String>,
    pub gpus: Vec<String>,
    pub price_kinds: Vec<String>,
    pub gpu_only: bool,
    pub limit: Option<usize>,
}

/// The default window: the last 30 days.
pub const DEFAULT_DAYS: i64 = 30;
/// The longest window of an hourly answer (a quarter of hours).
pub const MAX_HOURLY_DAYS: i64 = 93;
/// The longest window of a daily or monthly answer.
pub const MAX_DAYS: i64 = 3660;
pub const DEFAULT_LIMIT: usize = 10_000;
pub const MAX_LIMIT: usize = 100_000;
/// Values a list parameter may hold.
const MAX_VALUES: usize = 50;

/// A date (`2026-10-01`, midnight UTC) or an RFC 3339 time, read as bill
/// dates are.
///
/// # Errors
/// Naming `parameter` when the text is neither.
pub fn parse_time(parameter: &str, text: &str) -> Result<i64, QueryError> {
    super::time::parse(text).map_err(|_| {
        refuse(
            parameter,
            format!("`{text}` is not a date (2026-10-01) or an RFC 3339 time"),
        )
    })
}

/// `[since, until)`: until defaults to now, since to `DEFAULT_DAYS` before it.
///
/// # Errors
/// A bad time, an empty window, or one longer than `max_days`.
pub fn window(p: &Params, now: DateTime<Utc>, max_days: i64) -> Result<(i64, i64), QueryError> {
    let until = match &p.until {
        Some(t) => parse_time("until", t)?,
        None => now.timestamp(),
    };
    let since = match &p.since {
        Some(t) => parse_time("since", t)?,
        None => until - DEFAULT_DAYS * DAY,
    };
    if since >= until {
        return Err(refuse("since", "must be before until"));
    }
    if until - since > max_days * DAY {
        return Err(refuse(
            "since",
            format!("the window is longer than {max_days} days; narrow it"),
        ));
    }
    Ok((since, until))
}

fn list(parameter: &str, values: &[String]) -> Result<Vec<String>, QueryError> {
    let out: Vec<String> = values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect();
    if out.len() > MAX_VALUES {
        return Err(refuse(parameter, format!("more than {MAX_VALUES} values")));
    }
    Ok(out)
}

fn fields(values: &[String], allowed: &[&str]) -> Result<Vec<String>, QueryError> {
    let mut out = Vec::new();
    for f in list("group", values)? {
        if !allowed.contains(&f.as_str()) {
            return Err(refuse(
                "group",
                format!("`{f}` is not a field; one of: {}", allowed.join(", ")),
            ));
        }
        if !out.contains(&f) {
            out.push(f);
        }
    }
    Ok(out)
}

fn limit(p: &Params) -> Result<usize, QueryError> {
    match p.limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(refuse(
            "limit",
            format!("{n} is out of range; allowed: 1 to {MAX_LIMIT}"),
        )),
    }
}

fn bucket(p: &Params, allowed: &[(&str, Bucket)]) -> Result<Bucket, QueryError> {
    match p.by.as_deref() {
        None => Ok(Bucket::Day),
        Some(b) => allowed
            .iter()
            .find(|(name, _)| *name == b)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
                refuse(
                    "by",
                    format!("`{b}` is not a grain; one of: {}", names.join(", ")),
                )
            }),
    }
}

/// A usage question.
///
/// # Errors
/// The first refused parameter.
pub fn usage(p: &Params, now: DateTime<Utc>) -> Result<BillQuery, QueryError> {
    let by = bucket(
        p,
        &[
            ("hour", Bucket::Hour),
            ("day", Bucket::Day),
            ("month", Bucket::Month),
        ],
    )?;
    let max = if by == Bucket::Hour {
        MAX_HOURLY_DAYS
    } else {
        MAX_DAYS
    };
    let (since, until) = window(p, now, max)?;
    let price_kinds = list("price_kind", &p.price_kinds)?;
    if let Some(bad) = price_kinds.iter().find(|k| UsageKind::parse(k).is_none()) {
        let names: Vec<&str> = UsageKind::ALL.iter().map(|k| k.as_str()).collect();
        return Err(refuse(
            "price_kind",
            format!("`{bad}` is not a price kind; one of: {}", names.join(", ")),
        ));
    }
    Ok(BillQuery {
        since,
        until,
        by: Some(by),
        group: fields(&p.group, USAGE_FIELDS)?,
        teams: list("team", &p.teams)?,
        providers: list("provider", &p.providers)?,
        gpus: list("gpu", &p.gpus)?,
        price_kinds,
        gpu_only: false,
        accounts: Vec::new(),
        limit: limit(p)?,
    })
}

/// A spend question.
///
/// # Errors
/// The first refused parameter.
pub fn spend(p: &Params, now: DateTime<Utc>) -> Result<BillQuery, QueryError> {
    let by = bucket(p, &[("day", Bucket::Day), ("month", Bucket::Month)])?;
    let (since, until) = window(p, now, MAX_DAYS)?;
    Ok(BillQuery {
        since,
        until,
        by: Some(by),
        group: fields(&p.group, SPEND_FIELDS)?,
        teams: list("team", &p.teams)?,
        providers: list("provider", &p.providers)?,
        gpus: Vec::new(),
        price_kinds: Vec::new(),
        gpu_only: p.gpu_only,
        accounts: Vec::new(),
        limit: limit(p)?,
    })
}

/// A commitments or coverage question: providers and a window.
///
/// # Errors
/// The first refused parameter.
pub fn window_of(p: &Params, now: DateTime<Utc>) -> Result<(Vec<String>, i64, i64), QueryError> {
    let (since, until) = window(p, now, MAX_DAYS)?;
    Ok((list("provider", &p.providers)?, since, until))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-11-15T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn each_refusal_names_its_parameter() {
        let cases = [
            (
                Params {
                    since: Some("last week".into()),
                    ..Params::default()
                },
                "since",
            ),
            (
                Params {
                    by: Some("week".into()),
                    ..Params::default()
                },
                "by",
            ),
            (
                Params {
                    group: vec!["team,colour".into()],
                    ..Params::default()
                },
                "group",
            ),
            (
                Params {
                    price_kinds: vec!["cheap".into()],
                    ..Params::default()
                },
                "price_kind",
            ),
            (
                Params {
                    limit: Some(MAX_LIMIT + 1),
                    ..Params::default()
                },
                "limit",
            ),
            (
                Params {
                    by: Some("hour".into()),
                    since: Some("2026-01-01".into()),
                    ..Params::default()
                },
                "since",
            ),
        ];
        for (p, param) in cases {
            assert_eq!(usage(&p, now()).unwrap_err().parameter, param, "{p:?}");
        }
    }

    #[test]
    fn the_default_window_is_the_last_thirty_days() {
        let q = usage(&Params::default(), now()).unwrap();
        assert_eq!(q.until - q.since, 30 * DAY);
        assert_eq!(q.until, now().timestamp());
        let q = usage(
            &Params {
                group: vec!["team".into(), "gpu_model,team".into()],
                ..Params::default()
            },
            now(),
        )
        .unwrap();
        assert_eq!(q.group, ["team", "gpu_model"]);
    }
}
