//! The normalized vocabulary every provider produces (docs/catalog.md, "The
//! record"). Wire formats end at the adapter; past it only these types exist.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Hours in a 1-year and a 3-year term (365-day years, as the clouds bill them).
pub const HOURS_1Y: f64 = 8760.0;
/// A month of a monthly subscription: a twelfth of a year.
pub const HOURS_1M: f64 = 730.0;
pub const HOURS_3Y: f64 = 26280.0;

/// Everything one sync run of one provider saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Which parts of the provider's stored data this snapshot replaces.
    pub scope: Scope,
    pub instance_types: Vec<InstanceType>,
    pub prices: Vec<PriceRecord>,
    pub spot_observations: Vec<SpotObservation>,
    pub availability: Vec<AvailabilityRecord>,
    /// Rows of the source that were deliberately not turned into records, by reason
    /// (`os:Windows`, `tenancy:Dedicated`, ...), so a sync summary can show them.
    pub skipped: BTreeMap<String, u64>,
    /// The version of each part of the source this snapshot stands for, by the
    /// provider's own name for the part (a region, or a source-wide file such
    /// as `region_index.json`): a published version id, an `ETag`, a date.
    /// Unchanged parts are listed too. The sync stores these with a good full
    /// run and hands them back in [`FetchContext::versions`].
    pub versions: BTreeMap<String, String>,
    /// Regions whose price list is still the version [`FetchContext::versions`]
    /// named, so the provider did not download it again. The snapshot carries
    /// no price of these regions; their stored prices stay current (neither
    /// withdrawn nor re-versioned) and count as part of this snapshot for the
    /// shrink and missing-region checks. Each must be in `versions` with the
    /// version the context gave.
    pub unchanged_regions: std::collections::BTreeSet<String>,
    /// What the source priced in. Every amount of the snapshot is already in
    /// USD; this records the source's currency and the rate that converted it.
    pub currency: Currency,
}

/// A source's currency and how many of its units make one USD (the rate the
/// user configured under `[fx]`; 1 for USD).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Currency {
    /// ISO 4217 code (`USD`, `CNY`).
    pub code: String,
    pub per_usd: f64,
}

impl Currency {
    #[must_use]
    pub fn usd() -> Self {
        Self {
            code: "USD".to_owned(),
            per_usd: 1.0,
        }
    }

    /// `amount` of this currency in USD.
    #[must_use]
    pub fn to_usd(&self, amount: f64) -> f64 {
        amount / self.per_usd
    }
}

impl Default for Currency {
    fn default() -> Self {
        Self::usd()
    }
}

impl Snapshot {
    /// Adds one to the skip counter for `reason`.
    pub fn skip(&mut self, reason: impl Into<String>) {
        *self.skipped.entry(reason.into()).or_insert(0) += 1;
    }
}

/// A provider may sync its fast-moving spot history more often than its price
/// lists; such a snapshot must not withdraw the prices it does not carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Prices and availability are the provider's complete current lists: what is
    /// not in them is gone. Spot observations are added.
    #[default]
    Full,
    /// Only spot observations (and instance types) are added; prices and
    /// availability stay as they are.
    SpotHistory,
}

/// What the sync knows from earlier runs that a provider may use to fetch less.
/// Providers never read the store; the sync hands them this instead.
#[derive(Debug, Clone, Default)]
pub struct FetchContext {
    /// What the sync asks for: everything, or (for a provider with a spot
    /// schedule) only new spot history. A provider may always answer `Full`.
    pub scope: Scope,
    /// Newest stored spot observation per region, for incremental spot history.
    pub newest_spot_by_region: BTreeMap<String, DateTime<Utc>>,
    /// The versions the last good full sync stored (see [`Snapshot::versions`]).
    pub versions: BTreeMap<String, String>,
    /// Instance types with a current price, per region: what an unchanged
    /// region still offers, for sources (the AWS spot advisor) that describe
    /// the priced types of every region.
    pub priced_types: BTreeMap<String, std::collections::BTreeSet<String>>,
}

