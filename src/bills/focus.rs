//! FOCUS 1.0, 1.1 and 1.2 rows (and the older names OCI writes) as charges.

use std::borrow::Cow;

use super::aggregate::Names;
use super::charge::{
    Amounts, Category, Cells, Charge, CommitmentUse, Entries, Memo, Pricing, TimeUnit, Wanted,
    entries, first_tag, first_value, opt, req,
};
use super::read::{Cell, Pairs};
use super::{BillError, BillProvider, CommitmentType};

// Positions in COLUMNS.
const ACCOUNT: usize = 0;
const PERIOD_START: usize = 1;
const PERIOD_END: usize = 2;
const START: usize = 3;
const END: usize = 4;
const CATEGORY: usize = 5;
const CLASS: usize = 6;
const PRICING: usize = 7;
const BILLED: usize = 8;
const EFFECTIVE: usize = 9;
const CURRENCY: usize = 10;
const QUANTITY: usize = 11;
const UNIT: usize = 12;
const C_ID: usize = 13;
const C_TYPE: usize = 14;
const C_CATEGORY: usize = 15;
const C_STATUS: usize = 16;
const C_QUANTITY: usize = 17;
const C_UNIT: usize = 18;
const REGION: usize = 19;
const SUB_ACCOUNT: usize = 20;
const SERVICE_CATEGORY: usize = 21;
const SKU: usize = 22;
const SKU_DETAILS: usize = 23;
const TAGS: usize = 24;
const USAGE_TYPE: usize = 25;
const AZURE_SKU: usize = 26;
const PRICING_SUB: usize = 27;

/// The columns gpuplan reads; every other column is ignored.
pub const COLUMNS: &[Wanted] = &[
    req(&["BillingAccountId"]),
    req(&["BillingPeriodStart"]),
    req(&["BillingPeriodEnd"]),
    req(&["ChargePeriodStart"]),
    req(&["ChargePeriodEnd"]),
    req(&["ChargeCategory"]),
    opt(&["ChargeClass"]),
    opt(&["PricingCategory"]),
    req(&["BilledCost"]),
    req(&["EffectiveCost"]),
    req(&["BillingCurrency"]),
    opt(&["ConsumedQuantity", "UsageQuantity"]),
    opt(&["ConsumedUnit", "UsageUnit"]),
    opt(&["CommitmentDiscountId"]),
    opt(&["CommitmentDiscountType"]),
    opt(&["CommitmentDiscountCategory"]),
    opt(&["CommitmentDiscountStatus"]),
    opt(&["CommitmentDiscountQuantity"]),
    opt(&["CommitmentDiscountUnit"]),
    opt(&["RegionId", "Region"]),
    opt(&["SubAccountId"]),
    opt(&["ServiceCategory"]),
    opt(&["SkuId"]),
    opt(&["SkuPriceDetails"]),
    opt(&["Tags"]),
    opt(&["x_UsageType"]),
    opt(&["x_SkuDetails"]),
    opt(&["x_PricingSubcategory"]),
];

/// The text columns a row's meaning depends on, besides its key-value
/// cells: everything but its amounts and times.
const SHAPED: [usize; 18] = [
    ACCOUNT,
    CATEGORY,
    CLASS,
    PRICING,
    CURRENCY,
    UNIT,
    C_ID,
    C_TYPE,
    C_CATEGORY,
    C_STATUS,
    C_UNIT,
    REGION,
    SUB_ACCOUNT,
    SERVICE_CATEGORY,
    SKU,
    USAGE_TYPE,
    AZURE_SKU,
    PRICING_SUB,
];

/// What decides a row's meaning but for its amounts and times: the keys of
/// its text cells, what its key-value cells name, and whether it has a
/// quantity. Rows of one epoch with the same shape mean the same. Packed
/// into words, since every row is hashed and compared by it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape([u64; SHAPE_WORDS]);

/// Two keys a word, then `SkuPriceDetails` (two words), `Tags`, the GPU
/// count and the flags.
const SHAPE_WORDS: usize = SHAPED.len().div_ceil(2) + 5;

/// A key-value cell in a shape: keyed when it is text (JSON); a map by the
/// dictionary ids of the values it names (`SkuPriceDetails`: the instance
/// type's and the GPU count's, `Tags`: the team's), or else by what it
/// names, interned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Named {
    Key(u32),
    Ids(Slot, Slot),
    Name(u32),
    Nothing,
}

