//! One sync's RPC calls: signed, sent as form posts, judged by the error
//! `Code` in the body (not the HTTP status), and counted against the budget.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use super::{ACCESS_KEY_ID_ENV, ACCESS_KEY_SECRET_ENV, AlibabaConfig, PROVIDER, sign, wire};
use crate::ProviderError;
use crate::http::{HttpClient, Verdict};
use crate::secret::Secret;

const VERSION: &str = "2014-05-26";
pub const DEFAULT_ENDPOINT: &str = "https://ecs.aliyuncs.com";
/// Rows per `DescribeInstanceTypes` page; newer accounts get at most 100.
const PAGE_SIZE: u32 = 100;
/// A page chain longer than this is a server that never says "done".
const MAX_PAGES: usize = 1000;

/// Codes that mean "slow down" or "try again", whatever the HTTP status.
const RETRYABLE: &[&str] = &[
    "Throttling",
    "Throttling.User",
    "Throttling.Api",
    "ServiceUnavailable",
    "InternalError",
];

/// Codes that mean the key pair is wrong or lacks permission.
const AUTH: &[&str] = &[
    "InvalidAccessKeyId.NotFound",
    "InvalidAccessKeyId.Inactive",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "Forbidden.RAM",
    "Forbidden",
    "Forbidden.AccessKeyDisabled",
];

/// An answer, or one of the error codes the caller said it handles.
pub enum Answer<T> {
    Ok(T),
    Refused(String),
}

/// The base URL of a call: the configured endpoint, else the region's own
/// endpoint, else the global one.
pub fn base(config: &AlibabaConfig, region: Option<&wire::Region>) -> String {
    match (&config.endpoint, region) {
        (Some(endpoint), _) => endpoint.trim_end_matches('/').to_owned(),
        (None, Some(r)) => format!("https://{}", r.region_endpoint),
        (None, None) => DEFAULT_ENDPOINT.to_owned(),
    }
}

pub struct Session<'a> {
    config: &'a AlibabaConfig,
    http: &'a HttpClient,
    key_id: &'a Secret,
    key_secret: &'a Secret,
    sent: AtomicU32,
}

impl<'a> Session<'a> {
    pub fn new(
        config: &'a AlibabaConfig,
        http: &'a HttpClient,
        key_id: &'a Secret,
        key_secret: &'a Secret,
    ) -> Self {
        Self {
            config,
            http,
            key_id,
            key_secret,
            sent: AtomicU32::new(0),
        }
    }

    /// Calls made so far (retries not counted).
    pub fn requests(&self) -> u32 {
        self.sent.load(Ordering::Relaxed)
    }

