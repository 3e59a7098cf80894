//! `GET /ui/prices`: the offer table. The view lives in the query string
//! (filters, unit, period, sort, columns), so a URL reproduces it and the
//! browser's back and forward buttons work; `format=csv` and `format=json`
//! export exactly the rows shown.

use std::borrow::Cow;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::{Value, json};

use super::{PageError, layout, money};
use gpuplan_providers::gpu::{count_json, count_label};

use crate::catalog::{self, CatalogRecord};
use crate::daemon::http::error::ApiError;
use crate::daemon::http::params::Params;
use crate::daemon::http::state::{
    AppState, PRICE_FILTERS, current_records, price_filter, ranked, read_in,
};

/// Every column, in order: (name, heading). `price` is in the chosen unit
/// and period.
const COLUMNS: &[(&str, &str)] = &[
    ("provider", "Provider"),
    ("region", "Region"),
    ("zone", "Zone"),
    ("instance_type", "Instance"),
    ("gpu_model", "GPU"),
    ("gpu_form_factor", "Form"),
    ("gpu_count", "GPUs"),
    ("gpu_memory_gib", "GiB/GPU"),
    ("vcpus", "vCPUs"),
    ("memory_gib", "RAM GiB"),
    ("price_kind", "Kind"),
    ("window_start", "Window start (UTC)"),
    ("window_end", "Window end (UTC)"),
    ("window_hours", "Window hours"),
    ("instance_count", "Instances"),
    ("price", "Price"),
    ("upfront_usd", "Upfront USD"),
    ("usd_per_gpu_hour", "USD/GPU-h"),
    ("work_factor", "Work factor"),
    ("usd_per_reference_gpu_hour", "USD/reference GPU-h"),
    ("kgco2e_per_hour", "kgCO2e/h"),
    ("stale", "Stale"),
];

const DEFAULT_COLUMNS: &[&str] = &[
    "provider",
    "region",
    "zone",
    "instance_type",
    "gpu_model",
    "gpu_form_factor",
    "gpu_count",
    "price_kind",
    "price",
    "kgco2e_per_hour",
];

/// The most priced windows listed under the table, soonest first.
const MAX_WINDOWS_SHOWN: usize = 200;

/// Rows per page unless `per_page` says otherwise, and the most it may say.
const DEFAULT_PER_PAGE: usize = 100;
const MAX_PER_PAGE: usize = 5000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Instance,
    Gpu,
    GpuGib,
}

