//! `[sync]` and `[providers.*]`: how and where each source syncs.

#[cfg(feature = "alibaba")]
use gpuplan_providers::alibaba::{self, AlibabaConfig};
#[cfg(feature = "aws")]
use gpuplan_providers::aws::{AwsConfig, AwsProvider};
#[cfg(feature = "azure")]
use gpuplan_providers::azure::AzureConfig;
use gpuplan_providers::config::Problems;
#[cfg(feature = "file")]
use gpuplan_providers::file::{FileProvider, SheetFormat};
#[cfg(feature = "gcp")]
use gpuplan_providers::gcp::{self, GcpConfig};
use gpuplan_providers::http::RetryPolicy;
#[cfg(feature = "lambda")]
use gpuplan_providers::lambda::{self, LambdaConfig};
#[cfg(feature = "nebius")]
use gpuplan_providers::nebius::{self, NebiusConfig};
#[cfg(feature = "oci")]
use gpuplan_providers::oci::OciConfig;
#[cfg(feature = "runpod")]
use gpuplan_providers::runpod::{self, RunpodConfig};
#[cfg(feature = "tencent")]
use gpuplan_providers::tencent::{self, TencentConfig};
#[cfg(feature = "vast")]
use gpuplan_providers::vast::{self, VastConfig};
use gpuplan_providers::{Provider, ProviderError};

use super::*;

/// List prices change rarely; hourly keeps them fresh without wasting quota.
pub(super) const DEFAULT_LIST_SCHEDULE: &str = "0 0 * * * *";

pub(super) const DEFAULT_MAX_SHRINK_PCT: f64 = 20.0;

/// Spot prices move faster than list prices; with credentials, AWS reads its
/// new spot history every 10 minutes between full syncs, offset by 5 so it never
/// runs at the same time as the hourly full sync (which reads it too).
#[cfg(feature = "aws")]
pub(super) const DEFAULT_AWS_SPOT_SCHEDULE: &str = "0 5-55/10 * * * *";

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
    /// Off unless `[providers.runpod] enabled = true`: RunPod's terms restrict
    /// automated collection.
    #[cfg(feature = "runpod")]
    pub runpod: Option<RunpodSourceConfig>,
    /// Off unless `[providers.vast] enabled = true`, for the same reason.
    #[cfg(feature = "vast")]
    pub vast: Option<VastSourceConfig>,
    /// `None` when the config has no `[providers.nebius]` (it needs a
    /// service account and the projects to price).
    #[cfg(feature = "nebius")]
    pub nebius: Option<NebiusSourceConfig>,
    /// Oracle's public price list: on unless `enabled = false`.
    #[cfg(feature = "oci")]
    pub oci: OciSourceConfig,
    /// `None` when the config has no `[providers.alibaba]`; off unless enabled.
    #[cfg(feature = "alibaba")]
    pub alibaba: Option<AlibabaSourceConfig>,
    /// `None` when the config has no `[providers.tencent]`; off unless enabled.
    #[cfg(feature = "tencent")]
    pub tencent: Option<TencentSourceConfig>,
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

#[cfg(feature = "runpod")]
/// RunPod; its optional API key is read from the environment when it is built.
#[derive(Debug, Clone)]
pub struct RunpodSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: RunpodConfig,
}

#[cfg(feature = "nebius")]
/// Nebius; its credentials file is named by the environment when it is built.
#[derive(Debug, Clone)]
pub struct NebiusSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: NebiusConfig,
}

#[cfg(feature = "vast")]
/// Vast.ai; its optional API key is read from the environment when it is built.
#[derive(Debug, Clone)]
pub struct VastSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: VastConfig,
}

#[cfg(feature = "oci")]
#[derive(Debug, Clone)]
pub struct OciSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: OciConfig,
}

#[cfg(feature = "alibaba")]
/// Alibaba Cloud; its access key is read from the environment when it is built.
#[derive(Debug, Clone)]
pub struct AlibabaSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: AlibabaConfig,
}

#[cfg(feature = "tencent")]
/// Tencent Cloud; its secret is read from the environment when it is built.
#[derive(Debug, Clone)]
pub struct TencentSourceConfig {
    pub enabled: bool,
    pub schedule: Schedule,
    pub provider: TencentConfig,
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
    aws: AwsSection,
    #[serde(default)]
    azure: AzureSection,
    gcp: Option<GcpSection>,
    lambda: Option<LambdaSection>,
    runpod: Option<RunpodSection>,
    vast: Option<VastSection>,
    nebius: Option<NebiusSection>,
    #[serde(default)]
    oci: OciSection,
    alibaba: Option<AlibabaSection>,
    tencent: Option<TencentSection>,
    #[serde(default)]
    file: BTreeMap<String, FileSection>,
}

