//! One billed charge, whatever format it came from, and the typed reading of
//! cells into it (each failure naming its column and line).

use std::borrow::Cow;
use std::collections::HashMap;

use super::read::{Cell, RowCells};
use super::{BadCell, BillError, BillFormat, BillProvider, CommitmentType, time};

/// `ChargeCategory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    Usage,
    Purchase,
    Tax,
    Credit,
    Adjustment,
}

/// The first of `names` equal to `s` ignoring case, without allocating (a
/// few of these run on every row).
fn one_of<T: Copy>(s: &str, names: &[(&str, T)]) -> Option<T> {
    names
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|(_, v)| *v)
}

impl Category {
    pub fn parse(s: &str) -> Option<Self> {
        one_of(
            s,
            &[
                ("Usage", Self::Usage),
                ("Purchase", Self::Purchase),
                ("Tax", Self::Tax),
                ("Credit", Self::Credit),
                ("Adjustment", Self::Adjustment),
            ],
        )
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Usage => "Usage",
            Self::Purchase => "Purchase",
            Self::Tax => "Tax",
            Self::Credit => "Credit",
            Self::Adjustment => "Adjustment",
        }
    }
}

/// `PricingCategory`, with the pre-1.0 names read as their successors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pricing {
    Standard,
    Dynamic,
    Committed,
    Other,
}

impl Pricing {
    pub fn parse(s: &str) -> Option<Self> {
        one_of(
            s,
            &[
                ("Standard", Self::Standard),
                ("Dynamic", Self::Dynamic),
                ("Committed", Self::Committed),
                ("Other", Self::Other),
                ("On-Demand", Self::Standard),
                ("OnDemand", Self::Standard),
                ("Spot", Self::Dynamic),
                ("Commitment-Based", Self::Committed),
            ],
        )
    }
}

/// What a row's quantity is measured in, as far as hours go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Hours,
    Seconds,
    Other,
}

impl TimeUnit {
    pub fn parse(s: &str) -> Self {
        const UNITS: &[(&str, TimeUnit)] = &[
            ("Hrs", TimeUnit::Hours),
            ("Hours", TimeUnit::Hours),
            ("Hour", TimeUnit::Hours),
            ("Hr", TimeUnit::Hours),
            ("h", TimeUnit::Hours),
            ("Seconds", TimeUnit::Seconds),
            ("Second", TimeUnit::Seconds),
            ("Secs", TimeUnit::Seconds),
            ("Sec", TimeUnit::Seconds),
            ("s", TimeUnit::Seconds),
        ];
        one_of(s.trim(), UNITS).unwrap_or(Self::Other)
    }
}

/// How a row uses a commitment: what it adds to its used and unused sides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommitmentUse<'a> {
    pub id: &'a str,
    pub kind: Option<CommitmentType>,
    /// `usage` or `spend`.
    pub category: Option<&'static str>,
    pub unit: Option<Cow<'a, str>>,
    /// A used or unused row (what `last_seen` counts), not a purchase.
    pub is_use: bool,
    /// Usage the commitment paid for (this row's hours count as covered).
    pub covers: bool,
    pub used_quantity: Option<f64>,
    pub unused_quantity: Option<f64>,
    pub used_cost: f64,
    pub unused_cost: f64,
}

/// One charge in gpuplan's terms.
#[derive(Debug, Clone)]
pub struct Charge<'a> {
    pub provider: RowProvider<'a>,
    pub billing_account: &'a str,
    pub period_start: i64,
    pub period_end: i64,
    pub start: i64,
    pub end: i64,
    pub category: Category,
    /// `ChargeClass = Correction`: corrects an earlier, invoiced period.
    pub correction: bool,
    pub pricing: Option<Pricing>,
    /// The commitment's status said `Unused`.
    pub unused: bool,
    pub billed: f64,
    pub effective: f64,
    pub currency: &'a str,
    pub quantity: Option<f64>,
    pub unit: Option<TimeUnit>,
    pub commitment: Option<CommitmentUse<'a>>,
    pub region: Option<&'a str>,
    pub sub_account: Option<&'a str>,
    pub service_category: Option<&'a str>,
    pub sku_id: Option<&'a str>,
    pub instance_type: Option<Cow<'a, str>>,
    /// `SkuPriceDetails.GpuCount`, where given.
    pub gpu_count: Option<f64>,
    /// The team a tag names.
    pub team: Option<Cow<'a, str>>,
    /// Azure's `x_PricingSubcategory = Spot`.
    pub spot: bool,
    /// Cost that belongs to usage billed on another line, never usage itself
    /// (CUR's savings-plan negation).
    pub cost_only: bool,
    /// `ChargeDescription`: what an untyped row that says it is GPU usage
    /// is reported under.
    pub description: Option<&'a str>,
    /// The description names GPUs, though no column types the row.
    pub says_gpu: bool,
}