/// How the table is shown, from the query string.
struct View {
    unit: Unit,
    /// Hours in the chosen period (1, 24, 730, 8760) and its name.
    period: (f64, &'static str),
    sort: String,
    descending: bool,
    columns: Vec<&'static str>,
    min_gpus: Option<f64>,
    max_gpus: Option<f64>,
    min_memory: Option<f64>,
    max_memory: Option<f64>,
    format: Option<String>,
    /// 1-based.
    page: usize,
    per_page: usize,
    /// Prices per unit of work: a workload against a reference GPU.
    work: Option<crate::facts::Work<'static>>,
    /// The workload and reference GPU `work` was made of.
    work_names: Option<String>,
}

const VIEW_PARAMS: &[&str] = &[
    "unit",
    "period",
    "sort",
    "dir",
    "cols",
    "min_gpus",
    "max_gpus",
    "min_gpu_memory_gib",
    "max_gpu_memory_gib",
    "format",
    "page",
    "per_page",
    "per_work",
    "reference",
];

fn view(p: &Params) -> Result<View, ApiError> {
    let unit = match p.one("unit")?.as_deref() {
        None | Some("instance") => Unit::Instance,
        Some("gpu") => Unit::Gpu,
        Some("gib") => Unit::GpuGib,
        Some(other) => {
            return Err(ApiError::bad_parameter(
                "unit",
                format!("`{other}` is not one of instance, gpu, gib"),
            ));
        }
    };
    let period = match p.one("period")?.as_deref() {
        None | Some("hour") => (1.0, "hour"),
        Some("day") => (24.0, "day"),
        Some("month") => (730.0, "month"),
        Some("year") => (8760.0, "year"),
        Some(other) => {
            return Err(ApiError::bad_parameter(
                "period",
                format!("`{other}` is not one of hour, day, month, year"),
            ));
        }
    };
    let column = |name: &str, key: &str| {
        COLUMNS
            .iter()
            .find(|(c, _)| *c == name)
            .map(|(c, _)| *c)
            .ok_or_else(|| {
                ApiError::bad_parameter(
                    key,
                    format!(
                        "`{name}` is not a column; columns: {}",
                        COLUMNS
                            .iter()
                            .map(|(c, _)| *c)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    };
    let (work, work_names) = match p.one("per_work")?.filter(|w| !w.is_empty()) {
        Some(w) => {
            let reference = p
                .one("reference")?
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| crate::facts::DEFAULT_REFERENCE.to_owned());
            let facts = crate::facts::builtin().map_err(|e| ApiError::internal(e))?;
            let work = facts
                .work(&w, &reference)
                .map_err(|e| ApiError::bad_parameter("per_work", e))?;
            (Some(work), Some(format!("{w}\n{reference}")))
        }
        None => (None, None),
    };
    // Per unit of work, the table sorts by it unless told otherwise.
    let default_sort = if work.is_some() {
        "usd_per_reference_gpu_hour"
    } else {
        "price"
    };
    let sort = column(
        &p.one("sort")?.unwrap_or_else(|| default_sort.to_owned()),
        "sort",
    )?
    .to_owned();
    let descending = match p.one("dir")?.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => {
            return Err(ApiError::bad_parameter(
                "dir",
                format!("`{other}` is not asc or desc"),
            ));
        }
    };
    let mut columns = p
        .all("cols")
        .iter()
        .map(|c| column(c, "cols"))
        .collect::<Result<Vec<_>, _>>()?;
    if columns.is_empty() {
        columns = DEFAULT_COLUMNS.to_vec();
        if work.is_some() {
            columns.extend(["work_factor", "usd_per_reference_gpu_hour"]);
        }
    }
    let format = p.one("format")?;
    if let Some(f) = format
        .as_deref()
        .filter(|f| !matches!(*f, "csv" | "json" | "html"))
    {
        return Err(ApiError::bad_parameter(
            "format",
            format!("`{f}` is not csv, json or html"),
        ));
    }
    let non_negative = |key: &str| -> Result<Option<f64>, ApiError> {
        let v = p.parsed::<f64>(key, "a number")?;
        if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
            return Err(ApiError::bad_parameter(key, "must be a number >= 0"));
        }
        Ok(v)
    };
    Ok(View {
        unit,
        period,
        sort,
        descending,
        columns,
        min_gpus: non_negative("min_gpus")?,
        max_gpus: non_negative("max_gpus")?,
        min_memory: non_negative("min_gpu_memory_gib")?,
        max_memory: non_negative("max_gpu_memory_gib")?,
        format: format.filter(|f| f != "html"),
        work,
        work_names,
        page: match p.parsed::<usize>("page", "a page number")? {
            None => 1,
            Some(n @ 1..) => n,
            Some(_) => return Err(ApiError::bad_parameter("page", "pages start at 1")),
        },
        per_page: match p.parsed::<usize>("per_page", "a number of rows")? {
            None => DEFAULT_PER_PAGE,
            Some(n @ 1..=MAX_PER_PAGE) => n,
            Some(_) => {
                return Err(ApiError::bad_parameter(
                    "per_page",
                    format!("must be between 1 and {MAX_PER_PAGE}"),
                ));
            }
        },
    })
}

impl View {
    /// The view keeps every record its filter keeps.
    fn keeps_all(&self) -> bool {
        self.min_gpus.is_none()
            && self.max_gpus.is_none()
            && self.min_memory.is_none()
            && self.max_memory.is_none()
    }

    /// Where the page's rows start and end among all the rows.
    fn rows(&self) -> (usize, usize) {
        let start = (self.page - 1).saturating_mul(self.per_page);
        (start, start.saturating_add(self.per_page))
    }

    /// What the table's order depends on: equal keys, equal orders.
    fn order_key(&self) -> String {
        format!(
            "prices\n{}\n{}\n{}\n{}\n{}",
            match self.unit {
                Unit::Instance => "instance",
                Unit::Gpu => "gpu",
                Unit::GpuGib => "gib",
            },
            self.period.1,
            self.sort,
            self.descending,
            self.work_names.as_deref().unwrap_or(""),
        )
    }

    fn keeps(&self, r: &CatalogRecord) -> bool {
        let memory = r.gpu_memory_gib;
        self.min_gpus.is_none_or(|m| r.gpu_count >= m)
            && self.max_gpus.is_none_or(|m| r.gpu_count <= m)
            && self
                .min_memory
                .is_none_or(|m| memory.is_some_and(|g| g >= m))
            && self
                .max_memory
                .is_none_or(|m| memory.is_some_and(|g| g <= m))
    }

    /// The price in the view's unit and period, or why there is none.
    fn price(&self, r: &CatalogRecord) -> Result<f64, &'static str> {
        let hourly = match self.unit {
            Unit::Instance => r.usd_per_hour,
            Unit::Gpu => r.usd_per_gpu_hour,
            Unit::GpuGib => match r.instance_gpu_memory_gib() {
                Some(gib) if gib > 0.0 => r.usd_per_hour / gib,
                _ => return Err("GPU memory unknown"),
            },
        };
        Ok(hourly * self.period.0)
    }

    /// The record's factor on the view's workload, if it asks for one.
    fn factor(&self, r: &CatalogRecord) -> Option<f64> {
        self.work
            .as_ref()?
            .ratio(&r.gpu_model, r.gpu_form_factor.as_deref())
    }

    fn price_heading(&self) -> String {
        let per = match self.unit {
            Unit::Instance => "instance",
            Unit::Gpu => "GPU",
            Unit::GpuGib => "GiB of GPU memory",
        };
        format!("USD per {per} per {}", self.period.1)
    }
}

/// A cell's value as JSON, which the table, the CSV and the JSON all show.
fn cell(view: &View, r: &CatalogRecord, column: &str) -> Value {
    match column {
        "provider" => json!(r.provider),
        "region" => json!(r.region),
        "zone" => json!(r.zone),
        "instance_type" => json!(r.instance_type),
        "gpu_model" => json!(r.gpu_model),
        "gpu_form_factor" => json!(r.gpu_form_factor),
        "gpu_count" => count_json(r.gpu_count),
        "gpu_memory_gib" => json!(r.gpu_memory_gib),
        "vcpus" => json!(r.vcpus),
        "memory_gib" => json!(r.memory_gib),
        "price_kind" => match &r.offering_class {
            Some(class) => json!(format!("{} ({class})", r.price_kind)),
            None => json!(r.price_kind),
        },
        "window_start" => json!(r.window_start),
        "window_end" => json!(r.window_end),
        "window_hours" => json!(r.window_hours),
        "instance_count" => json!(r.instance_count),
        "price" => view.price(r).map_or(Value::Null, |v| json!(v)),
        "upfront_usd" => json!(r.upfront_usd),
        "usd_per_gpu_hour" => json!(r.usd_per_gpu_hour),
        "work_factor" => view.factor(r).map_or(Value::Null, |f| json!(f)),
        "usd_per_reference_gpu_hour" => view
            .factor(r)
            .map_or(Value::Null, |f| json!(r.usd_per_gpu_hour / f)),
        "kgco2e_per_hour" => json!(r.kgco2e_per_hour),
        "stale" => json!(r.stale),
        _ => Value::Null,
    }
}

/// A cell reduced to what sorting compares.
enum SortKey<'a> {
    Number(f64),
    Text(Cow<'a, str>),
    Missing,
}

impl<'a> SortKey<'a> {
    fn of(view: &View, r: &'a CatalogRecord) -> Self {
        // Text columns are compared in place: the whole catalog may be sorted.
        let text =
            |s: Option<&'a String>| s.map_or(Self::Missing, |s| Self::Text(Cow::Borrowed(s)));
        match view.sort.as_str() {
            "provider" => text(Some(&r.provider)),
            "region" => text(Some(&r.region)),
            "zone" => text(r.zone.as_ref()),
            "instance_type" => text(Some(&r.instance_type)),
            "gpu_model" => text(Some(&r.gpu_model)),
            "gpu_form_factor" => text(r.gpu_form_factor.as_ref()),
            // The usual sorts, without building a cell for every offer.
            "price" => Self::number(view.price(r).ok()),
            "usd_per_gpu_hour" => Self::number(Some(r.usd_per_gpu_hour)),
            _ => match cell(view, r, &view.sort) {
                Value::Null => Self::Missing,
                Value::Number(n) => Self::Number(n.as_f64().unwrap_or(0.0)),
                Value::String(s) => Self::Text(Cow::Owned(s)),
                other => Self::Text(Cow::Owned(other.to_string())),
            },
        }
    }
}

impl SortKey<'_> {
    /// A number as its cell compares: JSON has no infinities nor NaN, so
    /// those are missing.
    fn number(v: Option<f64>) -> Self {
        v.filter(|v| v.is_finite())
            .map_or(Self::Missing, Self::Number)
    }
}

