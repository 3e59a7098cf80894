//! Configuration: TOML parsed strictly (unknown keys are errors), then validated
//! as a whole so that every problem is reported at once with its dotted path
//! (`providers.file.onprem.schedule: ...`). With no file, built-in defaults apply.
//!
//! Validation is pure: it reads no files and opens no connections. Relative paths
//! in a config file are resolved against the file's own directory, so a service
//! finds the same files whatever its working directory is.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use gpuplan_providers::file::SheetFormat;
use serde::Deserialize;

/// The documented example, also printed by `gpuplan config example`.
pub const EXAMPLE: &str = include_str!("../config/gpuplan.example.toml");

const DEFAULT_STORE_PATH: &str = "gpuplan.db";
const DEFAULT_FILE_SCHEDULE: &str = "0 0 * * * *";

#[derive(Debug, Clone)]
pub struct Config {
    pub store: StoreConfig,
    pub providers: ProvidersConfig,
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub path: PathBuf,
}

#[derive(Debug, Clone, Default)]
pub struct ProvidersConfig {
    /// Price sheets by name; records carry `file:<name>` as their provider.
    pub file: BTreeMap<String, FileSourceConfig>,
}

#[derive(Debug, Clone)]
pub struct FileSourceConfig {
    pub enabled: bool,
    pub path: PathBuf,
    pub format: SheetFormat,
    pub schedule: Schedule,
}

/// A cron schedule (UTC, with a seconds field) and the text it came from.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub expr: String,
    parsed: cron::Schedule,
}

impl Schedule {
    fn parse(expr: &str) -> Result<Self, String> {
        let parsed = cron::Schedule::from_str(expr).map_err(|e| {
            // The cron crate's message spans lines with a caret diagram; keep its words.
            let detail = e.to_string().split_whitespace().filter(|w| *w != "^").collect::<Vec<_>>().join(" ");
            format!("`{expr}` is not a cron schedule (sec min hour day-of-month month day-of-week [year]): {detail}")
        })?;
        if parsed.upcoming(Utc).next().is_none() {
            return Err(format!("`{expr}` never fires again"));
        }
        Ok(Self {
            expr: expr.to_owned(),
            parsed,
        })
    }

    /// The longest gap between consecutive runs over the next few runs after
    /// `from`: data older than twice this is stale.
    #[must_use]
    pub fn interval(&self, from: DateTime<Utc>) -> Duration {
        let fires: Vec<DateTime<Utc>> = self.parsed.after(&from).take(25).collect();
        fires
            .windows(2)
            .filter_map(|w| (w[1] - w[0]).to_std().ok())
            .max()
            .unwrap_or(Duration::from_secs(3600))
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            store: StoreConfig {
                path: PathBuf::from(DEFAULT_STORE_PATH),
            },
            providers: ProvidersConfig::default(),
        }
    }
}

impl Config {
    /// Reads and validates the config file at `path`.
    ///
    /// # Errors
    /// Every problem found, each with its dotted path.
    pub fn load(path: &Path) -> Result<Self, ConfigErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigErrors {
            file: path.display().to_string(),
            errors: vec![ConfigError::new("", format!("cannot read the file: {e}"))],
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        Self::parse(&text, base).map_err(|errors| ConfigErrors {
            file: path.display().to_string(),
            errors,
        })
    }

    /// Parses and validates config text; relative paths are taken from `base`.
    ///
    /// # Errors
    /// Every problem found, each with its dotted path.
    pub fn parse(text: &str, base: &Path) -> Result<Self, Vec<ConfigError>> {
        let raw = parse_raw(text)?;
        raw.validate(base)
    }

    /// The providers the config enables, by their record name (`file:onprem`).
    #[must_use]
    pub fn enabled_sources(&self) -> Vec<String> {
        self.providers
            .file
            .iter()
            .filter(|(_, f)| f.enabled)
            .map(|(name, _)| format!("file:{name}"))
            .collect()
    }

    /// The schedule of a source, if the config has one for it.
    #[must_use]
    pub fn schedule_of(&self, source: &str) -> Option<&Schedule> {
        let name = source.strip_prefix("file:")?;
        self.providers.file.get(name).map(|f| &f.schedule)
    }
}

/// One problem with a config, at a dotted path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// All problems of one config file, shown one per line.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigErrors {
    pub file: String,
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{}: {n} problem{}:",
            self.file,
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    store: RawStore,
    #[serde(default)]
    providers: RawProviders,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProviders {
    #[serde(default)]
    file: BTreeMap<String, RawFileSource>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFileSource {
    enabled: Option<bool>,
    path: String,
    format: Option<String>,
    schedule: Option<String>,
}

/// Structural parsing: syntax, unknown keys and wrong types. serde stops at the
/// first of these, so this yields one error; semantic checks then collect all.
fn parse_raw(text: &str) -> Result<RawConfig, Vec<ConfigError>> {
    let located = |message: &str, span: Option<std::ops::Range<usize>>| match span {
        Some(span) => {
            let line = 1 + text[..span.start.min(text.len())].matches('\n').count();
            format!("{message} (line {line})")
        }
        None => message.to_owned(),
    };
    let de = toml::Deserializer::parse(text)
        .map_err(|e| vec![ConfigError::new("", located(e.message(), e.span()))])?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let path = if path == "." { String::new() } else { path };
        vec![ConfigError::new(
            path,
            located(inner.message(), inner.span()),
        )]
    })
}

impl RawConfig {
    fn validate(self, base: &Path) -> Result<Config, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let resolve = |p: &str| {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };

        let store_path = self
            .store
            .path
            .unwrap_or_else(|| DEFAULT_STORE_PATH.to_owned());
        if store_path.trim().is_empty() {
            errors.push(ConfigError::new("store.path", "must not be empty"));
        }

        let mut file = BTreeMap::new();
        for (name, raw) in self.providers.file {
            let at = |key: &str| format!("providers.file.{name}.{key}");
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
            {
                errors.push(ConfigError::new(
                    format!("providers.file.{name}"),
                    "a sheet name may only use a-z, 0-9, '-' and '_' (it becomes the provider name `file:<name>`)",
                ));
            }
            if raw.path.trim().is_empty() {
                errors.push(ConfigError::new(at("path"), "must not be empty"));
            }
            let format = match raw.format.as_deref() {
                Some("csv") => Some(SheetFormat::Csv),
                Some("json") => Some(SheetFormat::Json),
                Some(other) => {
                    errors.push(ConfigError::new(
                        at("format"),
                        format!("`{other}` is not a sheet format; expected \"csv\" or \"json\""),
                    ));
                    None
                }
                None => {
                    let guessed = SheetFormat::from_path(Path::new(&raw.path));
                    if guessed.is_none() && !raw.path.trim().is_empty() {
                        errors.push(ConfigError::new(at("format"), format!("cannot tell the format of `{}` from its extension; set format = \"csv\" or \"json\"", raw.path)));
                    }
                    guessed
                }
            };
            let schedule =
                Schedule::parse(raw.schedule.as_deref().unwrap_or(DEFAULT_FILE_SCHEDULE))
                    .map_err(|e| errors.push(ConfigError::new(at("schedule"), e)))
                    .ok();
            if let (Some(format), Some(schedule)) = (format, schedule) {
                file.insert(
                    name,
                    FileSourceConfig {
                        enabled: raw.enabled.unwrap_or(true),
                        path: resolve(&raw.path),
                        format,
                        schedule,
                    },
                );
            }
        }

        if errors.is_empty() {
            Ok(Config {
                store: StoreConfig {
                    path: resolve(&store_path),
                },
                providers: ProvidersConfig { file },
            })
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(text: &str) -> Vec<String> {
        Config::parse(text, Path::new("/etc/gpuplan"))
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_example_config_is_valid() {
        let config = Config::parse(EXAMPLE, Path::new("/etc/gpuplan")).unwrap();
        assert!(!config.providers.file.is_empty());
    }

    #[test]
    fn no_config_means_built_in_defaults() {
        let config = Config::parse("", Path::new("")).unwrap();
        assert_eq!(config.store.path, PathBuf::from("gpuplan.db"));
        assert!(config.enabled_sources().is_empty());
        assert_eq!(Config::default().store.path, config.store.path);
    }

    #[test]
    fn relative_paths_are_taken_from_the_config_files_directory() {
        let config = Config::parse(
            "[store]\npath = \"data/catalog.db\"\n[providers.file.onprem]\npath = \"/srv/p.csv\"\n",
            Path::new("/etc/gpuplan"),
        )
        .unwrap();
        assert_eq!(
            config.store.path,
            PathBuf::from("/etc/gpuplan/data/catalog.db")
        );
        assert_eq!(
            config.providers.file["onprem"].path,
            PathBuf::from("/srv/p.csv")
        );
        assert_eq!(config.enabled_sources(), vec!["file:onprem"]);
    }

    #[test]
    fn an_unknown_key_is_named_by_its_dotted_path_and_line() {
        let errors =
            errors_of("[store]\npath = \"x.db\"\n\n[providers.file.onprem]\npaht = \"p.csv\"\n");
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("providers.file.onprem"), "{errors:?}");
        assert!(errors[0].contains("paht"), "{errors:?}");
    }

    #[test]
    fn a_wrong_type_is_named_by_its_dotted_path() {
        let errors = errors_of("[providers.file.onprem]\npath = \"p.csv\"\nenabled = \"yes\"\n");
        assert!(
            errors[0].starts_with("providers.file.onprem.enabled:"),
            "{errors:?}"
        );
        assert!(errors[0].contains("line 3"), "{errors:?}");
    }

    #[test]
    fn a_syntax_error_gives_its_line() {
        let errors = errors_of("[store\npath = 1\n");
        assert!(errors[0].contains("line 1"), "{errors:?}");
    }

    #[test]
    fn every_semantic_problem_is_reported_at_once() {
        let errors = errors_of(
            "[store]\npath = \"\"\n\
             [providers.file.onprem]\npath = \"p.xlsx\"\nschedule = \"every hour\"\n\
             [providers.file.deals]\npath = \"d.csv\"\nformat = \"excel\"\n\
             [providers.file.Bad]\npath = \"b.json\"\n",
        );
        let paths: Vec<&str> = errors
            .iter()
            .map(|e| e.split(':').next().unwrap())
            .collect();
        assert_eq!(
            paths,
            vec![
                "store.path",
                "providers.file.Bad",
                "providers.file.deals.format",
                "providers.file.onprem.format",
                "providers.file.onprem.schedule",
            ],
            "{errors:#?}"
        );
    }

    #[test]
    fn schedule_intervals_follow_the_cron_expression() {
        let now = Utc::now();
        assert_eq!(
            Schedule::parse("0 0 * * * *").unwrap().interval(now),
            Duration::from_secs(3600)
        );
        assert_eq!(
            Schedule::parse("0 */10 * * * *").unwrap().interval(now),
            Duration::from_secs(600)
        );
    }
}
