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
use gpuplan_providers::aws::{Credentials as AwsCredentials, Sources as AwsSources};
use gpuplan_providers::file::SheetFormat;
use gpuplan_providers::http::url_origin;
use gpuplan_providers::secret::Secret;

use crate::store::Retention;
use serde::Deserialize;

/// The documented example, also printed by `gpuplan config example`.
pub const EXAMPLE: &str = include_str!("../config/gpuplan.example.toml");

const DEFAULT_STORE_PATH: &str = "gpuplan.db";
/// List prices change rarely; hourly keeps them fresh without wasting quota.
const DEFAULT_LIST_SCHEDULE: &str = "0 0 * * * *";
const DEFAULT_MAX_SHRINK_PCT: f64 = 20.0;
const DEFAULT_LISTEN: &str = "127.0.0.1:8321";
const DEFAULT_AZURE_ENDPOINT: &str = "https://prices.azure.com";
const DEFAULT_AWS_BULK_ENDPOINT: &str = "https://pricing.us-east-1.amazonaws.com";
const DEFAULT_AWS_SPOT_ADVISOR_URL: &str =
    "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json";
/// Spot prices move faster than list prices; with credentials, AWS reads its
/// new spot history every 10 minutes between full syncs, offset by 5 so it never
/// runs at the same time as the hourly full sync (which reads it too).
const DEFAULT_AWS_SPOT_SCHEDULE: &str = "0 5-55/10 * * * *";
/// Each region's offer file is hundreds of MB, so the default is two regions, not all.
const DEFAULT_AWS_REGIONS: [&str; 2] = ["us-east-1", "us-west-2"];
/// Pruning runs daily at a quiet minute, away from the hourly syncs at :00.
const DEFAULT_PRUNE_SCHEDULE: &str = "0 17 3 * * *";
const DEFAULT_GCP_BILLING_ENDPOINT: &str = "https://cloudbilling.googleapis.com";
const DEFAULT_GCP_COMPUTE_ENDPOINT: &str = "https://compute.googleapis.com";
const DEFAULT_LAMBDA_ENDPOINT: &str = "https://cloud.lambda.ai";

#[derive(Debug, Clone)]
pub struct Config {
    pub store: StoreConfig,
    pub api: ApiConfig,
    pub planner: PlannerConfig,
    pub sync: SyncConfig,
    pub providers: ProvidersConfig,
    pub alerts: AlertsConfig,
}

#[derive(Debug, Clone)]
pub struct PlannerConfig {
    /// Solves run at once; more API requests get 503 with `Retry-After`, and
    /// scheduled plans and the CLI wait for a slot.
    pub max_concurrent_solves: usize,
    /// The defaults of every plan (CLI flags and API fields override them).
    pub time_limit: Duration,
    pub spot_window: Duration,
    pub restart_hours: f64,
    pub checkpoint_hours: f64,
}

#[derive(Debug, Clone, Default)]
pub struct AlertsConfig {
    /// Scheduled plans by name (`[alerts.plans.NAME]`).
    pub plans: BTreeMap<String, ScheduledPlan>,
    pub channels: BTreeMap<String, ChannelConfig>,
    pub rules: Vec<RuleConfig>,
    /// Backoff of deliveries to a receiver that fails.
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// How long one delivery may take before it counts as failed.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ChannelConfig {
    /// Generic webhook: JSON body, `Idempotency-Key` header, optional HMAC-SHA256
    /// signature with the secret read from the environment variable named here.
    Webhook {
        url: ChannelUrl,
        secret_env: Option<String>,
    },
    /// Slack incoming webhook.
    Slack { url: ChannelUrl },
    /// The daemon's log.
    Log,
}

/// Where a channel's URL comes from. Slack and webhook URLs carry their
/// credential in the path, so they are secrets either way.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelUrl {
    /// `url` in the file.
    Inline(Secret),
    /// `url_env`: the environment variable holding it, read at start.
    Env(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    PriceBelow,
    PriceAbove,
    SpotAboveCommitted,
    SyncFailed,
    Stale,
    NewOffer,
    PlanChanged,
}

