//! `[sync]` and `[providers.*]`: how and where each source syncs.

#[cfg(feature = "aws")]
use gpuplan_providers::aws::{AwsConfig, AwsProvider, Credentials as AwsCredentials};
#[cfg(feature = "azure")]
use gpuplan_providers::azure::{AzureConfig, AzureProvider};
#[cfg(feature = "file")]
use gpuplan_providers::file::{FileProvider, SheetFormat};
#[cfg(feature = "gcp")]
use gpuplan_providers::gcp::{self, GcpConfig, GcpProvider};
use gpuplan_providers::http::RetryPolicy;
#[cfg(feature = "lambda")]
use gpuplan_providers::lambda::{self, LambdaConfig, LambdaProvider};
use gpuplan_providers::{Provider, ProviderError};

use super::*;

/// List prices change rarely; hourly keeps them fresh without wasting quota.
pub(super) const DEFAULT_LIST_SCHEDULE: &str = "0 0 * * * *";

pub(super) const DEFAULT_MAX_SHRINK_PCT: f64 = 20.0;

#[cfg(feature = "azure")]
pub(super) const DEFAULT_AZURE_ENDPOINT: &str = "https://prices.azure.com";

#[cfg(feature = "aws")]
pub(super) const DEFAULT_AWS_BULK_ENDPOINT: &str = "https://pricing.us-east-1.amazonaws.com";

#[cfg(feature = "aws")]
pub(super) const DEFAULT_AWS_SPOT_ADVISOR_URL: &str =
    "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json";

/// Spot prices move faster than list prices; with credentials, AWS reads its
/// new spot history every 10 minutes between full syncs, offset by 5 so it never
/// runs at the same time as the hourly full sync (which reads it too).
#[cfg(feature = "aws")]
pub(super) const DEFAULT_AWS_SPOT_SCHEDULE: &str = "0 5-55/10 * * * *";

/// Each region's offer file is hundreds of MB, so the default is two regions, not all.
#[cfg(feature = "aws")]
pub(super) const DEFAULT_AWS_REGIONS: [&str; 2] = ["us-east-1", "us-west-2"];

#[cfg(feature = "gcp")]
pub(super) const DEFAULT_GCP_BILLING_ENDPOINT: &str = "https://cloudbilling.googleapis.com";

#[cfg(feature = "gcp")]
pub(super) const DEFAULT_GCP_COMPUTE_ENDPOINT: &str = "https://compute.googleapis.com";

#[cfg(feature = "lambda")]
pub(super) const DEFAULT_LAMBDA_ENDPOINT: &str = "https://cloud.lambda.ai";

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
pub struct ProvidersConfig {
    #[cfg(feature = "aws")]
    pub aws: AwsSourceConfig,
    #[cfg(feature = "azure")]
    pub azure: AzureSourceConfig,
    /// `None` when the config has no `[providers.gcp]` (it needs an API key).
    #[cfg(feature = "gcp")]
    pub gcp: Option<GcpSourceConfig>,
    /// `None` when the config has no `[providers.lambda]` (it needs an API key).
    #[cfg(feature = "lambda")]
    pub lambda: Option<LambdaSourceConfig>,
    /// Price sheets by name; records carry `file:<name>` as their provider.
    #[cfg(feature = "file")]
    pub file: BTreeMap<String, FileSourceConfig>,
}

#[cfg(feature = "aws")]
/// AWS: with credentials through the SDK, without them from the public price
/// files; the spot advisor either way.
#[derive(Debug, Clone)]
pub struct AwsSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    /// Spot history alone, more often than the list prices; `None` = off.
    pub spot_schedule: Option<Schedule>,
    /// What the provider is built from; static keys never come from the file.
    pub provider: AwsConfig,
}

#[cfg(feature = "azure")]
#[derive(Debug, Clone)]
pub struct AzureSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: AzureConfig,
}

#[cfg(feature = "gcp")]
/// GCP; its API key and token are read from the environment when it is built.
#[derive(Debug, Clone)]
pub struct GcpSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: GcpConfig,
}

