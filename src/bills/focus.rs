//! FOCUS 1.0 to 1.3 rows (and the older names OCI writes) as charges.

use std::borrow::Cow;

use super::charge::{
    Amounts, Category, Cells, Charge, CommitmentUse, Described, Entries, Memo, Pricing,
    RowProvider, TimeUnit, Wanted, described, entries, first_tag, first_value, opt, req,
};
use super::read::{Batch, Cell, MapIds};
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
const PROVIDER: usize = 28;
const DESCRIPTION: usize = 29;

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
    // 1.3 renamed `ProviderName`; a file with both has the newer one right.
    opt(&["ServiceProviderName", "ProviderName"]),
    opt(&["ChargeDescription"]),
];

/// The text columns a row's meaning depends on, besides its key-value
/// cells: everything but its amounts and times.
const SHAPED: [usize; 19] = [
    PROVIDER,
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

/// What decides a row's meaning but for its amounts and times, as one
/// number: the ids of its text cells (see [`Batch::ids`]), the ids of the
/// values its key-value maps name (the instance type, GPU count and team),
/// and whether it has a quantity, each a digit in the base of how many ids
/// it can have. Rows of one epoch with the same shape mean the same. One
/// number, since every row is hashed and compared by it.
pub type Shape = u128;

/// Shapes being written a digit at a time, every row's at once. Digits
/// gather in a word per row until the next would not fit, then go into
/// the shape: one wide multiplication a row per word, not per digit.
struct Digits<'o> {
    shapes: &'o mut [Shape],
    word: &'o mut Vec<u64>,
    /// How many values the digits in `word` can tell apart.
    word_room: u64,
    /// How many shapes all the digits so far can tell apart.
    room: Shape,
}

impl<'o> Digits<'o> {
    fn new(shapes: &'o mut [Shape], word: &'o mut Vec<u64>) -> Self {
        shapes.fill(0);
        word.clear();
        word.resize(shapes.len(), 0);
        Self {
            shapes,
            word,
            word_room: 1,
            room: 1,
        }
    }

    /// Appends each row's id from [`Batch::ids`] (below `base`, which the
    /// same call returned) to its shape.
    fn push_ids(&mut self, base: u32, ids: &[u32]) -> Option<()> {
        if base == 1 {
            // A column null in every row: nothing to tell apart.
            return Some(());
        }
        let base = u64::from(base);
        self.widen(base)?;
        for (w, &id) in self.word.iter_mut().zip(ids) {
            *w = *w * base + u64::from(id);
        }
        Some(())
    }

    /// Appends digit `digit(r)`, below `base`, to row r's shape. `None`
    /// when the shapes outgrow a [`Shape`] or a digit its base.
    fn push(&mut self, base: u64, mut digit: impl FnMut(usize) -> Option<u64>) -> Option<()> {
        self.widen(base)?;
        for (r, w) in self.word.iter_mut().enumerate() {
            let d = digit(r)?;
            if d >= base {
                return None;
            }
            *w = *w * base + d;
        }
        Some(())
    }

    /// Makes room for a digit below `base`.
    fn widen(&mut self, base: u64) -> Option<()> {
        self.room = self.room.checked_mul(Shape::from(base))?;
        self.word_room = match self.word_room.checked_mul(base) {
            Some(room) => room,
            None => {
                self.flush();
                base
            }
        };
        Some(())
    }

    /// Moves the word's digits into the shapes.
    fn flush(&mut self) {
        let room = Shape::from(self.word_room);
        for (s, w) in self.shapes.iter_mut().zip(self.word.iter_mut()) {
            *s = *s * room + Shape::from(*w);
            *w = 0;
        }
        self.word_room = 1;
    }
}

/// A batch's rows as the repeat memo reads them, a column at a time: each
/// row's shape, amounts and times.
#[derive(Default)]
pub struct BatchRows {
    shapes: Vec<Shape>,
    ids: Vec<u32>,
    words: Vec<u64>,
    /// `BilledCost`, `EffectiveCost`, the quantity.
    numbers: [Vec<Option<f64>>; 3],
    /// The billing period's start and end, the charge's start and end.
    times: [Vec<Option<i64>>; 4],
}

