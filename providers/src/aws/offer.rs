//! AWS price-list products and terms into records. Both sources go through the
//! one [`Collector`], so a SKU gives the same records whether it came from the
//! Query API (`GetProducts`) or a bulk offer file:
//! - [`parse`] streams a region's offer file (hundreds of MB) entry by entry
//!   from a reader. Products come before terms in these files, which is what
//!   lets one pass do it.
//! - [`PriceListItem`] is one decoded element of a `GetProducts` page.
//!
//! Only Linux, shared-tenancy, no-pre-installed-software, no-licence instance
//! products of the `OnDemand` market with GPUs or accelerators are kept, and
//! only terms with a price above zero; every other row is counted by reason.
//!
//! The price list also sells Capacity Blocks under the same `usagetype`: rows
//! that pass every other filter, priced at the block's operating-system fee
//! ($0.00 for Linux, cents elsewhere), before or after the on-demand row, on
//! any page. Taken as on-demand prices they poisoned real catalogs (OpenCost
//! read p4d at $0.032), so only `marketoption` decides, never the row order.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
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
pub(super) struct Product {
    #[serde(default)]
    sku: String,
    #[serde(default)]
    product_family: String,
    #[serde(default)]
    attributes: HashMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct OfferTerm {
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

/// One element of a `GetProducts` page's `PriceList` (itself a JSON string).
/// Unlike the offer file, its terms are keyed by `<sku>.<offerTermCode>` directly.
#[derive(Deserialize)]
pub(super) struct PriceListItem {
    pub product: Product,
    #[serde(default)]
    terms: ItemTerms,
}

#[derive(Deserialize, Default)]
struct ItemTerms {
    #[serde(default, rename = "OnDemand")]
    on_demand: HashMap<String, OfferTerm>,
    /// Absent for products without reservations.
    #[serde(default, rename = "Reserved")]
    reserved: HashMap<String, OfferTerm>,
}

/// A kept product: what its terms become records of.
struct Kept {
    instance_type: String,
    region: String,
}

/// Turns products and their terms into a snapshot's prices, instance types
/// and skip counts.
#[derive(Default)]
pub(super) struct Collector {
    /// Instance-type patterns (`p5.*`); empty keeps every type.
    filter: Vec<String>,
    /// Where kept products' instance facts (GPU model, count, memory) come
    /// from: `DescribeInstanceTypes` of the region, when there are credentials
    /// (types not in it have neither GPUs nor accelerators). Without, the price
    /// list's own `gpu` count and the family table; accelerator-only families
    /// (Trainium, Inferentia) have no GPU count there and are skipped as `not_gpu`.
    described: Option<BTreeMap<String, InstanceType>>,
    kept: HashMap<String, Kept>,
    snapshot: Snapshot,
    types: BTreeMap<String, InstanceType>,
    seen_prices: HashSet<(String, String, PriceKind, Option<OfferingClass>)>,
    terms_seen: bool,
    unknown: BTreeSet<String>,
}

impl Collector {
    pub fn new(filter: Vec<String>, described: Option<BTreeMap<String, InstanceType>>) -> Self {
        Self {
            filter,
            described,
            ..Self::default()
        }
    }

    /// Adds one `GetProducts` element: its product, then its terms.
    pub fn item(&mut self, item: &PriceListItem) {
        let sku = item.product.sku.clone();
        self.product(sku.clone(), &item.product);
        for (terms, reserved) in [(&item.terms.on_demand, false), (&item.terms.reserved, true)] {
            self.terms(&sku, terms, reserved);
        }
    }

    fn terms(&mut self, sku: &str, terms: &HashMap<String, OfferTerm>, reserved: bool) {
        let mut codes: Vec<(&String, &OfferTerm)> = terms.iter().collect();
        codes.sort_by_key(|(code, _)| *code);
        for (_, term) in codes {
            record(self, sku, term, reserved);
        }
    }

    /// The collected prices, instance types and skip counts.
    pub fn finish(mut self) -> Snapshot {
        for family in &self.unknown {
            tracing::warn!(provider = "aws", family = %family, "GPU instance family is not in the table; stored with an unknown GPU model.");
        }
        self.snapshot.instance_types = self.types.into_values().collect();
        self.snapshot
    }
}

/// Parses an offer file; the result has instance types, prices and skip
/// counts. `filter` and `described` are as in [`Collector`].
///
/// # Errors
/// A message when the JSON is malformed or out of the expected order.
pub fn parse(
    reader: impl Read,
    filter: Vec<String>,
    described: Option<BTreeMap<String, InstanceType>>,
) -> Result<Snapshot, String> {
    let mut collector = Collector::new(filter, described);
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(reader));
    OfferSeed(&mut collector)
        .deserialize(&mut de)
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(collector.finish())
}

struct OfferSeed<'a>(&'a mut Collector);

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