/// Orders `rows` by the view's column far enough that the first `upto` are
/// the table's first rows in order (the rest follow in no order): a page
/// needs only its own rows sorted. Missing values go last either way, and
/// equal values follow the catalog's order (then their place in `rows`), so
/// pages continue each other.
fn sort(view: &View, rows: &mut Vec<&CatalogRecord>, upto: usize) {
    *rows = order(view, rows, upto)
        .into_iter()
        .map(|i| rows[i])
        .collect();
}

/// [`sort`] as positions in `rows`.
fn order(view: &View, rows: &[&CatalogRecord], upto: usize) -> Vec<usize> {
    let mut keyed: Vec<(SortKey, usize, &CatalogRecord)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (SortKey::of(view, r), i, *r))
        .collect();
    let compare = |(a, i, x): &(SortKey, usize, &CatalogRecord),
                   (b, j, y): &(SortKey, usize, &CatalogRecord)| {
        let order = match (a, b) {
            (SortKey::Missing, SortKey::Missing) => std::cmp::Ordering::Equal,
            (SortKey::Missing, _) => return std::cmp::Ordering::Greater,
            (_, SortKey::Missing) => return std::cmp::Ordering::Less,
            (SortKey::Number(x), SortKey::Number(y)) => x.total_cmp(y),
            (SortKey::Text(x), SortKey::Text(y)) => x.cmp(y),
            (SortKey::Number(_), SortKey::Text(_)) => std::cmp::Ordering::Less,
            (SortKey::Text(_), SortKey::Number(_)) => std::cmp::Ordering::Greater,
        };
        let order = if view.descending {
            order.reverse()
        } else {
            order
        };
        order
            .then_with(|| catalog::catalog_order(x, y))
            .then(i.cmp(j))
    };
    if upto > 0 && upto < keyed.len() {
        keyed.select_nth_unstable_by(upto - 1, compare);
        keyed[..upto].sort_unstable_by(compare);
    } else {
        keyed.sort_unstable_by(compare);
    }
    keyed.into_iter().map(|(_, i, _)| i).collect()
}

