//! A stand-in for Nebius: the token exchange over HTTP (it checks the JWT's
//! RS256 signature against the service account's public key) and one gRPC
//! server of the real `PlatformService` and `CalculatorService` protos,
//! which accept only tokens it issued and has not expired.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use prost::Message as _;
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

use super::{FixtureServer, Seen, serve, status_json};
use crate::nebius::proto::nebius::billing::v1 as billing;
use crate::nebius::proto::nebius::common::v1 as common;
use crate::nebius::proto::nebius::compute::v1 as compute;

/// One preset: name, vCPUs, memory GiB, GPUs.
pub type Preset = (&'static str, i32, i32, i32);

/// One platform: name, GPU GB, preemptibles allowed, presets.
pub type Platform = (String, i32, bool, Vec<Preset>);

/// What the stand-in lists and prices.
#[derive(Debug, Clone)]
pub struct Market {
    /// Project id to its platforms.
    pub projects: BTreeMap<String, Vec<Platform>>,
    /// `platform_preset` to its hourly (on-demand, preemptible) costs as the
    /// calculator writes them.
    pub costs: BTreeMap<String, (String, String)>,
    /// Platforms per `List` page.
    pub page_size: usize,
    /// Every page names the same next page, as a broken server might.
    pub stuck_page_token: bool,
}

impl Market {
    /// Two regions: H100 SXM (preemptible), L40S (not), and a CPU platform,
    /// two pages of platforms in the first project.
    #[must_use]
    pub fn sample() -> Self {
        let h100: Vec<Preset> = vec![
            ("1gpu-16vcpu-200gb", 16, 200, 1),
            ("8gpu-128vcpu-1600gb", 128, 1600, 8),
        ];
        let l40s: Vec<Preset> = vec![("1gpu-8vcpu-32gb", 8, 32, 1)];
        let cpu: Vec<Preset> = vec![("4vcpu-16gb", 4, 16, 0)];
        let platforms = vec![
            ("gpu-h100-sxm".to_owned(), 80, true, h100),
            ("gpu-l40s-a".to_owned(), 48, false, l40s),
            ("cpu-d3".to_owned(), 0, true, cpu),
        ];
        let mut projects = BTreeMap::new();
        projects.insert("project-e00north".to_owned(), platforms.clone());
        projects.insert("project-u00central".to_owned(), platforms[..1].to_vec());
        let mut costs = BTreeMap::new();
        for (key, od, pre) in [
            (
                "gpu-h100-sxm_1gpu-16vcpu-200gb",
                "2.950000000",
                "1.250000000",
            ),
            (
                "gpu-h100-sxm_8gpu-128vcpu-1600gb",
                "23.600000000",
                "10.000000000",
            ),
            ("gpu-l40s-a_1gpu-8vcpu-32gb", "1.5456", "0.9"),
            ("cpu-d3_4vcpu-16gb", "0.1", "0.05"),
        ] {
            costs.insert(key.to_owned(), (od.to_owned(), pre.to_owned()));
        }
        Self {
            projects,
            costs,
            page_size: 2,
            stuck_page_token: false,
        }
    }
}

#[derive(Default)]
struct Tokens {
    /// Issued and still accepted.
    valid: Vec<String>,
    issued: usize,
}

struct State {
    market: Mutex<Market>,
    public_key: Vec<u8>,
    kid: String,
    account: String,
    expires_in: u64,
    tokens: Mutex<Tokens>,
    /// Statuses the next gRPC calls answer, before any real answer.
    faults: Mutex<VecDeque<Status>>,
    calls: AtomicUsize,
}

impl State {
    fn check(&self, metadata: &tonic::metadata::MetadataMap) -> Result<(), Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(fault) = self.faults.lock().unwrap().pop_front() {
            return Err(fault);
        }
        let bearer = metadata
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Status::unauthenticated("no bearer token"))?;
        if self
            .tokens
            .lock()
            .unwrap()
            .valid
            .iter()
            .any(|t| t == bearer)
        {
            Ok(())
        } else {
            Err(Status::unauthenticated("token is expired or unknown"))
        }
    }

    /// The token exchange: an access token for a JWT this account signed.
    fn exchange(&self, body: &str) -> Result<String, String> {
        let form: BTreeMap<String, String> = form_urlencoded::parse(body.as_bytes())
            .into_owned()
            .collect();
        let want = [
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:jwt"),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
        ];
        for (k, v) in want {
            if form.get(k).map(String::as_str) != Some(v) {
                return Err(format!("`{k}` is not `{v}`"));
            }
        }
        let jwt = form.get("subject_token").ok_or("no subject_token")?;
        let parts: Vec<&str> = jwt.split('.').collect();
        let [header, claims, signature] = parts[..] else {
            return Err("not a compact JWT".to_owned());
        };
        let json = |part: &str| -> Result<serde_json::Value, String> {
            let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|e| e.to_string())?;
            serde_json::from_slice(&bytes).map_err(|e| e.to_string())
        };
        let (header_doc, claims_doc) = (json(header)?, json(claims)?);
        if header_doc["alg"] != "RS256" || header_doc["kid"] != self.kid.as_str() {
            return Err(format!("unexpected header {header_doc}"));
        }
        let now = chrono::Utc::now().timestamp();
        if claims_doc["iss"] != self.account.as_str()
            || claims_doc["sub"] != self.account.as_str()
            || claims_doc["exp"].as_i64().is_none_or(|exp| exp <= now)
            || claims_doc["iat"].as_i64().is_none_or(|iat| iat > now + 5)
        {
            return Err(format!("unexpected claims {claims_doc}"));
        }
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|e| e.to_string())?;
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &self.public_key)
            .verify(format!("{header}.{claims}").as_bytes(), &signature)
            .map_err(|_| "bad signature".to_owned())?;
        let mut tokens = self.tokens.lock().unwrap();
        tokens.issued += 1;
        let token = format!("nebius-token-{}", tokens.issued);
        tokens.valid.push(token.clone());
        Ok(token)
    }
}