/// What a charge's description tells of its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Described<'t> {
    /// An instance type written as AWS writes them, `family.size`
    /// (`$1.624 per On Demand Linux g5.4xlarge Instance Hour`).
    pub instance_type: Option<&'t str>,
    /// A word `GPU` or `GPUs`.
    pub gpu: bool,
}

/// Reads a `ChargeDescription`.
#[must_use]
pub fn described(text: &str) -> Described<'_> {
    let mut out = Described::default();
    for word in text.split(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | ';' | '/'))
    {
        if word.eq_ignore_ascii_case("gpu") || word.eq_ignore_ascii_case("gpus") {
            out.gpu = true;
        } else if out.instance_type.is_none() && is_instance_type(word) {
            out.instance_type = Some(word);
        }
    }
    out
}

/// `g5.4xlarge`, `p4d.24xlarge`, `u-6tb1.metal`: a family with a digit,
/// a dot, and one of EC2's sizes.
fn is_instance_type(word: &str) -> bool {
    let Some((family, size)) = word.split_once('.') else {
        return false;
    };
    let family_ok = family.starts_with(|c: char| c.is_ascii_lowercase())
        && family.bytes().any(|b| b.is_ascii_digit())
        && family
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let sized = |s: &str| {
        let n = s.trim_start_matches(|c: char| c.is_ascii_digit());
        matches!(
            n,
            "nano" | "micro" | "small" | "medium" | "large" | "xlarge"
        ) && (n == "xlarge" || n.len() == s.len())
    };
    let size_ok = sized(size)
        || size == "metal"
        || size
            .strip_prefix("metal-")
            .and_then(|x| x.strip_suffix("xl"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    family_ok && size_ok
}

/// Who billed a row: a cloud gpuplan knows the instance types of, or
/// another provider by the name the file gives it (a marketplace seller, a
/// service an aggregator adds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowProvider<'a> {
    Cloud(BillProvider),
    Other(&'a str),
}

impl<'a> RowProvider<'a> {
    /// A FOCUS `ServiceProviderName` or `ProviderName`.
    #[must_use]
    pub fn named(name: &'a str) -> Self {
        let name = name.trim();
        BillProvider::from_provider_name(name).map_or(Self::Other(name), Self::Cloud)
    }

    /// The name usage and spend are kept under.
    #[must_use]
    pub fn name(self) -> &'a str {
        match self {
            Self::Cloud(p) => p.as_str(),
            Self::Other(name) => name,
        }
    }

    #[must_use]
    pub fn cloud(self) -> Option<BillProvider> {
        match self {
            Self::Cloud(p) => Some(p),
            Self::Other(_) => None,
        }
    }
}

/// The cells of a row that vary between rows of one shape (see
/// `Focus::shape`): its times, quantity and costs.
#[derive(Debug, Clone, Copy)]
pub struct Amounts {
    pub period_start: i64,
    pub period_end: i64,
    pub start: i64,
    pub end: i64,
    pub quantity: Option<f64>,
    pub billed: f64,
    pub effective: f64,
}

/// A wanted column: its name in the file (or the first alias the file has).
pub struct Wanted {
    pub names: &'static [&'static str],
    pub required: bool,
}

/// A column every file must have.
pub const fn req(names: &'static [&'static str]) -> Wanted {
    Wanted {
        names,
        required: true,
    }
}

/// A column read where present.
pub const fn opt(names: &'static [&'static str]) -> Wanted {
    Wanted {
        names,
        required: false,
    }
}