impl Named {
    fn words(self) -> (u64, u64) {
        let kind = |k: u64, v: u32| (k << 62) | u64::from(v);
        match self {
            Self::Nothing => (0, 0),
            Self::Key(k) => (kind(1, k), 0),
            Self::Ids(a, b) => (kind(2, 0) | a.word(), b.word()),
            Self::Name(n) => (kind(3, n), 0),
        }
    }
}

/// Which entry of a map gave a value: none, one with no value, or value id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Absent,
    Null,
    Value(u32),
}

impl Slot {
    fn of(value: Option<u32>) -> Self {
        value.map_or(Self::Null, Self::Value)
    }

    fn word(self) -> u64 {
        match self {
            Self::Absent => 0,
            Self::Null => 1,
            Self::Value(v) => u64::from(v) + 2,
        }
    }
}

/// What each key of a map's dictionary means to the mapping, worked out
/// the first time an epoch's row names it.
#[derive(Default)]
struct Roles {
    epoch: u64,
    /// `SkuPriceDetails` keys: 1 another key, 2 `InstanceType`, 3 `GpuCount`.
    details: Vec<u8>,
    /// `Tags` keys: bit i of the first mask when the key is team tag i
    /// exactly, of the second ignoring case.
    tags: Vec<Option<(u64, u64)>>,
}

/// Map keys with a role table entry; a map with bigger key ids is shaped
/// by what it names instead.
const ROLE_LIMIT: u32 = 1 << 16;

/// What a key-value cell gives a charge: the instance type and GPU count
/// (`SkuPriceDetails`, `x_SkuDetails`) or the team (`Tags`).
#[derive(Debug, Clone, Default)]
struct Details {
    instance_type: Option<String>,
    gpu_count: Option<f64>,
}

/// The per-file state of the FOCUS mapping: memos of repeated JSON cells.
pub struct Focus<'s> {
    provider: BillProvider,
    team_tags: &'s [String],
    tags: Memo<Option<String>>,
    details: Memo<Details>,
    azure: Memo<Option<String>>,
    /// Instance types and teams named by key-value maps, for shapes.
    named: Names,
    roles: Roles,
}

impl<'s> Focus<'s> {
    pub fn new(provider: BillProvider, team_tags: &'s [String]) -> Self {
        Self {
            provider,
            team_tags,
            tags: Memo::new(),
            details: Memo::new(),
            azure: Memo::new(),
            named: Names::default(),
            roles: Roles::default(),
        }
    }

    /// The shape of a row (within its epoch, see [`RowCells::keys`]), or
    /// `None` when some of its text has no key. Reads no cell that could
    /// fail.
    ///
    /// [`RowCells::keys`]: super::read::RowCells::keys
    pub fn shape(&mut self, c: &Cells<'_>) -> Option<Shape> {
        let mut keys = [0; SHAPED.len()];
        if !c.keys(&SHAPED, &mut keys) {
            return None;
        }
        if c.epoch() != self.roles.epoch {
            self.roles = Roles {
                epoch: c.epoch(),
                ..Roles::default()
            };
        }
        let mut gpu_count = None;
        let details = match keyed(c, SKU_DETAILS) {
            Some(k) => Named::Key(k),
            None => match c.raw(SKU_DETAILS) {
                Cell::Null => Named::Nothing,
                Cell::Pairs(p) => match self.detail_ids(&p) {
                    Some(named) => named,
                    None => {
                        let (t, gpus) = self.details(c, SKU_DETAILS).ok()?;
                        gpu_count = gpus.map(f64::to_bits);
                        t.map_or(Named::Nothing, |t| Named::Name(self.named.id(&t)))
                    }
                },
                _ => return None,
            },
        };
        let tags = match keyed(c, TAGS) {
            _ if self.team_tags.is_empty() => Named::Nothing,
            Some(k) => Named::Key(k),
            None => match c.raw(TAGS) {
                Cell::Null => Named::Nothing,
                Cell::Pairs(p) => match self.team_ids(&p) {
                    Some(named) => named,
                    None => self
                        .team(c)
                        .ok()?
                        .map_or(Named::Nothing, |t| Named::Name(self.named.id(&t))),
                },
                _ => return None,
            },
        };
        let mut words = [0; SHAPE_WORDS];
        for (w, pair) in words.iter_mut().zip(keys.chunks(2)) {
            *w = pair.iter().fold(0, |w, &k| (w << 32) | u64::from(k));
        }
        let n = SHAPED.len().div_ceil(2);
        (words[n], words[n + 1]) = details.words();
        words[n + 2] = tags.words().0;
        words[n + 3] = gpu_count.unwrap_or(0);
        words[n + 4] =
            u64::from(gpu_count.is_some()) | u64::from(!matches!(c.raw(QUANTITY), Cell::Null)) << 1;
        Some(Shape(words))
    }