    /// `DescribeRegions`: the regions to sync, each with its endpoint. A
    /// configured region the account does not list is an error.
    pub async fn regions(&self) -> Result<Vec<wire::Region>, ProviderError> {
        let answer: wire::Regions = self.call("DescribeRegions", None, &[]).await?;
        let listed = answer.regions.region;
        if self.config.regions.is_empty() {
            return Ok(listed);
        }
        self.config
            .regions
            .iter()
            .map(|wanted| {
                listed
                    .iter()
                    .find(|r| &r.region_id == wanted)
                    .map(|r| wire::Region {
                        region_id: r.region_id.clone(),
                        region_endpoint: r.region_endpoint.clone(),
                    })
                    .ok_or_else(|| {
                        self.decode_error(
                            "DescribeRegions",
                            None,
                            format!(
                                "configured region `{wanted}` is not one this account lists ({})",
                                listed
                                    .iter()
                                    .map(|r| r.region_id.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                    })
            })
            .collect()
    }

    /// `DescribeInstanceTypes`, every page.
    pub async fn instance_types(&self) -> Result<Vec<wire::InstanceTypeInfo>, ProviderError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut params = vec![("MaxResults", PAGE_SIZE.to_string())];
            if let Some(t) = &token {
                params.push(("NextToken", t.clone()));
            }
            let page: wire::InstanceTypes =
                self.call("DescribeInstanceTypes", None, &params).await?;
            out.extend(page.instance_types.instance_type);
            match page.next_token.filter(|t| !t.is_empty()) {
                Some(next) if Some(&next) == token.as_ref() => {
                    return Err(self.decode_error(
                        "DescribeInstanceTypes",
                        None,
                        format!("NextToken `{next}` repeats: the page chain does not advance"),
                    ));
                }
                Some(next) => token = Some(next),
                None => return Ok(out),
            }
        }
        Err(self.decode_error(
            "DescribeInstanceTypes",
            None,
            format!("more than {MAX_PAGES} pages"),
        ))
    }

    /// `DescribeAvailableResource`: each instance type any zone lists, with
    /// its status per zone (`Available`, `SoldOut`, ...).
    pub async fn available_resource(
        &self,
        region: &wire::Region,
    ) -> Result<BTreeMap<String, Vec<(String, String)>>, ProviderError> {
        let params = [
            ("RegionId", region.region_id.clone()),
            ("DestinationResource", "InstanceType".to_owned()),
        ];
        let answer: wire::AvailableResource = self
            .call("DescribeAvailableResource", Some(region), &params)
            .await?;
        let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for zone in answer
            .available_zones
            .map(|z| z.available_zone)
            .unwrap_or_default()
        {
            let resources = zone
                .available_resources
                .map(|r| r.available_resource)
                .unwrap_or_default();
            for supported in resources
                .into_iter()
                .filter_map(|r| r.supported_resources)
                .flat_map(|s| s.supported_resource)
            {
                out.entry(supported.value)
                    .or_default()
                    .push((zone.zone_id.clone(), supported.status));
            }
        }
        Ok(out)
    }

    /// `DescribePrice` of one term: the `instanceType` line's trade price in
    /// the site's currency, or the refusal code when the term or the type is
    /// not sold.
    pub async fn describe_price(
        &self,
        region: &wire::Region,
        instance_type: &str,
        unit: &str,
        period: u32,
    ) -> Result<Answer<f64>, ProviderError> {
        let params = [
            ("RegionId", region.region_id.clone()),
            ("ResourceType", "instance".to_owned()),
            ("InstanceType", instance_type.to_owned()),
            ("PriceUnit", unit.to_owned()),
            ("Period", period.to_string()),
        ];
        let what = format!("DescribePrice {instance_type} {unit}/{period}");
        let answer: Answer<wire::PriceAnswer> = self
            .call_refusable(
                "DescribePrice",
                Some(region),
                &params,
                &[super::PRICE_NOT_FOUND, super::NOT_SOLD],
            )
            .await?;
        let price = match answer {
            Answer::Ok(a) => a.price_info.price,
            Answer::Refused(code) => return Ok(Answer::Refused(code)),
        };
        if price.currency != self.config.currency.code {
            return Err(self.decode_error(
                &what,
                Some(region),
                format!(
                    "priced in {} but the site prices in {} (check providers.alibaba.site)",
                    price.currency, self.config.currency.code
                ),
            ));
        }
        let line = price
            .detail_infos
            .map(|d| d.detail_info)
            .unwrap_or_default()
            .into_iter()
            .find(|d| d.resource.eq_ignore_ascii_case("instanceType"));
        match line.and_then(|l| l.trade_price) {
            Some(p) if p.is_finite() && p >= 0.0 => Ok(Answer::Ok(p)),
            Some(p) => Err(self.decode_error(&what, Some(region), format!("TradePrice {p}"))),
            None => Err(self.decode_error(
                &what,
                Some(region),
                "no DetailInfo line with Resource `instanceType` and a TradePrice".to_owned(),
            )),
        }
    }

    /// `DescribeSpotPriceHistory` of one type since `since`, every zone,
    /// every page (by offset).
    pub async fn spot_price_history(
        &self,
        region: &wire::Region,
        instance_type: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<wire::SpotPrice>, ProviderError> {
        let now = Utc::now();
        let mut out = Vec::new();
        let mut offset = 0;
        for _ in 0..MAX_PAGES {
            let mut params = vec![
                ("RegionId", region.region_id.clone()),
                ("InstanceType", instance_type.to_owned()),
                ("NetworkType", "vpc".to_owned()),
                ("OSType", "linux".to_owned()),
                (
                    "StartTime",
                    since.to_rfc3339_opts(SecondsFormat::Secs, true),
                ),
                ("EndTime", now.to_rfc3339_opts(SecondsFormat::Secs, true)),
            ];
            if offset > 0 {
                params.push(("Offset", offset.to_string()));
            }
            let page: wire::SpotHistory = self
                .call("DescribeSpotPriceHistory", Some(region), &params)
                .await?;
            if let Some(currency) = page
                .currency
                .as_ref()
                .filter(|c| **c != self.config.currency.code)
            {
                return Err(self.decode_error(
                    "DescribeSpotPriceHistory",
                    Some(region),
                    format!(
                        "priced in {currency} but the site prices in {}",
                        self.config.currency.code
                    ),
                ));
            }
            out.extend(
                page.spot_prices
                    .map(|s| s.spot_price_type)
                    .unwrap_or_default(),
            );
            match page.next_offset.unwrap_or(0) {
                0 => return Ok(out),
                next if next <= offset => {
                    return Err(self.decode_error(
                        "DescribeSpotPriceHistory",
                        Some(region),
                        format!("NextOffset {next} does not advance past {offset}"),
                    ));
                }
                next => offset = next,
            }
        }
        Err(self.decode_error(
            "DescribeSpotPriceHistory",
            Some(region),
            format!("more than {MAX_PAGES} pages"),
        ))
    }

    /// A call whose every error code fails it.
    async fn call<T: DeserializeOwned>(
        &self,
        action: &str,
        region: Option<&wire::Region>,
        params: &[(&str, String)],
    ) -> Result<T, ProviderError> {
        match self.call_refusable(action, region, params, &[]).await? {
            Answer::Ok(t) => Ok(t),
            Answer::Refused(code) => Err(self.decode_error(action, region, code)),
        }
    }

    /// Signs and sends one call; an error whose code is in `refusals` is an
    /// answer, not a failure.
    async fn call_refusable<T: DeserializeOwned>(
        &self,
        action: &str,
        region: Option<&wire::Region>,
        params: &[(&str, String)],
        refusals: &[&str],
    ) -> Result<Answer<T>, ProviderError> {
        let sent = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        if sent > self.config.max_requests {
            return Err(ProviderError::Budget {
                provider: PROVIDER.to_owned(),
                limit: self.config.max_requests,
                call: call_name(action, region),
                hint: "raise providers.alibaba.max_requests, or narrow regions or instance_types"
                    .to_owned(),
            });
        }
        let url = format!("{}/", base(self.config, region));
        let shown = format!("{url} ({})", call_name(action, region));
        let judge = |status: StatusCode, body: &[u8]| judge(&shown, status, body, refusals);
        let body = self
            .http
            .send_judged(
                &shown,
                |c| {
                    c.post(&url)
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body(self.signed_form(action, params))
                },
                &judge,
            )
            .await
            .map_err(|e| {
                e.with_auth_hint(&format!("{ACCESS_KEY_ID_ENV} and {ACCESS_KEY_SECRET_ENV}"))
            })?;
        if let Ok(wire::ErrorBody {
            code: Some(code), ..
        }) = serde_json::from_slice(&body)
        {
            return Ok(Answer::Refused(code));
        }
        serde_json::from_slice(&body)
            .map(Answer::Ok)
            .map_err(|e| self.decode_error(action, region, e.to_string()))
    }

    /// The form body of one call: its parameters, the common ones with a
    /// fresh nonce and timestamp, and the signature over all of them.
    fn signed_form(&self, action: &str, params: &[(&str, String)]) -> String {
        let mut all: Vec<(String, String)> = params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        let common = [
            ("Action", action.to_owned()),
            ("Version", VERSION.to_owned()),
            ("Format", "JSON".to_owned()),
            ("AccessKeyId", self.key_id.expose().to_owned()),
            ("SignatureMethod", "HMAC-SHA1".to_owned()),
            ("SignatureVersion", "1.0".to_owned()),
            ("SignatureNonce", format!("{:032x}", fastrand::u128(..))),
            (
                "Timestamp",
                Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
            ),
        ];
        all.extend(common.into_iter().map(|(k, v)| (k.to_owned(), v)));
        let signature = sign::signature("POST", &all, self.key_secret.expose());
        all.push(("Signature".to_owned(), signature));
        sign::canonical_query(&all)
    }

    pub fn decode_error(
        &self,
        action: &str,
        region: Option<&wire::Region>,
        detail: String,
    ) -> ProviderError {
        ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: format!(
                "{}/ ({})",
                base(self.config, region),
                call_name(action, region)
            ),
            detail,
        }
    }
}

/// `DescribePrice in ap-southeast-1`, for errors.
fn call_name(action: &str, region: Option<&wire::Region>) -> String {
    match region {
        Some(r) => format!("{action} in {}", r.region_id),
        None => action.to_owned(),
    }
}

/// Decides on the `Code` of an error body: throttling and server trouble are
/// retried whatever the status; a body without a code goes by its status.
fn judge(shown: &str, status: StatusCode, body: &[u8], refusals: &[&str]) -> Verdict {
    let error = serde_json::from_slice::<wire::ErrorBody>(body)
        .ok()
        .and_then(|e| e.code.map(|code| (code, e.message)));
    let Some((code, message)) = error else {
        return Verdict::ByStatus;
    };
    let message: String = message.chars().take(300).collect();
    if refusals.contains(&code.as_str()) {
        Verdict::Done
    } else if code.starts_with("Throttling") || RETRYABLE.contains(&code.as_str()) {
        Verdict::Retry(ProviderError::RateLimited {
            provider: PROVIDER.to_owned(),
            url: format!("{shown}: {code}"),
            retry_after: None,
        })
    } else if status.is_server_error() {
        Verdict::Retry(ProviderError::Http {
            provider: PROVIDER.to_owned(),
            url: shown.to_owned(),
            status: status.as_u16(),
            body: format!("{code}: {message}"),
        })
    } else if AUTH.contains(&code.as_str()) {
        Verdict::Fail(ProviderError::Auth {
            provider: PROVIDER.to_owned(),
            url: shown.to_owned(),
            detail: format!("{code}: {message}"),
        })
    } else {
        Verdict::Fail(ProviderError::Http {
            provider: PROVIDER.to_owned(),
            url: shown.to_owned(),
            status: status.as_u16(),
            body: format!("{code}: {message}"),
        })
    }
}
