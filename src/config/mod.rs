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
use gpuplan_providers::http::Redaction;
use gpuplan_providers::secret::Secret;

use crate::store::{Location, Retention};
use serde::Deserialize;

mod alerts;
mod api;
mod bills;
mod budgets;
mod check;
mod fx;
mod planner;
mod schedule;
mod sources;
mod store;

use crate::alerts::channels::{ChannelConfig, ChannelUrl, is_http_url};
use crate::alerts::rules::{Rule, RuleKind, Threshold};
use crate::bills::budgets::{AllocationConfig, BillSourceRef, BillsSetup, BudgetConfig};
use crate::catalog::sync::SyncConfig;
use crate::plan::settings::PlannerConfig;
pub use alerts::{AlertsConfig, PlanInput, ScheduledPlan};
pub use api::ApiConfig;
pub use bills::BillSourceConfig;
pub use fx::FxRates;
pub use schedule::Schedule;
#[cfg(feature = "alibaba")]
pub use sources::AlibabaSourceConfig;
#[cfg(feature = "aws")]
pub use sources::AwsSourceConfig;
#[cfg(feature = "azure")]
pub use sources::AzureSourceConfig;
#[cfg(feature = "file")]
pub use sources::FileSourceConfig;
#[cfg(feature = "gcp")]
pub use sources::GcpSourceConfig;
#[cfg(feature = "lambda")]
pub use sources::LambdaSourceConfig;
#[cfg(feature = "nebius")]
pub use sources::NebiusSourceConfig;
#[cfg(feature = "oci")]
pub use sources::OciSourceConfig;
pub use sources::ProvidersConfig;
#[cfg(feature = "runpod")]
pub use sources::RunpodSourceConfig;
#[cfg(feature = "tencent")]
pub use sources::TencentSourceConfig;
#[cfg(feature = "vast")]
pub use sources::VastSourceConfig;
pub use store::{STORE_URL_ENV, StoreConfig};

use alerts::{RawAlerts, validate_alerts};
use api::RawApi;
use check::Checker;
use planner::RawPlanner;
use sources::{DEFAULT_LIST_SCHEDULE, RawProviders, RawSync};
use store::RawStore;

/// The documented example, also printed by `gpuplan config example`.
pub const EXAMPLE: &str = include_str!("../../config/gpuplan.example.toml");

#[derive(Debug, Clone)]
pub struct Config {
    pub store: StoreConfig,
    pub api: ApiConfig,
    pub planner: PlannerConfig,
    pub sync: SyncConfig,
    pub providers: ProvidersConfig,
    pub alerts: AlertsConfig,
    pub fx: FxRates,
    /// Billing exports by source name.
    pub bills: BTreeMap<String, BillSourceConfig>,
    pub budgets: Vec<BudgetConfig>,
    pub allocation: AllocationConfig,
}