#[derive(Clone)]
struct Service(Arc<State>);

#[tonic::async_trait]
impl compute::platform_service_server::PlatformService for Service {
    async fn get_by_name(
        &self,
        _request: Request<common::GetByNameRequest>,
    ) -> Result<Response<compute::Platform>, Status> {
        Err(Status::unimplemented("not used by gpuplan"))
    }

    async fn list(
        &self,
        request: Request<compute::ListPlatformsRequest>,
    ) -> Result<Response<compute::ListPlatformsResponse>, Status> {
        self.0.check(request.metadata())?;
        let r = request.into_inner();
        let market = self.0.market.lock().unwrap().clone();
        let Some(all) = market.projects.get(&r.parent_id) else {
            return Err(Status::not_found(format!(
                "project {} not found",
                r.parent_id
            )));
        };
        let start: usize = if r.page_token.is_empty() {
            0
        } else {
            r.page_token
                .parse()
                .map_err(|_| Status::invalid_argument("bad page token"))?
        };
        let size = market
            .page_size
            .min(usize::try_from(r.page_size).unwrap_or(usize::MAX).max(1));
        let items: Vec<compute::Platform> = all
            .iter()
            .skip(start)
            .take(size)
            .map(|(name, gpu_gb, preemptible, presets)| compute::Platform {
                metadata: Some(common::ResourceMetadata {
                    id: format!("computeplatform-{name}"),
                    parent_id: r.parent_id.clone(),
                    name: name.clone(),
                    ..Default::default()
                }),
                spec: Some(compute::PlatformSpec {
                    presets: presets
                        .iter()
                        .map(|(preset, vcpu, mem, gpus)| compute::Preset {
                            name: (*preset).to_owned(),
                            resources: Some(compute::PresetResources {
                                vcpu_count: *vcpu,
                                memory_gibibytes: *mem,
                                gpu_count: *gpus,
                                ..Default::default()
                            }),
                            allow_gpu_clustering: *gpus == 8,
                        })
                        .collect(),
                    human_readable_name: name.to_uppercase(),
                    gpu_memory_gigabytes: *gpu_gb,
                    ..Default::default()
                }),
                status: Some(compute::PlatformStatus {
                    allowed_for_preemptibles: *preemptible,
                }),
            })
            .collect();
        let next = start + items.len();
        Ok(Response::new(compute::ListPlatformsResponse {
            next_page_token: if market.stuck_page_token {
                "1".to_owned()
            } else if next < all.len() {
                next.to_string()
            } else {
                String::new()
            },
            items,
        }))
    }
}

