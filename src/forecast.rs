//! Demand input for the planner: a CSV of hourly GPU demand, either
//! `hour,gpus` (consecutive hour numbers) or `timestamp,gpus` (consecutive UTC
//! hours). Every bad cell is an error naming file, line and column.

use std::path::Path;

use chrono::{DateTime, NaiveDateTime, Utc};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct DemandError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// Hourly GPU demand, with the first hour's time when the file gave times.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    pub gpus: Vec<f64>,
    pub start: Option<DateTime<Utc>>,
}

/// Reads a demand CSV.
///
/// # Errors
/// The first problem, naming file and line.
pub fn read_demand(path: &Path) -> Result<Demand, DemandError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| DemandError {
        file: file.clone(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    parse_demand(&file, &text)
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

/// Parses demand CSV text; `file` names it in errors.
///
/// # Errors
/// The first problem, naming file and line.
pub fn parse_demand(file: &str, text: &str) -> Result<Demand, DemandError> {
    let fail = |line: usize, message: String| DemandError {
        file: file.to_owned(),
        line,
        message,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let Some((header_line, header)) = lines.next() else {
        return Err(fail(
            1,
            "empty file; expected a header `hour,gpus` or `timestamp,gpus`".to_owned(),
        ));
    };
    let by_time = match header.replace(' ', "").to_ascii_lowercase().as_str() {
        "hour,gpus" => false,
        "timestamp,gpus" => true,
        other => {
            return Err(fail(
                header_line,
                format!("header `{other}`: expected `hour,gpus` or `timestamp,gpus`"),
            ));
        }
    };
    let mut gpus = Vec::new();
    let mut start = None;
    let mut previous: Option<(i64, usize)> = None;
    for (line, row) in lines {
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        if cells.len() != 2 {
            return Err(fail(
                line,
                format!("expected 2 columns, found {}", cells.len()),
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
            && hour != prev + 1
        {
            return Err(fail(
                line,
                format!(
                    "hours must be consecutive: this row follows line {prev_line} but is {} hour(s) after it",
                    hour - prev
                ),
            ));
        }
        previous = Some((hour, line));
        let g = cells[1]
            .parse::<f64>()
            .ok()
            .filter(|g| g.is_finite() && *g >= 0.0)
            .ok_or_else(|| fail(line, format!("gpus `{}` is not a number >= 0", cells[1])))?;
        gpus.push(g);
    }
    if gpus.is_empty() {
        return Err(fail(
            header_line,
            "no demand rows after the header".to_owned(),
        ));
    }
    Ok(Demand { gpus, start })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_or_timestamps_give_the_series() {
        let d = parse_demand("d.csv", "hour,gpus\n0,8\n1,16\n2,0\n").unwrap();
        assert_eq!((d.gpus, d.start), (vec![8.0, 16.0, 0.0], None));
        let d = parse_demand(
            "d.csv",
            "# forecast\ntimestamp,gpus\n2026-12-01T00:00:00Z,4\n2026-12-01 01:00,5.5\n",
        )
        .unwrap();
        assert_eq!(d.gpus, vec![4.0, 5.5]);
        assert_eq!(d.start.unwrap().to_rfc3339(), "2026-12-01T00:00:00+00:00");
    }

    #[test]
    fn bad_rows_name_their_line() {
        let err = |text: &str| parse_demand("d.csv", text).unwrap_err();
        assert_eq!(err("hours,gpus\n0,1\n").line, 1);
        assert_eq!(err("hour,gpus\n0,1\n1,-2\n").line, 3);
        assert_eq!(err("hour,gpus\n0,1\n2,1\n").line, 3);
        assert_eq!(err("hour,gpus\n0,1,2\n").line, 2);
        assert!(
            err("timestamp,gpus\nyesterday,1\n")
                .to_string()
                .starts_with("d.csv:2: timestamp `yesterday`")
        );
        assert_eq!(err("hour,gpus\n").line, 1);
    }
}