    /// The ids of the values [`Focus::details`] reads from a dictionary
    /// map: its last `InstanceType` and `GpuCount` entries.
    fn detail_ids(&mut self, p: &Pairs<'_>) -> Option<Named> {
        let (mut instance_type, mut gpus) = (Slot::Absent, Slot::Absent);
        for (k, v) in p.ids()? {
            if k >= ROLE_LIMIT {
                return None;
            }
            let at = k as usize;
            if self.roles.details.len() <= at {
                self.roles.details.resize(at + 1, 0);
            }
            if self.roles.details[at] == 0 {
                let key = p.key_text(k)?;
                self.roles.details[at] = if key.eq_ignore_ascii_case("InstanceType") {
                    2
                } else if key.eq_ignore_ascii_case("GpuCount") {
                    3
                } else {
                    1
                };
            }
            match self.roles.details[at] {
                2 => instance_type = Slot::of(v),
                3 => gpus = Slot::of(v),
                _ => {}
            }
        }
        Some(Named::Ids(instance_type, gpus))
    }

    /// The id of the value [`first_tag`] takes from a dictionary map: for
    /// each team tag in turn, the first entry with exactly its key, else
    /// the first ignoring case, if its value is not blank.
    fn team_ids(&mut self, p: &Pairs<'_>) -> Option<Named> {
        let keys = self.team_tags;
        if keys.len() > 64 {
            return None;
        }
        for (k, _) in p.ids()? {
            if k >= ROLE_LIMIT {
                return None;
            }
            let at = k as usize;
            if self.roles.tags.len() <= at {
                self.roles.tags.resize(at + 1, None);
            }
            if self.roles.tags[at].is_none() {
                let text = p.key_text(k)?;
                let (mut exact, mut loose) = (0u64, 0u64);
                for (i, key) in keys.iter().enumerate() {
                    if text == key {
                        exact |= 1 << i;
                    }
                    if text.eq_ignore_ascii_case(key) {
                        loose |= 1 << i;
                    }
                }
                self.roles.tags[at] = Some((exact, loose));
            }
        }
        let roles = &self.roles.tags;
        let role = |k: u32| roles.get(k as usize).copied().flatten().unwrap_or((0, 0));
        for i in 0..keys.len() {
            let bit = 1u64 << i;
            let found = p
                .ids()?
                .find(|(k, _)| role(*k).0 & bit != 0)
                .or_else(|| p.ids()?.find(|(k, _)| role(*k).1 & bit != 0));
            if let Some((_, Some(v))) = found
                && !p.value_text(v)?.trim().is_empty()
            {
                return Some(Named::Ids(Slot::Value(v), Slot::Absent));
            }
        }
        Some(Named::Nothing)
    }

    /// The amounts and times of a row whose shape was seen before, checked
    /// as [`Focus::charge`] checks them, in the same order.
    ///
    /// # Errors
    /// The first of those cells that does not parse.
    pub fn amounts(&self, c: &Cells<'_>) -> Result<Amounts, BillError> {
        let billed = c.required_number(BILLED)?;
        let effective = c.required_number(EFFECTIVE)?;
        let quantity = c.number(QUANTITY)?;
        let period_start = c.required_time(PERIOD_START)?;
        let period_end = c.required_time(PERIOD_END)?;
        let start = c.required_time(START)?;
        let end = c.required_time(END)?;
        Ok(Amounts {
            period_start,
            period_end,
            start,
            end,
            quantity,
            billed,
            effective,
        })
    }