impl BatchRows {
    /// Reads the rows of `b`; `false` when they have no shapes (a text
    /// cell without an id, a map without dictionary values, amounts that
    /// are not numbers or times, more ids than a shape holds), and each is
    /// to be read as a row.
    pub fn read(&mut self, focus: &mut Focus<'_>, b: &Batch<'_>) -> bool {
        let [billed, effective, quantity] = &mut self.numbers;
        let [period_start, period_end, start, end] = &mut self.times;
        b.numbers(BILLED, billed)
            && b.numbers(EFFECTIVE, effective)
            && b.numbers(QUANTITY, quantity)
            && b.times(PERIOD_START, period_start)
            && b.times(PERIOD_END, period_end)
            && b.times(START, start)
            && b.times(END, end)
            && focus.shapes(b, self).is_some()
    }

    pub fn shape(&self, row: usize) -> Shape {
        self.shapes[row]
    }

    /// Row `row`'s amounts and times; `None` when one that is required is
    /// missing or a number is not finite (the row is then read in full,
    /// which says what is wrong).
    pub fn amounts(&self, row: usize) -> Option<Amounts> {
        let [billed, effective, quantity] = &self.numbers;
        let [period_start, period_end, start, end] = &self.times;
        let finite = |v: &[Option<f64>]| v[row].filter(|v| v.is_finite());
        let quantity = match quantity[row] {
            Some(_) => Some(finite(quantity)?),
            None => None,
        };
        Some(Amounts {
            period_start: period_start[row]?,
            period_end: period_end[row]?,
            start: start[row]?,
            end: end[row]?,
            quantity,
            billed: finite(billed)?,
            effective: finite(effective)?,
        })
    }
}

/// Which entry of a map gave a value: none, one with no value, or value id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Absent,
    Null,
    Value(u32),
}

impl Slot {
    fn of(value: Option<u32>) -> Self {
        value.map_or(Self::Null, Self::Value)
    }