/// A machine shape and its accelerators. `gpu_model` is normalized (see [`crate::gpu`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceType {
    pub instance_type: String,
    pub gpu_model: String,
    /// GPUs per instance, or the share of one GPU a slice rents (0.125 for
    /// an eighth); see [`crate::gpu::COUNT_TOLERANCE`] for comparing them.
    #[serde(serialize_with = "crate::gpu::serialize_count")]
    pub gpu_count: f64,
    /// Memory per GPU, or a slice's own memory (see [`crate::gpu::share_memory`]).
    pub gpu_memory_gib: Option<f64>,
    pub vcpus: Option<u32>,
    pub memory_gib: Option<f64>,
    /// Which form of a model sold in several (see [`crate::gpu::form_factor`]).
    #[serde(default)]
    pub gpu_form_factor: Option<FormFactor>,
    /// The MIG profile of a slice of an owned GPU (`1g.10gb`), from a price sheet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_profile: Option<String>,
}

/// The form a GPU model is sold in, where it is sold in more than one:
/// an SXM module, a PCIe card, or an NVL board.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FormFactor {
    Sxm,
    Pcie,
    Nvl,
}

impl FormFactor {
    pub const ALL: [Self; 3] = [Self::Sxm, Self::Pcie, Self::Nvl];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sxm => "sxm",
            Self::Pcie => "pcie",
            Self::Nvl => "nvl",
        }
    }
}

impl fmt::Display for FormFactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FormFactor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("`{s}` is not a GPU form factor; one of: sxm, pcie, nvl"))
    }
}

/// One price of one instance type in one region (or zone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceRecord {
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub price_kind: PriceKind,
    pub offering_class: Option<OfferingClass>,
    /// Effective USD per whole-instance hour; for terms, upfront amortized over the term.
    pub usd_per_hour: f64,
    /// Upfront payment for a term (0 for pay-as-you-go kinds).
    pub upfront_usd: f64,
    /// Hourly part billed during a term (equal to `usd_per_hour` without upfront).
    pub recurring_usd_per_hour: f64,
    /// The provider's SKU / meter id, for tracing a record back to the source.
    pub source: Option<String>,
    /// For providers that price one global offer: where it can be launched.
    pub available_regions: Vec<String>,
    /// Most instances that can be had at this price (on-prem pools, negotiated deals).
    pub max_instances: Option<u32>,
    /// What the price buys: a rentable machine, or GPUs alone.
    #[serde(default)]
    pub price_scope: PriceScope,
    /// The fixed window a `capacity_block` offering reserves; part of its
    /// identity, as one type in one zone is offered for several windows.
    #[serde(default)]
    pub window: Option<Window>,
}

/// A fixed window of capacity: `instance_count` instances from `start` to
/// `end` (a Capacity Block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Window {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub instance_count: u32,
}

impl Window {
    /// The window's length in hours: an instant block that starts at 15:10
    /// and ends at 11:30 the next day is 20.33 hours, not the 20 its whole
    /// hours say.
    #[must_use]
    pub fn hours(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let seconds = (self.end - self.start).num_seconds() as f64;
        seconds / 3600.0
    }
}

/// What a price buys. Plans are made of rentable machines only: a price of
/// GPUs alone (GCP's per-accelerator SKUs) leaves out the machine they attach
/// to, which is billed separately, so it is listed but never planned.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum PriceScope {
    /// A whole instance (or an on-prem machine): what a plan can buy.
    #[default]
    Instance,
    /// Accelerators that must be attached to a machine priced separately.
    GpuOnly,
}

impl PriceScope {
    pub const ALL: [Self; 2] = [Self::Instance, Self::GpuOnly];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Instance => "instance",
            Self::GpuOnly => "gpu_only",
        }
    }
}

impl fmt::Display for PriceScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PriceScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown price_scope `{s}`; expected instance or gpu_only"))
    }
}