fn breakdown(cost: &str) -> billing::CostBreakdown {
    billing::CostBreakdown {
        sku_costs: vec![billing::SkuCost {
            sku_id: "sku-gpu".to_owned(),
            quantity: "1".to_owned(),
            quantity_rounded: "1.00".to_owned(),
            cost: cost.to_owned(),
            cost_rounded: cost.to_owned(),
        }],
        cost: cost.to_owned(),
        cost_rounded: cost.to_owned(),
    }
}

#[tonic::async_trait]
impl billing::calculator_service_server::CalculatorService for Service {
    async fn estimate_batch(
        &self,
        request: Request<billing::EstimateBatchRequest>,
    ) -> Result<Response<billing::EstimateBatchResponse>, Status> {
        self.0.check(request.metadata())?;
        let r = request.into_inner();
        let hourly = r.filter_aggregation_unit.as_ref().is_some_and(|f| {
            f.filter_aggregation_unit_values
                == [billing::filter_aggregation_unit::FilterAggregationUnitValue::FilterAggregationUnitHour as i32]
        });
        if !hourly || r.currency != "usd" {
            return Err(Status::invalid_argument("the stand-in prices hours in usd"));
        }
        let market = self.0.market.lock().unwrap().clone();
        let mut costs = Vec::new();
        for spec in r.resource_specs {
            let any = spec
                .spec
                .ok_or_else(|| Status::invalid_argument("no spec"))?;
            if any.type_url != "type.googleapis.com/nebius.compute.v1.CreateInstanceRequest" {
                return Err(Status::invalid_argument(format!(
                    "cannot price {}",
                    any.type_url
                )));
            }
            let create = compute::CreateInstanceRequest::decode(any.value.as_slice())
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            let metadata = create.metadata.clone().unwrap_or_default();
            let instance = create.spec.unwrap_or_default();
            let resources = instance.resources.unwrap_or_default();
            let Some(compute::resources_spec::Size::Preset(preset)) = resources.size else {
                return Err(Status::invalid_argument("no preset"));
            };
            let key = format!("{}_{preset}", resources.platform);
            let (od, pre) = market
                .costs
                .get(&key)
                .ok_or_else(|| Status::invalid_argument(format!("unknown preset {key}")))?;
            let cost = if instance.preemptible.is_some() {
                pre
            } else {
                od
            };
            let unit = |unit: &str, kind: billing::aggregation_unit::UnitType| {
                Some(billing::AggregationUnit {
                    unit: unit.to_owned(),
                    unit_type: kind as i32,
                })
            };
            // Usage-based units come whatever the filter asks for.
            costs.push(billing::ResourceCost {
                metadata: Some(metadata.clone()),
                override_metadata: None,
                aggregation_unit: unit("request", billing::aggregation_unit::UnitType::UsageBased),
                cost_type: Some(billing::resource_cost::CostType::General(
                    billing::GeneralResourceCost {
                        total: Some(breakdown("0")),
                    },
                )),
            });
            costs.push(billing::ResourceCost {
                metadata: Some(metadata),
                override_metadata: None,
                aggregation_unit: unit("hour", billing::aggregation_unit::UnitType::TimeBased),
                cost_type: Some(billing::resource_cost::CostType::General(
                    billing::GeneralResourceCost {
                        total: Some(breakdown(cost)),
                    },
                )),
            });
        }
        Ok(Response::new(billing::EstimateBatchResponse {
            resource_costs: costs,
            total_costs: Vec::new(),
            currency: "usd".to_owned(),
        }))
    }
}

