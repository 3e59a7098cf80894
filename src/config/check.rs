//! The validation checker: collects every problem with its dotted path.

use super::*;

/// Collects problems while converting raw values into checked ones.
#[derive(Default)]
pub(super) struct Checker {
    pub(super) errors: Vec<ConfigError>,
}

impl Checker {
    pub(super) fn fail(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError::new(path, message));
    }

    /// A bad schedule is recorded and replaced by the default, so the rest of the
    /// config can still be checked; the recorded error rejects the config.
    pub(super) fn schedule(&mut self, path: &str, expr: Option<&str>) -> Schedule {
        Schedule::parse(expr.unwrap_or(DEFAULT_LIST_SCHEDULE)).unwrap_or_else(|e| {
            self.fail(path, e);
            Schedule::parse(DEFAULT_LIST_SCHEDULE).expect("the built-in schedule is valid")
        })
    }

    /// A positive number of seconds, or the default.
    pub(super) fn seconds(&mut self, path: &str, value: Option<f64>, default: f64) -> Duration {
        let v = value.unwrap_or(default);
        if v.is_finite() && v > 0.0 && v < 1e9 {
            Duration::from_secs_f64(v)
        } else {
            self.fail(path, format!("{v} is not a positive number of seconds"));
            Duration::from_secs_f64(default)
        }
    }

    /// An integer in `range`, or the default (the same rule the providers'
    /// sections use).
    pub(super) fn bounded(
        &mut self,
        path: &str,
        value: Option<i64>,
        default: u32,
        range: std::ops::RangeInclusive<u32>,
    ) -> u32 {
        let mut problems = gpuplan_providers::config::Problems::new("");
        let n = problems.bounded(path, value, default, range);
        self.absorb(problems);
        n
    }

    /// The problems a provider found in its own section.
    pub(super) fn absorb(&mut self, problems: gpuplan_providers::config::Problems) {
        for (path, message) in problems.into_vec() {
            self.fail(path, message);
        }
    }
}