impl Default for Config {
    fn default() -> Self {
        match RawConfig::default().validate(Path::new("")) {
            Ok(config) => config,
            Err(errors) => unreachable!("the built-in defaults are invalid: {errors:?}"),
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

    /// The sync interval of each enabled source, as its schedule stands at `now`.
    #[must_use]
    pub fn source_intervals(&self, now: DateTime<Utc>) -> BTreeMap<String, Duration> {
        self.enabled_sources()
            .into_iter()
            .map(|(source, schedule)| (source, schedule.interval(now)))
            .collect()
    }

    /// The grace days of each bill source, by name.
    #[must_use]
    pub fn bill_grace(&self) -> BTreeMap<String, u32> {
        self.bills
            .iter()
            .map(|(name, s)| (name.clone(), s.source.grace_days))
            .collect()
    }

    /// The providers the config enables, by their record name (`file:onprem`),
    /// with their schedules.
    /// Budgets, the bill sources and the allocation mode, as the alerts and
    /// answers over the bills take them.
    #[must_use]
    pub fn bills_setup(&self) -> BillsSetup {
        BillsSetup {
            budgets: self.budgets.clone(),
            sources: self
                .bills
                .values()
                .filter(|b| b.enabled)
                .map(|b| BillSourceRef {
                    name: b.source.name.clone(),
                    provider: b.source.provider,
                })
                .collect(),
            proportional: self.allocation.proportional,
        }
    }

    #[must_use]
    pub fn enabled_sources(&self) -> Vec<(String, &Schedule)> {
        let p = &self.providers;
        let mut out = Vec::new();
        #[cfg(feature = "aws")]
        if p.aws.enabled {
            out.push(("aws".to_owned(), &p.aws.schedule));
        }
        #[cfg(feature = "azure")]
        if p.azure.enabled {
            out.push(("azure".to_owned(), &p.azure.schedule));
        }
        #[cfg(feature = "gcp")]
        if let Some(gcp) = p.gcp.as_ref().filter(|g| g.enabled) {
            out.push(("gcp".to_owned(), &gcp.schedule));
        }
        #[cfg(feature = "lambda")]
        if let Some(lambda) = p.lambda.as_ref().filter(|l| l.enabled) {
            out.push(("lambda".to_owned(), &lambda.schedule));
        }
        #[cfg(feature = "oci")]
        if p.oci.enabled {
            out.push(("oci".to_owned(), &p.oci.schedule));
        }
        #[cfg(feature = "runpod")]
        if let Some(runpod) = p.runpod.as_ref().filter(|r| r.enabled) {
            out.push(("runpod".to_owned(), &runpod.schedule));
        }
        #[cfg(feature = "vast")]
        if let Some(vast) = p.vast.as_ref().filter(|v| v.enabled) {
            out.push(("vast".to_owned(), &vast.schedule));
        }
        #[cfg(feature = "nebius")]
        if let Some(n) = p.nebius.as_ref().filter(|n| n.enabled) {
            out.push(("nebius".to_owned(), &n.schedule));
        }
        #[cfg(feature = "alibaba")]
        if let Some(alibaba) = p.alibaba.as_ref().filter(|a| a.enabled) {
            out.push(("alibaba".to_owned(), &alibaba.schedule));
        }
        #[cfg(feature = "tencent")]
        if let Some(tencent) = p.tencent.as_ref().filter(|t| t.enabled) {
            out.push(("tencent".to_owned(), &tencent.schedule));
        }
        #[cfg(feature = "file")]
        for (name, sheet) in p.file.iter().filter(|(_, f)| f.enabled) {
            out.push((format!("file:{name}"), &sheet.schedule));
        }
        out
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
    api: RawApi,
    #[serde(default)]
    planner: RawPlanner,
    #[serde(default)]
    sync: RawSync,
    #[serde(default)]
    providers: RawProviders,
    #[serde(default)]
    alerts: RawAlerts,
    #[serde(default)]
    fx: BTreeMap<String, f64>,
    #[serde(default)]
    bills: BTreeMap<String, bills::RawBillSource>,
    #[serde(default)]
    budgets: Vec<budgets::RawBudget>,
    #[serde(default)]
    allocation: budgets::RawAllocation,
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
        let message = match dotted_name(text, &path, inner.message()) {
            Some(hint) => format!("{}; {hint}", inner.message()),
            None => inner.message().to_owned(),
        };
        vec![ConfigError::new(path, located(&message, inner.span()))]
    })
}

/// What an unknown field means when the file has a `[PARENT.FIELD]` header
/// (`path` ends with the field): a name with a dot, which TOML reads as a
/// table inside `PARENT`.
fn dotted_name(text: &str, path: &str, message: &str) -> Option<String> {
    let field = message.strip_prefix("unknown field `")?.split('`').next()?;
    // The path names the unknown field last.
    let parent = path.strip_suffix(field)?.strip_suffix('.')?;
    let header = format!("[{path}]");
    let (section, name) = parent.rsplit_once('.')?;
    text.lines().any(|l| l.trim() == header).then(|| {
        format!(
            "`{header}` reads as a table `{field}` inside `{parent}`: a name with a dot \
             must be quoted, as in [{section}.\"{name}.{field}\"]"
        )
    })
}

impl RawConfig {
    fn validate(self, base: &Path) -> Result<Config, Vec<ConfigError>> {
        let mut c = Checker::default();
        let resolve = |p: &str| {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        let store = store::validate(self.store, &mut c, &resolve);
        let sync = sources::validate_sync(self.sync, &mut c);
        let api = api::validate(self.api, &mut c);
        let planner = planner::validate(self.planner, &mut c);
        let fx = fx::validate(self.fx, &mut c);
        let providers =
            sources::validate(self.providers, &sync.retry_policy(), &fx, &mut c, &resolve);
        let alerts = validate_alerts(self.alerts, &mut c, &resolve);
        let bills = bills::validate(self.bills, &mut c, &resolve);
        let budgets = budgets::validate(self.budgets, &alerts.channels, &mut c);
        let allocation = budgets::validate_allocation(self.allocation, &mut c);
        if !c.errors.is_empty() {
            return Err(c.errors);
        }
        Ok(Config {
            store,
            api,
            planner,
            sync,
            providers,
            alerts,
            fx,
            bills,
            budgets,
            allocation,
        })
    }
}

#[cfg(test)]
mod tests;