pub struct NebiusStandIn {
    /// `http://127.0.0.1:PORT` of the gRPC server (compute and calculator).
    pub grpc: String,
    /// The token exchange's base URL.
    pub auth: FixtureServer,
    /// The service account's credentials file as `nebius` writes it.
    pub credentials_json: String,
    state: Arc<State>,
}

impl NebiusStandIn {
    /// Starts both servers; issued tokens are good for `expires_in` seconds
    /// as far as the client is told (the stand-in expires them only when
    /// [`Self::expire_tokens`] says so).
    pub async fn start(market: Market, expires_in: u64) -> Self {
        let key = KeyPair::generate(KeySize::Rsa2048).unwrap();
        let pkcs8 = key.as_der().unwrap();
        let pem_body = STANDARD.encode(pkcs8.as_ref());
        let lines: Vec<&str> = pem_body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        );
        let (kid, account) = ("publickey-e00test", "serviceaccount-e00test");
        let credentials_json = serde_json::json!({"subject-credentials": {
            "alg": "RS256", "private-key": pem, "kid": kid, "iss": account, "sub": account}})
        .to_string();
        let state = Arc::new(State {
            market: Mutex::new(market),
            public_key: key.public_key().as_ref().to_vec(),
            kid: kid.to_owned(),
            account: account.to_owned(),
            expires_in,
            tokens: Mutex::default(),
            faults: Mutex::default(),
            calls: AtomicUsize::new(0),
        });
        let for_auth = state.clone();
        let auth = serve(move |req: &Seen, _base, _n| {
            if !req.uri.starts_with("/oauth2/token/exchange") {
                return status_json(404, r#"{"error":"not_found"}"#);
            }
            match for_auth.exchange(&req.body) {
                Ok(token) => status_json(
                    200,
                    &serde_json::json!({"access_token": token, "token_type": "Bearer",
                        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                        "expires_in": for_auth.expires_in})
                    .to_string(),
                ),
                Err(why) => status_json(
                    400,
                    &serde_json::json!({"error": "invalid_grant", "error_description": why})
                        .to_string(),
                ),
            }
        })
        .await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc = format!("http://{}", listener.local_addr().unwrap());
        let service = Service(state.clone());
        let router = tonic::transport::Server::builder()
            .add_service(
                compute::platform_service_server::PlatformServiceServer::new(service.clone()),
            )
            .add_service(billing::calculator_service_server::CalculatorServiceServer::new(service));
        tokio::spawn(async move {
            router
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
                .unwrap();
        });
        Self {
            grpc,
            auth,
            credentials_json,
            state,
        }
    }

    /// Tokens exchanged so far.
    pub fn exchanges(&self) -> usize {
        self.state.tokens.lock().unwrap().issued
    }

    /// gRPC calls answered so far, faults included.
    pub fn calls(&self) -> usize {
        self.state.calls.load(Ordering::SeqCst)
    }

    /// Every token issued so far stops being accepted, as at its expiry.
    pub fn expire_tokens(&self) {
        self.state.tokens.lock().unwrap().valid.clear();
    }

    /// The next gRPC calls answer these statuses, in order.
    pub fn fail_next(&self, statuses: impl IntoIterator<Item = Status>) {
        self.state.faults.lock().unwrap().extend(statuses);
    }

    /// Changes what the stand-in lists and prices from now on.
    pub fn set_market(&self, market: Market) {
        *self.state.market.lock().unwrap() = market;
    }

    /// `[providers.nebius]` keys pointing at the stand-in, for a config file.
    #[must_use]
    pub fn config_toml(&self, credentials_file: &str) -> String {
        format!(
            "[providers.nebius]\nauth_endpoint = \"{}\"\ncompute_endpoint = \"{}\"\ncalculator_endpoint = \"{}\"\ncredentials_file = \"{credentials_file}\"\nprojects = {{ eu-north1 = \"project-e00north\", us-central1 = \"project-u00central\" }}\n",
            self.auth.base, self.grpc, self.grpc
        )
    }
}
