//! A local stand-in for AWS's pricing endpoints, in their real wire formats:
//! the bulk files and spot advisor (JSON over GET), the Price List Query API
//! (awsJson1_1, `X-Amz-Target`) and EC2's query protocol (form POST, XML
//! answers). Its GetProducts pages are generated from the bulk fixtures, so
//! both AWS paths can be compared SKU by SKU. Regions come from the SigV4
//! credential scope, as a real regional endpoint would know them.

use std::collections::BTreeMap;

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Seen;

pub const INDEX: &str = include_str!("../../fixtures/aws/region_index.json");
pub const EAST: &str = include_str!("../../fixtures/aws/offer-us-east-1.json");
pub const WEST: &str = include_str!("../../fixtures/aws/offer-us-west-2.json");
pub const ADVISOR: &str = include_str!("../../fixtures/aws/spot-advisor-data.json");

/// The index's `ETag`, as CloudFront sends one for each published version.
pub const INDEX_ETAG: &str = "\"20261101000000\"";

/// `region_index.json` with its `ETag`, or a bodiless 304 when the request's
/// `If-None-Match` names the current one.
pub fn index(req: &Seen, index: &str, etag: &str) -> Response {
    if req
        .headers
        .get("if-none-match")
        .is_some_and(|v| v.as_bytes() == etag.as_bytes())
    {
        return axum::http::StatusCode::NOT_MODIFIED.into_response();
    }
    (
        [("content-type", "application/json"), ("etag", etag)],
        index.to_owned(),
    )
        .into_response()
}

/// The offer files a stand-in serves, and what its GetProducts pages are
/// made of: us-east-1's and us-west-2's.
#[derive(Clone, Copy)]
pub struct Offers<'a> {
    pub east: &'a str,
    pub west: &'a str,
    /// GetProducts also answers for an L4 and a Trainium type that the bulk
    /// fixtures lack.
    pub extra_types: bool,
}

/// The bulk fixtures.
pub const FIXTURES: Offers<'static> = Offers {
    east: EAST,
    west: WEST,
    extra_types: true,
};

/// The bulk price files and the spot advisor.
pub fn files(req: &Seen, base: &str) -> Response {
    files_from(req, base, FIXTURES)
}

/// [`files`] with other offer files.
pub fn files_from(req: &Seen, base: &str, offers: Offers<'_>) -> Response {
    match req.uri.as_str() {
        "/offers/v1.0/aws/AmazonEC2/current/region_index.json" => index(req, INDEX, INDEX_ETAG),
        "/offers/v1.0/aws/AmazonEC2/20261101000000/us-east-1/index.json" => {
            super::json(offers.east, base)
        }
        "/offers/v1.0/aws/AmazonEC2/20261101000000/us-west-2/index.json" => {
            super::json(offers.west, base)
        }
        "/spot-advisor-data.json" => super::json(ADVISOR, base),
        _ => super::status(404, "NoSuchKey"),
    }
}

/// One product of an offer file with its terms, for tests that build their
/// own files in the real shape (see [`offer_file`]).
pub struct Row<'a> {
    pub sku: &'a str,
    pub instance_type: &'a str,
    pub operating_system: &'a str,
    /// `OnDemand`, or `CapacityBlock` for a Capacity Block's fee row.
    pub market: &'a str,
    pub gpus: &'a str,
    /// The on-demand `Hrs` price, as the file writes it.
    pub on_demand: Option<&'a str>,
    /// Reserved terms: (lease, purchase option, upfront, hourly).
    pub reserved: &'a [(&'a str, &'a str, &'a str, &'a str)],
}

