//! Lambda Cloud `GET /api/v1/instance-types` (API key from the environment).
//!
//! One global price per instance type, in integer US cents per hour. The regions
//! listed with capacity are where it can be launched right now; an empty list means
//! priced but no capacity at the moment, not "not offered". The GPU model and its
//! memory exist only inside `gpu_description` (`"A10 (24 GB PCIe)"`: an A10, not
//! an A10G).

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Deserialize;

use crate::http::{HttpClient, RetryPolicy};
use crate::secret::Secret;
use crate::snapshot::{
    AvailabilityRecord, AvailabilitySignal, InstanceType, PriceKind, PriceRecord, Snapshot,
};
use crate::{FetchContext, Provider, ProviderError, gpu};

const PROVIDER: &str = "lambda";
/// The environment variable holding the API key.
pub const API_KEY_ENV: &str = "GPUPLAN_LAMBDA_API_KEY";

#[derive(Debug, Clone)]
pub struct LambdaConfig {
    /// Base URL; the adapter appends `/api/v1/instance-types`.
    pub endpoint: String,
    pub api_key: Option<Secret>,
    pub retry: RetryPolicy,
}

impl LambdaConfig {
    /// The provider this config describes.
    ///
    /// # Errors
    /// When its HTTP client cannot be built.
    pub fn build(self) -> Result<LambdaProvider, ProviderError> {
        LambdaProvider::new(self)
    }
}

pub struct LambdaProvider {
    config: LambdaConfig,
    http: HttpClient,
}

impl LambdaProvider {
    /// # Errors
    /// `Transport` when the HTTP client cannot be built.
    pub fn new(config: LambdaConfig) -> Result<Self, ProviderError> {
        let http = HttpClient::new(PROVIDER, config.retry.clone())?;
        Ok(Self { config, http })
    }
}

#[derive(Debug, Deserialize)]
struct Response {
    data: BTreeMap<String, Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    instance_type: Spec,
    #[serde(default)]
    regions_with_capacity_available: Vec<Region>,
}

#[derive(Debug, Deserialize)]
struct Spec {
    name: String,
    gpu_description: String,
    /// Integer cents: a float here means the API changed its unit, so it fails.
    price_cents_per_hour: u64,
    specs: Specs,
}

#[derive(Debug, Deserialize)]
struct Specs {
    vcpus: u32,
    memory_gib: f64,
    gpus: u32,
}

#[derive(Debug, Deserialize)]
struct Region {
    name: String,
}

#[async_trait]
impl Provider for LambdaProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    #[tracing::instrument(skip_all, fields(provider = PROVIDER))]
    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let url = format!(
            "{}/api/v1/instance-types",
            self.config.endpoint.trim_end_matches('/')
        );
        let Some(key) = &self.config.api_key else {
            return Err(ProviderError::Auth {
                provider: PROVIDER.to_owned(),
                url,
                detail: format!("no API key: set {API_KEY_ENV}"),
            });
        };
        let body = self
            .http
            .send(&url, |c| c.get(&url).bearer_auth(key.expose()))
            .await
            .map_err(|e| e.with_auth_hint(API_KEY_ENV))?;
        let response: Response =
            serde_json::from_slice(&body).map_err(|e| ProviderError::Decode {
                provider: PROVIDER.to_owned(),
                location: url.clone(),
                detail: e.to_string(),
            })?;
        Ok(build_snapshot(response))
    }
}

fn build_snapshot(response: Response) -> Snapshot {
    let mut snap = Snapshot::default();
    for (key, entry) in response.data {
        let spec = entry.instance_type;
        if spec.specs.gpus == 0 {
            snap.skip("no_gpu");
            continue;
        }
        let (name, memory) = parse_gpu_description(&spec.gpu_description);
        let model = gpu::normalize(&name, memory);
        if !model.known {
            tracing::warn!(provider = PROVIDER, instance_type = %key, gpu = %spec.gpu_description, "GPU model is not in the normalization table; keeping it as written.");
        }
        let mut regions: Vec<String> = entry
            .regions_with_capacity_available
            .into_iter()
            .map(|r| r.name)
            .collect();
        regions.sort();
        regions.dedup();
        let usd = spec.price_cents_per_hour as f64 / 100.0;
        for region in &regions {
            snap.availability.push(AvailabilityRecord {
                region: region.clone(),
                zone: None,
                instance_type: spec.name.clone(),
                signal: AvailabilitySignal::CapacityAvailable(true),
            });
        }
        snap.prices.push(PriceRecord {
            region: "global".to_owned(),
            zone: None,
            instance_type: spec.name.clone(),
            price_kind: PriceKind::OnDemand,
            offering_class: None,
            usd_per_hour: usd,
            upfront_usd: 0.0,
            recurring_usd_per_hour: usd,
            source: Some(key),
            available_regions: regions,
            max_instances: None,
            price_scope: crate::PriceScope::Instance,
            window: None,
        });
        snap.instance_types.push(InstanceType {
            gpu_form_factor: gpu::form_factor(&model.name, &spec.gpu_description),
            instance_type: spec.name,
            gpu_model: model.name,
            gpu_count: f64::from(spec.specs.gpus),
            gpu_memory_gib: model.memory_gib,
            vcpus: Some(spec.specs.vcpus),
            memory_gib: Some(spec.specs.memory_gib),
            mig_profile: None,
        });
    }
    snap
}