/// Which export a header looks like, for the error when it is read as
/// another format: the format that reads it (if gpuplan has one) and what to
/// tell the user.
fn looks_like(header: &[String]) -> Option<(Option<BillFormat>, &'static str)> {
    let has = |name: &str| header.iter().any(|h| h.eq_ignore_ascii_case(name));
    if has("BilledCost") && (has("ChargePeriodStart") || has("ChargeCategory")) {
        Some((
            Some(BillFormat::Focus),
            "a FOCUS export: set `format = \"focus\"`",
        ))
    } else if has("line_item_unblended_cost") {
        Some((
            Some(BillFormat::Cur2),
            "an AWS CUR 2.0 export: set `format = \"cur2\"`",
        ))
    } else if has("lineItem/UnblendedCost") {
        Some((
            None,
            "a legacy AWS Cost and Usage Report (CUR 1.0), which gpuplan does not read: \
             export CUR 2.0 or FOCUS from AWS Data Exports",
        ))
    } else if has("CostInBillingCurrency") {
        Some((
            None,
            "an Azure cost details export, not FOCUS: export the FOCUS cost dataset \
             from Cost Management",
        ))
    } else {
        None
    }
}

/// Finds each wanted column in `header`: exact name first, then ignoring case.
///
/// # Errors
/// `File` naming the first required column the file lacks, and, when the
/// header looks like an export other than `format`, which one.
pub fn resolve(
    shown: &str,
    header: &[String],
    wanted: &[Wanted],
    format: BillFormat,
) -> Result<Vec<Option<usize>>, BillError> {
    let find = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .or_else(|| header.iter().position(|h| h.eq_ignore_ascii_case(name)))
    };
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let at = w.names.iter().find_map(|n| find(n));
        if at.is_none() && w.required {
            let mut why = format!("missing the required column {}", w.names.join(" or "));
            if let Some((other, what)) = looks_like(header)
                && other != Some(format)
            {
                why = format!("{why}; the header looks like {what}");
            }
            return Err(BillError::file(shown, why));
        }
        out.push(at);
    }
    Ok(out)
}

/// Typed reads of one row's cells, failing with file, line and column.
pub struct Cells<'r> {
    pub row: &'r dyn RowCells,
    pub shown: &'r str,
    pub names: &'r [Wanted],
}

impl<'r> Cells<'r> {
    pub fn bad(&self, i: usize, why: impl Into<String>) -> BillError {
        BillError::Cell(BadCell {
            file: self.shown.to_owned(),
            line: self.row.line(),
            column: self.names.get(i).map_or("?", |w| w.names[0]).to_owned(),
            why: why.into(),
        })
    }

    pub fn raw(&self, i: usize) -> Cell<'r> {
        self.row.cell(i)
    }

    pub fn text(&self, i: usize) -> Result<Option<&'r str>, BillError> {
        match self.row.cell(i) {
            Cell::Null => Ok(None),
            Cell::Text(t) => Ok(Some(t)),
            Cell::Num(_) | Cell::Time(_) | Cell::Pairs(_) => {
                Err(self.bad(i, "expected text, found another type"))
            }
        }
    }

    pub fn required_text(&self, i: usize) -> Result<&'r str, BillError> {
        self.text(i)?
            .ok_or_else(|| self.bad(i, "empty, but the column is required"))
    }

    pub fn number(&self, i: usize) -> Result<Option<f64>, BillError> {
        let v = match self.row.cell(i) {
            Cell::Null => return Ok(None),
            Cell::Num(n) => n,
            Cell::Text(t) => t
                .trim()
                .parse::<f64>()
                .map_err(|_| self.bad(i, format!("`{t}` is not a number")))?,
            Cell::Time(_) | Cell::Pairs(_) => return Err(self.bad(i, "expected a number")),
        };
        if v.is_finite() {
            Ok(Some(v))
        } else {
            Err(self.bad(i, format!("{v} is not a finite number")))
        }
    }

    pub fn required_number(&self, i: usize) -> Result<f64, BillError> {
        self.number(i)?
            .ok_or_else(|| self.bad(i, "empty, but the column is required"))
    }

    pub fn time(&self, i: usize) -> Result<Option<i64>, BillError> {
        match self.row.cell(i) {
            Cell::Null => Ok(None),
            Cell::Time(t) => Ok(Some(t)),
            Cell::Text(t) => time::parse(t).map(Some).map_err(|why| self.bad(i, why)),
            Cell::Num(_) | Cell::Pairs(_) => Err(self.bad(i, "expected a date and time")),
        }
    }

    pub fn required_time(&self, i: usize) -> Result<i64, BillError> {
        self.time(i)?
            .ok_or_else(|| self.bad(i, "empty, but the column is required"))
    }
}