/// An offer file of `region` holding `rows`, in the real format: products
/// first, then terms keyed by SKU and `<sku>.<offerTermCode>`. A Capacity
/// Block row reads as AWS writes one: its own `operation` and description,
/// and the same `usagetype` as the type's on-demand row.
pub fn offer_file(region: &str, rows: &[Row<'_>]) -> String {
    let prefix = match region {
        "us-east-1" => String::new(),
        "us-west-2" => "USW2-".to_owned(),
        other => format!("{}-", other.to_ascii_uppercase()),
    };
    let mut products = serde_json::Map::new();
    let (mut on_demand, mut reserved) = (serde_json::Map::new(), serde_json::Map::new());
    for r in rows {
        let cb = r.market == "CapacityBlock";
        let operation = match (r.operating_system, cb) {
            ("Linux", false) => "RunInstances",
            ("Linux", true) => "RunInstances:CB",
            (_, false) => "RunInstances:0002",
            (_, true) => "RunInstances:0002:CB",
        };
        products.insert(
            r.sku.to_owned(),
            json!({"sku": r.sku, "productFamily": "Compute Instance", "attributes": {
                "servicecode": "AmazonEC2", "locationType": "AWS Region",
                "instanceType": r.instance_type, "regionCode": region,
                "operatingSystem": r.operating_system, "tenancy": "Shared",
                "capacitystatus": "Used", "preInstalledSw": "NA",
                "licenseModel": "No License required", "marketoption": r.market,
                "usagetype": format!("{prefix}BoxUsage:{}", r.instance_type),
                "operation": operation, "gpu": r.gpus, "gpuMemory": "NA",
                "vcpu": "192", "memory": "2048 GiB"}}),
        );
        if let Some(usd) = r.on_demand {
            let code = format!("{}.JRTCKXETXF", r.sku);
            let description = if cb {
                format!(
                    "${usd} per Capacity Block {} {} Instance Hour",
                    r.operating_system, r.instance_type
                )
            } else {
                format!(
                    "${usd} per On Demand {} {} Instance Hour",
                    r.operating_system, r.instance_type
                )
            };
            on_demand.insert(
                r.sku.to_owned(),
                json!({code.clone(): {"offerTermCode": "JRTCKXETXF", "sku": r.sku,
                    "effectiveDate": "2026-11-01T00:00:00Z", "termAttributes": {},
                    "priceDimensions": {format!("{code}.6YS6EN2CT7"): {
                        "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                        "rateCode": format!("{code}.6YS6EN2CT7"), "description": description,
                        "pricePerUnit": {"USD": usd}}}}}),
            );
        }
        let mut terms = serde_json::Map::new();
        for (i, (lease, option, upfront, hourly)) in r.reserved.iter().enumerate() {
            let code = format!("{}.RESERVED{i:02}", r.sku);
            let mut dims = serde_json::Map::new();
            dims.insert(
                format!("{code}.6YS6EN2CT7"),
                json!({"unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                       "description": "Linux reserved hourly", "pricePerUnit": {"USD": hourly}}),
            );
            if *upfront != "0" {
                dims.insert(
                    format!("{code}.2TG2D8R56U"),
                    json!({"unit": "Quantity", "description": "Upfront Fee", "appliesTo": [],
                           "pricePerUnit": {"USD": upfront}}),
                );
            }
            terms.insert(
                code,
                json!({"offerTermCode": format!("RESERVED{i:02}"), "sku": r.sku,
                       "effectiveDate": "2026-11-01T00:00:00Z", "priceDimensions": dims,
                       "termAttributes": {"LeaseContractLength": lease, "OfferingClass": "standard",
                                          "PurchaseOption": option}}),
            );
        }
        if !terms.is_empty() {
            reserved.insert(r.sku.to_owned(), Value::Object(terms));
        }
    }
    json!({"formatVersion": "v1.0", "disclaimer": "test", "offerCode": "AmazonEC2",
           "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
           "products": products, "terms": {"OnDemand": on_demand, "Reserved": reserved},
           "attributesList": {}})
    .to_string()
}

/// Items per GetProducts page: small, so every query pages.
const PAGE: usize = 2;

/// The first GetProducts elements of `instance_type` in `region`, as the API
/// sends them: each a JSON string whose terms are keyed `<sku>.<code>`, with
/// `Reserved` absent when the product has none.
fn price_list(offers: Offers<'_>, region: &str, instance_type: &str) -> Vec<String> {
    let mut items = Vec::new();
    for file in [offers.east, offers.west] {
        let offer: Value = serde_json::from_str(file).unwrap();
        for (sku, product) in offer["products"].as_object().unwrap() {
            let a = &product["attributes"];
            if a["regionCode"] != region || a["instanceType"] != instance_type {
                continue;
            }
            let mut terms = serde_json::Map::new();
            for kind in ["OnDemand", "Reserved"] {
                if let Some(t) = offer["terms"][kind].get(sku) {
                    terms.insert(kind.to_owned(), t.clone());
                }
            }
            items.push(
                json!({"product": product, "serviceCode": "AmazonEC2", "terms": terms,
                   "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z"})
                .to_string(),
            );
        }
    }
    // Types the bulk fixture lacks: an L4 one, a slice of one, and an
    // accelerator whose price list rows carry no GPU count at all.
    let extra = match instance_type {
        _ if !offers.extra_types => None,
        "g6.xlarge" => Some(("G6XLARGELINUX01", "1", "0.8048000000")),
        // The price list's `gpu` says 1 for a slice.
        "g6f.xlarge" => Some(("G6FXLARGELINUX1", "1", "0.2526000000")),
        "trn1.32xlarge" => Some(("TRN1LINUX000001", "NA", "21.5000000000")),
        _ => None,
    };
    if let Some((sku, gpus, usd)) = extra {
        items.push(json!({
            "product": {"productFamily": "Compute Instance", "sku": sku,
                "attributes": {"instanceType": instance_type, "regionCode": region,
                    "operatingSystem": "Linux", "tenancy": "Shared", "capacitystatus": "Used",
                    "preInstalledSw": "NA", "licenseModel": "No License required",
                    "gpu": gpus, "gpuMemory": "NA"}},
            "serviceCode": "AmazonEC2",
            "terms": {"OnDemand": {format!("{sku}.JRTCKXETXF"): {
                "offerTermCode": "JRTCKXETXF", "sku": sku, "termAttributes": {},
                "priceDimensions": {format!("{sku}.JRTCKXETXF.6YS6EN2CT7"): {
                    "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                    "description": format!("${usd} per On Demand Linux {instance_type} Instance Hour"),
                    "pricePerUnit": {"USD": usd}}}}}}
        }).to_string());
    }
    items
}

/// The request's form fields (EC2 query protocol).
pub fn form(body: &str) -> BTreeMap<String, String> {
    let decode = |s: &str| {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() + 1 {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    };
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// The region a request was signed for (from the SigV4 credential scope).
fn signed_region(req: &Seen) -> String {
    let auth = req.headers["authorization"].to_str().unwrap();
    let scope = auth.split("Credential=").nth(1).unwrap();
    scope.split('/').nth(2).unwrap().to_owned()
}

pub fn xml(body: &str) -> Response {
    (
        axum::http::StatusCode::OK,
        [("content-type", "text/xml;charset=UTF-8")],
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}",
            body.replace(
                "{{NS}}",
                "xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\""
            )
        ),
    )
        .into_response()
}

pub fn ec2_error(status: u16, code: &str) -> Response {
    (
        axum::http::StatusCode::from_u16(status).unwrap(),
        [("content-type", "text/xml;charset=UTF-8")],
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{code} (test)</Message></Error></Errors><RequestID>req-1</RequestID></Response>"
        ),
    )
        .into_response()
}

/// A Price List Query API answer (awsJson1_1).
pub fn pricing_json(status: u16, body: &str) -> Response {
    (
        axum::http::StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/x-amz-json-1.1")],
        body.to_owned(),
    )
        .into_response()
}

/// A Price List Query API error: HTTP 400 with the error's type and message.
pub fn pricing_error(code: &str, message: &str) -> Response {
    pricing_json(
        400,
        &json!({"__type": code, "Message": message}).to_string(),
    )
}

fn gpu(name: &str, count: u32, mib: u32) -> String {
    format!(
        "<gpuInfo><gpus><item><name>{name}</name><manufacturer>NVIDIA</manufacturer><count>{count}</count><memoryInfo><sizeInMiB>{mib}</sizeInMiB></memoryInfo></item></gpus><totalGpuMemoryInMiB>{}</totalGpuMemoryInMiB></gpuInfo>",
        count * mib
    )
}

fn instance_type(name: &str, vcpus: u32, mib: u64, accelerator: &str) -> String {
    format!(
        "<item><instanceType>{name}</instanceType><currentGeneration>true</currentGeneration><vCpuInfo><defaultVCpus>{vcpus}</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>{mib}</sizeInMiB></memoryInfo>{accelerator}</item>"
    )
}

/// `DescribeInstanceTypes`: us-east-1 in two pages (the last ending with an
/// empty `<nextToken/>`), us-west-2 in one.
fn describe_instance_types(region: &str, token: Option<&str>) -> Response {
    let (items, next) = match (region, token) {
        ("us-east-1", None) => (
            instance_type("p5.48xlarge", 192, 2_097_152, &gpu("H100", 8, 81920))
                + &instance_type("m7i.large", 2, 8192, ""),
            "<nextToken>types-2</nextToken>",
        ),
        ("us-east-1", Some("types-2")) => (
            instance_type("g5.xlarge", 4, 16384, &gpu("A10G", 1, 24576))
                + &instance_type("g6.xlarge", 4, 16384, &gpu("L4", 1, 22888))
                // An eighth of an L4: `count` 0, the share in the partition
                // size, and the slice's memory (22888 / 8 MiB).
                + &instance_type(
                    "g6f.xlarge",
                    4,
                    16384,
                    "<gpuInfo><gpus><item><name>L4</name><manufacturer>NVIDIA</manufacturer><count>0</count><logicalGpuCount>1</logicalGpuCount><gpuPartitionSize>0.125</gpuPartitionSize><memoryInfo><sizeInMiB>2861</sizeInMiB></memoryInfo></item></gpus><totalGpuMemoryInMiB>2861</totalGpuMemoryInMiB></gpuInfo>",
                )
                + &instance_type(
                    "trn1.32xlarge",
                    128,
                    524_288,
                    "<neuronInfo><neuronDevices><item><count>16</count><name>Trainium</name><coreInfo><count>2</count><version>2</version></coreInfo><memoryInfo><sizeInMiB>32768</sizeInMiB></memoryInfo></item></neuronDevices><totalNeuronDeviceMemoryInMiB>524288</totalNeuronDeviceMemoryInMiB></neuronInfo>",
                ),
            "<nextToken/>",
        ),
        ("us-west-2", None) => (
            instance_type("p5.48xlarge", 192, 2_097_152, &gpu("H100", 8, 81920)),
            "",
        ),
        other => panic!("unexpected DescribeInstanceTypes {other:?}"),
    };
    xml(&format!(
        "<DescribeInstanceTypesResponse {{{{NS}}}}><requestId>r</requestId><instanceTypeSet>{items}</instanceTypeSet>{next}</DescribeInstanceTypesResponse>"
    ))
}

pub fn spot_row(t: &str, zone: &str, product: &str, price: &str, at: &str) -> String {
    format!(
        "<item><instanceType>{t}</instanceType><productDescription>{product}</productDescription><spotPrice>{price}</spotPrice><timestamp>{at}</timestamp><availabilityZone>{zone}</availabilityZone></item>"
    )
}

/// Spot history: unsorted across two pages, with a Windows row mixed in.
fn spot_history(region: &str, token: Option<&str>) -> Response {
    let (rows, next) = match (region, token) {
        ("us-east-1", None) => (
            spot_row(
                "g5.xlarge",
                "us-east-1a",
                "Linux/UNIX",
                "0.401200",
                "2026-11-20T08:00:00.000Z",
            ) + &spot_row(
                "p5.48xlarge",
                "us-east-1b",
                "Linux/UNIX",
                "41.112000",
                "2026-11-21T09:30:00.000Z",
            ) + &spot_row(
                "g5.xlarge",
                "us-east-1a",
                "Windows",
                "0.612000",
                "2026-11-22T08:00:00.000Z",
            ),
            "<nextToken>spot-2</nextToken>",
        ),
        ("us-east-1", Some("spot-2")) => (
            spot_row(
                "g5.xlarge",
                "us-east-1a",
                "Linux/UNIX",
                "0.398700",
                "2026-11-22T10:00:00.000Z",
            ),
            "<nextToken></nextToken>",
        ),
        ("us-west-2", None) => (
            spot_row(
                "p5.48xlarge",
                "us-west-2a",
                "Linux/UNIX",
                "39.000000",
                "2026-11-21T00:00:00.000Z",
            ),
            "",
        ),
        other => panic!("unexpected DescribeSpotPriceHistory {other:?}"),
    };
    xml(&format!(
        "<DescribeSpotPriceHistoryResponse {{{{NS}}}}><requestId>r</requestId><spotPriceHistorySet>{rows}</spotPriceHistorySet>{next}</DescribeSpotPriceHistoryResponse>"
    ))
}

fn zones(region: &str) -> Response {
    let zones: &[(&str, &str, &str)] = if region == "us-east-1" {
        &[
            ("us-east-1a", "use1-az4", "available"),
            ("us-east-1b", "use1-az6", "available"),
            ("us-east-1e", "use1-az3", "impaired"),
        ]
    } else {
        &[("us-west-2a", "usw2-az2", "available")]
    };
    let items: String = zones
        .iter()
        .map(|(name, id, state)| format!("<item><zoneName>{name}</zoneName><zoneId>{id}</zoneId><zoneState>{state}</zoneState><regionName>{region}</regionName><zoneType>availability-zone</zoneType></item>"))
        .collect();
    xml(&format!(
        "<DescribeAvailabilityZonesResponse {{{{NS}}}}><requestId>r</requestId><availabilityZoneInfo>{items}</availabilityZoneInfo></DescribeAvailabilityZonesResponse>"
    ))
}

fn offerings(region: &str, location_type: &str, token: Option<&str>) -> Response {
    let offer = |t: &str, at: &str| {
        format!(
            "<item><instanceType>{t}</instanceType><locationType>{location_type}</locationType><location>{at}</location></item>"
        )
    };
    let (items, next) = match (region, location_type, token) {
        ("us-east-1", "region", None) => (
            offer("p5.48xlarge", "us-east-1") + &offer("g5.xlarge", "us-east-1"),
            "",
        ),
        ("us-east-1", "availability-zone", None) => (
            offer("p5.48xlarge", "us-east-1b") + &offer("p5.48xlarge", "us-east-1e"),
            "<nextToken>off-2</nextToken>",
        ),
        ("us-east-1", "availability-zone", Some("off-2")) => (
            offer("g5.xlarge", "us-east-1a") + &offer("g5.xlarge", "us-east-1b"),
            "<nextToken/>",
        ),
        ("us-west-2", "region", None) => (offer("p5.48xlarge", "us-west-2"), ""),
        ("us-west-2", "availability-zone", None) => (offer("p5.48xlarge", "us-west-2a"), ""),
        other => panic!("unexpected DescribeInstanceTypeOfferings {other:?}"),
    };
    xml(&format!(
        "<DescribeInstanceTypeOfferingsResponse {{{{NS}}}}><requestId>r</requestId><instanceTypeOfferingSet>{items}</instanceTypeOfferingSet>{next}</DescribeInstanceTypeOfferingsResponse>"
    ))
}

/// Placement scores: us-east-1 in two pages, the second with a zone id the
/// account does not have.
fn placement_scores(region: &str, token: Option<&str>) -> Response {
    let score = |id: &str, score: u8| {
        format!(
            "<item><region>{region}</region><availabilityZoneId>{id}</availabilityZoneId><score>{score}</score></item>"
        )
    };
    let (items, next) = match (region, token) {
        ("us-east-1", None) => (score("use1-az4", 7), "<nextToken>scores-2</nextToken>"),
        ("us-east-1", Some("scores-2")) => (score("use1-az9", 3), "<nextToken/>"),
        _ => (String::new(), ""),
    };
    xml(&format!(
        "<GetSpotPlacementScoresResponse {{{{NS}}}}><requestId>r</requestId><spotPlacementScoreSet>{items}</spotPlacementScoreSet>{next}</GetSpotPlacementScoresResponse>"
    ))
}

/// `DescribeCapacityBlockOfferings` for us-east-1's p5.48xlarge (no other
/// type or region has offerings): one instance for 24 hours in two pages
/// (the second with an instant block of 20 h 20 min, the first page's
/// offering again, and a dedicated-tenancy one), four instances for 24
/// hours a euro and a $0 offering, four for 168 hours one block, and one
/// for 168 hours none.
fn capacity_blocks(region: &str, f: &BTreeMap<String, String>) -> Response {
    for absent in ["StartDateRange", "EndDateRange", "UltraserverType"] {
        assert!(!f.contains_key(absent), "{absent} was sent");
    }
    assert_eq!(f["MaxResults"], "100");
    let block = |id: &str,
                 count: u32,
                 start: &str,
                 end: &str,
                 hours: u32,
                 minutes: u32,
                 fee: &str,
                 currency: &str,
                 tenancy: &str| {
        format!(
            "<item><capacityBlockOfferingId>{id}</capacityBlockOfferingId><instanceType>p5.48xlarge</instanceType><availabilityZone>us-east-1a</availabilityZone><instanceCount>{count}</instanceCount><startDate>{start}</startDate><endDate>{end}</endDate><capacityBlockDurationHours>{hours}</capacityBlockDurationHours><capacityBlockDurationMinutes>{minutes}</capacityBlockDurationMinutes><upfrontFee>{fee}</upfrontFee><currencyCode>{currency}</currencyCode><tenancy>{tenancy}</tenancy></item>"
        )
    };
    let day = block(
        "cb-0a1b2c3d4e5f60718",
        1,
        "2027-03-09T11:30:00.000Z",
        "2027-03-10T11:30:00.000Z",
        24,
        0,
        "950.40",
        "USD",
        "default",
    );
    let key = (
        region,
        f["InstanceType"].as_str(),
        f["InstanceCount"].as_str(),
        f["CapacityDurationHours"].as_str(),
        f.get("NextToken").map(String::as_str),
    );
    let (items, next) = match key {
        ("us-east-1", "p5.48xlarge", "1", "24", None) => {
            (day.clone(), "<nextToken>cb-2</nextToken>")
        }
        ("us-east-1", "p5.48xlarge", "1", "24", Some("cb-2")) => (
            block(
                "cb-instant000000001",
                1,
                "2027-03-04T15:10:00.000Z",
                "2027-03-05T11:30:00.000Z",
                20,
                20,
                "800.00",
                "USD",
                "default",
            ) + &day
                + &block(
                    "cb-dedicated0000001",
                    1,
                    "2027-03-11T11:30:00.000Z",
                    "2027-03-12T11:30:00.000Z",
                    24,
                    0,
                    "990.00",
                    "USD",
                    "dedicated",
                ),
            "<nextToken/>",
        ),
        ("us-east-1", "p5.48xlarge", "4", "24", None) => (
            block(
                "cb-euro000000000001",
                4,
                "2027-03-09T11:30:00.000Z",
                "2027-03-10T11:30:00.000Z",
                24,
                0,
                "3500.00",
                "EUR",
                "default",
            ) + &block(
                "cb-free000000000001",
                4,
                "2027-03-16T11:30:00.000Z",
                "2027-03-17T11:30:00.000Z",
                24,
                0,
                "0.00",
                "USD",
                "default",
            ),
            "",
        ),
        ("us-east-1", "p5.48xlarge", "4", "168", None) => (
            block(
                "cb-week000000000001",
                4,
                "2027-03-15T11:30:00.000Z",
                "2027-03-22T11:30:00.000Z",
                168,
                0,
                "23654.40",
                "USD",
                "default",
            ),
            "",
        ),
        (_, t, _, _, None) if t.starts_with("p") => (String::new(), ""),
        other => panic!("unexpected DescribeCapacityBlockOfferings {other:?}"),
    };
    xml(&format!(
        "<DescribeCapacityBlockOfferingsResponse {{{{NS}}}}><requestId>r</requestId><capacityBlockOfferingSet>{items}</capacityBlockOfferingSet>{next}</DescribeCapacityBlockOfferingsResponse>"
    ))
}

/// Answers Pricing (JSON, by `X-Amz-Target`) and EC2 (form, by `Action`).
pub fn answer(req: &Seen, base: &str) -> Response {
    answer_from(req, base, FIXTURES)
}

/// [`answer`] with GetProducts pages and bulk files made of other offer files.
pub fn answer_from(req: &Seen, base: &str, offers: Offers<'_>) -> Response {
    if let Some(target) = req.headers.get("x-amz-target") {
        assert_eq!(target, "AWSPriceListService.GetProducts");
        let body: Value = serde_json::from_str(&req.body).unwrap();
        let field = |name: &str| {
            body["Filters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["Field"] == name)
                .map(|f| f["Value"].as_str().unwrap().to_owned())
                .unwrap()
        };
        assert_eq!(body["ServiceCode"], "AmazonEC2");
        let items = price_list(offers, &field("regionCode"), &field("instanceType"));
        let start: usize = body["NextToken"]
            .as_str()
            .map_or(0, |t| t.trim_start_matches("page-").parse().unwrap());
        let end = (start + PAGE).min(items.len());
        let mut page = json!({"FormatVersion": "aws_v1", "PriceList": items[start..end]});
        if end < items.len() {
            page["NextToken"] = json!(format!("page-{end}"));
        }
        return pricing_json(200, &page.to_string());
    }
    if !req.body.contains("Action=") {
        return files_from(req, base, offers);
    }
    let f = form(&req.body);
    let region = signed_region(req);
    let token = f.get("NextToken").map(String::as_str);
    match f["Action"].as_str() {
        "DescribeInstanceTypes" => describe_instance_types(&region, token),
        "DescribeSpotPriceHistory" => spot_history(&region, token),
        "DescribeAvailabilityZones" => zones(&region),
        "DescribeInstanceTypeOfferings" => offerings(&region, &f["LocationType"], token),
        "GetSpotPlacementScores" => placement_scores(&region, token),
        "DescribeCapacityBlockOfferings" => capacity_blocks(&region, &f),
        other => panic!("unexpected EC2 action {other}"),
    }
}