    /// One row as a charge.
    ///
    /// # Errors
    /// The first cell that does not parse, with its line and column.
    pub fn charge<'r>(&mut self, c: &Cells<'r>) -> Result<Charge<'r>, BillError> {
        let category_text = c.required_text(CATEGORY)?;
        let category = Category::parse(category_text).ok_or_else(|| {
            c.bad(
                CATEGORY,
                format!("`{category_text}` is not a charge category (Usage, Purchase, Tax, Credit, Adjustment)"),
            )
        })?;
        let pricing = match c.text(PRICING)? {
            None => None,
            Some(p) => Some(Pricing::parse(p).ok_or_else(|| {
                c.bad(
                    PRICING,
                    format!(
                        "`{p}` is not a pricing category (Standard, Dynamic, Committed, Other)"
                    ),
                )
            })?),
        };
        let correction = c
            .text(CLASS)?
            .is_some_and(|t| t.eq_ignore_ascii_case("correction"));
        let billed = c.required_number(BILLED)?;
        let effective = c.required_number(EFFECTIVE)?;
        let quantity = c.number(QUANTITY)?;
        let unit = c.text(UNIT)?.map(TimeUnit::parse);
        let status = c.text(C_STATUS)?;
        let unused = status.is_some_and(|s| s.eq_ignore_ascii_case("unused"));
        let used = status.is_some_and(|s| s.eq_ignore_ascii_case("used"));

        let (mut instance_type, gpu_count) = self.details(c, SKU_DETAILS)?;
        if self.provider == BillProvider::Azure
            && let Some(t) = self.azure_size(c)?
        {
            instance_type = Some(Cow::Owned(t));
        }
        if instance_type.is_none() && self.provider == BillProvider::Aws {
            instance_type = c
                .text(USAGE_TYPE)?
                .and_then(|u| u.rsplit_once(':'))
                .map(|(_, t)| t.trim())
                .filter(|t| !t.is_empty())
                .map(Cow::Borrowed);
        }
        let team = self.team(c)?;

        let commitment = match c.text(C_ID)? {
            None => None,
            Some(id) => {
                let kind = commitment_type(self.provider, c.text(C_TYPE)?, id, c.text(C_CATEGORY)?);
                let quantity = c.number(C_QUANTITY)?;
                Some(CommitmentUse {
                    id,
                    kind,
                    category: c.text(C_CATEGORY)?.and_then(|k| {
                        if k.eq_ignore_ascii_case("usage") {
                            Some("usage")
                        } else if k.eq_ignore_ascii_case("spend") {
                            Some("spend")
                        } else {
                            None
                        }
                    }),
                    unit: c.text(C_UNIT)?.map(Cow::Borrowed),
                    is_use: used || unused,
                    covers: used && category == Category::Usage,
                    used_quantity: if used { quantity } else { None },
                    unused_quantity: if unused { quantity } else { None },
                    used_cost: if used { effective } else { 0.0 },
                    unused_cost: if unused { effective } else { 0.0 },
                })
            }
        };
        Ok(Charge {
            billing_account: c.required_text(ACCOUNT)?,
            period_start: c.required_time(PERIOD_START)?,
            period_end: c.required_time(PERIOD_END)?,
            start: c.required_time(START)?,
            end: c.required_time(END)?,
            category,
            correction,
            pricing,
            unused,
            billed,
            effective,
            currency: c.required_text(CURRENCY)?,
            quantity,
            unit,
            commitment,
            region: c.text(REGION)?,
            sub_account: c.text(SUB_ACCOUNT)?,
            service_category: c.text(SERVICE_CATEGORY)?,
            sku_id: c.text(SKU)?,
            instance_type,
            gpu_count,
            team,
            spot: c
                .text(PRICING_SUB)?
                .is_some_and(|s| s.eq_ignore_ascii_case("spot")),
            cost_only: false,
        })
    }

    /// `SkuPriceDetails`: the instance type and GPU count. A Parquet map is
    /// searched in place; JSON text is parsed once per distinct text.
    fn details<'r>(
        &mut self,
        c: &Cells<'r>,
        i: usize,
    ) -> Result<(Option<Cow<'r, str>>, Option<f64>), BillError> {
        match c.raw(i) {
            Cell::Null => Ok((None, None)),
            Cell::Pairs(p) => {
                let (mut instance_type, mut gpus) = (None, None);
                for (k, v) in p.iter() {
                    let v = v.map(str::trim).filter(|v| !v.is_empty());
                    if k.eq_ignore_ascii_case("InstanceType") {
                        instance_type = v.map(Cow::Borrowed);
                    } else if k.eq_ignore_ascii_case("GpuCount") {
                        gpus = v.and_then(|n| n.parse().ok());
                    }
                }
                Ok((instance_type, gpus))
            }
            Cell::Text(t) => {
                let read = |e: &Entries<'_>| {
                    let get = |key: &str| {
                        e.iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(key))
                            .and_then(|(_, v)| v.as_deref())
                            .map(str::trim)
                            .filter(|v| !v.is_empty())
                    };
                    Details {
                        instance_type: get("InstanceType").map(str::to_owned),
                        gpu_count: get("GpuCount").and_then(|n| n.parse().ok()),
                    }
                };
                let d = self
                    .details
                    .get_or(t, || entries(Cell::Text(t)).map(|e| read(&e)))
                    .map_err(|why| c.bad(i, why))?;
                Ok((d.instance_type.map(Cow::Owned), d.gpu_count))
            }
            Cell::Num(_) | Cell::Time(_) => Err(c.bad(i, "expected a key-value object")),
        }
    }

    /// Azure's VM size: `x_SkuDetails.ServiceType`.
    fn azure_size(&mut self, c: &Cells<'_>) -> Result<Option<String>, BillError> {
        let read = |e: &Entries<'_>| {
            e.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("ServiceType"))
                .and_then(|(_, v)| v.as_deref())
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        match c.raw(AZURE_SKU) {
            Cell::Text(t) => self
                .azure
                .get_or(t, || entries(Cell::Text(t)).map(|e| read(&e)))
                .map_err(|why| c.bad(AZURE_SKU, why)),
            cell => entries(cell)
                .map(|e| read(&e))
                .map_err(|why| c.bad(AZURE_SKU, why)),
        }
    }

    fn team<'r>(&mut self, c: &Cells<'r>) -> Result<Option<Cow<'r, str>>, BillError> {
        let keys = self.team_tags;
        if keys.is_empty() {
            return Ok(None);
        }
        match c.raw(TAGS) {
            Cell::Pairs(p) => Ok(first_tag(|| p.iter(), keys, "").map(Cow::Borrowed)),
            Cell::Text(t) => self
                .tags
                .get_or(t, || {
                    entries(Cell::Text(t)).map(|e| first_value(&e, keys, "").map(str::to_owned))
                })
                .map(|team| team.map(Cow::Owned))
                .map_err(|why| c.bad(TAGS, why)),
            cell => entries(cell)
                .map(|e| first_value(&e, keys, "").map(|v| Cow::Owned(v.to_owned())))
                .map_err(|why| c.bad(TAGS, why)),
        }
    }
}

/// The key of one text cell, if it has one.
fn keyed(c: &Cells<'_>, i: usize) -> Option<u32> {
    let mut key = [0];
    c.keys(&[i], &mut key).then_some(key[0])
}

/// A commitment's kind from its type text (matched loosely: every cloud
/// words it its own way), else its id, else its category.
fn commitment_type(
    provider: BillProvider,
    type_text: Option<&str>,
    id: &str,
    category: Option<&str>,
) -> Option<CommitmentType> {
    if provider == BillProvider::Gcp {
        return Some(CommitmentType::Commit);
    }
    let t = type_text.unwrap_or_default().to_ascii_lowercase();
    let id = id.to_ascii_lowercase();
    if t.contains("savings") || id.contains("savingsplan") {
        Some(CommitmentType::SavingsPlan)
    } else if t.contains("reserv")
        || id.contains("reserved-instances")
        || id.contains("reservationorders")
    {
        Some(CommitmentType::Reservation)
    } else if t.contains("commit") {
        Some(CommitmentType::Commit)
    } else {
        match category.map(str::to_ascii_lowercase).as_deref() {
            Some("usage") => Some(CommitmentType::Reservation),
            Some("spend") => Some(CommitmentType::SavingsPlan),
            _ => None,
        }
    }
}