/// Priced windows soonest first (then in the catalog's order).
fn window_order(a: &CatalogRecord, b: &CatalogRecord) -> std::cmp::Ordering {
    (a.window_start, a.window_end)
        .cmp(&(b.window_start, b.window_end))
        .then_with(|| catalog::catalog_order(a, b))
}

/// Positions of `all` as a table sorted by `view` shows them.
fn rank_rows(view: &View, all: &[&CatalogRecord]) -> Vec<u32> {
    order(view, all, all.len())
        .into_iter()
        .map(position)
        .collect()
}

/// Positions of the records of `all` with a priced window, soonest first.
fn rank_windows(all: &[&CatalogRecord]) -> Vec<u32> {
    let mut windows: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].window_start.is_some())
        .collect();
    windows.sort_by(|&i, &j| window_order(all[i], all[j]));
    windows.into_iter().map(position).collect()
}

fn position(i: usize) -> u32 {
    // A catalog of four billion offers is not one memory could hold.
    u32::try_from(i).expect("fewer than 2^32 records")
}

/// The records at `order`'s positions that `keep` keeps (all of them
/// without one): how many in all, and the `start..end` of them.
fn walk<'a>(
    order: &[u32],
    at: impl Fn(u32) -> &'a CatalogRecord,
    keep: Option<&dyn Fn(&CatalogRecord) -> bool>,
    (start, end): (usize, usize),
) -> (usize, Vec<&'a CatalogRecord>) {
    let Some(keep) = keep else {
        let (start, end) = (start.min(order.len()), end.min(order.len()));
        return (
            order.len(),
            order[start..end].iter().map(|&i| at(i)).collect(),
        );
    };
    let mut total = 0;
    let mut shown = Vec::new();
    for &i in order {
        let r = at(i);
        if keep(r) {
            if (start..end).contains(&total) {
                shown.push(r);
            }
            total += 1;
        }
    }
    (total, shown)
}

