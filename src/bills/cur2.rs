//! AWS CUR 2.0 rows as charges. Costs per line type as AWS's own dashboards
//! amortize them; a savings plan's negation line carries cost, never usage.

use std::borrow::Cow;

use super::charge::{
    Category, Cells, Charge, CommitmentUse, Memo, Pricing, RowProvider, TimeUnit, Wanted, entries,
    first_tag, first_value, opt, req,
};
use super::read::Cell;
use super::{BillError, BillProvider, CommitmentType};

const PAYER: usize = 0;
const PERIOD_START: usize = 1;
const PERIOD_END: usize = 2;
const START: usize = 3;
const END: usize = 4;
const LINE_TYPE: usize = 5;
const USAGE_TYPE: usize = 6;
const AMOUNT: usize = 7;
const UNBLENDED: usize = 8;
const CURRENCY: usize = 9;
const INSTANCE_TYPE: usize = 10;
const REGION: usize = 11;
const RI_ARN: usize = 12;
const RI_EFFECTIVE: usize = 13;
const RI_UNUSED_UPFRONT: usize = 14;
const RI_UNUSED_RECURRING: usize = 15;
const RI_UNUSED_QUANTITY: usize = 16;
const SP_ARN: usize = 17;
const SP_EFFECTIVE: usize = 18;
const SP_TOTAL: usize = 19;
const SP_USED: usize = 20;
const TAGS: usize = 21;
const USAGE_ACCOUNT: usize = 22;
const PRODUCT_CODE: usize = 23;
const PRICING_UNIT: usize = 24;

pub const COLUMNS: &[Wanted] = &[
    req(&["bill_payer_account_id"]),
    req(&["bill_billing_period_start_date"]),
    opt(&["bill_billing_period_end_date"]),
    req(&["line_item_usage_start_date"]),
    req(&["line_item_usage_end_date"]),
    req(&["line_item_line_item_type"]),
    opt(&["line_item_usage_type"]),
    opt(&["line_item_usage_amount"]),
    req(&["line_item_unblended_cost"]),
    req(&["line_item_currency_code"]),
    opt(&["product_instance_type"]),
    opt(&["product_region_code"]),
    opt(&["reservation_reservation_a_r_n"]),
    opt(&["reservation_effective_cost"]),
    opt(&["reservation_unused_amortized_upfront_fee_for_billing_period"]),
    opt(&["reservation_unused_recurring_fee"]),
    opt(&["reservation_unused_quantity"]),
    opt(&["savings_plan_savings_plan_a_r_n"]),
    opt(&["savings_plan_savings_plan_effective_cost"]),
    opt(&["savings_plan_total_commitment_to_date"]),
    opt(&["savings_plan_used_commitment"]),
    opt(&["resource_tags"]),
    opt(&["line_item_usage_account_id"]),
    opt(&["line_item_product_code"]),
    opt(&["pricing_unit"]),
];

/// Per-file state: a memo of the tags' team.
pub struct Cur2<'s> {
    team_tags: &'s [String],
    tags: Memo<Option<String>>,
}

/// Usage types whose amount is instance-hours.
const INSTANCE_USAGE: &[&str] = &["BoxUsage", "SpotUsage", "DedicatedUsage", "HostUsage"];

impl<'s> Cur2<'s> {
    pub fn new(team_tags: &'s [String]) -> Self {
        Self {
            team_tags,
            tags: Memo::new(),
        }
    }