struct ProductsSeed<'a>(&'a mut Collector);

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
            self.0.product(sku, &product);
        }
        Ok(())
    }
}

impl Collector {
    /// Applies the filters of docs/providers.md §1 and records why a row was skipped.
    fn product(&mut self, sku: String, p: &Product) {
        let state = self;
        let snap = &mut state.snapshot;
        if p.product_family != "Compute Instance" {
            snap.skip(format!("family:{}", p.product_family));
            return;
        }
        let attr = |k: &str| p.attributes.get(k).map_or("", String::as_str);
        // A row without the attribute predates Capacity Blocks: on-demand.
        let market = p
            .attributes
            .get("marketoption")
            .map_or("OnDemand", String::as_str);
        if market != "OnDemand" {
            snap.skip("marketoption_not_ondemand");
            return;
        }
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
        let instance_type = attr("instanceType").to_owned();
        if !super::selected(&state.filter, &instance_type) {
            snap.skip("filtered");
            return;
        }
        let described = match &state.described {
            None => {
                // The price list's `gpu` says 1 for a slice of an L4: the
                // size table says how much of one it rents.
                let count = gpus::fraction(&instance_type)
                    .unwrap_or_else(|| attr("gpu").parse().unwrap_or(0.0));
                if count <= 0.0 || instance_type.is_empty() {
                    snap.skip("not_gpu");
                    return;
                }
                let family = gpus::family(&instance_type);
                let model = gpus::model(family);
                if model.is_none() {
                    state.unknown.insert(family.to_owned());
                }
                let normalized = model.map(|m| crate::gpu::normalize(m, None));
                InstanceType {
                    instance_type: instance_type.clone(),
                    gpu_model: normalized
                        .as_ref()
                        .map_or_else(|| format!("unknown ({family})"), |m| m.name.clone()),
                    gpu_count: count,
                    gpu_memory_gib: crate::gpu::share_memory(
                        normalized.and_then(|m| m.memory_gib),
                        count,
                    ),
                    gpu_form_factor: gpus::form_factor(family),
                    mig_profile: None,
                    vcpus: attr("vcpu").parse().ok(),
                    memory_gib: attr("memory")
                        .split_whitespace()
                        .next()
                        .and_then(|m| m.replace(',', "").parse().ok()),
                }
            }
            Some(types) => match types.get(&instance_type) {
                Some(t) => t.clone(),
                None => {
                    snap.skip("not_gpu");
                    return;
                }
            },
        };
        state
            .types
            .entry(instance_type.clone())
            .or_insert(described);
        state.kept.insert(
            sku,
            Kept {
                instance_type,
                region: attr("regionCode").to_owned(),
            },
        );
    }
}

struct TermsSeed<'a>(&'a mut Collector);

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
    state: &'a mut Collector,
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
            self.state.terms(&sku, &terms, self.reserved);
        }
        Ok(())
    }
}

/// A dimension's USD price: `None` when it has none or it is not a number.
fn usd(d: &Dimension) -> Option<f64> {
    d.price_per_unit
        .get("USD")?
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
}

fn record(state: &mut Collector, sku: &str, term: &OfferTerm, reserved: bool) {
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
    // A $0.00 row is a placeholder (a new type's, or an allocated
    // reservation's): it must neither become a price nor take the key from
    // the real row that may follow it.
    if recurring <= 0.0 && upfront <= 0.0 {
        state.snapshot.skip("zero_price");
        return;
    }
    let key = (kept.region.clone(), kept.instance_type.clone(), kind, class);
    if !state.seen_prices.insert(key) {
        tracing::warn!(provider = "aws", sku, region = %kept.region, instance_type = %kept.instance_type, price_kind = %kind, "A second price-list row for the same price; keeping the first.");
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
        price_scope: crate::PriceScope::Instance,
        window: None,
    });
}