#[cfg(feature = "lambda")]
/// Lambda; its API key is read from the environment when it is built.
#[derive(Debug, Clone)]
pub struct LambdaSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: LambdaConfig,
}

#[cfg(feature = "file")]
#[derive(Debug, Clone)]
pub struct FileSourceConfig {
    pub enabled: bool,
    pub path: PathBuf,
    pub format: SheetFormat,
    pub schedule: Schedule,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSync {
    max_shrink_pct: Option<f64>,
    retry_initial_secs: Option<f64>,
    retry_max_secs: Option<f64>,
    http_attempts: Option<i64>,
    http_timeout_secs: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProviders {
    #[serde(default)]
    aws: RawAws,
    #[serde(default)]
    azure: RawAzure,
    gcp: Option<RawGcp>,
    lambda: Option<RawLambda>,
    #[serde(default)]
    file: BTreeMap<String, RawFileSource>,
}

// Read only by the validation of a build with this provider.
#[cfg_attr(not(feature = "aws"), allow(dead_code))]
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAws {
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

// Read only by the validation of a build with this provider.
#[cfg_attr(not(feature = "azure"), allow(dead_code))]
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAzure {
    enabled: Option<bool>,
    endpoint: Option<String>,
    regions: Option<Vec<String>>,
    concurrency: Option<i64>,
    schedule: Option<String>,
}

// Read only by the validation of a build with this provider.
#[cfg_attr(not(feature = "gcp"), allow(dead_code))]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGcp {
    enabled: Option<bool>,
    billing_endpoint: Option<String>,
    compute_endpoint: Option<String>,
    project: Option<String>,
    regions: Option<Vec<String>>,
    schedule: Option<String>,
}

// Read only by the validation of a build with this provider.
#[cfg_attr(not(feature = "lambda"), allow(dead_code))]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLambda {
    enabled: Option<bool>,
    endpoint: Option<String>,
    schedule: Option<String>,
}

// Read only by the validation of a build with this provider.
#[cfg_attr(not(feature = "file"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFileSource {
    enabled: Option<bool>,
    path: String,
    format: Option<String>,
    schedule: Option<String>,
}

/// `[sync]`.
pub(super) fn validate_sync(raw: RawSync, c: &mut Checker) -> SyncConfig {
    let shrink = raw.max_shrink_pct.unwrap_or(DEFAULT_MAX_SHRINK_PCT);
    if !(0.0..=100.0).contains(&shrink) {
        c.fail(
            "sync.max_shrink_pct",
            format!("{shrink} is not a percentage between 0 and 100"),
        );
    }
    let retry_initial = c.seconds("sync.retry_initial_secs", raw.retry_initial_secs, 30.0);
    let retry_max = c.seconds("sync.retry_max_secs", raw.retry_max_secs, 900.0);
    let http_timeout = c.seconds("sync.http_timeout_secs", raw.http_timeout_secs, 120.0);
    let http_attempts = match raw.http_attempts.unwrap_or(5) {
        n @ 1..=20 => n as u32,
        n => {
            c.fail("sync.http_attempts", format!("{n} is not between 1 and 20"));
            1
        }
    };
    SyncConfig {
        max_shrink: shrink / 100.0,
        retry_initial,
        retry_max,
        http_attempts,
        http_timeout,
    }
}

