//! Nebius AI Cloud over gRPC. Nebius publishes no price list: a service
//! account lists each project's platforms and presets
//! (`nebius.compute.v1.PlatformService/List`) and has the billing
//! calculator price an instance of each (`nebius.billing.v1.
//! CalculatorService/EstimateBatch`), on demand and, where the platform
//! allows it, preemptible. One project per region: the project decides the
//! region. Costs arrive as decimal strings. A preemptible price is a
//! point-in-time observation of the sync; a Nebius region is one zone, so
//! its zone is the region's name.

mod auth;
pub(crate) mod proto;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use prost::Message as _;
use serde::Deserialize;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

pub use auth::CREDENTIALS_ENV;
use auth::Credentials;
use proto::nebius::billing::v1 as billing;
use proto::nebius::common::v1 as common;
use proto::nebius::compute::v1 as compute;

use crate::http::{HttpClient, RetryPolicy, backoff_delay};
use crate::secret::Secret;
use crate::snapshot::{InstanceType, PriceKind, PriceRecord, Snapshot, SpotObservation};
use crate::{FetchContext, Provider, ProviderError, RegionScope, gpu};

const PROVIDER: &str = "nebius";
pub const DEFAULT_AUTH_ENDPOINT: &str = "https://auth.eu.nebius.com:443";
pub const DEFAULT_COMPUTE_ENDPOINT: &str = "https://compute.api.nebius.cloud:443";
pub const DEFAULT_CALCULATOR_ENDPOINT: &str =
    "https://api.calculator.billing-data-plane.api.nebius.cloud:443";
const EXCHANGE_PATH: &str = "/oauth2/token/exchange";
const PLATFORMS_PER_PAGE: i64 = 100;
/// A project lists a few dozen platforms; more pages than this is a loop.
const MAX_PAGES: usize = 50;
/// Instance specs priced per calculator request.
const SPECS_PER_ESTIMATE: usize = 50;
/// The calculator's type URL of the spec it prices.
const CREATE_INSTANCE_TYPE_URL: &str =
    "type.googleapis.com/nebius.compute.v1.CreateInstanceRequest";