/// `view`'s page of `rows` (the records it shows, in no order), sorted here.
fn sorted_page<'a>(view: &View, mut rows: Vec<&'a CatalogRecord>) -> Page<'a> {
    let total = rows.len();
    let (start, end) = view.rows();
    let (start, end) = (start.min(total), end.min(total));
    sort(view, &mut rows, end);
    let mut windows: Vec<&CatalogRecord> = rows
        .iter()
        .copied()
        .filter(|r| r.window_start.is_some())
        .collect();
    windows.sort_by(|a, b| window_order(a, b));
    windows.truncate(MAX_WINDOWS_SHOWN);
    Page {
        shown: rows[start..end].to_vec(),
        total,
        windows,
    }
}

/// `view`'s page of the records `keep` keeps (all of them without it),
/// walking kept orders of every record (`rows` as the view sorts them,
/// `windows` soonest first) whose positions `at` looks up.
fn walked_page<'a>(
    view: &View,
    (rows, windows): (&[u32], &[u32]),
    at: impl Fn(u32) -> &'a CatalogRecord + Copy,
    keep: Option<&dyn Fn(&CatalogRecord) -> bool>,
) -> Page<'a> {
    let (total, shown) = walk(rows, at, keep, view.rows());
    let (_, windows) = walk(windows, at, keep, (0, MAX_WINDOWS_SHOWN));
    Page {
        shown,
        total,
        windows,
    }
}

/// The orders of the whole market a table of it walks.
struct Ranks {
    rows: Arc<[u32]>,
    windows: Arc<[u32]>,
}

pub async fn page(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, PageError> {
    let p = Params::parse(uri.query(), &[PRICE_FILTERS, VIEW_PARAMS].concat())?;
    let filter = price_filter(&p)?;
    let view = Arc::new(view(&p)?);
    // A GPU's offers are a few thousand, sorted as asked; the whole market
    // (or a provider's, a region's) is put in order once per state of the
    // catalog, and a page of it is a walk.
    let whole = filter.gpus.is_empty();
    let (records, ranks) = read_in(&state, {
        let view = view.clone();
        move |store, fresh, state, generation| {
            let records = current_records(store, &fresh, state, generation)?;
            let ranks = if whole {
                Some(Ranks {
                    rows: ranked(&state.cache, &records, &view.order_key(), |r| {
                        rank_rows(&view, &r.all().collect::<Vec<_>>())
                    })?,
                    windows: ranked(&state.cache, &records, "windows", |r| {
                        rank_windows(&r.all().collect::<Vec<_>>())
                    })?,
                })
            } else {
                None
            };
            Ok((records, ranks))
        }
    })
    .await?;
    let keep = |r: &CatalogRecord| filter.matches(r) && view.keeps(r);
    let page = match &ranks {
        Some(ranks) => walked_page(
            &view,
            (&ranks.rows, &ranks.windows),
            |i| records.at(i),
            (!filter.is_empty() || !view.keeps_all()).then_some(&keep),
        ),
        None => sorted_page(
            &view,
            records
                .filtered(&filter)
                .filter(|r| view.keeps(r))
                .collect(),
        ),
    };
    Ok(match view.format.as_deref() {
        Some("csv") => csv(&view, &page.shown),
        Some("json") => json_rows(&view, &page.shown),
        _ => html_page(&view, &page, &p, uri.query().unwrap_or("")),
    })
}

fn csv(view: &View, rows: &[&CatalogRecord]) -> Response {
    let mut out = view.columns.join(",");
    out.push('\n');
    for r in rows {
        let line: Vec<String> = view
            .columns
            .iter()
            .map(|c| match cell(view, r, c) {
                Value::Null => String::new(),
                Value::String(s) => csv_field(&s),
                v => v.to_string(),
            })
            .collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"gpuplan-prices.csv\"",
            ),
        ],
        out,
    )
        .into_response()
}

/// A CSV field, quoted when it holds a comma, quote or line break, and with
/// a leading `=`, `+`, `-` or `@` defused so that a spreadsheet does not run
/// a provider's string as a formula.
pub(super) fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s.to_owned()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn json_rows(view: &View, rows: &[&CatalogRecord]) -> Response {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            view.columns
                .iter()
                .map(|c| ((*c).to_owned(), cell(view, r, c)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        })
        .collect();
    (
        [(header::CONTENT_TYPE, "application/json")],
        json!({
            "unit": view.price_heading(),
            "columns": view.columns,
            "rows": rows,
        })
        .to_string(),
    )
        .into_response()
}