impl RuleKind {
    const NAMES: [(&'static str, RuleKind); 7] = [
        ("price_below", RuleKind::PriceBelow),
        ("price_above", RuleKind::PriceAbove),
        ("spot_above_committed", RuleKind::SpotAboveCommitted),
        ("sync_failed", RuleKind::SyncFailed),
        ("stale", RuleKind::Stale),
        ("new_offer", RuleKind::NewOffer),
        ("plan_changed", RuleKind::PlanChanged),
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("", |(n, _)| n)
    }
}

/// Which price a threshold compares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    PerGpuHour(f64),
    PerInstanceHour(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleConfig {
    pub name: String,
    pub kind: RuleKind,
    /// GPU models or families; empty matches all.
    pub gpu_models: Vec<String>,
    /// Price kinds; empty matches all.
    pub price_kinds: Vec<gpuplan_providers::PriceKind>,
    /// What the prices buy: `instance` unless the rule asks for `gpu_only`
    /// prices too (GPUs without the machine they attach to).
    pub price_scopes: Vec<gpuplan_providers::PriceScope>,
    /// Glob patterns (`*`, `?`) for providers and regions (or sources); empty matches all.
    pub providers: Vec<String>,
    pub regions: Vec<String>,
    pub threshold: Option<Threshold>,
    /// Alert on the cheapest matching offer only (one key), or on every offer.
    pub every_offer: bool,
    /// Share of the threshold the value must move back past before re-arming.
    pub hysteresis: f64,
    pub cooldown: Option<Duration>,
    pub channels: Vec<String>,
    /// For `plan_changed`: the scheduled plans it watches; empty means all.
    pub plans: Vec<String>,
}

/// A plan the daemon re-solves on a schedule, alerting `plan_changed` rules
/// when its result changes (docs/planning-model.md §7).
#[derive(Debug, Clone)]
pub struct ScheduledPlan {
    /// Hourly demand (CSV), or past usage to forecast from.
    pub input: PlanInput,
    pub schedule: Schedule,
    pub gpus: Vec<String>,
    pub clouds: Vec<String>,
    pub regions: Vec<String>,
    pub policy: crate::optimizer::Policy,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PlanInput {
    Demand(PathBuf),
    Usage { path: PathBuf, horizon_hours: usize },
}

#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Where `gpuplan serve` listens. Beyond loopback it requires a token.
    pub listen: std::net::SocketAddr,
}

#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// A snapshot with this share (0..1) fewer prices than the source's last good
    /// one is rejected as suspicious (a page chain that stopped early, say).
    pub max_shrink: f64,
    /// Backoff of the daemon's retries after a failed sync.
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// Tries of one HTTP request within a sync, the first included.
    pub http_attempts: u32,
    pub http_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub path: PathBuf,
    pub retention: Retention,
    /// When the daemon prunes what `retention` lets go.
    pub prune_schedule: Schedule,
}

#[derive(Debug, Clone)]
pub struct ProvidersConfig {
    pub aws: AwsSourceConfig,
    pub azure: AzureSourceConfig,
    /// `None` when the config has no `[providers.gcp]` (it needs an API key).
    pub gcp: Option<GcpSourceConfig>,
    /// `None` when the config has no `[providers.lambda]` (it needs an API key).
    pub lambda: Option<LambdaSourceConfig>,
    /// Price sheets by name; records carry `file:<name>` as their provider.
    pub file: BTreeMap<String, FileSourceConfig>,
}

/// AWS: with credentials through the SDK, without them from the public price
/// files; the spot advisor either way.
#[derive(Debug, Clone)]
pub struct AwsSourceConfig {
    pub enabled: bool,
    pub regions: Vec<String>,
    /// Instance-type patterns (`p5.*`); empty = every GPU/accelerator type.
    pub instance_types: Vec<String>,
    /// `Auto`, `Chain` or `None`; static keys never come from the file.
    pub credentials: AwsCredentials,
    pub sources: AwsSources,
    pub bulk_endpoint: String,
    pub spot_advisor_url: String,
    pub pricing_endpoint: Option<String>,
    pub ec2_endpoint: Option<String>,
    pub spot_history_days: u32,
    pub placement_capacity: u32,
    pub schedule: Schedule,
    /// Spot history alone, more often than the list prices; `None` = off.
    pub spot_schedule: Option<Schedule>,
}

#[derive(Debug, Clone)]
pub struct AzureSourceConfig {
    pub enabled: bool,
    pub endpoint: String,
    pub regions: Vec<String>,
    pub concurrency: usize,
    pub schedule: Schedule,
}

#[derive(Debug, Clone)]
pub struct GcpSourceConfig {
    pub enabled: bool,
    pub billing_endpoint: String,
    pub compute_endpoint: String,
    pub project: Option<String>,
    pub regions: Vec<String>,
    pub schedule: Schedule,
}

#[derive(Debug, Clone)]
pub struct LambdaSourceConfig {
    pub enabled: bool,
    pub endpoint: String,
    pub schedule: Schedule,
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

impl FromStr for Schedule {
    type Err = String;

    fn from_str(expr: &str) -> Result<Self, String> {
        Self::parse(expr)
    }
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

