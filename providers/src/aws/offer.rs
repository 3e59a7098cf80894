//! Streaming parser of an AWS EC2 price-list offer file (bulk JSON, the same
//! term objects as `GetProducts`). A region's file is hundreds of MB: it is read
//! entry by entry from a reader, keeping only Linux, shared-tenancy,
//! no-pre-installed-software, no-licence GPU instance products and their terms.
//! Products come before terms in these files, which is what lets one pass do it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::Read;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::snapshot::{
    InstanceType, OfferingClass, PriceKind, PriceRecord, Snapshot, Term, Upfront,
};

use super::gpus;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Product {
    #[serde(default)]
    product_family: String,
    #[serde(default)]
    attributes: HashMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OfferTerm {
    #[serde(default)]
    price_dimensions: HashMap<String, Dimension>,
    #[serde(default)]
    term_attributes: HashMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Dimension {
    unit: String,
    price_per_unit: HashMap<String, String>,
}

/// A kept product: what its terms become records of.
struct Kept {
    instance_type: String,
    region: String,
}

#[derive(Default)]
struct State {
    kept: HashMap<String, Kept>,
    snapshot: Snapshot,
    types: BTreeMap<String, InstanceType>,
    seen_prices: HashSet<(String, String, PriceKind, Option<OfferingClass>)>,
    terms_seen: bool,
    unknown: std::collections::BTreeSet<String>,
}

/// Parses an offer file; the result has instance types, prices and skip counts.
///
/// # Errors
/// A message when the JSON is malformed or out of the expected order.
pub fn parse(reader: impl Read) -> Result<Snapshot, String> {
    let mut state = State::default();
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(reader));
    OfferSeed(&mut state)
        .deserialize(&mut de)
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    for family in &state.unknown {
        tracing::warn!(provider = "aws", family = %family, "GPU instance family is not in the table; stored with an unknown GPU model.");
    }
    state.snapshot.instance_types = state.types.into_values().collect();
    Ok(state.snapshot)
}

struct OfferSeed<'a>(&'a mut State);

impl<'de> DeserializeSeed<'de> for OfferSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for OfferSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an AWS offer file object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "products" => map.next_value_seed(ProductsSeed(&mut *self.0))?,
                "terms" => {
                    self.0.terms_seen = true;
                    map.next_value_seed(TermsSeed(&mut *self.0))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct ProductsSeed<'a>(&'a mut State);

impl<'de> DeserializeSeed<'de> for ProductsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ProductsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of products by SKU")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.0.terms_seen {
            return Err(serde::de::Error::custom(
                "products come after terms; this parser needs products first",
            ));
        }
        while let Some((sku, product)) = map.next_entry::<String, Product>()? {
            keep_product(self.0, sku, &product);
        }
        Ok(())
    }
}

/// Applies the filters of provider-apis.md §1 and records why a row was skipped.
fn keep_product(state: &mut State, sku: String, p: &Product) {
    let snap = &mut state.snapshot;
    if p.product_family != "Compute Instance" {
        snap.skip(format!("family:{}", p.product_family));
        return;
    }
    let attr = |k: &str| p.attributes.get(k).map_or("", String::as_str);
    for (key, wanted, reason) in [
        ("operatingSystem", "Linux", "os"),
        ("tenancy", "Shared", "tenancy"),
        ("capacitystatus", "Used", "capacitystatus"),
        ("preInstalledSw", "NA", "preinstalled_sw"),
        ("licenseModel", "No License required", "license"),
    ] {
        if attr(key) != wanted {
            snap.skip(format!("{reason}:{}", attr(key)));
            return;
        }
    }
    let count: u32 = attr("gpu").parse().unwrap_or(0);
    let instance_type = attr("instanceType").to_owned();
    if count == 0 || instance_type.is_empty() {
        snap.skip("not_gpu");
        return;
    }
    let family = instance_type
        .split('.')
        .next()
        .unwrap_or_default()
        .to_owned();
    let model = gpus::model(&family);
    if model.is_none() {
        state.unknown.insert(family.clone());
    }
    let normalized = model.map(|m| crate::gpu::normalize(m, None));
    state
        .types
        .entry(instance_type.clone())
        .or_insert_with(|| InstanceType {
            instance_type: instance_type.clone(),
            gpu_model: normalized
                .as_ref()
                .map_or_else(|| format!("unknown ({family})"), |m| m.name.clone()),
            gpu_count: count,
            gpu_memory_gib: normalized.and_then(|m| m.memory_gib),
            vcpus: attr("vcpu").parse().ok(),
            memory_gib: attr("memory")
                .split_whitespace()
                .next()
                .and_then(|m| m.replace(',', "").parse().ok()),
        });
    state.kept.insert(
        sku,
        Kept {
            instance_type,
            region: attr("regionCode").to_owned(),
        },
    );
}

