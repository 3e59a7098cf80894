//! Each provider reads and checks its own `[providers.<name>]` table: the
//! sections are defined next to the provider they configure, and turn into
//! its config (and then, through `new`, into the provider). The daemon only
//! adds when each source runs.
//!
//! A section holds the daemon's keys too (`enabled`, `schedule`), unread
//! here, so that one strict table rejects every unknown key.

/// Whether `instance_type` matches one of `patterns` (`*` matches any run of
/// characters); no patterns select every type.
#[must_use]
pub fn selected(patterns: &[String], instance_type: &str) -> bool {
    patterns.is_empty() || patterns.iter().any(|p| glob(p, instance_type))
}

fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|i| tail.is_char_boundary(*i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}

use crate::snapshot::Currency;

/// Problems found in one section, each at a dotted path under the section's
/// own (`providers.aws.regions[1]`), all reported at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems {
    prefix: String,
    found: Vec<(String, String)>,
}

impl Problems {
    /// Problems of the section at `prefix` (`providers.aws`); an empty prefix
    /// takes keys as whole paths.
    #[must_use]
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            found: Vec::new(),
        }
    }

    /// Notes a problem of `key` (`regions[1]`) in this section.
    pub fn fail(&mut self, key: impl AsRef<str>, message: impl Into<String>) {
        let path = if self.prefix.is_empty() {
            key.as_ref().to_owned()
        } else {
            format!("{}.{}", self.prefix, key.as_ref())
        };
        self.found.push((path, message.into()));
    }

    /// (dotted path, message) of each problem, in the order found.
    #[must_use]
    pub fn into_vec(self) -> Vec<(String, String)> {
        self.found
    }

    /// An http(s) base URL, or `default`.
    pub fn endpoint(&mut self, key: &str, value: Option<String>, default: &str) -> String {
        let value = value.unwrap_or_else(|| default.to_owned());
        let ok = (value.starts_with("http://") || value.starts_with("https://"))
            && value.len() > "https://".len()
            && !value.contains(char::is_whitespace);
        if !ok {
            self.fail(key, format!("`{value}` is not an http(s) base URL"));
        }
        value
    }

    /// Region codes (lowercase letters, digits and `-`).
    pub fn regions(&mut self, key: &str, value: Option<Vec<String>>) -> Vec<String> {
        let regions = value.unwrap_or_default();
        for (i, r) in regions.iter().enumerate() {
            let ok = !r.is_empty()
                && r.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !ok {
                self.fail(
                    format!("{key}[{i}]"),
                    format!("`{r}` is not a region code (lowercase letters, digits and '-', like \"eastus\" or \"us-central1\")"),
                );
            }
        }
        regions
    }

    /// Instance type names or `*` patterns (`p5.48xlarge`, `g6.*`).
    pub fn instance_types(&mut self, key: &str, value: Option<Vec<String>>) -> Vec<String> {
        let patterns = value.unwrap_or_default();
        for (i, t) in patterns.iter().enumerate() {
            let ok = !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '*'));
            if !ok {
                self.fail(
                    format!("{key}[{i}]"),
                    format!(
                        "`{t}` is not an instance type or pattern (like \"p5.48xlarge\" or \"g6.*\")"
                    ),
                );
            }
        }
        patterns
    }

    /// The currency of a cloud's site: `international` (the default) prices
    /// in USD, `china` (aliyun.com, cloud.tencent.com) in CNY, which needs a
    /// rate from `rates` (the config's `[fx]`).
    pub fn site_currency(
        &mut self,
        key: &str,
        site: Option<&str>,
        rates: &dyn Fn(&str) -> Option<Currency>,
    ) -> Currency {
        let code = match site.unwrap_or("international") {
            "international" => return Currency::usd(),
            "china" => "CNY",
            other => {
                self.fail(
                    key,
                    format!("`{other}` is not one of \"international\", \"china\""),
                );
                return Currency::usd();
            }
        };
        rates(code).unwrap_or_else(|| {
            self.fail(
                key,
                format!("this site prices in {code}; set its rate as `[fx] {code} = <{code} per US dollar>`"),
            );
            Currency::usd()
        })
    }

    /// A whole number in `range`, or `default`.
    pub fn bounded(
        &mut self,
        key: &str,
        value: Option<i64>,
        default: u32,
        range: std::ops::RangeInclusive<u32>,
    ) -> u32 {
        let v = value.unwrap_or(i64::from(default));
        match u32::try_from(v) {
            Ok(n) if range.contains(&n) => n,
            _ => {
                self.fail(
                    key,
                    format!("{v} is not between {} and {}", range.start(), range.end()),
                );
                default
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_named_under_their_section() {
        let mut p = Problems::new("providers.x");
        assert_eq!(
            p.endpoint("endpoint", None, "https://x.test"),
            "https://x.test"
        );
        p.endpoint("endpoint", Some("ftp://x".into()), "");
        p.regions(
            "regions",
            Some(vec!["us-east-1".into(), "West Europe".into()]),
        );
        assert_eq!(p.bounded("n", Some(99), 4, 1..=32), 4);
        let paths: Vec<String> = p.into_vec().into_iter().map(|(path, _)| path).collect();
        assert_eq!(
            paths,
            [
                "providers.x.endpoint",
                "providers.x.regions[1]",
                "providers.x.n"
            ]
        );
    }
}

/// `[providers.NAME]` of a source whose one setting of its own is its
/// endpoint (Lambda, RunPod, Vast.ai). `enabled` and `schedule` are the
/// daemon's.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSection {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    endpoint: Option<String>,
}

impl EndpointSection {
    /// The endpoint given, or `default`; a bad one is noted in `p`.
    pub fn endpoint(&self, p: &mut Problems, default: &str) -> String {
        p.endpoint("endpoint", self.endpoint.clone(), default)
    }
}
