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

    pub(super) fn endpoint(&mut self, path: &str, value: Option<String>, default: &str) -> String {
        let value = value.unwrap_or_else(|| default.to_owned());
        let ok = (value.starts_with("http://") || value.starts_with("https://"))
            && value.len() > "https://".len()
            && !value.contains(char::is_whitespace);
        if !ok {
            self.fail(path, format!("`{value}` is not an http(s) base URL"));
        }
        value
    }

    /// An integer in `range`, or the default.
    pub(super) fn bounded(
        &mut self,
        path: &str,
        value: Option<i64>,
        default: u32,
        range: std::ops::RangeInclusive<u32>,
    ) -> u32 {
        let v = value.unwrap_or(i64::from(default));
        match u32::try_from(v) {
            Ok(n) if range.contains(&n) => n,
            _ => {
                self.fail(
                    path,
                    format!("{v} is not between {} and {}", range.start(), range.end()),
                );
                default
            }
        }
    }

    #[cfg(feature = "aws")]
    pub(super) fn instance_types(&mut self, value: Option<Vec<String>>) -> Vec<String> {
        let patterns = value.unwrap_or_default();
        for (i, p) in patterns.iter().enumerate() {
            let ok = !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '*'));
            if !ok {
                self.fail(
                    format!("providers.aws.instance_types[{i}]"),
                    format!("`{p}` is not an instance type or pattern (like \"p5.48xlarge\" or \"g6.*\")"),
                );
            }
        }
        patterns
    }

    #[cfg(feature = "aws")]
    pub(super) fn aws_sources(&mut self, value: Option<Vec<String>>) -> AwsSources {
        let Some(names) = value else {
            return AwsSources::default();
        };
        let mut sources = AwsSources {
            spot_history: false,
            offerings: false,
            spot_advisor: false,
            placement_scores: false,
        };
        for (i, name) in names.iter().enumerate() {
            let flag = match name.as_str() {
                "spot_history" => &mut sources.spot_history,
                "offerings" => &mut sources.offerings,
                "spot_advisor" => &mut sources.spot_advisor,
                "placement_scores" => &mut sources.placement_scores,
                other => {
                    self.fail(
                        format!("providers.aws.sources[{i}]"),
                        format!("`{other}` is not one of \"spot_history\", \"offerings\", \"spot_advisor\", \"placement_scores\""),
                    );
                    continue;
                }
            };
            *flag = true;
        }
        sources
    }

    pub(super) fn regions(&mut self, path: &str, value: Option<Vec<String>>) -> Vec<String> {
        let regions = value.unwrap_or_default();
        for (i, r) in regions.iter().enumerate() {
            let ok = !r.is_empty()
                && r.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !ok {
                self.fail(format!("{path}[{i}]"), format!("`{r}` is not a region code (lowercase letters, digits and '-', like \"eastus\" or \"us-central1\")"));
            }
        }
        regions
    }
}