struct TermsSeed<'a>(&'a mut State);

impl<'de> DeserializeSeed<'de> for TermsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TermsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of term types")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(term_type) = map.next_key::<String>()? {
            let reserved = match term_type.as_str() {
                "OnDemand" => false,
                "Reserved" => true,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            map.next_value_seed(SkuTermsSeed {
                state: &mut *self.0,
                reserved,
            })?;
        }
        Ok(())
    }
}

struct SkuTermsSeed<'a> {
    state: &'a mut State,
    reserved: bool,
}

impl<'de> DeserializeSeed<'de> for SkuTermsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SkuTermsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of terms by SKU")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(sku) = map.next_key::<String>()? {
            if !self.state.kept.contains_key(&sku) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let terms = map.next_value::<HashMap<String, OfferTerm>>()?;
            let mut codes: Vec<(&String, &OfferTerm)> = terms.iter().collect();
            codes.sort_by_key(|(code, _)| *code);
            for (_, term) in codes {
                record(self.state, &sku, term, self.reserved);
            }
        }
        Ok(())
    }
}

fn usd(d: &Dimension) -> Option<f64> {
    d.price_per_unit
        .get("USD")?
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
}

fn record(state: &mut State, sku: &str, term: &OfferTerm, reserved: bool) {
    let Some(kept) = state.kept.get(sku) else {
        return;
    };
    let hourly = term
        .price_dimensions
        .values()
        .filter(|d| d.unit == "Hrs")
        .find_map(usd);
    let (kind, class, upfront) = if reserved {
        let a = |k: &str| term.term_attributes.get(k).map_or("", String::as_str);
        let t = match a("LeaseContractLength") {
            "1yr" => Term::OneYear,
            "3yr" => Term::ThreeYears,
            other => {
                state.snapshot.skip(format!("lease:{other}"));
                return;
            }
        };
        let u = match a("PurchaseOption") {
            "No Upfront" => Upfront::No,
            "Partial Upfront" => Upfront::Partial,
            "All Upfront" => Upfront::All,
            other => {
                state.snapshot.skip(format!("purchase_option:{other}"));
                return;
            }
        };
        let class: Option<OfferingClass> = a("OfferingClass").parse().ok();
        let upfront = term
            .price_dimensions
            .values()
            .filter(|d| d.unit == "Quantity")
            .find_map(usd)
            .unwrap_or(0.0);
        (PriceKind::AwsReserved(t, u), class, upfront)
    } else {
        (PriceKind::OnDemand, None, 0.0)
    };
    let recurring = hourly.unwrap_or(0.0);
    if hourly.is_none() && upfront == 0.0 {
        state.snapshot.skip("no_price");
        return;
    }
    let key = (kept.region.clone(), kept.instance_type.clone(), kind, class);
    if !state.seen_prices.insert(key) {
        state.snapshot.skip("duplicate");
        return;
    }
    state.snapshot.prices.push(PriceRecord {
        region: kept.region.clone(),
        zone: None,
        instance_type: kept.instance_type.clone(),
        price_kind: kind,
        offering_class: class,
        usd_per_hour: PriceRecord::effective_hourly(kind, upfront, recurring),
        upfront_usd: upfront,
        recurring_usd_per_hour: recurring,
        source: Some(sku.to_owned()),
        available_regions: Vec::new(),
        max_instances: None,
    });
}