/// The credentials file the environment names, if it names one.
#[must_use]
pub fn credentials_from_env() -> Option<PathBuf> {
    std::env::var_os(CREDENTIALS_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// A preset's instance type: `gpu-h100-sxm_8gpu-128vcpu-1600gb`.
fn instance_type(platform: &str, preset: &str) -> String {
    format!("{platform}_{preset}")
}

#[derive(Debug, Clone)]
pub struct NebiusConfig {
    /// Region (`eu-north1`) to the project (`project-e00...`) priced there.
    pub projects: BTreeMap<String, String>,
    /// Base URL of the token exchange; the adapter appends its path.
    pub auth_endpoint: String,
    pub compute_endpoint: String,
    pub calculator_endpoint: String,
    /// The service account's credentials file, read at every sync so a
    /// rotated key is picked up; `None` fails the sync naming the variable.
    /// The daemon sets it from `GPUPLAN_NEBIUS_CREDENTIALS`, or else from
    /// the section's `credentials_file`.
    pub credentials_file: Option<PathBuf>,
    pub retry: RetryPolicy,
}

impl NebiusConfig {
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<NebiusProvider, ProviderError> {
        NebiusProvider::new(self)
    }
}

pub struct NebiusProvider {
    config: NebiusConfig,
    http: HttpClient,
    /// The access token, kept between syncs until shortly before it expires.
    token: tokio::sync::Mutex<Option<auth::Token>>,
}

impl NebiusProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: NebiusConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self {
            config,
            http,
            token: tokio::sync::Mutex::new(None),
        })
    }

    fn list_url(&self) -> String {
        format!(
            "{}/nebius.compute.v1.PlatformService/List",
            self.config.compute_endpoint.trim_end_matches('/')
        )
    }

    fn exchange_url(&self) -> String {
        format!(
            "{}{EXCHANGE_PATH}",
            self.config.auth_endpoint.trim_end_matches('/')
        )
    }

    /// The cached token while it is fresh, else a new one.
    async fn bearer(&self, credentials: &Credentials) -> Result<Secret, ProviderError> {
        let mut slot = self.token.lock().await;
        if let Some(token) = slot.as_ref().filter(|t| t.fresh(std::time::Instant::now())) {
            return Ok(token.bearer.clone());
        }
        let token = auth::exchange(&self.http, &self.exchange_url(), credentials).await?;
        let bearer = token.bearer.clone();
        *slot = Some(token);
        Ok(bearer)
    }

    async fn forget_token(&self) {
        *self.token.lock().await = None;
    }

    fn channel(&self, endpoint: &str) -> Result<Channel, ProviderError> {
        let transport = |detail: String| ProviderError::Transport {
            provider: PROVIDER.to_owned(),
            url: endpoint.to_owned(),
            detail,
        };
        let mut e = Endpoint::from_shared(endpoint.to_owned())
            .map_err(|e| transport(e.to_string()))?
            .connect_timeout(Duration::from_secs(10))
            .timeout(self.config.retry.request_timeout);
        if endpoint.starts_with("https://") {
            e = e
                .tls_config(ClientTlsConfig::new().with_native_roots())
                .map_err(|e| transport(e.to_string()))?;
        }
        Ok(e.connect_lazy())
    }

    /// Sends `message` with `send` and the bearer token, retrying what a
    /// retry can fix. A token the server calls expired or unknown is
    /// exchanged anew once; refused twice, it is an auth error.
    async fn call<M: Clone, T, Fut>(
        &self,
        credentials: &Credentials,
        url: &str,
        message: &M,
        mut send: impl FnMut(tonic::Request<M>) -> Fut,
    ) -> Result<T, ProviderError>
    where
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let policy = &self.config.retry;
        let mut renewed = false;
        let mut attempt = 0;
        loop {
            let bearer = self.bearer(credentials).await?;
            let mut value = MetadataValue::try_from(format!("Bearer {}", bearer.expose()))
                .map_err(|_| ProviderError::Decode {
                    provider: PROVIDER.to_owned(),
                    location: self.exchange_url(),
                    detail: "the access token is not printable ASCII".to_owned(),
                })?;
            value.set_sensitive(true);
            let mut request = tonic::Request::new(message.clone());
            request.metadata_mut().insert("authorization", value);
            let status = match send(request).await {
                Ok(answer) => return Ok(answer.into_inner()),
                Err(status) => status,
            };
            let code = code_name(status.code());
            match status.code() {
                tonic::Code::Unauthenticated if !renewed => {
                    renewed = true;
                    self.forget_token().await;
                    continue;
                }
                tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
                    return Err(ProviderError::Auth {
                        provider: PROVIDER.to_owned(),
                        url: url.to_owned(),
                        detail: format!(
                            "{code}: {} (check the service account in {CREDENTIALS_ENV} and its access to the project)",
                            shorten(status.message())
                        ),
                    });
                }
                _ => {}
            }
            let error = ProviderError::Grpc {
                provider: PROVIDER.to_owned(),
                url: url.to_owned(),
                code: code.to_owned(),
                message: shorten(status.message()),
            };
            attempt += 1;
            if !error.is_retryable() || attempt >= policy.max_attempts {
                return Err(error);
            }
            let wait = backoff_delay(policy, attempt - 1, fastrand::f64());
            tracing::debug!(provider = PROVIDER, %url, code, ?wait, "retrying gRPC call");
            tokio::time::sleep(wait).await;
        }
    }

    /// Every platform of `project`, page by page.
    async fn platforms(
        &self,
        credentials: &Credentials,
        channel: &Channel,
        project: &str,
    ) -> Result<Vec<compute::Platform>, ProviderError> {
        let url = self.list_url();
        let client = compute::platform_service_client::PlatformServiceClient::new(channel.clone());
        let mut out = Vec::new();
        let mut token = String::new();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let request = compute::ListPlatformsRequest {
                page_size: PLATFORMS_PER_PAGE,
                page_token: token.clone(),
                parent_id: project.to_owned(),
            };
            let page = self
                .call(credentials, &url, &request, |r| {
                    let mut client = client.clone();
                    async move { client.list(r).await }
                })
                .await?;
            out.extend(page.items);
            if page.next_page_token.is_empty() {
                return Ok(out);
            }
            if !seen.insert(page.next_page_token.clone()) {
                return Err(decode(
                    &url,
                    format!(
                        "page token `{}` came back twice: the listing loops",
                        page.next_page_token
                    ),
                ));
            }
            token = page.next_page_token;
        }
        Err(decode(
            &url,
            format!("more than {MAX_PAGES} pages of platforms for project {project}"),
        ))
    }

    /// The hourly USD cost of each spec, in order.
    async fn estimate(
        &self,
        credentials: &Credentials,
        channel: &Channel,
        project: &str,
        specs: &[Spec],
    ) -> Result<Vec<f64>, ProviderError> {
        let url = format!(
            "{}/nebius.billing.v1.CalculatorService/EstimateBatch",
            self.config.calculator_endpoint.trim_end_matches('/')
        );
        let client =
            billing::calculator_service_client::CalculatorServiceClient::new(channel.clone());
        let mut out = Vec::with_capacity(specs.len());
        for chunk in specs.chunks(SPECS_PER_ESTIMATE) {
            let request = billing::EstimateBatchRequest {
                resource_specs: chunk.iter().map(|s| s.resource(project)).collect(),
                offer_types: Vec::new(),
                currency: "usd".to_owned(),
                filter_aggregation_unit: Some(billing::FilterAggregationUnit {
                    filter_aggregation_unit_values: vec![
                        billing::filter_aggregation_unit::FilterAggregationUnitValue::FilterAggregationUnitHour
                            as i32,
                    ],
                }),
            };
            let answer = self
                .call(credentials, &url, &request, |r| {
                    let mut client = client.clone();
                    async move { client.estimate_batch(r).await }
                })
                .await?;
            out.extend(hourly_costs(&answer, chunk).map_err(|detail| decode(&url, detail))?);
        }
        Ok(out)
    }
}

