//! A local stand-in for Tencent Cloud's CVM API 3.0 in its wire format (JSON
//! posts, errors inside HTTP 200), checking every request's TC3 signature as
//! Tencent does. It serves two regions of one fixture account.

use axum::response::Response;

use super::{FixtureServer, Seen};
use crate::tencent::sign;
use crate::test_server;

pub const QUOTAS_SG: &str =
    include_str!("../../fixtures/tencent/zone_instance_config_infos_ap-singapore.json");
pub const QUOTAS_SV: &str =
    include_str!("../../fixtures/tencent/zone_instance_config_infos_na-siliconvalley.json");
pub const CONFIGS_SG: &str =
    include_str!("../../fixtures/tencent/instance_type_configs_ap-singapore.json");
pub const CONFIGS_SV: &str =
    include_str!("../../fixtures/tencent/instance_type_configs_na-siliconvalley.json");
pub const ERROR: &str = include_str!("../../fixtures/tencent/error.json");

pub const SECRET_ID: &str = "AKIDtestsecretid0123";
pub const SECRET_KEY: &str = "test-secret-key-0123";

pub fn header<'a>(req: &'a Seen, name: &str) -> &'a str {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no {name} header"))
}

/// Checks a request the way Tencent does: the signature recomputed over the
/// host it arrived at and its exact body, at its own timestamp.
pub fn verify(req: &Seen) {
    let timestamp: i64 = header(req, "x-tc-timestamp").parse().unwrap();
    assert_eq!(
        header(req, "authorization"),
        sign::authorization(
            SECRET_ID,
            SECRET_KEY,
            header(req, "host"),
            &req.body,
            timestamp
        )
    );
    assert_eq!(header(req, "content-type"), sign::CONTENT_TYPE);
    assert_eq!(header(req, "x-tc-version"), "2017-03-12");
    assert_eq!(req.uri, "/");
}

pub fn error(code: &str, message: &str) -> Response {
    test_server::json(
        &ERROR
            .replace("{{CODE}}", code)
            .replace("{{MESSAGE}}", message),
        "",
    )
}

/// Tencent's answers for the fixture account; `first` may answer instead,
/// given the action, the region and the request's number.
pub async fn stand_in(
    first: impl Fn(&str, &str, usize) -> Option<Response> + Send + Sync + 'static,
) -> FixtureServer {
    test_server::serve(move |req, _, n| {
        verify(req);
        let (action, region) = (header(req, "x-tc-action"), header(req, "x-tc-region"));
        if let Some(r) = first(action, region, n) {
            return r;
        }
        let body = match (action, region) {
            ("DescribeZoneInstanceConfigInfos", "ap-singapore") => {
                let filters: serde_json::Value = serde_json::from_str(&req.body).unwrap();
                assert_eq!(
                    filters["Filters"][0]["Values"],
                    serde_json::json!(["POSTPAID_BY_HOUR", "SPOTPAID", "PREPAID"])
                );
                QUOTAS_SG
            }
            ("DescribeZoneInstanceConfigInfos", "na-siliconvalley") => QUOTAS_SV,
            ("DescribeInstanceTypeConfigs", "ap-singapore") => CONFIGS_SG,
            ("DescribeInstanceTypeConfigs", "na-siliconvalley") => CONFIGS_SV,
            _ => return error("UnsupportedRegion", "The region is not supported."),
        };
        test_server::json(body, "")
    })
    .await
}
