//! A local stand-in for Alibaba Cloud's ECS RPC API in its wire format (form
//! posts, JSON answers), checking every request's signature as Alibaba does.
//! It serves one fixture account: two regions, a paged type catalogue, four
//! price terms per type and paged spot history.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::response::Response;

use super::{FixtureServer, Seen};
use crate::alibaba::sign;
use crate::test_server;

pub const REGIONS: &str = include_str!("../../fixtures/alibaba/regions.json");
pub const TYPES_1: &str = include_str!("../../fixtures/alibaba/instance_types_1.json");
pub const TYPES_2: &str = include_str!("../../fixtures/alibaba/instance_types_2.json");
pub const AVAILABLE_SG: &str = include_str!("../../fixtures/alibaba/available_ap-southeast-1.json");
pub const AVAILABLE_US: &str = include_str!("../../fixtures/alibaba/available_us-east-1.json");
pub const PRICE: &str = include_str!("../../fixtures/alibaba/price.json");
pub const SPOT_GN7I_1: &str = include_str!("../../fixtures/alibaba/spot_gn7i_1.json");
pub const SPOT_GN7I_2: &str = include_str!("../../fixtures/alibaba/spot_gn7i_2.json");
pub const SPOT_GN7E: &str = include_str!("../../fixtures/alibaba/spot_gn7e.json");
pub const SPOT_EMPTY: &str = include_str!("../../fixtures/alibaba/spot_empty.json");
pub const ERROR: &str = include_str!("../../fixtures/alibaba/error.json");

pub const KEY_ID: &str = "LTAI5tTestKeyId";
pub const KEY_SECRET: &str = "test-secret-0123";

pub type Params = BTreeMap<String, String>;

/// The form parameters of a request, after checking its signature the way
/// Alibaba does: recomputed over every parameter but `Signature`.
pub fn verified(req: &Seen) -> Params {
    let url = reqwest::Url::parse(&format!("http://x/?{}", req.body)).unwrap();
    let mut params: Params = url.query_pairs().into_owned().collect();
    let signature = params.remove("Signature").expect("a Signature parameter");
    let pairs: Vec<(String, String)> = params.clone().into_iter().collect();
    assert_eq!(
        sign::signature("POST", &pairs, KEY_SECRET),
        signature,
        "signature of {}",
        req.body
    );
    for (k, v) in [
        ("AccessKeyId", KEY_ID),
        ("Format", "JSON"),
        ("Version", "2014-05-26"),
        ("SignatureMethod", "HMAC-SHA1"),
    ] {
        assert_eq!(params.get(k).map(String::as_str), Some(v), "{k}");
    }
    params
}

