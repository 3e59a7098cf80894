//! How a plan is built and solved, and the one rule for each setting:
//! `[planner]`, CLI flags and API fields are all checked here, so the
//! config and the plan pipeline share it without importing each other.

use std::time::Duration;

use serde::Serialize;

use crate::optimizer::{Owned, ValidationError};

/// `[planner]`: the daemon-wide plan settings, validated by `config`.
#[derive(Debug, Clone)]
pub struct PlannerConfig {
    /// Solves run at once; more API requests get 503 with `Retry-After`, and
    /// scheduled plans and the CLI wait for a slot.
    pub max_concurrent_solves: usize,
    /// The defaults of every plan (CLI flags and API fields override them).
    pub defaults: PlanSettings,
    /// Reservations the team already holds: catalog plans count them unless
    /// a request gives its own list.
    pub owned: Vec<Owned>,
    /// MiB one MIP search may add to the process before it stops with its
    /// best plan: a daemon-wide guard, which no request can raise.
    pub max_solve_memory_mib: u64,
}

/// How a plan is built and solved: the `[planner]` defaults, or a request's
/// overrides of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanSettings {
    /// A solve without a proven optimum by then fails with `time_limit`.
    #[serde(rename = "time_limit_secs", serialize_with = "secs")]
    pub time_limit: Duration,
    /// History behind the expected spot price.
    #[serde(rename = "spot_window_secs", serialize_with = "secs")]
    pub spot_window: Duration,
    /// Restart plus warm-up hours lost per spot interruption.
    pub restart_hours: f64,
    /// Checkpoint interval in hours (half of it is lost per interruption).
    pub checkpoint_hours: f64,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// A request's own settings, as given (checked by [`PlanSettings::with`]);
/// `None` takes the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Seconds.
    pub time_limit: Option<f64>,
    pub spot_window: Option<Duration>,
    pub restart_hours: Option<f64>,
    pub checkpoint_hours: Option<f64>,
}

/// Longest time limit a request may set: a day.
pub const MAX_TIME_LIMIT: Duration = Duration::from_secs(86_400);

/// Most restart or checkpoint hours a request may give: a year.
pub const MAX_HOURS: f64 = 8760.0;

/// Restart or checkpoint hours `field` gave: 0 to a year. The one rule for
/// `[planner]`, CLI flags and API fields alike.
///
/// # Errors
/// Names `field` and the allowed range.
pub fn check_hours(field: &str, hours: f64) -> Result<f64, ValidationError> {
    if (0.0..=MAX_HOURS).contains(&hours) {
        Ok(hours)
    } else {
        Err(ValidationError {
            path: field.to_owned(),
            message: format!("{hours} is out of range; allowed: 0 to {MAX_HOURS}"),
        })
    }
}

/// A time limit of `secs` seconds that `field` gave: more than 0, up to a day.
///
/// # Errors
/// Names `field` and the allowed range.
pub fn check_time_limit(field: &str, secs: f64) -> Result<Duration, ValidationError> {
    match Duration::try_from_secs_f64(secs) {
        Ok(t) if !t.is_zero() && t <= MAX_TIME_LIMIT => Ok(t),
        _ => Err(ValidationError {
            path: field.to_owned(),
            message: format!(
                "{secs} is out of range; allowed: more than 0, up to {}",
                MAX_TIME_LIMIT.as_secs()
            ),
        }),
    }
}

impl PlanSettings {
    /// These settings with `o`'s overrides, each checked.
    ///
    /// # Errors
    /// The first override out of range, named by its field.
    pub fn with(&self, o: &Overrides) -> Result<Self, ValidationError> {
        let hours = |field: &str, v: Option<f64>, default: f64| {
            v.map_or(Ok(default), |h| check_hours(field, h))
        };
        Ok(Self {
            time_limit: o.time_limit.map_or(Ok(self.time_limit), |t| {
                check_time_limit("time_limit_secs", t)
            })?,
            spot_window: o.spot_window.unwrap_or(self.spot_window),
            restart_hours: hours("restart_hours", o.restart_hours, self.restart_hours)?,
            checkpoint_hours: hours(
                "checkpoint_hours",
                o.checkpoint_hours,
                self.checkpoint_hours,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_defaults_and_are_checked_by_name() {
        let defaults = PlanSettings {
            time_limit: Duration::from_secs(300),
            spot_window: Duration::from_secs(7 * 86400),
            restart_hours: 0.5,
            checkpoint_hours: 1.0,
        };
        assert_eq!(defaults.with(&Overrides::default()).unwrap(), defaults);
        let mine = defaults
            .with(&Overrides {
                restart_hours: Some(2.0),
                time_limit: Some(5.0),
                ..Overrides::default()
            })
            .unwrap();
        assert_eq!((mine.restart_hours, mine.time_limit.as_secs()), (2.0, 5));
        assert_eq!(mine.checkpoint_hours, 1.0);
        for (o, field) in [
            (
                Overrides {
                    restart_hours: Some(-1.0),
                    ..Overrides::default()
                },
                "restart_hours",
            ),
            (
                Overrides {
                    checkpoint_hours: Some(f64::NAN),
                    ..Overrides::default()
                },
                "checkpoint_hours",
            ),
            (
                Overrides {
                    time_limit: Some(0.0),
                    ..Overrides::default()
                },
                "time_limit_secs",
            ),
            (
                Overrides {
                    time_limit: Some(86_401.0),
                    ..Overrides::default()
                },
                "time_limit_secs",
            ),
        ] {
            assert_eq!(defaults.with(&o).unwrap_err().path, field);
        }
    }
}
