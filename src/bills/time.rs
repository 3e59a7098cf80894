//! Dates as the exports write them, to Unix seconds (UTC).
//!
//! FOCUS says ISO 8601 UTC, but real files vary: Azure FOCUS 1.0 drops the
//! seconds (`2024-01-01T00:00Z`), OCI writes `+00:00` or fractions, BigQuery's
//! CSV export writes `2026-10-01 00:00:00 UTC`, and a date alone appears too.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// Parses one timestamp; the error says what was expected.
pub(crate) fn parse(text: &str) -> Result<i64, String> {
    let t = text.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Ok(d.timestamp());
    }
    let t = t.strip_suffix(" UTC").unwrap_or(t);
    // Offsets other than Z need the colon form RFC 3339 takes; without seconds
    // (`…T00:00Z`, `…T00:00+00:00`) chrono's RFC 3339 parser refuses, so the
    // naive part is parsed alone and the offset applied.
    let (naive, offset) = split_offset(t);
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(n) = NaiveDateTime::parse_from_str(naive, format) {
            return Ok(n.and_utc().timestamp() - offset);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(naive, "%Y-%m-%d") {
        return Ok(d
            .and_hms_opt(0, 0, 0)
            .map_or(0, |n| n.and_utc().timestamp())
            - offset);
    }
    Err(format!(
        "`{text}` is not an ISO 8601 UTC time (2026-10-01T00:00:00Z)"
    ))
}

/// Splits a trailing `Z`, `+HH:MM` or `-HH:MM` off; the offset in seconds.
fn split_offset(t: &str) -> (&str, i64) {
    if let Some(rest) = t.strip_suffix('Z').or_else(|| t.strip_suffix('z')) {
        return (rest, 0);
    }
    let bytes = t.as_bytes();
    // Only an ASCII tail can be an offset; slicing anything else could cut
    // a character in two.
    let tail = bytes
        .len()
        .checked_sub(6)
        .filter(|at| *at > 0)
        .and_then(|at| {
            t.get(at..)
                .filter(|tail| tail.is_ascii())
                .map(|tail| (at, tail))
        });
    if let Some((at, tail)) = tail {
        let sign = match bytes[at] {
            b'+' => 1,
            b'-' => -1,
            _ => 0,
        };
        if sign != 0
            && tail.as_bytes()[3] == b':'
            && let (Ok(h), Ok(m)) = (tail[1..3].parse::<i64>(), tail[4..6].parse::<i64>())
        {
            return (&t[..at], sign * (h * 3600 + m * 60));
        }
    }
    (t, 0)
}

pub(crate) const HOUR: i64 = 3600;
pub(crate) const DAY: i64 = 86_400;

pub(crate) fn floor_hour(t: i64) -> i64 {
    t.div_euclid(HOUR) * HOUR
}

pub(crate) fn floor_day(t: i64) -> i64 {
    t.div_euclid(DAY) * DAY
}

pub(crate) fn to_utc(t: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(t, 0).single().unwrap_or_default()
}

/// The billing period's name: the year and month it starts in (`2026-10`).
/// The UTC day of `t`, as `2026-10-01`.
pub(crate) fn day_name(t: i64) -> String {
    to_utc(t).format("%Y-%m-%d").to_string()
}

pub(crate) fn period_name(start: i64) -> String {
    let d = to_utc(start);
    format!("{:04}-{:02}", d.year(), d.month())
}

/// The start of the next calendar month after `t` (UTC).
pub(crate) fn next_month(t: i64) -> i64 {
    let d = to_utc(t);
    let (y, m) = if d.month() == 12 {
        (d.year() + 1, 1)
    } else {
        (d.year(), d.month() + 1)
    };
    Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0)
        .single()
        .map_or(t, |d| d.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_is_not_ascii_is_refused_not_split_mid_character() {
        for text in [
            "çS¸¿å{",
            "2026-10-01T00:00:00+01:0¸",
            "ç2026-10-01",
            "¸¸¸¸¸¸¸",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
        assert_eq!(
            parse("2026-10-01T01:00:00+01:00"),
            parse("2026-10-01T00:00:00Z")
        );
    }

    #[test]
    fn the_date_forms_real_exports_write() {
        let want = 1_780_272_000; // 2026-06-01T00:00:00Z
        for text in [
            "2026-06-01T00:00:00Z",
            "2026-06-01T00:00Z",
            "2026-06-01T00:00:00.000Z",
            "2026-06-01T00:00:00+00:00",
            "2026-06-01T00:00+00:00",
            "2026-06-01 00:00:00 UTC",
            "2026-06-01T02:00:00+02:00",
            "2026-06-01",
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
        assert!(parse("01/06/2026").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn months_roll_over_the_year() {
        let dec = parse("2026-12-15T10:00:00Z").unwrap();
        assert_eq!(next_month(dec), parse("2027-01-01T00:00:00Z").unwrap());
        assert_eq!(period_name(dec), "2026-12");
    }
}