/// One instance the calculator is asked to price.
#[derive(Debug, Clone)]
struct Spec {
    platform: String,
    preset: String,
    preemptible: bool,
}

impl Spec {
    /// The name the spec carries, which the answer's metadata echoes.
    fn key(&self) -> String {
        let kind = if self.preemptible {
            "preemptible"
        } else {
            "on-demand"
        };
        format!("{} {kind}", instance_type(&self.platform, &self.preset))
    }

    fn resource(&self, project: &str) -> billing::ResourceSpec {
        let request = compute::CreateInstanceRequest {
            metadata: Some(common::ResourceMetadata {
                parent_id: project.to_owned(),
                name: self.key(),
                ..Default::default()
            }),
            spec: Some(compute::InstanceSpec {
                resources: Some(compute::ResourcesSpec {
                    platform: self.platform.clone(),
                    size: Some(compute::resources_spec::Size::Preset(self.preset.clone())),
                }),
                preemptible: self.preemptible.then(|| compute::PreemptibleSpec {
                    on_preemption: compute::preemptible_spec::PreemptionPolicy::Stop as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        };
        billing::ResourceSpec {
            spec: Some(prost_types::Any {
                type_url: CREATE_INSTANCE_TYPE_URL.to_owned(),
                value: request.encode_to_vec(),
            }),
        }
    }
}

/// The hourly cost of each spec of `specs` in `answer`: one hourly cost per
/// spec, in order, in USD; anything else fails the sync.
fn hourly_costs(
    answer: &billing::EstimateBatchResponse,
    specs: &[Spec],
) -> Result<Vec<f64>, String> {
    if !answer.currency.is_empty() && !answer.currency.eq_ignore_ascii_case("usd") {
        return Err(format!(
            "the estimate is in `{}`, not the USD asked for",
            answer.currency
        ));
    }
    let hourly: Vec<&billing::ResourceCost> = answer
        .resource_costs
        .iter()
        .filter(|c| {
            c.aggregation_unit
                .as_ref()
                .is_some_and(|u| u.unit.eq_ignore_ascii_case("hour"))
        })
        .collect();
    if hourly.len() != specs.len() {
        return Err(format!(
            "{} hourly costs for {} instance specs",
            hourly.len(),
            specs.len()
        ));
    }
    specs
        .iter()
        .zip(hourly)
        .map(|(spec, cost)| {
            let key = spec.key();
            let named = cost.metadata.as_ref().map_or("", |m| m.name.as_str());
            if !named.is_empty() && named != key {
                return Err(format!("the cost of `{key}` is answered as `{named}`"));
            }
            use billing::resource_cost::CostType;
            let breakdown = match &cost.cost_type {
                Some(CostType::General(g)) => g.total.as_ref(),
                Some(CostType::FixedInstance(f)) => f.per_instance.as_ref(),
                Some(CostType::Autoscale(a)) => a.per_instance.as_ref(),
                None => None,
            };
            let text = breakdown
                .map(|b| b.cost.as_str())
                .ok_or_else(|| format!("the cost of `{key}` has no total"))?;
            decimal(text)
                .ok_or_else(|| format!("the cost of `{key}` is `{text}`, not a decimal amount"))
        })
        .collect()
}

/// A decimal string (`42.123456789`) as a positive amount.
fn decimal(text: &str) -> Option<f64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !digits(whole)
        || !digits(fraction)
        || (text.contains('.') && fraction.is_empty())
    {
        return None;
    }
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
}

fn decode(url: &str, detail: String) -> ProviderError {
    ProviderError::Decode {
        provider: PROVIDER.to_owned(),
        location: url.to_owned(),
        detail,
    }
}

/// A server's message, bounded: it goes into errors and logs.
fn shorten(message: &str) -> String {
    let mut m: String = message.chars().take(300).collect();
    if m.len() < message.len() {
        m.push('…');
    }
    m
}

fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// What a region's platforms offer: the instance types, and the specs to price.
#[derive(Default)]
struct Offers {
    types: Vec<InstanceType>,
    specs: Vec<Spec>,
}

/// The GPU presets of `platforms`; CPU-only ones are counted as skipped.
fn offers(platforms: &[compute::Platform], snap: &mut Snapshot) -> Result<Offers, String> {
    let mut out = Offers::default();
    for p in platforms {
        let name = p.metadata.as_ref().map_or("", |m| m.name.as_str());
        if name.is_empty() {
            return Err("a platform has no `metadata.name`".to_owned());
        }
        let Some(spec) = p.spec.as_ref() else {
            return Err(format!("platform `{name}` has no `spec`"));
        };
        // `gpu-h100-sxm`: the GPU is the word after `gpu`.
        let gpu_word = name
            .strip_prefix("gpu-")
            .and_then(|rest| rest.split('-').next());
        let preemptible = p
            .status
            .as_ref()
            .is_some_and(|s| s.allowed_for_preemptibles);
        let memory_hint =
            (spec.gpu_memory_gigabytes > 0).then(|| f64::from(spec.gpu_memory_gigabytes));
        for preset in &spec.presets {
            let Some(r) = preset.resources.as_ref() else {
                return Err(format!(
                    "preset `{}` of `{name}` has no `resources`",
                    preset.name
                ));
            };
            let (Some(word), Ok(gpus @ 1..)) = (gpu_word, u32::try_from(r.gpu_count)) else {
                snap.skip("no_gpu");
                continue;
            };
            if preset.name.is_empty() {
                return Err(format!("a preset of `{name}` has no name"));
            }
            let model = gpu::normalize(word, memory_hint);
            if !model.known {
                tracing::warn!(
                    provider = PROVIDER,
                    platform = name,
                    "GPU model is not in the normalization table; keeping it as written."
                );
            }
            let form = gpu::form_factor(&model.name, name);
            out.types.push(InstanceType {
                instance_type: instance_type(name, &preset.name),
                gpu_model: model.name,
                gpu_count: f64::from(gpus),
                gpu_memory_gib: model.memory_gib,
                vcpus: u32::try_from(r.vcpu_count).ok().filter(|v| *v > 0),
                memory_gib: (r.memory_gibibytes > 0).then(|| f64::from(r.memory_gibibytes)),
                gpu_form_factor: form,
                mig_profile: None,
            });
            for preemptible in std::iter::once(false).chain(preemptible.then_some(true)) {
                out.specs.push(Spec {
                    platform: name.to_owned(),
                    preset: preset.name.clone(),
                    preemptible,
                });
            }
        }
    }
    Ok(out)
}

#[async_trait]
impl Provider for NebiusProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::Only(self.config.projects.keys().cloned().collect())
    }

    #[tracing::instrument(name = "nebius_fetch", skip_all)]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let credentials = match &self.config.credentials_file {
            Some(path) => Credentials::from_file(path)?,
            None => return Err(auth::unset()),
        };
        let compute = self.channel(&self.config.compute_endpoint)?;
        let calculator = self.channel(&self.config.calculator_endpoint)?;
        let observed_at = Utc::now();
        let mut snap = Snapshot::default();
        let mut types = BTreeMap::new();
        for (region, project) in &self.config.projects {
            let platforms = self.platforms(&credentials, &compute, project).await?;
            let offers = offers(&platforms, &mut snap).map_err(|detail| {
                decode(
                    &self.list_url(),
                    format!("project {project} ({region}): {detail}"),
                )
            })?;
            let costs = self
                .estimate(&credentials, &calculator, project, &offers.specs)
                .await?;
            for (spec, usd) in offers.specs.iter().zip(costs) {
                let instance_type = instance_type(&spec.platform, &spec.preset);
                if spec.preemptible {
                    snap.spot_observations.push(SpotObservation {
                        region: region.clone(),
                        zone: region.clone(),
                        instance_type,
                        usd_per_hour: usd,
                        observed_at,
                    });
                } else {
                    snap.prices.push(PriceRecord {
                        region: region.clone(),
                        zone: None,
                        instance_type,
                        price_kind: PriceKind::OnDemand,
                        offering_class: None,
                        usd_per_hour: usd,
                        upfront_usd: 0.0,
                        recurring_usd_per_hour: usd,
                        source: Some(format!("{}/{}", spec.platform, spec.preset)),
                        available_regions: Vec::new(),
                        max_instances: None,
                        price_scope: crate::PriceScope::Instance,
                        window: None,
                    });
                }
            }
            for t in offers.types {
                types.entry(t.instance_type.clone()).or_insert(t);
            }
        }
        snap.instance_types = types.into_values().collect();
        tracing::info!(
            provider = PROVIDER,
            regions = self.config.projects.len(),
            prices = snap.prices.len(),
            preemptible = snap.spot_observations.len(),
            "priced the projects' GPU presets"
        );
        Ok(snap)
    }
}