    /// The first run strictly after `t`.
    #[must_use]
    pub fn next_after(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        // Validation checked that the schedule fires again; a schedule that ran
        // out (a year field in the past) falls back to a day later.
        self.parsed
            .after(&t)
            .next()
            .unwrap_or(t + chrono::Duration::days(1))
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

    /// The providers the config enables, by their record name (`file:onprem`),
    /// with their schedules.
    #[must_use]
    pub fn enabled_sources(&self) -> Vec<(String, &Schedule)> {
        let p = &self.providers;
        let mut out = Vec::new();
        if p.aws.enabled {
            out.push(("aws".to_owned(), &p.aws.schedule));
        }
        if p.azure.enabled {
            out.push(("azure".to_owned(), &p.azure.schedule));
        }
        if let Some(gcp) = p.gcp.as_ref().filter(|g| g.enabled) {
            out.push(("gcp".to_owned(), &gcp.schedule));
        }
        if let Some(lambda) = p.lambda.as_ref().filter(|l| l.enabled) {
            out.push(("lambda".to_owned(), &lambda.schedule));
        }
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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAlerts {
    retry_initial_secs: Option<f64>,
    retry_max_secs: Option<f64>,
    timeout_secs: Option<f64>,
    #[serde(default)]
    channels: BTreeMap<String, RawChannel>,
    #[serde(default)]
    rules: Vec<RawRule>,
    #[serde(default)]
    plans: BTreeMap<String, RawPlan>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    demand: Option<String>,
    usage: Option<String>,
    horizon_hours: Option<i64>,
    schedule: Option<String>,
    #[serde(default)]
    gpu: Vec<String>,
    #[serde(default)]
    clouds: Vec<String>,
    #[serde(default)]
    regions: Vec<String>,
    policy: Option<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    #[serde(rename = "type")]
    kind: String,
    url: Option<String>,
    url_env: Option<String>,
    secret_env: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: String,
    kind: String,
    #[serde(default)]
    gpu_models: Vec<String>,
    #[serde(default)]
    price_kinds: Vec<String>,
    price_scopes: Option<Vec<String>>,
    #[serde(default)]
    providers: Vec<String>,
    #[serde(default)]
    regions: Vec<String>,
    usd_per_gpu_hour: Option<f64>,
    usd_per_hour: Option<f64>,
    #[serde(rename = "match")]
    matching: Option<String>,
    hysteresis_pct: Option<f64>,
    cooldown_secs: Option<f64>,
    #[serde(default)]
    channels: Vec<String>,
    #[serde(default)]
    plans: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSync {
    max_shrink_pct: Option<f64>,
    retry_initial_secs: Option<f64>,
    retry_max_secs: Option<f64>,
    http_attempts: Option<i64>,
    http_timeout_secs: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApi {
    listen: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlanner {
    max_concurrent_solves: Option<i64>,
    time_limit_secs: Option<f64>,
    spot_window: Option<String>,
    restart_hours: Option<f64>,
    checkpoint_hours: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    path: Option<String>,
    #[serde(default)]
    retention: RawRetention,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    spot_history_days: Option<i64>,
    price_history_days: Option<i64>,
    sync_runs_days: Option<i64>,
    plans_days: Option<i64>,
    delivered_alerts_days: Option<i64>,
    schedule: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProviders {
    #[serde(default)]
    aws: RawAws,
    #[serde(default)]
    azure: RawAzure,
    gcp: Option<RawGcp>,
    lambda: Option<RawLambda>,
    #[serde(default)]
    file: BTreeMap<String, RawFileSource>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAws {
    enabled: Option<bool>,
    regions: Option<Vec<String>>,
    instance_types: Option<Vec<String>>,
    credentials: Option<String>,
    sources: Option<Vec<String>>,
    bulk_endpoint: Option<String>,
    spot_advisor_url: Option<String>,
    pricing_endpoint: Option<String>,
    ec2_endpoint: Option<String>,
    spot_history_days: Option<i64>,
    placement_capacity: Option<i64>,
    schedule: Option<String>,
    spot_schedule: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAzure {
    enabled: Option<bool>,
    endpoint: Option<String>,
    regions: Option<Vec<String>>,
    concurrency: Option<i64>,
    schedule: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGcp {
    enabled: Option<bool>,
    billing_endpoint: Option<String>,
    compute_endpoint: Option<String>,
    project: Option<String>,
    regions: Option<Vec<String>>,
    schedule: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLambda {
    enabled: Option<bool>,
    endpoint: Option<String>,
    schedule: Option<String>,
}

/// Collects problems while converting raw values into checked ones.
#[derive(Default)]
struct Checker {
    errors: Vec<ConfigError>,
}

impl Checker {
    fn fail(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError::new(path, message));
    }

    /// A bad schedule is recorded and replaced by the default, so the rest of the
    /// config can still be checked; the recorded error rejects the config.
    fn schedule(&mut self, path: &str, expr: Option<&str>) -> Schedule {
        Schedule::parse(expr.unwrap_or(DEFAULT_LIST_SCHEDULE)).unwrap_or_else(|e| {
            self.fail(path, e);
            Schedule::parse(DEFAULT_LIST_SCHEDULE).expect("the built-in schedule is valid")
        })
    }

    /// A positive number of seconds, or the default.
    fn seconds(&mut self, path: &str, value: Option<f64>, default: f64) -> Duration {
        let v = value.unwrap_or(default);
        if v.is_finite() && v > 0.0 && v < 1e9 {
            Duration::from_secs_f64(v)
        } else {
            self.fail(path, format!("{v} is not a positive number of seconds"));
            Duration::from_secs_f64(default)
        }
    }

    fn endpoint(&mut self, path: &str, value: Option<String>, default: &str) -> String {
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
    fn bounded(
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

    fn instance_types(&mut self, value: Option<Vec<String>>) -> Vec<String> {
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

    fn aws_sources(&mut self, value: Option<Vec<String>>) -> AwsSources {
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

    fn regions(&mut self, path: &str, value: Option<Vec<String>>) -> Vec<String> {
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
        let mut c = Checker::default();
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
            c.fail("store.path", "must not be empty");
        }
        let raw_retention = self.store.retention;
        let defaults = Retention::default();
        let mut days = |key: &str, value: Option<i64>, default: Option<Duration>| {
            let default_days = default.map_or(0, |d| d.as_secs() / 86_400);
            match c.bounded(
                &format!("store.retention.{key}"),
                value,
                u32::try_from(default_days).unwrap_or(0),
                0..=36_500,
            ) {
                0 => None,
                n => Some(Duration::from_secs(u64::from(n) * 86_400)),
            }
        };
        let retention = Retention {
            spot_history: days(
                "spot_history_days",
                raw_retention.spot_history_days,
                defaults.spot_history,
            ),
            price_history: days(
                "price_history_days",
                raw_retention.price_history_days,
                defaults.price_history,
            ),
            sync_runs: days(
                "sync_runs_days",
                raw_retention.sync_runs_days,
                defaults.sync_runs,
            ),
            plans: days("plans_days", raw_retention.plans_days, defaults.plans),
            delivered_alerts: days(
                "delivered_alerts_days",
                raw_retention.delivered_alerts_days,
                defaults.delivered_alerts,
            ),
        };
        let prune_schedule = c.schedule(
            "store.retention.schedule",
            Some(
                raw_retention
                    .schedule
                    .as_deref()
                    .unwrap_or(DEFAULT_PRUNE_SCHEDULE),
            ),
        );
        let shrink = self.sync.max_shrink_pct.unwrap_or(DEFAULT_MAX_SHRINK_PCT);
        if !(0.0..=100.0).contains(&shrink) {
            c.fail(
                "sync.max_shrink_pct",
                format!("{shrink} is not a percentage between 0 and 100"),
            );
        }
        let retry_initial = c.seconds(
            "sync.retry_initial_secs",
            self.sync.retry_initial_secs,
            30.0,
        );
        let retry_max = c.seconds("sync.retry_max_secs", self.sync.retry_max_secs, 900.0);
        let http_timeout = c.seconds("sync.http_timeout_secs", self.sync.http_timeout_secs, 120.0);
        let http_attempts = match self.sync.http_attempts.unwrap_or(5) {
            n @ 1..=20 => n as u32,
            n => {
                c.fail("sync.http_attempts", format!("{n} is not between 1 and 20"));
                1
            }
        };
        let listen_text = self.api.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen = listen_text.parse().unwrap_or_else(|_| {
            c.fail(
                "api.listen",
                format!("`{listen_text}` is not an address like \"127.0.0.1:8321\""),
            );
            std::net::SocketAddr::from(([127, 0, 0, 1], 8321))
        });

        let raw_planner = self.planner;
        let mut hours = |key: &str, value: Option<f64>, default: f64| match value {
            None => default,
            Some(h) if (0.0..=8760.0).contains(&h) => h,
            Some(h) => {
                c.fail(
                    format!("planner.{key}"),
                    format!("{h} is out of range; allowed: 0 to 8760"),
                );
                default
            }
        };
        let restart_hours = hours("restart_hours", raw_planner.restart_hours, 0.5);
        let checkpoint_hours = hours("checkpoint_hours", raw_planner.checkpoint_hours, 1.0);
        let time_limit = match raw_planner.time_limit_secs {
            None => Duration::from_secs(300),
            Some(t) if t > 0.0 && t <= 86_400.0 => Duration::from_secs_f64(t),
            Some(t) => {
                c.fail(
                    "planner.time_limit_secs",
                    format!("{t} is out of range; allowed: more than 0, up to 86400"),
                );
                Duration::from_secs(300)
            }
        };
        let spot_window = match crate::catalog::parse_window(
            raw_planner.spot_window.as_deref().unwrap_or("7d"),
        ) {
            Ok(w) => w,
            Err(e) => {
                c.fail("planner.spot_window", e);
                Duration::from_secs(7 * 86_400)
            }
        };
        let planner = PlannerConfig {
            max_concurrent_solves: c.bounded(
                "planner.max_concurrent_solves",
                raw_planner.max_concurrent_solves,
                2,
                1..=64,
            ) as usize,
            time_limit,
            spot_window,
            restart_hours,
            checkpoint_hours,
        };

        let raw = self.providers;
        let aws = AwsSourceConfig {
            enabled: raw.aws.enabled.unwrap_or(true),
            regions: c.regions(
                "providers.aws.regions",
                Some(
                    raw.aws
                        .regions
                        .unwrap_or_else(|| DEFAULT_AWS_REGIONS.map(str::to_owned).to_vec()),
                ),
            ),
            bulk_endpoint: c.endpoint(
                "providers.aws.bulk_endpoint",
                raw.aws.bulk_endpoint,
                DEFAULT_AWS_BULK_ENDPOINT,
            ),
            spot_advisor_url: c.endpoint(
                "providers.aws.spot_advisor_url",
                raw.aws.spot_advisor_url,
                DEFAULT_AWS_SPOT_ADVISOR_URL,
            ),
            instance_types: c.instance_types(raw.aws.instance_types),
            credentials: match raw.aws.credentials.as_deref().unwrap_or("auto") {
                "auto" => AwsCredentials::Auto,
                "chain" => AwsCredentials::Chain,
                "none" => AwsCredentials::None,
                other => {
                    c.fail(
                        "providers.aws.credentials",
                        format!("`{other}` is not one of \"auto\", \"chain\", \"none\""),
                    );
                    AwsCredentials::Auto
                }
            },
            sources: c.aws_sources(raw.aws.sources),
            pricing_endpoint: raw
                .aws
                .pricing_endpoint
                .map(|v| c.endpoint("providers.aws.pricing_endpoint", Some(v), "")),
            ec2_endpoint: raw
                .aws
                .ec2_endpoint
                .map(|v| c.endpoint("providers.aws.ec2_endpoint", Some(v), "")),
            spot_history_days: c.bounded(
                "providers.aws.spot_history_days",
                raw.aws.spot_history_days,
                30,
                1..=90,
            ),
            placement_capacity: c.bounded(
                "providers.aws.placement_capacity",
                raw.aws.placement_capacity,
                1,
                1..=100_000,
            ),
            schedule: c.schedule("providers.aws.schedule", raw.aws.schedule.as_deref()),
            spot_schedule: match raw.aws.spot_schedule.as_deref() {
                Some("off") => None,
                other => Some(c.schedule(
                    "providers.aws.spot_schedule",
                    Some(other.unwrap_or(DEFAULT_AWS_SPOT_SCHEDULE)),
                )),
            },
        };
        let azure = AzureSourceConfig {
            enabled: raw.azure.enabled.unwrap_or(true),
            endpoint: c.endpoint(
                "providers.azure.endpoint",
                raw.azure.endpoint,
                DEFAULT_AZURE_ENDPOINT,
            ),
            regions: c.regions("providers.azure.regions", raw.azure.regions),
            concurrency: match raw.azure.concurrency.unwrap_or(4) {
                n @ 1..=32 => n as usize,
                n => {
                    c.fail(
                        "providers.azure.concurrency",
                        format!("{n} is not between 1 and 32"),
                    );
                    1
                }
            },
            schedule: c.schedule("providers.azure.schedule", raw.azure.schedule.as_deref()),
        };
        let gcp = raw.gcp.map(|g| GcpSourceConfig {
            enabled: g.enabled.unwrap_or(true),
            billing_endpoint: c.endpoint(
                "providers.gcp.billing_endpoint",
                g.billing_endpoint,
                DEFAULT_GCP_BILLING_ENDPOINT,
            ),
            compute_endpoint: c.endpoint(
                "providers.gcp.compute_endpoint",
                g.compute_endpoint,
                DEFAULT_GCP_COMPUTE_ENDPOINT,
            ),
            project: g.project.filter(|p| !p.trim().is_empty()),
            regions: c.regions("providers.gcp.regions", g.regions),
            schedule: c.schedule("providers.gcp.schedule", g.schedule.as_deref()),
        });
        let lambda = raw.lambda.map(|l| LambdaSourceConfig {
            enabled: l.enabled.unwrap_or(true),
            endpoint: c.endpoint(
                "providers.lambda.endpoint",
                l.endpoint,
                DEFAULT_LAMBDA_ENDPOINT,
            ),
            schedule: c.schedule("providers.lambda.schedule", l.schedule.as_deref()),
        });

        let mut file = BTreeMap::new();
        for (name, sheet) in raw.file {
            let at = |key: &str| format!("providers.file.{name}.{key}");
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
            {
                c.fail(
                    format!("providers.file.{name}"),
                    "a sheet name may only use a-z, 0-9, '-' and '_' (it becomes the provider name `file:<name>`)",
                );
            }
            if sheet.path.trim().is_empty() {
                c.fail(at("path"), "must not be empty");
            }
            let format = match sheet.format.as_deref() {
                Some("csv") => Some(SheetFormat::Csv),
                Some("json") => Some(SheetFormat::Json),
                Some(other) => {
                    c.fail(
                        at("format"),
                        format!("`{other}` is not a sheet format; expected \"csv\" or \"json\""),
                    );
                    None
                }
                None => {
                    let guessed = SheetFormat::from_path(Path::new(&sheet.path));
                    if guessed.is_none() && !sheet.path.trim().is_empty() {
                        c.fail(at("format"), format!("cannot tell the format of `{}` from its extension; set format = \"csv\" or \"json\"", sheet.path));
                    }
                    guessed
                }
            };
            let schedule = c.schedule(&at("schedule"), sheet.schedule.as_deref());
            if let Some(format) = format {
                file.insert(
                    name,
                    FileSourceConfig {
                        enabled: sheet.enabled.unwrap_or(true),
                        path: resolve(&sheet.path),
                        format,
                        schedule,
                    },
                );
            }
        }

        let alerts = validate_alerts(self.alerts, &mut c, &resolve);
        if !c.errors.is_empty() {
            return Err(c.errors);
        }
        Ok(Config {
            alerts,
            store: StoreConfig {
                path: resolve(&store_path),
                retention,
                prune_schedule,
            },
            api: ApiConfig { listen },
            planner,
            sync: SyncConfig {
                max_shrink: shrink / 100.0,
                retry_initial,
                retry_max,
                http_attempts,
                http_timeout,
            },
            providers: ProvidersConfig {
                aws,
                azure,
                gcp,
                lambda,
                file,
            },
        })
    }
}

fn validate_plans(
    raw: BTreeMap<String, RawPlan>,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> BTreeMap<String, ScheduledPlan> {
    let mut plans = BTreeMap::new();
    for (name, p) in raw {
        let at = |key: &str| format!("alerts.plans.{name}.{key}");
        let input = match (&p.demand, &p.usage) {
            (Some(d), None) => PlanInput::Demand(resolve(d)),
            (None, Some(u)) => match p.horizon_hours.unwrap_or(168) {
                h @ 1..=8784 => PlanInput::Usage {
                    path: resolve(u),
                    horizon_hours: h as usize,
                },
                h => {
                    c.fail(
                        at("horizon_hours"),
                        format!("{h} is not between 1 and 8784"),
                    );
                    continue;
                }
            },
            _ => {
                c.fail(
                    format!("alerts.plans.{name}"),
                    "give exactly one of demand (hourly demand CSV) or usage (past usage CSV)",
                );
                continue;
            }
        };
        // The policy uses the planning model's keys and rules (docs/planning-model.md §4.1).
        let policy_json = serde_json::to_value(p.policy.unwrap_or_default()).unwrap_or_default();
        let policy = match crate::optimizer::Problem::from_json(
            &serde_json::json!({"demand": [0], "offers": [], "policy": policy_json}),
        ) {
            Ok(problem) => problem.policy,
            Err(e) => {
                c.fail(format!("alerts.plans.{name}.{}", e.path), e.message);
                continue;
            }
        };
        plans.insert(
            name.clone(),
            ScheduledPlan {
                input,
                schedule: c.schedule(
                    &at("schedule"),
                    p.schedule.as_deref().or(Some("0 0 6 * * *")),
                ),
                gpus: p.gpu,
                clouds: p.clouds,
                regions: p.regions,
                policy,
            },
        );
    }
    plans
}

/// An absolute http(s) URL with a host and no whitespace.
#[must_use]
pub fn is_http_url(u: &str) -> bool {
    ["http://", "https://"].iter().any(|scheme| {
        u.strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
    }) && !u.contains(char::is_whitespace)
}

fn validate_alerts(
    raw: RawAlerts,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> AlertsConfig {
    let plans = validate_plans(raw.plans, c, resolve);
    let mut channels = BTreeMap::new();
    for (name, ch) in raw.channels {
        let at = |key: &str| format!("alerts.channels.{name}.{key}");
        let url = |c: &mut Checker| match (&ch.url, &ch.url_env) {
            (Some(u), None) if is_http_url(u) => ChannelUrl::Inline(Secret::new(u.clone())),
            (Some(u), None) => {
                c.fail(
                    at("url"),
                    format!("`{}` is not an http(s) URL", url_origin(u)),
                );
                ChannelUrl::Inline(Secret::new(String::new()))
            }
            (None, Some(var)) if !var.trim().is_empty() => ChannelUrl::Env(var.trim().to_owned()),
            (None, Some(_)) => {
                c.fail(at("url_env"), "must name an environment variable");
                ChannelUrl::Env(String::new())
            }
            (Some(_), Some(_)) => {
                c.fail(at("url"), "give url or url_env, not both");
                ChannelUrl::Env(String::new())
            }
            (None, None) => {
                c.fail(
                    at("url"),
                    format!(
                        "a {} channel needs url_env (the environment variable holding its URL) or url",
                        ch.kind
                    ),
                );
                ChannelUrl::Env(String::new())
            }
        };
        let channel = match ch.kind.as_str() {
            "webhook" => ChannelConfig::Webhook {
                url: url(c),
                secret_env: ch.secret_env.clone(),
            },
            "slack" => ChannelConfig::Slack { url: url(c) },
            "log" => ChannelConfig::Log,
            other => {
                c.fail(
                    at("type"),
                    format!("`{other}` is not a channel type; expected webhook, slack or log"),
                );
                continue;
            }
        };
        if (ch.url.is_some() || ch.url_env.is_some()) && ch.kind == "log" {
            c.fail(at("url"), "a log channel has no URL");
        }
        if ch.secret_env.is_some() && ch.kind != "webhook" {
            c.fail(
                at("secret_env"),
                "only webhook channels sign their messages",
            );
        }
        channels.insert(name, channel);
    }
    let mut rules: Vec<RuleConfig> = Vec::new();
    for (i, r) in raw.rules.into_iter().enumerate() {
        let label = if r.name.is_empty() {
            format!("alerts.rules[{i}]")
        } else {
            format!("alerts.rules[{i}] ({})", r.name)
        };
        let at = |key: &str| format!("{label}.{key}");
        if r.name.trim().is_empty() {
            c.fail(at("name"), "must not be empty");
        } else if rules.iter().any(|x| x.name == r.name) {
            c.fail(at("name"), format!("`{}` names another rule too", r.name));
        }
        let Some(kind) = RuleKind::NAMES
            .iter()
            .find(|(n, _)| *n == r.kind)
            .map(|(_, k)| *k)
        else {
            let names: Vec<&str> = RuleKind::NAMES.iter().map(|(n, _)| *n).collect();
            c.fail(
                at("kind"),
                format!(
                    "`{}` is not a rule kind; expected one of: {}",
                    r.kind,
                    names.join(", ")
                ),
            );
            continue;
        };
        let price_kinds = r
            .price_kinds
            .iter()
            .enumerate()
            .filter_map(|(j, k)| {
                k.parse()
                    .map_err(|e: gpuplan_providers::snapshot::UnknownName| {
                        c.fail(format!("{label}.price_kinds[{j}]"), e.to_string())
                    })
                    .ok()
            })
            .collect();
        let price_scopes = match &r.price_scopes {
            None => vec![gpuplan_providers::PriceScope::Instance],
            Some(list) => list
                .iter()
                .enumerate()
                .filter_map(|(j, k)| {
                    k.parse()
                        .map_err(|e: String| c.fail(format!("{label}.price_scopes[{j}]"), e))
                        .ok()
                })
                .collect(),
        };
        let threshold = match (r.usd_per_gpu_hour, r.usd_per_hour) {
            (Some(v), None) => Some(Threshold::PerGpuHour(v)),
            (None, Some(v)) => Some(Threshold::PerInstanceHour(v)),
            (Some(_), Some(_)) => {
                c.fail(
                    at("usd_per_hour"),
                    "give usd_per_gpu_hour or usd_per_hour, not both",
                );
                None
            }
            (None, None) => None,
        };
        let needs_threshold = matches!(kind, RuleKind::PriceBelow | RuleKind::PriceAbove);
        if needs_threshold && threshold.is_none() {
            c.fail(
                at("usd_per_gpu_hour"),
                format!("a {} rule needs usd_per_gpu_hour or usd_per_hour", r.kind),
            );
        }
        if !needs_threshold && threshold.is_some() {
            c.fail(
                at("usd_per_gpu_hour"),
                format!("a {} rule has no threshold", r.kind),
            );
        }
        if let Some(Threshold::PerGpuHour(v) | Threshold::PerInstanceHour(v)) = threshold
            && !(v.is_finite() && v >= 0.0)
        {
            c.fail(at("usd_per_gpu_hour"), format!("{v} is not a price >= 0"));
        }
        let every_offer = match r.matching.as_deref() {
            None | Some("cheapest") => false,
            Some("every") => true,
            Some(other) => {
                c.fail(
                    at("match"),
                    format!("`{other}` is not a match mode; expected \"cheapest\" or \"every\""),
                );
                false
            }
        };
        let hysteresis = r.hysteresis_pct.unwrap_or(2.0);
        if !(0.0..=100.0).contains(&hysteresis) {
            c.fail(
                at("hysteresis_pct"),
                format!("{hysteresis} is not a percentage between 0 and 100"),
            );
        }
        let cooldown = r
            .cooldown_secs
            .map(|s| c.seconds(&at("cooldown_secs"), Some(s), 1.0));
        if !r.plans.is_empty() && kind != RuleKind::PlanChanged {
            c.fail(
                at("plans"),
                format!("only plan_changed rules watch plans, not {}", r.kind),
            );
        }
        for (j, plan) in r.plans.iter().enumerate() {
            if !plans.contains_key(plan) {
                c.fail(
                    format!("{label}.plans[{j}]"),
                    format!("no scheduled plan `{plan}` in [alerts.plans]"),
                );
            }
        }
        if r.channels.is_empty() {
            c.fail(
                at("channels"),
                "name at least one channel of [alerts.channels]",
            );
        }
        for (j, ch) in r.channels.iter().enumerate() {
            if !channels.contains_key(ch) {
                c.fail(
                    format!("{label}.channels[{j}]"),
                    format!("no channel `{ch}` in [alerts.channels]"),
                );
            }
        }
        rules.push(RuleConfig {
            name: r.name,
            kind,
            gpu_models: r.gpu_models,
            price_kinds,
            price_scopes,
            providers: r.providers,
            regions: r.regions,
            threshold,
            every_offer,
            hysteresis: hysteresis / 100.0,
            cooldown,
            channels: r.channels,
            plans: r.plans,
        });
    }
    AlertsConfig {
        plans,
        channels,
        rules,
        retry_initial: c.seconds("alerts.retry_initial_secs", raw.retry_initial_secs, 5.0),
        retry_max: c.seconds("alerts.retry_max_secs", raw.retry_max_secs, 600.0),
        timeout: c.seconds("alerts.timeout_secs", raw.timeout_secs, 10.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// The config file: a config or errors that each name a dotted path
        /// (or the file itself, for TOML syntax), never a panic.
        #[test]
        fn any_config_text_validates_or_names_each_problem(
            text in "\\PC{0,120}",
            key in proptest::sample::select(vec![
                "sync.max_shrink_pct", "sync.retry_initial_secs", "sync.http_attempts",
                "sync.http_timeout_secs", "planner.max_concurrent_solves", "alerts.retry_max_secs",
                "api.listen", "store.path",
            ]),
            value in proptest::prop_oneof![
                proptest::num::f64::ANY.prop_map(|x| format!("{x:?}")),
                proptest::num::i64::ANY.prop_map(|n| n.to_string()),
                "\\PC{0,12}".prop_map(|s| format!("{s:?}")),
            ],
        ) {
            let (table, field) = key.split_once('.').unwrap();
            let structured = format!("[{table}]\n{field} = {value}\n");
            for t in [text.clone(), structured] {
                if let Err(errors) = Config::parse(t.as_str(), Path::new("")) {
                    proptest::prop_assert!(!errors.is_empty());
                    for e in errors {
                        proptest::prop_assert!(!e.message.is_empty(), "{e:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn channel_urls_come_from_the_file_or_the_environment_and_are_never_echoed() {
        let config = Config::parse(
            "[alerts.channels.a]\ntype = \"slack\"\nurl_env = \"GPUPLAN_SLACK_URL\"\n\
             [alerts.channels.b]\ntype = \"webhook\"\nurl = \"https://h.example/T0/SECRETPATH\"\n",
            Path::new(""),
        )
        .unwrap();
        let channels = &config.alerts.channels;
        assert_eq!(
            channels["a"],
            ChannelConfig::Slack {
                url: ChannelUrl::Env("GPUPLAN_SLACK_URL".into())
            }
        );
        assert!(!format!("{:?}", channels["b"]).contains("SECRETPATH"));
        let errors = errors_of(
            "[alerts.channels.both]\ntype = \"slack\"\nurl = \"https://h.example/x\"\nurl_env = \"V\"\n\
             [alerts.channels.none]\ntype = \"webhook\"\n\
             [alerts.channels.blank]\ntype = \"webhook\"\nurl_env = \" \"\n\
             [alerts.channels.plain]\ntype = \"webhook\"\nurl = \"hooks.example/SECRETPATH\"\n\
             [alerts.channels.log]\ntype = \"log\"\nurl = \"https://h.example/x\"\n",
        )
        .join("\n");
        for expected in [
            "alerts.channels.both.url: give url or url_env, not both",
            "alerts.channels.none.url: a webhook channel needs url_env",
            "alerts.channels.blank.url_env",
            "alerts.channels.plain.url",
            "alerts.channels.log.url",
        ] {
            assert!(
                errors.contains(expected),
                "missing {expected} in:\n{errors}"
            );
        }
        assert!(!errors.contains("SECRETPATH"), "{errors}");
    }

    #[test]
    fn bad_alert_rules_are_named_by_rule() {
        let errors = errors_of(
            "[alerts.channels.ops]\ntype = \"webhook\"\nurl = \"ftp://x\"\n\
             [alerts.channels.chat]\ntype = \"pager\"\n\
             [[alerts.rules]]\nname = \"cheap\"\nkind = \"price_below\"\nchannels = [\"ops\", \"nope\"]\nprice_kinds = [\"weekly\"]\n\
             [[alerts.rules]]\nname = \"cheap\"\nkind = \"plan_exploded\"\nchannels = [\"ops\"]\n",
        );
        let joined = errors.join("\n");
        for expected in [
            "alerts.channels.chat.type",
            "alerts.channels.ops.url",
            "alerts.rules[0] (cheap).price_kinds[0]",
            "alerts.rules[0] (cheap).usd_per_gpu_hour",
            "alerts.rules[0] (cheap).channels[1]",
            "alerts.rules[1] (cheap).name",
            "alerts.rules[1] (cheap).kind",
        ] {
            assert!(
                joined.contains(expected),
                "missing {expected} in:\n{joined}"
            );
        }
    }

    #[test]
    fn scheduled_plans_are_checked_with_the_models_policy_rules() {
        let errors = errors_of(
            "[alerts.plans.a]\ndemand = \"d.csv\"\nusage = \"u.csv\"\n\
             [alerts.plans.b]\ndemand = \"d.csv\"\n[alerts.plans.b.policy]\nmax_spot_shar = 0.5\n\
             [alerts.channels.log]\ntype = \"log\"\n\
             [[alerts.rules]]\nname = \"moved\"\nkind = \"plan_changed\"\nplans = [\"c\"]\nchannels = [\"log\"]\n",
        );
        let joined = errors.join("\n");
        for expected in [
            "alerts.plans.a:",
            "alerts.plans.b.policy.max_spot_shar",
            "alerts.rules[0] (moved).plans[0]",
        ] {
            assert!(
                joined.contains(expected),
                "missing {expected} in:\n{joined}"
            );
        }
        let ok = Config::parse(
            "[alerts.plans.w]\nusage = \"u.csv\"\nhorizon_hours = 24\nschedule = \"0 0 6 * * *\"\n[alerts.plans.w.policy]\nmax_spot_share = 0.5\n",
            Path::new("/etc/gpuplan"),
        )
        .unwrap();
        let plan = &ok.alerts.plans["w"];
        assert_eq!(
            plan.input,
            PlanInput::Usage {
                path: PathBuf::from("/etc/gpuplan/u.csv"),
                horizon_hours: 24
            }
        );
        assert_eq!(plan.policy.max_spot_share, Some(0.5));
    }

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
    fn aws_keys_are_read_and_checked() {
        let config = Config::parse(
            "[providers.aws]\ncredentials = \"chain\"\ninstance_types = [\"p5.*\"]\n\
             sources = [\"spot_history\", \"placement_scores\"]\nspot_history_days = 7\n\
             ec2_endpoint = \"http://127.0.0.1:9/{region}\"\n",
            Path::new(""),
        )
        .unwrap();
        let aws = &config.providers.aws;
        assert!(matches!(aws.credentials, AwsCredentials::Chain));
        assert_eq!(aws.instance_types, ["p5.*"]);
        assert!(aws.sources.spot_history && aws.sources.placement_scores);
        assert!(!aws.sources.offerings && !aws.sources.spot_advisor);
        assert_eq!(aws.spot_history_days, 7);
        assert_eq!(aws.pricing_endpoint, None);
        let spot = aws.spot_schedule.as_ref().unwrap();
        let next = spot.next_after("2026-11-29T10:00:00Z".parse().unwrap());
        assert_eq!(next.to_rfc3339(), "2026-11-29T10:05:00+00:00");
        let off =
            Config::parse("[providers.aws]\nspot_schedule = \"off\"\n", Path::new("")).unwrap();
        assert!(off.providers.aws.spot_schedule.is_none());
        // Defaults: the chain when it has keys, every optional source but scores.
        let defaults = Config::parse("", Path::new("")).unwrap().providers.aws;
        assert!(matches!(defaults.credentials, AwsCredentials::Auto));
        assert_eq!(defaults.sources, AwsSources::default());

        let errors = errors_of(
            "[providers.aws]\ncredentials = \"env\"\ninstance_types = [\"p5 large\"]\n\
             sources = [\"spot\"]\nspot_history_days = 91\npricing_endpoint = \"localhost\"\n\
             spot_schedule = \"every ten minutes\"\n",
        );
        for path in [
            "providers.aws.credentials",
            "providers.aws.instance_types[0]",
            "providers.aws.sources[0]",
            "providers.aws.spot_history_days",
            "providers.aws.pricing_endpoint",
            "providers.aws.spot_schedule",
        ] {
            assert!(
                errors.iter().any(|e| e.starts_with(path)),
                "{path}: {errors:?}"
            );
        }
    }

    #[test]
    fn no_config_means_built_in_defaults() {
        let config = Config::parse("", Path::new("")).unwrap();
        assert_eq!(config.store.path, PathBuf::from("gpuplan.db"));
        // Only the sources that need no credentials.
        let sources: Vec<String> = config
            .enabled_sources()
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(sources, vec!["aws", "azure"]);
        assert!((config.sync.max_shrink - 0.2).abs() < 1e-12);
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
        let sources: Vec<String> = config
            .enabled_sources()
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(sources, vec!["aws", "azure", "file:onprem"]);
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
    fn cloud_sections_are_checked_too() {
        let errors = errors_of(
            "[sync]\nmax_shrink_pct = 150\n\
             [providers.azure]\nregions = [\"eastus\", \"West Europe\"]\nconcurrency = 0\nendpoint = \"prices.azure.com\"\n\
             [providers.gcp]\nbilling_endpoint = \"ftp://x\"\nschedule = \"* * *\"\n\
             [providers.lambda]\nendpoint = \"http://127.0.0.1:9\"\n",
        );
        let paths: Vec<&str> = errors
            .iter()
            .map(|e| e.split(':').next().unwrap())
            .collect();
        assert_eq!(
            paths,
            vec![
                "sync.max_shrink_pct",
                "providers.azure.endpoint",
                "providers.azure.regions[1]",
                "providers.azure.concurrency",
                "providers.gcp.billing_endpoint",
                "providers.gcp.schedule",
            ],
            "{errors:#?}"
        );
    }

    #[test]
    fn gcp_and_lambda_are_enabled_by_their_sections() {
        let config = Config::parse("[providers.aws]\nenabled = false\n[providers.azure]\nenabled = false\n[providers.gcp]\nproject = \"p\"\n[providers.lambda]\n", Path::new("")).unwrap();
        let sources: Vec<String> = config
            .enabled_sources()
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(sources, vec!["gcp", "lambda"]);
        assert_eq!(config.providers.gcp.unwrap().project.as_deref(), Some("p"));
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