/// The table's URL: `query` with each key of `set` given its value (every
/// other value of those keys, and any export format, dropped).
fn link(query: &str, set: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .filter(|(k, _)| k != "format" && !set.iter().any(|(key, _)| key == k))
        .collect();
    pairs.extend(set.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let encoded = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    format!("/ui/prices?{encoded}")
}

/// What one HTML page shows: its rows of the table, how many rows the
/// whole table has, and the priced windows among them.
struct Page<'a> {
    shown: Vec<&'a CatalogRecord>,
    total: usize,
    windows: Vec<&'a CatalogRecord>,
}

fn html_page(view: &View, page: &Page<'_>, p: &Params, query: &str) -> Response {
    // The workloads to price by: the measured ones, then datasheet ratios.
    let workloads: Vec<String> = crate::facts::builtin()
        .map(|f| {
            crate::facts::workloads(&f.perf)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain(["spec:bf16", "spec:fp8", "spec:fp16"].map(str::to_owned))
        .collect();
    let (shown, total) = (&page.shown, page.total);
    let when = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or_else(
            || "—".to_owned(),
            |t| t.format("%Y-%m-%d %H:%M").to_string(),
        )
    };
    let value = |key: &str| p.all(key).join(",");
    let pages = total.div_ceil(view.per_page).max(1);
    let heading = |column: &str, label: &str| -> Markup {
        let dir = if view.sort == column && !view.descending {
            "desc"
        } else {
            "asc"
        };
        let label = if column == "price" {
            view.price_heading()
        } else {
            label.to_owned()
        };
        let arrow = match (view.sort == column, view.descending) {
            (true, false) => " ▲",
            (true, true) => " ▼",
            _ => "",
        };
        let target = link(query, &[("sort", column), ("dir", dir)]);
        html! { th { a href=(target) { (label) (arrow) } } }
    };
    let body = html! {
        h1 { "Prices" }
        form.filters method="get" action="/ui/prices" {
            label { "GPU " input name="gpu" value=(value("gpu")) placeholder="H100, A10G"; }
            label { "Provider " input name="provider" value=(value("provider")) placeholder="aws, azure"; }
            label { "Region " input name="region" value=(value("region")); }
            label { "Kind " input name="kind" value=(value("kind")) placeholder="on_demand, spot"; }
            label { "Form " input name="form_factor" value=(value("form_factor")) placeholder="sxm, pcie, nvl" size="6"; }
            label { "Max USD/GPU-h " input name="max_usd_per_gpu_hour" value=(value("max_usd_per_gpu_hour")) size="6"; }
            label { "Country " input name="country" value=(value("country")) placeholder="DE, FR" size="6"; }
            label { "Per work "
                select name="per_work" {
                    option value="" selected[value("per_work").is_empty()] { "per GPU-hour only" }
                    @for w in &workloads {
                        option value=(w) selected[value("per_work") == *w] { (w) }
                    }
                }
            }
            label { "Reference " input name="reference" value=(value("reference")) placeholder=(crate::facts::DEFAULT_REFERENCE) size="12"; }
            label { "GPUs " input name="min_gpus" value=(value("min_gpus")) size="3"; " – " input name="max_gpus" value=(value("max_gpus")) size="3"; }
            label { "GiB/GPU " input name="min_gpu_memory_gib" value=(value("min_gpu_memory_gib")) size="4"; " – " input name="max_gpu_memory_gib" value=(value("max_gpu_memory_gib")) size="4"; }
            label { "Unit "
                select name="unit" {
                    @for (v, l) in [("instance", "per instance"), ("gpu", "per GPU"), ("gib", "per GiB of GPU memory")] {
                        option value=(v) selected[value("unit") == v || (v == "instance" && value("unit").is_empty())] { (l) }
                    }
                }
            }
            label { "Period "
                select name="period" {
                    @for v in ["hour", "day", "month", "year"] {
                        option value=(v) selected[view.period.1 == v] { (v) }
                    }
                }
            }
            input type="hidden" name="sort" value=(view.sort);
            input type="hidden" name="dir" value=(if view.descending { "desc" } else { "asc" });
            details.columns {
                summary { "Columns" }
                @for (c, l) in COLUMNS {
                    label { input type="checkbox" name="cols" value=(c) checked[view.columns.contains(c)]; " " (l) }
                }
            }
            button type="submit" { "Show" }
        }
        @if let Some(work) = &view.work {
            p.note {
                "Per work: " (work.workload()) " against " (work.reference())
                @if work.is_estimate() { ", estimated from datasheet figures" } @else { ", the best published per-GPU result of each model" }
                ". A work factor is a GPU's work per hour over the reference's; "
                code { "gpuplan prices --per-work … --json" } " names the rows."
            }
        }
        p.export {
            (total) " offers"
            @if pages > 1 {
                " · page " (view.page) " of " (pages)
                @if view.page > 1 { " · " a rel="prev" href=(link(query, &[("page", &(view.page - 1).to_string())])) { "previous" } }
                @if view.page < pages { " · " a rel="next" href=(link(query, &[("page", &(view.page + 1).to_string())])) { "next" } }
            }
            " · export these rows: " a href=(link(query, &[("format", "csv")])) { "CSV" }
            " · " a href=(link(query, &[("format", "json")])) { "JSON" }
        }
        table.prices id="prices" {
            thead { tr {
                @for c in &view.columns {
                    (heading(c, COLUMNS.iter().find(|(n, _)| n == c).map_or("", |(_, l)| l)))
                }
            } }
            tbody {
                @for r in shown {
                    tr {
                        @for c in &view.columns {
                            @match *c {
                                "price" => td.num { (money(view.price(r).ok(), view.price(r).err().unwrap_or(""))) },
                                "upfront_usd" | "usd_per_gpu_hour" | "usd_per_reference_gpu_hour" => td.num { (money(cell(view, r, c).as_f64(), "no figure for this GPU")) },
                                "work_factor" => td.num { (cell(view, r, c).as_f64().map_or_else(|| "—".to_owned(), |f| format!("{f:.3}"))) },
                                "kgco2e_per_hour" => td.num { (cell(view, r, c).as_f64().map_or_else(|| "—".to_owned(), |k| format!("{k:.3}"))) },
                                "window_start" => td { (when(r.window_start)) },
                                "window_end" => td { (when(r.window_end)) },
                                "window_hours" => td.num { (r.window_hours.map_or_else(|| "—".to_owned(), |h| format!("{h:.2}"))) },
                                "stale" => td { @if r.stale { span.badge.stale { "stale" } } },
                                "gpu_count" => td.num { (count_label(r.gpu_count)) },
                                "gpu_model" if r.gpu_count < 1.0 => td {
                                    span title=(format!("a slice: {} of one {}", count_label(r.gpu_count), r.gpu_model)) {
                                        (count_label(r.gpu_count)) " " (r.gpu_model)
                                    }
                                    @if let Some(profile) = &r.mig_profile { " (MIG " (profile) ")" }
                                },
                                _ => td { (match cell(view, r, c) { Value::String(s) => s, Value::Null => "—".to_owned(), v => v.to_string() }) },
                            }
                        }
                    }
                }
            }
        }
        @if !page.windows.is_empty() {
            h2 { "Capacity windows" }
            p { "Fixed windows among these offers (Capacity Blocks), soonest first: paid up front, for exactly these hours. "
                code { "gpuplan windows" } " also lists those that vanished." }
            table.prices id="windows" {
                thead { tr {
                    th { "Start (UTC)" } th { "End (UTC)" } th { "Hours" } th { "Instances" }
                    th { "Provider" } th { "Zone" } th { "Instance" } th { "GPU" }
                    th { "Upfront USD" } th { "USD/GPU-h" }
                } }
                tbody {
                    @for r in &page.windows {
                        tr {
                            td { (when(r.window_start)) }
                            td { (when(r.window_end)) }
                            td.num { (r.window_hours.map_or_else(String::new, |h| format!("{h:.2}"))) }
                            td.num { (r.instance_count.unwrap_or(0)) }
                            td { (r.provider) }
                            td { (r.zone.as_deref().unwrap_or(&r.region)) }
                            td { (r.instance_type) }
                            td { (count_label(r.gpu_count)) " x " (r.gpu_model) }
                            td.num { (money(Some(r.upfront_usd), "")) }
                            td.num { (money(Some(r.usd_per_gpu_hour), "")) }
                        }
                    }
                }
            }
        }
    };
    layout("Prices", "/ui/prices", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_replace_their_keys_and_keep_the_rest() {
        assert_eq!(
            link(
                "gpu=H100&sort=price&format=csv",
                &[("sort", "gpu_model"), ("dir", "desc")]
            ),
            "/ui/prices?gpu=H100&sort=gpu_model&dir=desc"
        );
    }

    fn offer(i: usize) -> CatalogRecord {
        CatalogRecord {
            region: format!("region-{}", i % 4),
            zone: (!i.is_multiple_of(5)).then(|| format!("zone-{}", i % 2)),
            instance_type: format!("type-{i}"),
            gpu_memory_gib: (!i.is_multiple_of(7)).then_some(80.0),
            recurring_usd_per_hour: 0.0,
            ..crate::catalog::test_record(
                ["aws", "gcp", "azure"][i % 3],
                "H100-80GB",
                (i % 6) as f64,
            )
        }
    }

    #[test]
    fn each_page_holds_the_rows_a_whole_sort_puts_there() {
        // Far more ties than the sort's small-slice cutoff, so that an
        // unstable order would show.
        let offers: Vec<CatalogRecord> = (0..500).map(offer).collect();
        for query in [
            "sort=provider",
            "sort=zone&dir=desc",
            "sort=price&unit=gib&dir=desc",
        ] {
            let p = Params::parse(Some(query), VIEW_PARAMS).unwrap();
            let view = view(&p).unwrap();
            let mut whole: Vec<&CatalogRecord> = offers.iter().collect();
            sort(&view, &mut whole, offers.len());
            let mut paged = Vec::new();
            for page in 0..offers.len().div_ceil(30) {
                let mut rows: Vec<&CatalogRecord> = offers.iter().collect();
                let end = ((page + 1) * 30).min(offers.len());
                sort(&view, &mut rows, end);
                paged.extend_from_slice(&rows[page * 30..end]);
            }
            let names = |rows: &[&CatalogRecord]| {
                rows.iter()
                    .map(|r| r.instance_type.clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(&paged), names(&whole), "{query}");
        }
    }

    #[test]
    fn a_walk_of_the_whole_order_shows_what_a_sort_of_the_kept_rows_shows() {
        let mut offers: Vec<CatalogRecord> = (0..400).map(offer).collect();
        for (i, o) in offers.iter_mut().enumerate().filter(|(i, _)| i % 11 == 0) {
            o.window_start =
                Some(chrono::DateTime::UNIX_EPOCH + chrono::Duration::days((i % 4) as i64));
            o.window_end = Some(chrono::DateTime::UNIX_EPOCH + chrono::Duration::days(9));
        }
        let all: Vec<&CatalogRecord> = offers.iter().collect();
        let windows = rank_windows(&all);
        for query in [
            "",
            "provider=gcp",
            "min_gpu_memory_gib=10&sort=zone&dir=desc",
            "provider=aws&region=region-1&sort=price&unit=gib&page=2&per_page=7",
            "sort=instance_type&page=40",
            "provider=azure&page=18446744073709551615",
        ] {
            let p = Params::parse(Some(query), &[PRICE_FILTERS, VIEW_PARAMS].concat()).unwrap();
            let (filter, view) = (price_filter(&p).unwrap(), view(&p).unwrap());
            let keep = |r: &CatalogRecord| filter.matches(r) && view.keeps(r);
            let walked = walked_page(
                &view,
                (&rank_rows(&view, &all), &windows),
                |i| all[i as usize],
                (!filter.is_empty() || !view.keeps_all()).then_some(&keep),
            );
            let sorted = sorted_page(&view, all.iter().copied().filter(|r| keep(r)).collect());
            let ids = |rows: &[&CatalogRecord]| {
                rows.iter()
                    .map(|r| r.instance_type.clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(walked.total, sorted.total, "{query}");
            assert!(!sorted.windows.is_empty(), "{query}");
            assert_eq!(ids(&walked.shown), ids(&sorted.shown), "{query}");
            assert_eq!(ids(&walked.windows), ids(&sorted.windows), "{query}");
        }
    }

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=HYPERLINK(1)"), "'=HYPERLINK(1)");
    }
}