impl PriceRecord {
    /// A record for a term price given as upfront plus recurring hourly parts; the
    /// effective hourly price follows docs/catalog.md: `(upfront + recurring*H) / H`.
    #[must_use]
    pub fn effective_hourly(kind: PriceKind, upfront_usd: f64, recurring_usd_per_hour: f64) -> f64 {
        match kind.term_hours() {
            Some(h) => (upfront_usd + recurring_usd_per_hour * h) / h,
            None => recurring_usd_per_hour,
        }
    }

    /// What `usd_per_hour` must be given the record's parts: a window's
    /// upfront fee is spread over its instances and hours, a term's over
    /// the term.
    #[must_use]
    pub fn parts_hourly(&self) -> f64 {
        match &self.window {
            Some(w) if w.instance_count > 0 && w.hours() > 0.0 => {
                self.upfront_usd / (f64::from(w.instance_count) * w.hours())
                    + self.recurring_usd_per_hour
            }
            _ => Self::effective_hourly(
                self.price_kind,
                self.upfront_usd,
                self.recurring_usd_per_hour,
            ),
        }
    }
}

/// One point of spot price history, as the provider timestamped it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpotObservation {
    pub region: String,
    pub zone: String,
    pub instance_type: String,
    pub usd_per_hour: f64,
    pub observed_at: DateTime<Utc>,
}

/// Where an instance type can be had and how reliable spot is there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AvailabilityRecord {
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub signal: AvailabilitySignal,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum AvailabilitySignal {
    /// The type is offered in this region / zone.
    Offered,
    /// Capacity can be launched right now (`false`: priced, but none free).
    CapacityAvailable(bool),
    /// Spot advisor interruption bucket: 0 (<5%/month) .. 4 (>20%/month).
    InterruptionBucket(u8),
    /// Spot advisor savings over on-demand, percent.
    SpotSavingsPct(u8),
    /// Spot placement score 1..10.
    PlacementScore(u8),
}