/// `[providers.nebius]`: the projects to price, and endpoints for a test or
/// a proxy. `enabled` and `schedule` are the daemon's.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    projects: Option<BTreeMap<String, String>>,
    auth_endpoint: Option<String>,
    compute_endpoint: Option<String>,
    calculator_endpoint: Option<String>,
    /// Where the credentials file is when `GPUPLAN_NEBIUS_CREDENTIALS` is unset.
    credentials_file: Option<String>,
}

/// The provider's config from its section, without its credentials, with
/// each problem noted in `p`.
pub fn config(
    section: &Section,
    retry: RetryPolicy,
    p: &mut crate::config::Problems,
) -> NebiusConfig {
    let projects = section.projects.clone().unwrap_or_default();
    if projects.is_empty() {
        p.fail(
            "projects",
            "name at least one project to price, by its region: projects = { eu-north1 = \"project-e00...\" }",
        );
    }
    for (region, project) in &projects {
        let code = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if !code(region) {
            p.fail(
                format!("projects.{region}"),
                format!("`{region}` is not a region code (like \"eu-north1\")"),
            );
        } else if !code(project) {
            p.fail(
                format!("projects.{region}"),
                format!("`{project}` is not a project id (like \"project-e00abc123\")"),
            );
        }
    }
    NebiusConfig {
        projects,
        auth_endpoint: p.endpoint(
            "auth_endpoint",
            section.auth_endpoint.clone(),
            DEFAULT_AUTH_ENDPOINT,
        ),
        compute_endpoint: p.endpoint(
            "compute_endpoint",
            section.compute_endpoint.clone(),
            DEFAULT_COMPUTE_ENDPOINT,
        ),
        calculator_endpoint: p.endpoint(
            "calculator_endpoint",
            section.calculator_endpoint.clone(),
            DEFAULT_CALCULATOR_ENDPOINT,
        ),
        credentials_file: section.credentials_file.as_ref().map(PathBuf::from),
        retry,
    }
}

#[cfg(test)]
mod tests;