    /// The slot as a digit below the number of value ids plus 2.
    fn digit(self) -> u64 {
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
    /// `Tags` values: 1 blank, 2 not.
    blank: Vec<u8>,
    /// `ChargeDescription` ids: 1 + the [`Roles::meaning`] of the text.
    described: Vec<u32>,
    /// The instance types descriptions name, by their place in `meanings`.
    types: foldhash::HashMap<Box<str>, u32>,
}

/// Instance types descriptions may name in one epoch before its rows are
/// read one at a time.
const DESCRIBED_TYPES: u32 = 4096;

/// How many meanings a description can have: no type or one of
/// [`DESCRIBED_TYPES`], with or without a GPU word.
const MEANINGS: u64 = 2 * (DESCRIBED_TYPES as u64 + 1);

impl Roles {
    /// What a description means to the mapping, as a number below
    /// [`MEANINGS`]; `None` past [`DESCRIBED_TYPES`] types.
    fn meaning(&mut self, d: Described<'_>) -> Option<u64> {
        let instance_type = match d.instance_type {
            None => 0,
            Some(t) => match self.types.get(t) {
                Some(&i) => i + 1,
                None => {
                    let i = u32::try_from(self.types.len()).ok()?;
                    if i >= DESCRIBED_TYPES {
                        return None;
                    }
                    self.types.insert(t.into(), i);
                    i + 1
                }
            },
        };
        Some(2 * u64::from(instance_type) + u64::from(d.gpu))
    }
}

/// Map keys with a role table entry; a map with bigger key ids leaves its
/// batch without shapes.
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
    /// Whose rows a file without a provider column holds.
    provider: BillProvider,
    team_tags: &'s [String],
    tags: Memo<Option<String>>,
    details: Memo<Details>,
    azure: Memo<Option<String>>,
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
            roles: Roles::default(),
        }
    }

    /// Each row's shape in `b`, into `rows`, whose quantities are read;
    /// `None` when the batch's rows have none (see [`BatchRows::read`]).
    fn shapes(&mut self, b: &Batch<'_>, rows: &mut BatchRows) -> Option<()> {
        let BatchRows {
            shapes,
            ids,
            words,
            numbers: [_, _, quantity],
            ..
        } = rows;
        if b.epoch() != self.roles.epoch {
            self.roles = Roles {
                epoch: b.epoch(),
                ..Roles::default()
            };
        }
        shapes.resize(b.rows(), 0);
        let mut digits = Digits::new(shapes, words);
        for col in SHAPED {
            let base = b.ids(col, ids)?;
            digits.push_ids(base, ids)?;
        }
        // Key-value cells as JSON text by their ids, maps by the ids of
        // the values they name.
        if let Some(base) = b.ids(SKU_DETAILS, ids) {
            digits.push_ids(base, ids)?;
        } else {
            let map = b.map_ids(SKU_DETAILS)?;
            let slots = u64::from(map.value_count()?) + 2;
            digits.push(slots.checked_mul(slots)?, |r| match map.row(r) {
                None => Some(0),
                Some(entries) => {
                    let (instance_type, gpus) = self.detail_ids(&map, entries)?;
                    Some(instance_type.digit() * slots + gpus.digit())
                }
            })?;
        }
        if !self.team_tags.is_empty() {
            if let Some(base) = b.ids(TAGS, ids) {
                digits.push_ids(base, ids)?;
            } else {
                let map = b.map_ids(TAGS)?;
                let base = u64::from(map.value_count()?) + 1;
                digits.push(base, |r| {
                    Some(self.team_ids(&map, r)?.map_or(0, |v| u64::from(v) + 1))
                })?;
            }
        }
        self.description_digits(b, ids, &mut digits)?;
        digits.push(2, |r| Some(u64::from(quantity[r].is_some())))?;
        digits.flush();
        Some(())
    }

    /// Each row's description as what it means to the mapping (its type
    /// and GPU word), not as its text: AWS writes a price into each, so
    /// the texts outnumber their meanings.
    fn description_digits(
        &mut self,
        b: &Batch<'_>,
        ids: &mut Vec<u32>,
        digits: &mut Digits<'_>,
    ) -> Option<()> {
        // A file's columns are its header's: one without descriptions
        // spends no digit on them.
        if !b.has(DESCRIPTION) {
            return Some(());
        }
        let roles = &mut self.roles;
        if b.ids(DESCRIPTION, ids).is_some() {
            // A dictionary: each distinct text read once an epoch.
            return digits.push(MEANINGS, |r| {
                let id = ids[r];
                if id == 0 {
                    return Some(0);
                }
                let at = id as usize;
                if roles.described.len() <= at {
                    roles.described.resize(at + 1, 0);
                }
                if roles.described[at] == 0 {
                    let text = b.id_text(DESCRIPTION, id)?;
                    roles.described[at] =
                        u32::try_from(roles.meaning(described(text))? + 1).ok()?;
                }
                Some(u64::from(roles.described[at] - 1))
            });
        }
        digits.push(MEANINGS, |r| match b.cell(DESCRIPTION, r) {
            Cell::Text(t) => roles.meaning(described(t)),
            Cell::Null => Some(0),
            _ => None,
        })
    }

    /// The ids of the values [`Focus::details`] reads from a map's
    /// entries: its last `InstanceType` and `GpuCount` entries.
    fn detail_ids(
        &mut self,
        map: &MapIds<'_>,
        entries: impl Iterator<Item = (u32, Option<u32>)>,
    ) -> Option<(Slot, Slot)> {
        let (mut instance_type, mut gpus) = (Slot::Absent, Slot::Absent);
        for (k, v) in entries {
            if k >= ROLE_LIMIT {
                return None;
            }
            let at = k as usize;
            if self.roles.details.len() <= at {
                self.roles.details.resize(at + 1, 0);
            }
            if self.roles.details[at] == 0 {
                let key = map.key_text(k)?;
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
        Some((instance_type, gpus))
    }

    /// The id of the value [`first_tag`] takes from row `r` of a map: for
    /// each team tag in turn, the first entry with exactly its key, else
    /// the first ignoring case, if its value is not blank. `Some(None)`
    /// when no entry gives a team (or the cell is null), `None` when a key
    /// id is too big for the role table.
    fn team_ids(&mut self, map: &MapIds<'_>, r: usize) -> Option<Option<u32>> {
        let keys = self.team_tags;
        if keys.len() > 64 {
            return None;
        }
        let Some(entries) = map.row(r) else {
            return Some(None);
        };
        let roles = &mut self.roles;
        for (k, _) in entries.clone() {
            if k >= ROLE_LIMIT {
                return None;
            }
            let at = k as usize;
            if roles.tags.len() <= at {
                roles.tags.resize(at + 1, None);
            }
            if roles.tags[at].is_none() {
                let text = map.key_text(k)?;
                let (mut exact, mut loose) = (0u64, 0u64);
                for (i, key) in keys.iter().enumerate() {
                    if text == key {
                        exact |= 1 << i;
                    }
                    if text.eq_ignore_ascii_case(key) {
                        loose |= 1 << i;
                    }
                }
                roles.tags[at] = Some((exact, loose));
            }
        }
        let role = |k: u32| {
            roles
                .tags
                .get(k as usize)
                .copied()
                .flatten()
                .unwrap_or((0, 0))
        };
        for i in 0..keys.len() {
            let bit = 1u64 << i;
            let found = entries
                .clone()
                .find(|(k, _)| role(*k).0 & bit != 0)
                .or_else(|| entries.clone().find(|(k, _)| role(*k).1 & bit != 0));
            let Some((_, Some(v))) = found else {
                continue;
            };
            // Whether each value is blank, worked out once an epoch.
            let at = usize::try_from(v).ok()?;
            if roles.blank.len() <= at {
                roles.blank.resize(at + 1, 0);
            }
            if roles.blank[at] == 0 {
                let blank = map.value_text(v)?.trim().is_empty();
                roles.blank[at] = if blank { 1 } else { 2 };
            }
            if roles.blank[at] == 2 {
                return Some(Some(v));
            }
        }
        Some(None)
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

        let provider = c
            .text(PROVIDER)?
            .map_or(RowProvider::Cloud(self.provider), RowProvider::named);
        let cloud = provider.cloud();
        let (mut instance_type, gpu_count) = self.details(c, SKU_DETAILS)?;
        if cloud == Some(BillProvider::Azure)
            && let Some(t) = self.azure_size(c)?
        {
            instance_type = Some(Cow::Owned(t));
        }
        let description = c.text(DESCRIPTION)?;
        let told = description.map(described).unwrap_or_default();
        if instance_type.is_none() && cloud == Some(BillProvider::Aws) {
            instance_type = c
                .text(USAGE_TYPE)?
                .and_then(|u| u.rsplit_once(':'))
                .map(|(_, t)| t.trim())
                .filter(|t| !t.is_empty())
                .or(told.instance_type)
                .map(Cow::Borrowed);
        }
        let team = self.team(c)?;

        let commitment = match c.text(C_ID)? {
            None => None,
            Some(id) => {
                let kind = commitment_type(cloud, c.text(C_TYPE)?, id, c.text(C_CATEGORY)?);
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
            provider,
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
            description,
            says_gpu: told.gpu,
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

/// A commitment's kind from its type text (matched loosely: every cloud
/// words it its own way), else its id, else its category.
fn commitment_type(
    provider: Option<BillProvider>,
    type_text: Option<&str>,
    id: &str,
    category: Option<&str>,
) -> Option<CommitmentType> {
    if provider == Some(BillProvider::Gcp) {
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

#[cfg(test)]
mod tests {
    use super::{Digits, Shape};

    #[test]
    fn digits_past_a_word_are_each_rows_number_in_mixed_radix_and_too_many_fail() {
        // Bases whose product passes 2^64 after the third: the word is
        // moved into the shapes once, and every row's shape is still the
        // number its digits spell.
        let bases: [u64; 5] = [1_000_003, 65_537, 4_294_967_311, 7, 1];
        let rows: Vec<[u64; 5]> = vec![
            [0, 0, 0, 0, 0],
            [1_000_002, 65_536, 4_294_967_310, 6, 0],
            [17, 3, 99, 2, 0],
            [17, 3, 99, 3, 0],
        ];
        let (mut shapes, mut word) = (vec![0; rows.len()], Vec::new());
        let mut digits = Digits::new(&mut shapes, &mut word);
        for (i, base) in bases.into_iter().enumerate() {
            digits.push(base, |r| Some(rows[r][i])).unwrap();
        }
        digits.flush();
        let spelled: Vec<Shape> = rows
            .iter()
            .map(|row| {
                row.iter()
                    .zip(bases)
                    .fold(0, |n, (&d, base)| n * Shape::from(base) + Shape::from(d))
            })
            .collect();
        assert_eq!(shapes, spelled);
        assert_eq!(shapes[3], shapes[2] + 1);

        // A digit not below its base, and more digits than 128 bits hold.
        let (mut shapes, mut word) = (vec![0; 2], Vec::new());
        let mut digits = Digits::new(&mut shapes, &mut word);
        assert!(
            digits
                .push(3, |r| Some(if r == 1 { 3 } else { 0 }))
                .is_none()
        );
        let (mut shapes, mut word) = (vec![0; 2], Vec::new());
        let mut digits = Digits::new(&mut shapes, &mut word);
        let wide = u64::MAX / 3;
        assert!(digits.push(wide, |_| Some(1)).is_some());
        assert!(digits.push(wide, |_| Some(1)).is_some());
        assert!(digits.push(wide, |_| Some(1)).is_none());
        // Ids of a column null in every row add nothing.
        let (mut shapes, mut word) = (vec![0; 2], Vec::new());
        let mut digits = Digits::new(&mut shapes, &mut word);
        digits.push_ids(1, &[0, 0]).unwrap();
        digits.push_ids(5, &[4, 2]).unwrap();
        digits.flush();
        assert_eq!(shapes, [4, 2]);
    }
}
