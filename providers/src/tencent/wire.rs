//! CVM API 3.0 answers as they arrive: `{"Response": {...}}`, with an error
//! (under HTTP 200) as `Response.Error`. Price fields may be numbers or
//! numeric strings.

use serde::Deserialize;

use crate::json::number_or_string;

#[derive(Debug, Deserialize)]
pub struct Envelope<T> {
    #[serde(rename = "Response")]
    pub response: T,
}

/// Only the error part of any answer, read before anything else.
#[derive(Debug, Deserialize)]
pub struct MaybeError {
    #[serde(rename = "Error")]
    pub error: Option<ApiError>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ApiError {
    pub code: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ZoneInstanceConfigInfos {
    pub instance_type_quota_set: Vec<Quota>,
}

/// One (zone, instance type, charge type).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Quota {
    pub zone: String,
    pub instance_type: String,
    pub instance_charge_type: String,
    pub cpu: Option<u32>,
    pub memory: Option<f64>,
    /// Physical cards; below 1 for a vGPU slice.
    #[serde(default, deserialize_with = "number_or_string")]
    pub gpu_count: Option<f64>,
    #[serde(default)]
    pub status: String,
    pub price: Option<ItemPrice>,
}

/// The discounted (`*Discount*`, `DiscountPrice*`) fields are the prices the
/// account pays; `Discount*` alone is the share paid, in percent.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ItemPrice {
    #[serde(default, deserialize_with = "number_or_string")]
    pub unit_price_discount: Option<f64>,
    /// The one-month total of a PREPAID listing.
    #[serde(default, deserialize_with = "number_or_string")]
    pub discount_price: Option<f64>,
    #[serde(default, deserialize_with = "number_or_string")]
    pub discount_price_one_year: Option<f64>,
    #[serde(default, deserialize_with = "number_or_string")]
    pub discount_price_three_year: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceTypeConfigs {
    pub instance_type_config_set: Vec<TypeConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TypeConfig {
    pub instance_type: String,
    #[serde(default)]
    pub gpu_type: String,
    /// GiB per card.
    #[serde(default, deserialize_with = "number_or_string")]
    pub gpu_memory: Option<f64>,
}