/// `[providers.*]`, with sheet paths resolved by `resolve`. A section of a
/// provider this build leaves out is an error, unless it only disables it.
pub(super) fn validate(
    raw: RawProviders,
    retry: &RetryPolicy,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> ProvidersConfig {
    let unbuilt = |c: &mut Checker, name: &str, set: bool, enabled: Option<bool>| {
        if set && enabled != Some(false) {
            c.fail(
                format!("providers.{name}"),
                format!("this gpuplan was built without the `{name}` feature; rebuild with it, or set enabled = false"),
            );
        }
    };
    #[cfg(not(feature = "aws"))]
    unbuilt(c, "aws", raw.aws != RawAws::default(), raw.aws.enabled);
    #[cfg(not(feature = "azure"))]
    unbuilt(
        c,
        "azure",
        raw.azure != RawAzure::default(),
        raw.azure.enabled,
    );
    #[cfg(not(feature = "gcp"))]
    unbuilt(
        c,
        "gcp",
        raw.gcp.is_some(),
        raw.gcp.as_ref().and_then(|g| g.enabled),
    );
    #[cfg(not(feature = "lambda"))]
    unbuilt(
        c,
        "lambda",
        raw.lambda.is_some(),
        raw.lambda.as_ref().and_then(|l| l.enabled),
    );
    #[cfg(not(feature = "file"))]
    unbuilt(c, "file", !raw.file.is_empty(), None);
    #[cfg(all(
        feature = "aws",
        feature = "azure",
        feature = "gcp",
        feature = "lambda",
        feature = "file"
    ))]
    let _ = unbuilt;
    let _ = (&retry, &resolve);
    ProvidersConfig {
        #[cfg(feature = "aws")]
        aws: validate_aws(raw.aws, retry, c),
        #[cfg(feature = "azure")]
        azure: validate_azure(raw.azure, retry, c),
        #[cfg(feature = "gcp")]
        gcp: raw.gcp.map(|g| validate_gcp(g, retry, c)),
        #[cfg(feature = "lambda")]
        lambda: raw.lambda.map(|l| validate_lambda(l, retry, c)),
        #[cfg(feature = "file")]
        file: validate_files(raw.file, c, resolve),
    }
}

