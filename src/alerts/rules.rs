//! What an alert rule is: its kind, the price it compares and the rest of
//! `[[alerts.rules]]`, as the config file states it once validated.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    PriceBelow,
    PriceAbove,
    SpotAboveCommitted,
    SyncFailed,
    Stale,
    NewOffer,
    PlanChanged,
    UnallocatedSpend,
    CommitmentUnderused,
    CoverageBelow,
    BillRestated,
    /// A sync stored prices that look wrong (see `sync::suspicious`).
    SuspiciousPrice,
    /// A priced window (a Capacity Block offering) long and cheap enough
    /// appeared; fires once per offering.
    WindowOffered,
    /// A `[[budgets]]` threshold (not a kind of `[alerts.rules]`).
    Budget,
}

impl RuleKind {
    pub(crate) const NAMES: [(&'static str, RuleKind); 13] = [
        ("price_below", RuleKind::PriceBelow),
        ("price_above", RuleKind::PriceAbove),
        ("spot_above_committed", RuleKind::SpotAboveCommitted),
        ("sync_failed", RuleKind::SyncFailed),
        ("stale", RuleKind::Stale),
        ("new_offer", RuleKind::NewOffer),
        ("plan_changed", RuleKind::PlanChanged),
        ("unallocated_spend", RuleKind::UnallocatedSpend),
        ("commitment_underused", RuleKind::CommitmentUnderused),
        ("coverage_below", RuleKind::CoverageBelow),
        ("bill_restated", RuleKind::BillRestated),
        ("suspicious_price", RuleKind::SuspiciousPrice),
        ("window_offered", RuleKind::WindowOffered),
    ];

    /// Kinds that watch the bills, with a percent threshold.
    #[must_use]
    pub fn over_bills(self) -> bool {
        matches!(
            self,
            Self::UnallocatedSpend
                | Self::CommitmentUnderused
                | Self::CoverageBelow
                | Self::BillRestated
                | Self::Budget
        )
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        if self == Self::Budget {
            return "budget";
        }
        Self::NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("", |(n, _)| n)
    }
}

/// Which price a threshold compares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    PerGpuHour(f64),
    PerInstanceHour(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: String,
    pub kind: RuleKind,
    /// GPU models or families; empty matches all.
    pub gpu_models: Vec<String>,
    /// Price kinds; empty matches all.
    pub price_kinds: Vec<gpuplan_providers::PriceKind>,
    /// What the prices buy: `instance` unless the rule asks for `gpu_only`
    /// prices too (GPUs without the machine they attach to).
    pub price_scopes: Vec<gpuplan_providers::PriceScope>,
    /// Glob patterns (`*`, `?`) for providers and regions (or sources); empty matches all.
    pub providers: Vec<String>,
    pub regions: Vec<String>,
    pub threshold: Option<Threshold>,
    /// Alert on the cheapest matching offer only (one key), or on every offer.
    pub every_offer: bool,
    /// Share of the threshold the value must move back past before re-arming.
    pub hysteresis: f64,
    pub cooldown: Option<Duration>,
    pub channels: Vec<String>,
    /// For `plan_changed`: the scheduled plans it watches; empty means all.
    pub plans: Vec<String>,
    /// For the kinds over the bills: the percent threshold (unallocated
    /// share, utilization, coverage, or a restatement's change).
    pub percent: Option<f64>,
    /// For `bill_restated`: an absolute change that fires too.
    pub amount: Option<f64>,
    /// For the kinds over the bills: the days of data they look back on.
    pub days: u32,
    /// For `window_offered`: the shortest window, in days, it reports.
    pub min_days: Option<f64>,
}