// Each provider reads its own table. A build without a provider still reads
// its table, as plain TOML, to refuse it by name.
#[cfg(feature = "aws")]
type AwsSection = gpuplan_providers::aws::Section;
#[cfg(not(feature = "aws"))]
type AwsSection = toml::Table;
#[cfg(feature = "azure")]
type AzureSection = gpuplan_providers::azure::Section;
#[cfg(not(feature = "azure"))]
type AzureSection = toml::Table;
#[cfg(feature = "gcp")]
type GcpSection = gpuplan_providers::gcp::Section;
#[cfg(not(feature = "gcp"))]
type GcpSection = toml::Table;
#[cfg(feature = "lambda")]
type LambdaSection = gpuplan_providers::lambda::Section;
#[cfg(not(feature = "lambda"))]
type LambdaSection = toml::Table;
#[cfg(feature = "runpod")]
type RunpodSection = gpuplan_providers::runpod::Section;
#[cfg(not(feature = "runpod"))]
type RunpodSection = toml::Table;
#[cfg(feature = "vast")]
type VastSection = gpuplan_providers::vast::Section;
#[cfg(not(feature = "vast"))]
type VastSection = toml::Table;
#[cfg(feature = "nebius")]
type NebiusSection = gpuplan_providers::nebius::Section;
#[cfg(not(feature = "nebius"))]
type NebiusSection = toml::Table;
#[cfg(feature = "oci")]
type OciSection = gpuplan_providers::oci::Section;
#[cfg(not(feature = "oci"))]
type OciSection = toml::Table;
#[cfg(feature = "alibaba")]
type AlibabaSection = gpuplan_providers::alibaba::Section;
#[cfg(not(feature = "alibaba"))]
type AlibabaSection = toml::Table;
#[cfg(feature = "tencent")]
type TencentSection = gpuplan_providers::tencent::Section;
#[cfg(not(feature = "tencent"))]
type TencentSection = toml::Table;
#[cfg(feature = "file")]
type FileSection = gpuplan_providers::file::Section;
#[cfg(not(feature = "file"))]
type FileSection = toml::Table;

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
    fx: &FxRates,
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
    // A plain table's own `enabled = false` lets a section stay.
    let off = |t: &toml::Table| t.get("enabled").and_then(toml::Value::as_bool);
    #[cfg(not(feature = "aws"))]
    unbuilt(c, "aws", !raw.aws.is_empty(), off(&raw.aws));
    #[cfg(not(feature = "azure"))]
    unbuilt(c, "azure", !raw.azure.is_empty(), off(&raw.azure));
    #[cfg(not(feature = "gcp"))]
    unbuilt(c, "gcp", raw.gcp.is_some(), raw.gcp.as_ref().and_then(off));
    #[cfg(not(feature = "lambda"))]
    unbuilt(
        c,
        "lambda",
        raw.lambda.is_some(),
        raw.lambda.as_ref().and_then(off),
    );
    #[cfg(not(feature = "oci"))]
    unbuilt(c, "oci", !raw.oci.is_empty(), off(&raw.oci));
    #[cfg(not(feature = "vast"))]
    unbuilt(
        c,
        "vast",
        raw.vast.is_some(),
        raw.vast.as_ref().and_then(off).or(Some(false)),
    );
    #[cfg(not(feature = "nebius"))]
    unbuilt(
        c,
        "nebius",
        raw.nebius.is_some(),
        raw.nebius.as_ref().and_then(off),
    );
    #[cfg(not(feature = "runpod"))]
    unbuilt(
        c,
        "runpod",
        raw.runpod.is_some(),
        raw.runpod.as_ref().and_then(off).or(Some(false)),
    );
    #[cfg(not(feature = "alibaba"))]
    unbuilt(
        c,
        "alibaba",
        raw.alibaba.is_some(),
        raw.alibaba.as_ref().and_then(off),
    );
    #[cfg(not(feature = "tencent"))]
    unbuilt(
        c,
        "tencent",
        raw.tencent.is_some(),
        raw.tencent.as_ref().and_then(off),
    );
    #[cfg(not(feature = "file"))]
    unbuilt(c, "file", !raw.file.is_empty(), None);
    #[cfg(all(
        feature = "aws",
        feature = "azure",
        feature = "gcp",
        feature = "lambda",
        feature = "oci",
        feature = "alibaba",
        feature = "tencent",
        feature = "file",
        feature = "runpod",
        feature = "vast",
        feature = "nebius"
    ))]
    let _ = (unbuilt, off);
    // A build with few providers may use neither.
    let _ = (&retry, &resolve, fx);
    ProvidersConfig {
        #[cfg(feature = "aws")]
        aws: validate_aws(&raw.aws, retry, c),
        #[cfg(feature = "azure")]
        azure: validate_azure(&raw.azure, retry, c),
        #[cfg(feature = "gcp")]
        gcp: raw.gcp.as_ref().map(|g| validate_gcp(g, retry, c)),
        #[cfg(feature = "lambda")]
        lambda: raw.lambda.as_ref().map(|l| validate_lambda(l, retry, c)),
        #[cfg(feature = "runpod")]
        runpod: raw.runpod.as_ref().map(|r| validate_runpod(r, retry, c)),
        #[cfg(feature = "vast")]
        vast: raw.vast.as_ref().map(|v| validate_vast(v, retry, c)),
        #[cfg(feature = "nebius")]
        nebius: raw.nebius.as_ref().map(|n| validate_nebius(n, retry, c)),
        #[cfg(feature = "oci")]
        oci: validate_oci(&raw.oci, retry, c),
        #[cfg(feature = "alibaba")]
        alibaba: raw
            .alibaba
            .as_ref()
            .map(|a| validate_alibaba(a, retry, fx, c)),
        #[cfg(feature = "tencent")]
        tencent: raw
            .tencent
            .as_ref()
            .map(|t| validate_tencent(t, retry, fx, c)),
        #[cfg(feature = "file")]
        file: validate_files(raw.file, c, resolve),
    }
}