#[cfg(feature = "aws")]
fn validate_aws(raw: RawAws, retry: &RetryPolicy, c: &mut Checker) -> AwsSourceConfig {
    let aws_regions = c.regions(
        "providers.aws.regions",
        Some(
            raw.regions
                .unwrap_or_else(|| DEFAULT_AWS_REGIONS.map(str::to_owned).to_vec()),
        ),
    );
    AwsSourceConfig {
        enabled: raw.enabled.unwrap_or(true),
        provider: AwsConfig {
            regions: aws_regions,
            bulk_endpoint: c.endpoint(
                "providers.aws.bulk_endpoint",
                raw.bulk_endpoint,
                DEFAULT_AWS_BULK_ENDPOINT,
            ),
            spot_advisor_url: c.endpoint(
                "providers.aws.spot_advisor_url",
                raw.spot_advisor_url,
                DEFAULT_AWS_SPOT_ADVISOR_URL,
            ),
            instance_types: c.instance_types(raw.instance_types),
            credentials: match raw.credentials.as_deref().unwrap_or("auto") {
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
            sources: c.aws_sources(raw.sources),
            pricing_endpoint: raw
                .pricing_endpoint
                .map(|v| c.endpoint("providers.aws.pricing_endpoint", Some(v), "")),
            ec2_endpoint: raw
                .ec2_endpoint
                .map(|v| c.endpoint("providers.aws.ec2_endpoint", Some(v), "")),
            spot_history_days: c.bounded(
                "providers.aws.spot_history_days",
                raw.spot_history_days,
                30,
                1..=90,
            ),
            placement_capacity: c.bounded(
                "providers.aws.placement_capacity",
                raw.placement_capacity,
                1,
                1..=100_000,
            ),
            retry: retry.clone(),
        },
        schedule: c.schedule("providers.aws.schedule", raw.schedule.as_deref()),
        spot_schedule: match raw.spot_schedule.as_deref() {
            Some("off") => None,
            other => Some(c.schedule(
                "providers.aws.spot_schedule",
                Some(other.unwrap_or(DEFAULT_AWS_SPOT_SCHEDULE)),
            )),
        },
    }
}

#[cfg(feature = "azure")]
fn validate_azure(raw: RawAzure, retry: &RetryPolicy, c: &mut Checker) -> AzureSourceConfig {
    AzureSourceConfig {
        enabled: raw.enabled.unwrap_or(true),
        provider: AzureConfig {
            endpoint: c.endpoint(
                "providers.azure.endpoint",
                raw.endpoint,
                DEFAULT_AZURE_ENDPOINT,
            ),
            regions: c.regions("providers.azure.regions", raw.regions),
            concurrency: match raw.concurrency.unwrap_or(4) {
                n @ 1..=32 => n as usize,
                n => {
                    c.fail(
                        "providers.azure.concurrency",
                        format!("{n} is not between 1 and 32"),
                    );
                    1
                }
            },
            retry: retry.clone(),
        },
        schedule: c.schedule("providers.azure.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "gcp")]
fn validate_gcp(g: RawGcp, retry: &RetryPolicy, c: &mut Checker) -> GcpSourceConfig {
    GcpSourceConfig {
        enabled: g.enabled.unwrap_or(true),
        provider: GcpConfig {
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
            api_key: None,
            token: None,
            retry: retry.clone(),
        },
        schedule: c.schedule("providers.gcp.schedule", g.schedule.as_deref()),
    }
}

#[cfg(feature = "lambda")]
fn validate_lambda(l: RawLambda, retry: &RetryPolicy, c: &mut Checker) -> LambdaSourceConfig {
    LambdaSourceConfig {
        enabled: l.enabled.unwrap_or(true),
        provider: LambdaConfig {
            endpoint: c.endpoint(
                "providers.lambda.endpoint",
                l.endpoint,
                DEFAULT_LAMBDA_ENDPOINT,
            ),
            api_key: None,
            retry: retry.clone(),
        },
        schedule: c.schedule("providers.lambda.schedule", l.schedule.as_deref()),
    }
}

#[cfg(feature = "file")]
fn validate_files(
    raw: BTreeMap<String, RawFileSource>,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> BTreeMap<String, FileSourceConfig> {
    let mut file = BTreeMap::new();
    for (name, sheet) in raw {
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
    file
}

impl SyncConfig {
    /// How each source's HTTP requests are retried within one sync.
    #[must_use]
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.http_attempts,
            request_timeout: self.http_timeout,
            ..RetryPolicy::default()
        }
    }
}

#[cfg(feature = "aws")]
impl AwsSourceConfig {
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn build(&self) -> Result<AwsProvider, ProviderError> {
        AwsProvider::new(self.provider.clone())
    }

    /// The spot-only job: AWS itself with its `spot_schedule`, when enabled
    /// and spot history is read.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn spot_job(&self) -> Result<Option<(AwsProvider, Schedule)>, ProviderError> {
        match &self.spot_schedule {
            Some(schedule) if self.enabled && self.provider.sources.spot_history => {
                Ok(Some((self.build()?, schedule.clone())))
            }
            _ => Ok(None),
        }
    }
}

impl ProvidersConfig {
    /// The providers this config enables, ready to sync. Keys come from the
    /// environment here, never from the config file.
    ///
    /// # Errors
    /// When an HTTP client cannot be built.
    pub fn build_enabled(&self) -> Result<Vec<Box<dyn Provider>>, ProviderError> {
        let mut out: Vec<Box<dyn Provider>> = Vec::new();
        #[cfg(feature = "aws")]
        if self.aws.enabled {
            out.push(Box::new(self.aws.build()?));
        }
        #[cfg(feature = "azure")]
        if self.azure.enabled {
            out.push(Box::new(AzureProvider::new(self.azure.provider.clone())?));
        }
        #[cfg(feature = "gcp")]
        if let Some(gcp) = self.gcp.as_ref().filter(|g| g.enabled) {
            out.push(Box::new(GcpProvider::new(GcpConfig {
                api_key: Secret::from_env(gcp::API_KEY_ENV),
                token: Secret::from_env(gcp::TOKEN_ENV),
                ..gcp.provider.clone()
            })?));
        }
        #[cfg(feature = "lambda")]
        if let Some(lambda) = self.lambda.as_ref().filter(|l| l.enabled) {
            out.push(Box::new(LambdaProvider::new(LambdaConfig {
                api_key: Secret::from_env(lambda::API_KEY_ENV),
                ..lambda.provider.clone()
            })?));
        }
        #[cfg(feature = "file")]
        for (name, sheet) in self.file.iter().filter(|(_, s)| s.enabled) {
            out.push(Box::new(FileProvider::new(
                name,
                sheet.path.clone(),
                sheet.format,
            )));
        }
        Ok(out)
    }
}