impl AvailabilitySignal {
    /// Splits the signal into the store's `(kind, value)` columns.
    #[must_use]
    pub fn to_kind_value(self) -> (&'static str, f64) {
        match self {
            Self::Offered => ("offered", 1.0),
            Self::CapacityAvailable(b) => ("capacity_available", if b { 1.0 } else { 0.0 }),
            Self::InterruptionBucket(v) => ("interruption_bucket", f64::from(v)),
            Self::SpotSavingsPct(v) => ("spot_savings_pct", f64::from(v)),
            Self::PlacementScore(v) => ("placement_score", f64::from(v)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Term {
    /// The short terms are prepaid only (`prepaid_1w` .. `prepaid_6m`: RunPod's
    /// savings plans, Alibaba and Tencent monthly subscriptions).
    OneWeek,
    OneMonth,
    ThreeMonths,
    SixMonths,
    OneYear,
    ThreeYears,
}

impl Term {
    #[must_use]
    pub fn hours(self) -> f64 {
        match self {
            Self::OneWeek => 168.0,
            Self::OneMonth => HOURS_1M,
            Self::ThreeMonths => 3.0 * HOURS_1M,
            Self::SixMonths => 6.0 * HOURS_1M,
            Self::OneYear => HOURS_1Y,
            Self::ThreeYears => HOURS_3Y,
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Self::OneWeek => "1w",
            Self::OneMonth => "1m",
            Self::ThreeMonths => "3m",
            Self::SixMonths => "6m",
            Self::OneYear => "1y",
            Self::ThreeYears => "3y",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Upfront {
    No,
    Partial,
    All,
}

impl Upfront {
    fn tag(self) -> &'static str {
        match self {
            Self::No => "no",
            Self::Partial => "partial",
            Self::All => "all",
        }
    }
}

/// `price_kind` of the catalog contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PriceKind {
    OnDemand,
    Spot,
    /// AWS reserved instances: term and payment option (`reserved_1y_partial_upfront`).
    AwsReserved(Term, Upfront),
    /// Azure reservations (`reserved_1y`).
    Reserved(Term),
    /// Azure savings plans (`savings_plan_1y`).
    SavingsPlan(Term),
    /// GCP committed use discounts (`commit_1y`).
    Commit(Term),
    /// Prepaid subscriptions (`prepaid_1m`, Alibaba and Tencent): the whole
    /// term paid upfront, nothing recurring.
    Prepaid(Term),
    /// GCP's Dynamic Workload Scheduler flex-start: capacity when it is
    /// free, for at most 7 days a VM, at a discount (`flex_start`).
    FlexStart,
    /// GCP's calendar mode: capacity reserved ahead for 1 to 90 days
    /// (`calendar`).
    Calendar,
    /// AWS EC2 Capacity Blocks for ML: instances reserved for a fixed window,
    /// paid in full up front (`capacity_block`).
    CapacityBlock,
}

impl PriceKind {
    /// Every kind, in the order listings and help texts use.
    #[must_use]
    pub fn all() -> Vec<PriceKind> {
        let mut kinds = vec![Self::OnDemand, Self::Spot];
        for term in [Term::OneYear, Term::ThreeYears] {
            for upfront in [Upfront::No, Upfront::Partial, Upfront::All] {
                kinds.push(Self::AwsReserved(term, upfront));
            }
        }
        for make in [Self::Reserved, Self::SavingsPlan, Self::Commit] {
            kinds.push(make(Term::OneYear));
            kinds.push(make(Term::ThreeYears));
        }
        for term in [
            Term::OneWeek,
            Term::OneMonth,
            Term::ThreeMonths,
            Term::SixMonths,
            Term::OneYear,
            Term::ThreeYears,
        ] {
            kinds.push(Self::Prepaid(term));
        }
        kinds.extend([Self::FlexStart, Self::Calendar, Self::CapacityBlock]);
        kinds
    }

    /// Whether the kind sells a run of bounded length (flex-start, calendar
    /// mode, a Capacity Block's window) rather than hours for as long as they are wanted: such prices
    /// do not serve a plan of hourly demand.
    #[must_use]
    pub fn bounded_run(self) -> bool {
        matches!(self, Self::FlexStart | Self::Calendar | Self::CapacityBlock)
    }

    /// The shortest and longest run the kind sells, in hours, where it
    /// limits them: a flex-start VM runs at most 7 days, a calendar-mode
    /// reservation 1 to 90 days.
    #[must_use]
    pub fn duration_hours(self) -> (Option<f64>, Option<f64>) {
        match self {
            Self::FlexStart => (None, Some(168.0)),
            Self::Calendar => (Some(24.0), Some(2160.0)),
            _ => (None, None),
        }
    }

    /// The term, for kinds that commit to one.
    #[must_use]
    pub fn term(self) -> Option<Term> {
        match self {
            Self::OnDemand
            | Self::Spot
            | Self::FlexStart
            | Self::Calendar
            | Self::CapacityBlock => None,
            Self::AwsReserved(t, _)
            | Self::Reserved(t)
            | Self::SavingsPlan(t)
            | Self::Commit(t)
            | Self::Prepaid(t) => Some(t),
        }
    }

    /// Term length in hours; `None` for pay-as-you-go kinds.
    #[must_use]
    pub fn term_hours(self) -> Option<f64> {
        self.term().map(Term::hours)
    }
}

/// Every kind with its name, spelled once: names are read and written for
/// every catalog row a query returns.
static NAMES: std::sync::LazyLock<Vec<(PriceKind, String)>> = std::sync::LazyLock::new(|| {
    PriceKind::all()
        .into_iter()
        .map(|k| {
            let name = match k {
                PriceKind::OnDemand => "on_demand".to_owned(),
                PriceKind::Spot => "spot".to_owned(),
                PriceKind::AwsReserved(t, u) => {
                    format!("reserved_{}_{}_upfront", t.tag(), u.tag())
                }
                PriceKind::Reserved(t) => format!("reserved_{}", t.tag()),
                PriceKind::SavingsPlan(t) => format!("savings_plan_{}", t.tag()),
                PriceKind::Commit(t) => format!("commit_{}", t.tag()),
                PriceKind::Prepaid(t) => format!("prepaid_{}", t.tag()),
                PriceKind::FlexStart => "flex_start".to_owned(),
                PriceKind::Calendar => "calendar".to_owned(),
                PriceKind::CapacityBlock => "capacity_block".to_owned(),
            };
            (k, name)
        })
        .collect()
});

impl PriceKind {
    /// The kind's name in the catalog contract.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        NAMES
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("", |(_, name)| name.as_str())
    }
}

impl fmt::Display for PriceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the contract's names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{value}`; expected one of: {expected}")]
pub struct UnknownName {
    pub what: &'static str,
    pub value: String,
    pub expected: String,
}

impl FromStr for PriceKind {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NAMES
            .iter()
            .find(|(_, name)| name == s)
            .map(|(k, _)| *k)
            .ok_or_else(|| UnknownName {
                what: "price_kind",
                value: s.to_owned(),
                expected: Self::all()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl Serialize for PriceKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PriceKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// AWS reserved-instance offering class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferingClass {
    Standard,
    Convertible,
}

impl OfferingClass {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Convertible => "convertible",
        }
    }
}

impl FromStr for OfferingClass {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "standard" => Ok(Self::Standard),
            "convertible" => Ok(Self::Convertible),
            _ => Err(UnknownName {
                what: "offering_class",
                value: s.to_owned(),
                expected: "standard, convertible".to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_price_kind_round_trips_through_its_contract_name() {
        let names: Vec<String> = PriceKind::all().iter().map(ToString::to_string).collect();
        assert_eq!(names.len(), 23);
        assert!(names.contains(&"reserved_3y_partial_upfront".to_owned()));
        assert_eq!("flex_start".parse::<PriceKind>(), Ok(PriceKind::FlexStart));
        assert_eq!(PriceKind::FlexStart.duration_hours(), (None, Some(168.0)));
        assert_eq!(
            PriceKind::Calendar.duration_hours(),
            (Some(24.0), Some(2160.0))
        );
        assert!(PriceKind::Calendar.bounded_run() && !PriceKind::OnDemand.bounded_run());
        assert_eq!(PriceKind::Calendar.term_hours(), None);
        assert!(names.contains(&"savings_plan_1y".to_owned()));
        assert!(names.contains(&"prepaid_1m".to_owned()));
        assert_eq!(PriceKind::Prepaid(Term::OneMonth).term_hours(), Some(730.0));
        assert_eq!(PriceKind::Prepaid(Term::OneWeek).term_hours(), Some(168.0));
        assert_eq!(
            PriceKind::Prepaid(Term::ThreeMonths).term_hours(),
            Some(2190.0)
        );
        assert_eq!(
            PriceKind::Prepaid(Term::SixMonths).term_hours(),
            Some(4380.0)
        );
        assert_eq!(
            "prepaid_1w".parse::<PriceKind>().unwrap().to_string(),
            "prepaid_1w"
        );
        for kind in PriceKind::all() {
            assert_eq!(kind.to_string().parse::<PriceKind>().unwrap(), kind);
        }
        let err = "reserved_2y".parse::<PriceKind>().unwrap_err();
        assert!(err.to_string().contains("reserved_2y"));
    }

    #[test]
    fn term_prices_amortize_upfront_over_the_term() {
        let kind = PriceKind::AwsReserved(Term::OneYear, Upfront::Partial);
        let eff = PriceRecord::effective_hourly(kind, 8760.0, 1.5);
        assert!((eff - 2.5).abs() < 1e-12);
        assert!(
            (PriceRecord::effective_hourly(PriceKind::Commit(Term::ThreeYears), 26280.0, 0.0)
                - 1.0)
                .abs()
                < 1e-12
        );
        assert!((PriceRecord::effective_hourly(PriceKind::OnDemand, 0.0, 3.0) - 3.0).abs() < 1e-12);
    }
}
