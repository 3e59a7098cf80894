//! The ECS RPC answers as they arrive (`Format=JSON`): lists wrapped twice,
//! prices as JSON numbers.

use serde::Deserialize;

use crate::json::number_or_string;

/// Any RPC error: `{RequestId, HostId, Code, Message, Recommend}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ErrorBody {
    pub code: Option<String>,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Regions {
    pub regions: RegionList,
}

#[derive(Debug, Deserialize)]
pub struct RegionList {
    #[serde(rename = "Region", default)]
    pub region: Vec<Region>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Region {
    pub region_id: String,
    pub region_endpoint: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceTypes {
    pub instance_types: InstanceTypeList,
    pub next_token: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct InstanceTypeList {
    #[serde(rename = "InstanceType", default)]
    pub instance_type: Vec<InstanceTypeInfo>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceTypeInfo {
    pub instance_type_id: String,
    pub cpu_core_count: Option<u32>,
    pub memory_size: Option<f64>,
    /// Whole cards, though some accounts see it as a string.
    #[serde(rename = "GPUAmount", default, deserialize_with = "number_or_string")]
    pub gpu_amount: Option<f64>,
    #[serde(rename = "GPUSpec", default)]
    pub gpu_spec: String,
    /// GiB per card.
    #[serde(
        rename = "GPUMemorySize",
        default,
        deserialize_with = "number_or_string"
    )]
    pub gpu_memory_size: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AvailableResource {
    pub available_zones: Option<ZoneList>,
}

#[derive(Debug, Deserialize)]
pub struct ZoneList {
    #[serde(rename = "AvailableZone", default)]
    pub available_zone: Vec<Zone>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Zone {
    pub zone_id: String,
    pub available_resources: Option<ResourceList>,
}

#[derive(Debug, Deserialize)]
pub struct ResourceList {
    #[serde(rename = "AvailableResource", default)]
    pub available_resource: Vec<Resource>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Resource {
    pub supported_resources: Option<SupportedList>,
}

#[derive(Debug, Deserialize)]
pub struct SupportedList {
    #[serde(rename = "SupportedResource", default)]
    pub supported_resource: Vec<Supported>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Supported {
    pub value: String,
    #[serde(default)]
    pub status: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PriceAnswer {
    pub price_info: PriceInfo,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PriceInfo {
    pub price: Price,
}

/// The order's price. Its own `TradePrice` includes the default system disk
/// and bandwidth: only the `instanceType` line of `DetailInfos` is the
/// instance.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Price {
    pub currency: String,
    pub detail_infos: Option<DetailList>,
}

#[derive(Debug, Deserialize)]
pub struct DetailList {
    #[serde(rename = "DetailInfo", default)]
    pub detail_info: Vec<Detail>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Detail {
    pub resource: String,
    pub trade_price: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SpotHistory {
    pub spot_prices: Option<SpotList>,
    pub next_offset: Option<u64>,
    pub currency: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct SpotList {
    #[serde(rename = "SpotPriceType", default)]
    pub spot_price_type: Vec<SpotPrice>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SpotPrice {
    pub zone_id: String,
    pub instance_type: String,
    pub spot_price: f64,
    pub timestamp: String,
}