/// `"Tesla V100 (16 GB)"` -> (`"Tesla V100"`, 16): the name before the
/// parenthesis and the memory inside it.
fn parse_gpu_description(text: &str) -> (String, Option<f64>) {
    let (name, rest) = text.split_once('(').unwrap_or((text, ""));
    let words: Vec<&str> = rest
        .split(|c: char| c.is_whitespace() || c == ')' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let memory = words
        .windows(2)
        .find(|w| w[1].eq_ignore_ascii_case("GB"))
        .and_then(|w| w[0].parse::<f64>().ok());
    (name.trim().to_owned(), memory)
}

pub const DEFAULT_ENDPOINT: &str = "https://cloud.lambda.ai";

/// `[providers.lambda]` as written.
pub type Section = crate::config::EndpointSection;

/// The provider's config from its section, without its key, with each
/// problem noted in `p`.
pub fn config(
    section: &Section,
    retry: RetryPolicy,
    p: &mut crate::config::Problems,
) -> LambdaConfig {
    LambdaConfig {
        endpoint: section.endpoint(p, DEFAULT_ENDPOINT),
        api_key: None,
        retry,
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::test_server::{self, FixtureServer};

    const FIXTURE: &str = include_str!("../fixtures/lambda/instance-types.json");

    fn provider(server: &FixtureServer, key: Option<&str>) -> LambdaProvider {
        LambdaProvider::new(LambdaConfig {
            endpoint: server.base.clone(),
            api_key: key.map(Secret::new),
            retry: test_server::fast_retry(),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn instance_types_become_one_global_price_each() {
        let server = test_server::serve(|req, base, _| {
            assert_eq!(req.uri, "/api/v1/instance-types");
            test_server::json(FIXTURE, base)
        })
        .await;
        let snap = provider(&server, Some("secret-key"))
            .fetch(&FetchContext::default())
            .await
            .unwrap();
        let auth = server.requests()[0].headers["authorization"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(auth, "Bearer secret-key");

        assert_eq!(snap.skipped.get("no_gpu"), Some(&1));
        assert_eq!(snap.prices.len(), 4);
        let h100 = snap
            .prices
            .iter()
            .find(|p| p.instance_type == "gpu_8x_h100_sxm5")
            .unwrap();
        assert_eq!((h100.region.as_str(), h100.usd_per_hour), ("global", 23.92));
        assert_eq!(h100.available_regions, vec!["us-east-1", "us-west-1"]);
        let a100 = snap
            .prices
            .iter()
            .find(|p| p.instance_type == "gpu_1x_a100")
            .unwrap();
        assert!(a100.available_regions.is_empty());
        assert_eq!(snap.availability.len(), 3);

        let spec = |name: &str| {
            snap.instance_types
                .iter()
                .find(|t| t.instance_type == name)
                .unwrap()
        };
        assert_eq!(
            (
                spec("gpu_1x_a10").gpu_model.as_str(),
                spec("gpu_1x_a10").gpu_count
            ),
            ("A10", 1.0)
        );
        assert_eq!(spec("gpu_1x_a100").gpu_model, "A100-40GB");
        assert_eq!(
            (
                spec("gpu_8x_h100_sxm5").gpu_model.as_str(),
                spec("gpu_8x_h100_sxm5").gpu_count
            ),
            ("H100-80GB", 8.0)
        );
        assert_eq!(spec("gpu_8x_v100").gpu_model, "V100");
        // The description says the form: "H100 (80 GB SXM5)".
        assert_eq!(
            spec("gpu_8x_h100_sxm5").gpu_form_factor,
            Some(crate::FormFactor::Sxm)
        );
        assert_eq!(spec("gpu_1x_a10").gpu_form_factor, None);
    }

    #[tokio::test]
    async fn a_missing_key_names_the_variable_to_set() {
        let server = test_server::serve(|_, base, _| test_server::json(FIXTURE, base)).await;
        let err = provider(&server, None)
            .fetch(&FetchContext::default())
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::Auth { .. }));
        assert!(err.to_string().contains(API_KEY_ENV), "{err}");
        assert!(server.requests().is_empty());
    }

    #[tokio::test]
    async fn a_rejected_key_is_not_retried_and_names_the_variable() {
        let server = test_server::serve(|_, _, _| {
            test_server::status(401, r#"{"error":{"code":"global/invalid-api-key","message":"API key was invalid, expired, or deleted."}}"#)
        })
        .await;
        let err = provider(&server, Some("wrong"))
            .fetch(&FetchContext::default())
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("invalid-api-key") && text.contains(API_KEY_ENV),
            "{text}"
        );
        assert!(!text.contains("wrong"), "the key leaked: {text}");
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn a_price_that_is_not_whole_cents_is_a_decode_error() {
        let server = test_server::serve(|_, base, _| {
            test_server::json(
                &FIXTURE.replace(
                    "\"price_cents_per_hour\": 75",
                    "\"price_cents_per_hour\": 0.75",
                ),
                base,
            )
        })
        .await;
        let err = provider(&server, Some("k"))
            .fetch(&FetchContext::default())
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::Decode { .. }), "{err}");
    }

    #[test]
    fn gpu_descriptions_give_name_and_memory() {
        assert_eq!(
            parse_gpu_description("A100 (40 GB PCIe)"),
            ("A100".to_owned(), Some(40.0))
        );
        assert_eq!(
            parse_gpu_description("Tesla V100 (16 GB)"),
            ("Tesla V100".to_owned(), Some(16.0))
        );
        assert_eq!(
            parse_gpu_description("Quadro RTX 6000 (24 GB)"),
            ("Quadro RTX 6000".to_owned(), Some(24.0))
        );
        assert_eq!(parse_gpu_description("GH200"), ("GH200".to_owned(), None));
    }
}