#[cfg(feature = "aws")]
fn validate_aws(raw: &AwsSection, retry: &RetryPolicy, c: &mut Checker) -> AwsSourceConfig {
    let mut problems = Problems::new("providers.aws");
    let provider = raw.config(retry.clone(), &mut problems);
    c.absorb(problems);
    AwsSourceConfig {
        enabled: raw.enabled.unwrap_or(true),
        provider,
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
fn validate_azure(raw: &AzureSection, retry: &RetryPolicy, c: &mut Checker) -> AzureSourceConfig {
    let mut problems = Problems::new("providers.azure");
    let provider = raw.config(retry.clone(), &mut problems);
    c.absorb(problems);
    AzureSourceConfig {
        enabled: raw.enabled.unwrap_or(true),
        provider,
        schedule: c.schedule("providers.azure.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "oci")]
fn validate_oci(raw: &OciSection, retry: &RetryPolicy, c: &mut Checker) -> OciSourceConfig {
    let mut problems = Problems::new("providers.oci");
    let provider = raw.config(retry.clone(), &mut problems);
    c.absorb(problems);
    OciSourceConfig {
        enabled: raw.enabled.unwrap_or(true),
        provider,
        schedule: c.schedule("providers.oci.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "alibaba")]
fn validate_alibaba(
    raw: &AlibabaSection,
    retry: &RetryPolicy,
    fx: &FxRates,
    c: &mut Checker,
) -> AlibabaSourceConfig {
    let mut problems = Problems::new("providers.alibaba");
    let provider = raw.config(retry.clone(), &|code| fx.currency(code), &mut problems);
    c.absorb(problems);
    AlibabaSourceConfig {
        enabled: raw.enabled.unwrap_or(false),
        provider,
        schedule: c.schedule("providers.alibaba.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "tencent")]
fn validate_tencent(
    raw: &TencentSection,
    retry: &RetryPolicy,
    fx: &FxRates,
    c: &mut Checker,
) -> TencentSourceConfig {
    let mut problems = Problems::new("providers.tencent");
    let provider = raw.config(retry.clone(), &|code| fx.currency(code), &mut problems);
    c.absorb(problems);
    TencentSourceConfig {
        enabled: raw.enabled.unwrap_or(false),
        provider,
        schedule: c.schedule("providers.tencent.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "gcp")]
fn validate_gcp(raw: &GcpSection, retry: &RetryPolicy, c: &mut Checker) -> GcpSourceConfig {
    let mut problems = Problems::new("providers.gcp");
    let provider = raw.config(retry.clone(), &mut problems);
    c.absorb(problems);
    GcpSourceConfig {
        enabled: raw.enabled.unwrap_or(true),
        provider,
        schedule: c.schedule("providers.gcp.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "lambda")]
fn validate_lambda(
    raw: &LambdaSection,
    retry: &RetryPolicy,
    c: &mut Checker,
) -> LambdaSourceConfig {
    let mut problems = Problems::new("providers.lambda");
    let provider = lambda::config(raw, retry.clone(), &mut problems);
    c.absorb(problems);
    LambdaSourceConfig {
        enabled: raw.enabled.unwrap_or(true),
        provider,
        schedule: c.schedule("providers.lambda.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "runpod")]
fn validate_runpod(
    raw: &RunpodSection,
    retry: &RetryPolicy,
    c: &mut Checker,
) -> RunpodSourceConfig {
    let mut problems = Problems::new("providers.runpod");
    let provider = runpod::config(raw, retry.clone(), &mut problems);
    c.absorb(problems);
    RunpodSourceConfig {
        // Off unless asked for: the terms restrict automated collection.
        enabled: raw.enabled.unwrap_or(false),
        provider,
        schedule: c.schedule("providers.runpod.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "vast")]
fn validate_vast(raw: &VastSection, retry: &RetryPolicy, c: &mut Checker) -> VastSourceConfig {
    let mut problems = Problems::new("providers.vast");
    let provider = vast::config(raw, retry.clone(), &mut problems);
    c.absorb(problems);
    VastSourceConfig {
        enabled: raw.enabled.unwrap_or(false),
        provider,
        // A marketplace changes by the minute: its own, shorter default.
        schedule: c.schedule(
            "providers.vast.schedule",
            Some(raw.schedule.as_deref().unwrap_or(vast::DEFAULT_SCHEDULE)),
        ),
    }
}

#[cfg(feature = "nebius")]
fn validate_nebius(
    raw: &NebiusSection,
    retry: &RetryPolicy,
    c: &mut Checker,
) -> NebiusSourceConfig {
    let mut problems = Problems::new("providers.nebius");
    let provider = nebius::config(raw, retry.clone(), &mut problems);
    c.absorb(problems);
    NebiusSourceConfig {
        enabled: raw.enabled.unwrap_or(true),
        provider,
        schedule: c.schedule("providers.nebius.schedule", raw.schedule.as_deref()),
    }
}

#[cfg(feature = "file")]
fn validate_files(
    raw: BTreeMap<String, FileSection>,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> BTreeMap<String, FileSourceConfig> {
    let mut file = BTreeMap::new();
    for (name, sheet) in raw {
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
        let mut problems = Problems::new(&format!("providers.file.{name}"));
        let format = sheet.format(&mut problems);
        c.absorb(problems);
        let schedule = c.schedule(
            &format!("providers.file.{name}.schedule"),
            sheet.schedule.as_deref(),
        );
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

#[cfg(feature = "aws")]
impl AwsSourceConfig {
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn build(&self) -> Result<AwsProvider, ProviderError> {
        self.provider.clone().build()
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
            out.push(Box::new(self.azure.provider.clone().build()?));
        }
        #[cfg(feature = "gcp")]
        if let Some(gcp) = self.gcp.as_ref().filter(|g| g.enabled) {
            let keyed = GcpConfig {
                api_key: Secret::from_env(gcp::API_KEY_ENV),
                token: Secret::from_env(gcp::TOKEN_ENV),
                ..gcp.provider.clone()
            };
            out.push(Box::new(keyed.build()?));
        }
        #[cfg(feature = "lambda")]
        if let Some(lambda) = self.lambda.as_ref().filter(|l| l.enabled) {
            let keyed = LambdaConfig {
                api_key: Secret::from_env(lambda::API_KEY_ENV),
                ..lambda.provider.clone()
            };
            out.push(Box::new(keyed.build()?));
        }
        #[cfg(feature = "oci")]
        if self.oci.enabled {
            out.push(Box::new(self.oci.provider.clone().build()?));
        }
        #[cfg(feature = "vast")]
        if let Some(v) = self.vast.as_ref().filter(|v| v.enabled) {
            let keyed = VastConfig {
                api_key: Secret::from_env(vast::API_KEY_ENV),
                ..v.provider.clone()
            };
            out.push(Box::new(keyed.build()?));
        }
        #[cfg(feature = "nebius")]
        if let Some(n) = self.nebius.as_ref().filter(|n| n.enabled) {
            let keyed = NebiusConfig {
                credentials_file: nebius::credentials_from_env()
                    .or_else(|| n.provider.credentials_file.clone()),
                ..n.provider.clone()
            };
            out.push(Box::new(keyed.build()?));
        }
        #[cfg(feature = "runpod")]
        if let Some(runpod) = self.runpod.as_ref().filter(|r| r.enabled) {
            let keyed = RunpodConfig {
                api_key: Secret::from_env(runpod::API_KEY_ENV),
                ..runpod.provider.clone()
            };
            out.push(Box::new(keyed.build()?));
        }
        #[cfg(feature = "alibaba")]
        if let Some(alibaba) = self.alibaba.as_ref().filter(|a| a.enabled) {
            let keyed = AlibabaConfig {
                access_key_id: Secret::from_env(alibaba::ACCESS_KEY_ID_ENV),
                access_key_secret: Secret::from_env(alibaba::ACCESS_KEY_SECRET_ENV),
                ..alibaba.provider.clone()
            };
            out.push(Box::new(keyed.build()?));
        }
        #[cfg(feature = "tencent")]
        if let Some(tencent) = self.tencent.as_ref().filter(|t| t.enabled) {
            let keyed = TencentConfig {
                secret_id: Secret::from_env(tencent::SECRET_ID_ENV),
                secret_key: Secret::from_env(tencent::SECRET_KEY_ENV),
                ..tencent.provider.clone()
            };
            out.push(Box::new(keyed.build()?));
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