    /// One line item as a charge.
    ///
    /// # Errors
    /// The first cell that does not parse, with its line and column.
    #[allow(clippy::too_many_lines)]
    pub fn charge<'r>(&mut self, c: &Cells<'r>) -> Result<Charge<'r>, BillError> {
        let line_type = c.required_text(LINE_TYPE)?;
        let unblended = c.required_number(UNBLENDED)?;
        let usage_type = c.text(USAGE_TYPE)?;
        let amount = c.number(AMOUNT)?;
        let ri = c.text(RI_ARN)?;
        let sp = c.text(SP_ARN)?;
        let zero = |n: Option<f64>| n.unwrap_or(0.0);
        let currency = c.required_text(CURRENCY)?;
        let unit = match c.text(PRICING_UNIT)? {
            Some(u) => Some(TimeUnit::parse(u)),
            None if usage_type.is_some_and(|u| INSTANCE_USAGE.iter().any(|k| u.contains(k))) => {
                Some(TimeUnit::Hours)
            }
            None => None,
        };
        let use_of = |id: &'r str, kind: CommitmentType| CommitmentUse {
            id,
            kind: Some(kind),
            category: Some(match kind {
                CommitmentType::SavingsPlan => "spend",
                _ => "usage",
            }),
            unit: Some(match kind {
                CommitmentType::SavingsPlan => Cow::Borrowed(currency),
                _ => Cow::Borrowed("Hours"),
            }),
            ..CommitmentUse::default()
        };
        let mut quantity = amount;
        let mut pricing = None;
        let mut cost_only = false;
        let mut commitment = None;
        let (category, effective) = match line_type {
            "Usage" => {
                pricing = Some(if usage_type.is_some_and(|u| u.contains("SpotUsage")) {
                    Pricing::Dynamic
                } else {
                    Pricing::Standard
                });
                (Category::Usage, unblended)
            }
            "DiscountedUsage" => {
                let effective = zero(c.number(RI_EFFECTIVE)?);
                pricing = Some(Pricing::Committed);
                commitment = ri.map(|id| CommitmentUse {
                    is_use: true,
                    covers: true,
                    used_quantity: amount,
                    used_cost: effective,
                    ..use_of(id, CommitmentType::Reservation)
                });
                (Category::Usage, effective)
            }
            "SavingsPlanCoveredUsage" => {
                let effective = zero(c.number(SP_EFFECTIVE)?);
                pricing = Some(Pricing::Committed);
                commitment = sp.map(|id| CommitmentUse {
                    is_use: true,
                    covers: true,
                    used_cost: effective,
                    ..use_of(id, CommitmentType::SavingsPlan)
                });
                (Category::Usage, effective)
            }
            "SavingsPlanNegation" => {
                quantity = None;
                cost_only = true;
                pricing = Some(Pricing::Committed);
                commitment = sp.map(|id| use_of(id, CommitmentType::SavingsPlan));
                (Category::Usage, 0.0)
            }
            "RIFee" => {
                let unused_cost =
                    zero(c.number(RI_UNUSED_UPFRONT)?) + zero(c.number(RI_UNUSED_RECURRING)?);
                let unused_quantity = zero(c.number(RI_UNUSED_QUANTITY)?);
                quantity = None;
                commitment = ri.map(|id| CommitmentUse {
                    is_use: true,
                    unused_quantity: Some(unused_quantity),
                    unused_cost,
                    ..use_of(id, CommitmentType::Reservation)
                });
                (Category::Purchase, unused_cost)
            }
            "SavingsPlanRecurringFee" => {
                let total = zero(c.number(SP_TOTAL)?);
                let used = zero(c.number(SP_USED)?);
                quantity = None;
                commitment = sp.map(|id| CommitmentUse {
                    is_use: true,
                    used_quantity: Some(used),
                    unused_quantity: Some(total - used),
                    unused_cost: total - used,
                    ..use_of(id, CommitmentType::SavingsPlan)
                });
                (Category::Purchase, total - used)
            }
            "SavingsPlanUpfrontFee" => {
                quantity = None;
                commitment = sp.map(|id| use_of(id, CommitmentType::SavingsPlan));
                (Category::Purchase, 0.0)
            }
            "Fee" => {
                quantity = None;
                match ri {
                    Some(id) => {
                        commitment = Some(use_of(id, CommitmentType::Reservation));
                        (Category::Purchase, 0.0)
                    }
                    None => (Category::Purchase, unblended),
                }
            }
            "Tax" => {
                quantity = None;
                (Category::Tax, unblended)
            }
            "Credit" => {
                quantity = None;
                (Category::Credit, unblended)
            }
            // Refunds, discounts and line types AWS adds later: spend only.
            _ => {
                quantity = None;
                (Category::Adjustment, unblended)
            }
        };
        let instance_type = c
            .text(INSTANCE_TYPE)?
            .or_else(|| {
                usage_type
                    .and_then(|u| u.rsplit_once(':'))
                    .map(|(_, t)| t.trim())
                    .filter(|t| !t.is_empty())
            })
            .map(Cow::Borrowed);
        let period_start = c.required_time(PERIOD_START)?;
        let period_end = match c.time(PERIOD_END)? {
            Some(e) => e,
            None => super::time::next_month(period_start),
        };
        let team = self.team(c)?;
        Ok(Charge {
            provider: RowProvider::Cloud(BillProvider::Aws),
            billing_account: c.required_text(PAYER)?,
            period_start,
            period_end,
            start: c.required_time(START)?,
            end: c.required_time(END)?,
            category,
            correction: false,
            pricing,
            unused: false,
            billed: unblended,
            effective,
            currency,
            quantity,
            unit,
            commitment,
            region: c.text(REGION)?,
            sub_account: c.text(USAGE_ACCOUNT)?,
            service_category: c.text(PRODUCT_CODE)?,
            sku_id: None,
            instance_type,
            gpu_count: None,
            team,
            spot: false,
            cost_only,
            description: None,
            says_gpu: false,
        })
    }

    /// CUR writes a user tag `team` as `user_team`; either spelling matches.
    fn team<'r>(&mut self, c: &Cells<'r>) -> Result<Option<Cow<'r, str>>, BillError> {
        let keys = self.team_tags;
        if keys.is_empty() {
            return Ok(None);
        }
        match c.raw(TAGS) {
            Cell::Pairs(p) => Ok(first_tag(|| p.iter(), keys, "user_").map(Cow::Borrowed)),
            Cell::Text(t) => self
                .tags
                .get_or(t, || {
                    entries(Cell::Text(t))
                        .map(|e| first_value(&e, keys, "user_").map(str::to_owned))
                })
                .map(|team| team.map(Cow::Owned))
                .map_err(|why| c.bad(TAGS, why)),
            cell => entries(cell)
                .map(|e| first_value(&e, keys, "user_").map(|v| Cow::Owned(v.to_owned())))
                .map_err(|why| c.bad(TAGS, why)),
        }
    }
}