pub fn error(status: u16, code: &str, message: &str) -> Response {
    let body = ERROR
        .replace("{{CODE}}", code)
        .replace("{{MESSAGE}}", message);
    let mut r = test_server::status(status, &body);
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

/// The instance line's trade price for (region, type, unit/period), in the
/// site's currency; `None` is a term that is not sold.
pub fn trade_price(region: &str, instance_type: &str, term: &str) -> Option<f64> {
    let table: &[(&str, &str, [Option<f64>; 4])] = &[
        (
            "ap-southeast-1",
            "ecs.gn7i-c8g1.2xlarge",
            [Some(1.2), Some(600.0), Some(6000.0), Some(14400.0)],
        ),
        (
            "ap-southeast-1",
            "ecs.gn6i-c4g1.xlarge",
            [Some(0.6), None, Some(4380.0), Some(9855.0)],
        ),
        (
            "ap-southeast-1",
            "ecs.gn7e-c16g1.4xlarge",
            [Some(3.5), Some(1800.0), Some(17520.0), Some(39420.0)],
        ),
        // A twelfth of an A10 (`NVIDIA A10*1/12`).
        (
            "ap-southeast-1",
            "ecs.sgn7i-vws-m2.xlarge",
            [Some(0.11), Some(55.0), Some(550.0), Some(1300.0)],
        ),
        (
            "us-east-1",
            "ecs.gn6i-c4g1.xlarge",
            [Some(0.55), Some(280.0), Some(3066.0), Some(7227.0)],
        ),
    ];
    let column = ["Hour/1", "Month/1", "Year/1", "Year/3"]
        .iter()
        .position(|t| *t == term)
        .unwrap();
    table
        .iter()
        .find(|(r, t, _)| *r == region && *t == instance_type)
        .and_then(|(_, _, prices)| prices[column])
}

/// Alibaba's answers for the fixture account, in `currency`. `first` may
/// answer a request instead (an error, say), given the request's parameters
/// and how many times that action was called before.
pub fn answer(p: &Params, currency: &str, calls: usize) -> Response {
    let fill = |body: &str| test_server::json(&body.replace("{{CURRENCY}}", currency), "");
    let region = p.get("RegionId").map(String::as_str).unwrap_or_default();
    let instance_type = p
        .get("InstanceType")
        .map(String::as_str)
        .unwrap_or_default();
    match p["Action"].as_str() {
        "DescribeRegions" => fill(REGIONS),
        "DescribeInstanceTypes" => {
            assert_eq!(p["MaxResults"], "100");
            match p.get("NextToken").map(String::as_str) {
                None => fill(TYPES_1),
                Some("e71d8a535bd9cc11") => fill(TYPES_2),
                Some(other) => panic!("unknown NextToken {other}"),
            }
        }
        "DescribeAvailableResource" => {
            assert_eq!(p["DestinationResource"], "InstanceType");
            fill(if region == "us-east-1" {
                AVAILABLE_US
            } else {
                AVAILABLE_SG
            })
        }
        "DescribePrice" => {
            assert_eq!(p["ResourceType"], "instance");
            assert!(!p.contains_key("SpotStrategy"));
            if instance_type == "ecs.gn7e-c16g1.4xlarge" && p["PriceUnit"] == "Hour" && calls == 0 {
                return error(
                    403,
                    "Throttling.User",
                    "Request was denied due to user flow control.",
                );
            }
            if region == "us-east-1" && instance_type == "ecs.gn7i-c8g1.2xlarge" {
                return error(
                    400,
                    "InvalidInstanceType.ValueNotSupported",
                    "The specified InstanceType is not supported in this region.",
                );
            }
            let term = format!("{}/{}", p["PriceUnit"], p["Period"]);
            let Some(trade) = trade_price(region, instance_type, &term) else {
                return error(
                    400,
                    "PriceNotFound",
                    "The price of your queried resource is not found.",
                );
            };
            // The order adds the system disk and bandwidth; the line's
            // resource name is capitalised differently by some regions.
            let resource = if instance_type.contains("gn7i") {
                "InstanceType"
            } else {
                "instanceType"
            };
            let body = PRICE
                .replace("{{RESOURCE}}", resource)
                .replace("{{LIST}}", &(trade * 1.25).to_string())
                .replace("{{OFF}}", &(trade * 0.25).to_string())
                .replace("{{TRADE}}", &trade.to_string())
                .replace("{{ORDER_LIST}}", &(trade * 1.25 + 0.1).to_string())
                .replace("{{ORDER_OFF}}", &(trade * 0.25).to_string())
                .replace("{{ORDER_TRADE}}", &(trade + 0.1).to_string());
            fill(&body)
        }
        "DescribeSpotPriceHistory" => {
            assert_eq!(
                (p["NetworkType"].as_str(), p["OSType"].as_str()),
                ("vpc", "linux")
            );
            assert!(!p.contains_key("ZoneId"));
            match (instance_type, p.get("Offset").map(String::as_str)) {
                ("ecs.gn7i-c8g1.2xlarge", None) if region == "ap-southeast-1" => fill(SPOT_GN7I_1),
                ("ecs.gn7i-c8g1.2xlarge", Some("2")) => fill(SPOT_GN7I_2),
                ("ecs.gn7e-c16g1.4xlarge", None) => fill(SPOT_GN7E),
                _ => fill(SPOT_EMPTY),
            }
        }
        other => panic!("unexpected action {other}"),
    }
}

/// A stand-in for Alibaba: `first` may answer a request instead of the
/// fixtures (given its parameters and how often its action came before).
pub async fn stand_in(
    currency: &'static str,
    first: impl Fn(&Params, usize) -> Option<Response> + Send + Sync + 'static,
) -> FixtureServer {
    let counts: Arc<std::sync::Mutex<BTreeMap<String, usize>>> = Arc::default();
    test_server::serve(move |req, _, _| {
        let p = verified(req);
        let key = format!(
            "{}:{}:{}:{}",
            p["Action"],
            p.get("InstanceType").cloned().unwrap_or_default(),
            p.get("PriceUnit").cloned().unwrap_or_default(),
            p.get("RegionId").cloned().unwrap_or_default()
        );
        let calls = {
            let mut counts = counts.lock().unwrap();
            let n = counts.entry(key).or_insert(0);
            *n += 1;
            *n - 1
        };
        first(&p, calls).unwrap_or_else(|| answer(&p, currency, calls))
    })
    .await
}