/// A key-value cell's entries as text: strings as they are, other JSON
/// scalars as `None` (a valueless tag is `true`, which names nothing).
pub type Entries<'a> = Vec<(Cow<'a, str>, Option<Cow<'a, str>>)>;

/// Reads a key-value cell: JSON object text (CSV), or a Parquet map.
///
/// # Errors
/// The reason, when the text is not a JSON object.
pub fn entries<'a>(cell: Cell<'a>) -> Result<Entries<'a>, String> {
    match cell {
        Cell::Null => Ok(Vec::new()),
        Cell::Pairs(p) => Ok(p
            .iter()
            .map(|(k, v)| {
                (
                    Cow::Borrowed(k),
                    v.filter(|v| !v.is_empty()).map(Cow::Borrowed),
                )
            })
            .collect()),
        Cell::Text(t) => {
            let t = t.trim();
            if t.is_empty() || t == "{}" {
                return Ok(Vec::new());
            }
            let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(t)
                .map_err(|_| format!("`{}` is not a JSON object", clip(t)))?;
            Ok(map
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        serde_json::Value::String(s) if !s.is_empty() => Some(Cow::Owned(s)),
                        serde_json::Value::Number(n) => Some(Cow::Owned(n.to_string())),
                        _ => None,
                    };
                    (Cow::Owned(k), v)
                })
                .collect())
        }
        Cell::Num(_) | Cell::Time(_) => Err("expected a key-value object".to_owned()),
    }
}

/// The first of `keys` present in `pairs` with a non-empty value: the exact
/// key first, then ignoring case. `prefix` is a spelling an export adds to
/// the user's key (`user_` in CUR 2.0); either spelling matches. A valueless
/// or empty tag names nothing and the next key is tried.
pub fn first_tag<'e, I>(pairs: impl Fn() -> I, keys: &[String], prefix: &str) -> Option<&'e str>
where
    I: Iterator<Item = (&'e str, Option<&'e str>)>,
{
    let unprefixed = |k: &'e str, ignore_case: bool| -> Option<&'e str> {
        let head = k.get(..prefix.len())?;
        let same = if ignore_case {
            head.eq_ignore_ascii_case(prefix)
        } else {
            head == prefix
        };
        (!prefix.is_empty() && same).then(|| &k[prefix.len()..])
    };
    for key in keys {
        let exact = |k: &'e str| k == key || unprefixed(k, false) == Some(key.as_str());
        let loose = |k: &'e str| {
            k.eq_ignore_ascii_case(key)
                || unprefixed(k, true).is_some_and(|r| r.eq_ignore_ascii_case(key))
        };
        let found = pairs()
            .find(|(k, _)| exact(k))
            .or_else(|| pairs().find(|(k, _)| loose(k)));
        if let Some((_, Some(v))) = found {
            let v = v.trim();
            if !v.is_empty() {
                return Some(v);
            }
        }
    }
    None
}

/// [`first_tag`] over parsed entries.
#[must_use]
pub fn first_value<'e>(entries: &'e Entries<'_>, keys: &[String], prefix: &str) -> Option<&'e str> {
    first_tag(
        || entries.iter().map(|(k, v)| (k.as_ref(), v.as_deref())),
        keys,
        prefix,
    )
}

/// Long cell text cut for an error message.
fn clip(t: &str) -> String {
    if t.chars().count() > 60 {
        format!("{}…", t.chars().take(60).collect::<String>())
    } else {
        t.to_owned()
    }
}

/// A bounded memo of what a repeated cell text means (the same tag and SKU
/// JSON repeat on thousands of rows), so each text is parsed once.
pub struct Memo<V> {
    map: HashMap<String, V>,
}

/// Distinct texts kept before the memo starts over.
const MEMO_LIMIT: usize = 50_000;

impl<V: Clone> Memo<V> {
    pub fn new() -> Self {
        Self {
            map: HashMap::new(),
        }
    }

    pub fn get_or(
        &mut self,
        text: &str,
        f: impl FnOnce() -> Result<V, String>,
    ) -> Result<V, String> {
        if let Some(v) = self.map.get(text) {
            return Ok(v.clone());
        }
        let v = f()?;
        if self.map.len() >= MEMO_LIMIT {
            self.map.clear();
        }
        self.map.insert(text.to_owned(), v.clone());
        Ok(v)
    }
}

impl<V: Clone> Default for Memo<V> {
    fn default() -> Self {
        Self::new()
    }
}
