//! The pages over the bills: `/ui/spend` (spend per team, stacked, with the
//! budgets' lines and forecasts, direct and allocated figures, CSV and JSON
//! export), `/ui/usage` (GPU-hours per team by price kind) and
//! `/ui/commitments` (each commitment's utilization over time, and
//! coverage). Windows are dates in the URL, so back and forward work.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::html;
use serde_json::{Value, json};

use super::{PageError, data_island, layout};
use crate::bills::allocation;
use crate::bills::budgets::budget_statuses;
use crate::bills::budgets::{self, BudgetStatus};
use crate::bills::query::{self, MAX_DAYS};
use crate::bills::time::day_name as date;
use crate::bills::{UNALLOCATED, UsageKind};
use crate::daemon::http::error::ApiError;
use crate::daemon::http::params::Params;
use crate::daemon::http::state::{AppState, read};
use crate::store::bills::{BillQuery, Bucket};

const DAY: i64 = 86_400;
/// Rows a page reads at most; a window with more is refused by name.
const PAGE_ROWS: usize = 50_000;

/// A page's window: the URL's dates, else the month holding the last
/// complete day of the bills (the last 30 days before any bills).
struct Window {
    since: i64,
    until: i64,
    by: Bucket,
}

fn window(p: &Params, complete_to: Option<i64>) -> Result<Window, ApiError> {
    let by = match p.one("by")?.as_deref() {
        None | Some("day") => Bucket::Day,
        Some("month") => Bucket::Month,
        Some(other) => {
            return Err(ApiError::bad_parameter(
                "by",
                format!("`{other}` is not day or month"),
            ));
        }
    };
    let (default_since, default_until) = match complete_to {
        Some(day) => {
            let (_, start, end) =
                budgets::period_of(crate::bills::budgets::BudgetPeriod::Month, day);
            (start, end)
        }
        None => {
            let now = Utc::now().timestamp();
            (
                now - now.rem_euclid(DAY) - 29 * DAY,
                now - now.rem_euclid(DAY) + DAY,
            )
        }
    };
    // The query's own rules bound the window, as the API's answers are.
    let since = p.one("since")?;
    let until = match p.one("until")? {
        Some(t) => t,
        None => {
            let from = match since.as_deref() {
                Some(t) => query::parse_time("since", t)?,
                None => default_since,
            };
            DateTime::<Utc>::from_timestamp(default_until.max(from + DAY), 0)
                .unwrap_or_default()
                .to_rfc3339()
        }
    };
    let (since, until) = query::window(
        &query::Params {
            since: Some(since.unwrap_or_else(|| date(default_since))),
            until: Some(until),
            ..query::Params::default()
        },
        Utc::now(),
        MAX_DAYS,
    )?;
    Ok(Window { since, until, by })
}

/// The window's links: the same page over the previous and next window, and
/// by day or by month.
fn window_links(path: &str, w: &Window, extra: &[(&str, String)]) -> maud::Markup {
    let (earlier, later) = shifted(w.since, w.until);
    let link = |since: i64, until: i64, by: &str| {
        let mut pairs: Vec<(&str, String)> = vec![
            ("since", date(since)),
            ("until", date(until)),
            ("by", by.to_owned()),
        ];
        pairs.extend(extra.iter().cloned());
        format!(
            "{path}?{}",
            form_urlencoded::Serializer::new(String::new())
                .extend_pairs(pairs)
                .finish()
        )
    };
    let by = if w.by == Bucket::Month {
        "month"
    } else {
        "day"
    };
    html! {
        p.ranges {
            (date(w.since)) " to " (date(w.until - 1)) " · "
            a rel="prev" href=(link(earlier.0, earlier.1, by)) { "earlier" } " · "
            a rel="next" href=(link(later.0, later.1, by)) { "later" } " · "
            @if w.by == Bucket::Month {
                a href=(link(w.since, w.until, "day")) { "by day" } " · " strong { "by month" }
            } @else {
                strong { "by day" } " · " a href=(link(w.since, w.until, "month")) { "by month" }
            }
        }
    }
}

/// The windows before and after `[since, until)`: whole calendar months
/// when it is whole months, else the same length.
fn shifted(since: i64, until: i64) -> ((i64, i64), (i64, i64)) {
    use chrono::{Datelike, Months};
    let at = |t: i64| DateTime::<Utc>::from_timestamp(t, 0).unwrap_or_default();
    let (a, b) = (at(since), at(until));
    let month_start = |d: DateTime<Utc>| d.day() == 1 && d.timestamp().rem_euclid(DAY) == 0;
    let months = (b.year() - a.year()) * 12 + i32::try_from(b.month()).unwrap_or(0)
        - i32::try_from(a.month()).unwrap_or(0);
    if month_start(a) && month_start(b) && months > 0 {
        let n = Months::new(months.unsigned_abs());
        if let (Some(before), Some(after)) = (a.checked_sub_months(n), b.checked_add_months(n)) {
            return ((before.timestamp(), since), (until, after.timestamp()));
        }
    }
    let len = until - since;
    ((since - len, since), (until, until + len))
}

fn money(v: f64) -> String {
    format!("{v:.2}")
}

/// The window of the URL, around the last complete day of every enabled
/// bill source when it gives no dates.
async fn page_window(state: &Arc<AppState>, p: &Params) -> Result<Window, ApiError> {
    let done = read(state, |store, _, state| {
        Ok(budgets::data_days(store, &state.bills.sources, &[])?
            .ok()
            .map(|d| d.complete_to))
    })
    .await?;
    window(p, done)
}

/// Per team (and currency): the window's direct and allocated spend.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct TeamSpend {
    team: String,
    currency: String,
    billed_cost: f64,
    effective_cost: f64,
    allocated_billed_cost: f64,
    allocated_effective_cost: f64,
    /// Share of the currency's effective spend, percent.
    share_pct: f64,
}

pub async fn spend(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, PageError> {
    let p = Params::parse(uri.query(), &["since", "until", "by", "format"])?;
    let format = p.one("format")?;
    if let Some(f) = format.as_deref().filter(|f| !matches!(*f, "csv" | "json")) {
        return Err(ApiError::bad_parameter("format", format!("`{f}` is not csv or json")).into());
    }
    let proportional = state.bills.proportional;
    let w = page_window(&state, &p).await?;
    let (since, until, by) = (w.since, w.until, w.by);
    let (rows, statuses) = read(&state, move |store, _, state| {
        let q = BillQuery {
            since,
            until,
            by: Some(by),
            group: vec!["team".to_owned()],
            limit: PAGE_ROWS,
            ..BillQuery::default()
        };
        let rows = allocation::spend(store, &q, proportional)?;
        let statuses = budget_statuses(store, &state.bills)?;
        Ok((rows, statuses))
    })
    .await?;
    let mut teams: BTreeMap<(String, String), TeamSpend> = BTreeMap::new();
    for r in &rows {
        let team = r.fields.get("team").cloned().unwrap_or_default();
        let t = teams
            .entry((r.currency.clone(), team.clone()))
            .or_insert_with(|| TeamSpend {
                team,
                currency: r.currency.clone(),
                ..TeamSpend::default()
            });
        t.billed_cost += r.billed_cost;
        t.effective_cost += r.effective_cost;
        t.allocated_billed_cost += r.allocated_billed_cost.unwrap_or(r.billed_cost);
        t.allocated_effective_cost += r.allocated_effective_cost.unwrap_or(r.effective_cost);
    }
    let totals: BTreeMap<String, f64> = teams.values().fold(BTreeMap::new(), |mut m, t| {
        *m.entry(t.currency.clone()).or_default() += t.effective_cost;
        m
    });
    let mut table: Vec<TeamSpend> = teams.into_values().collect();
    for t in &mut table {
        let total = totals.get(&t.currency).copied().unwrap_or(0.0);
        t.share_pct = if total == 0.0 {
            0.0
        } else {
            100.0 * t.effective_cost / total
        };
    }
    match format.as_deref() {
        Some("json") => return Ok(axum::Json(&table).into_response()),
        Some("csv") => return Ok(spend_csv(&table)),
        _ => {}
    }
    let main_currency = totals
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(c, _)| c.clone())
        .unwrap_or_else(|| "USD".to_owned());
    let chart = spend_chart(&w, &rows, &statuses, &main_currency);
    let export = |f: &str| {
        format!(
            "/ui/spend?{}",
            form_urlencoded::Serializer::new(String::new())
                .extend_pairs([
                    ("since", date(w.since)),
                    ("until", date(w.until)),
                    (
                        "by",
                        if w.by == Bucket::Month {
                            "month"
                        } else {
                            "day"
                        }
                        .to_owned()
                    ),
                    ("format", f.to_owned()),
                ])
                .finish()
        )
    };
    let body = html! {
        h1 { "Spend by team" }
        (window_links("/ui/spend", &w, &[]))
        @if rows.is_empty() {
            p { "No spend in the bills for this window. `gpuplan bills sync` loads them; `[bills.NAME]` in the config names where they are." }
        } @else {
            div.chart id="spend-chart" data-kind="stacked" {}
            (data_island("spend-data", &chart))
            p.meta { "Effective (amortized) cost in " (main_currency) " with each team's share of unallocated spend, "
                @if w.by == Bucket::Day { "summed from the window's first day" } @else { "per month" }
                "; each budget's amount and its forecast to the end of its period are lines." }
        }
        table #spend {
            thead { tr { th { "team" } th { "billed" } th { "effective" } th { "allocated billed" } th { "allocated effective" } th { "share" } th { "currency" } } }
            tbody {
                @for t in &table {
                    tr class=[(t.team == UNALLOCATED).then_some("unallocated")] {
                        td { (t.team) } td.num { (money(t.billed_cost)) } td.num { (money(t.effective_cost)) }
                        td.num { (money(t.allocated_billed_cost)) } td.num { (money(t.allocated_effective_cost)) }
                        td.num { (format!("{:.1}%", t.share_pct)) } td { (t.currency) }
                    }
                }
            }
        }
        p.export {
            @if proportional { "Unallocated spend is split across teams by their share of each day's spend (allocated columns)." }
            @else { "Unallocated spend is kept apart (`[allocation] unallocated = \"keep\"`): allocated equals direct." }
            " · export these rows: " a href=(export("csv")) { "CSV" } " · " a href=(export("json")) { "JSON" }
        }
        h2 { "Budgets" }
        (budgets_table(&statuses))
    };
    Ok(layout("Spend", "/ui/spend", &body))
}

fn spend_csv(rows: &[TeamSpend]) -> Response {
    let mut out = String::from(
        "team,currency,billed_cost,effective_cost,allocated_billed_cost,allocated_effective_cost,share_pct\n",
    );
    for t in rows {
        out.push_str(&format!(
            "{},{},{:.2},{:.2},{:.2},{:.2},{:.1}\n",
            super::prices::csv_field(&t.team),
            super::prices::csv_field(&t.currency),
            t.billed_cost,
            t.effective_cost,
            t.allocated_billed_cost,
            t.allocated_effective_cost,
            t.share_pct
        ));
    }
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"gpuplan-spend.csv\"",
            ),
        ],
        out,
    )
        .into_response()
}

/// The stacked chart: per team, effective spend in the main currency
/// (cumulative by day), and per budget whose period starts with the window
/// its amount and its forecast from the complete day to its period's end.
fn spend_chart(
    w: &Window,
    rows: &[crate::store::bills::SpendRow],
    statuses: &[BudgetStatus],
    currency: &str,
) -> Value {
    let cumulative = w.by == Bucket::Day;
    // By day, every day of the window, so that a forecast reaches the
    // period's end; bands stop at the last day with spend.
    let xs: Vec<i64> = if cumulative {
        (0..(w.until - w.since) / DAY)
            .map(|i| w.since + i * DAY)
            .collect()
    } else {
        rows.iter()
            .map(|r| r.start.timestamp())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let at: BTreeMap<i64, usize> = xs.iter().enumerate().map(|(i, x)| (*x, i)).collect();
    let last = rows
        .iter()
        .map(|r| r.start.timestamp())
        .max()
        .and_then(|t| at.get(&t).copied())
        .unwrap_or(0);
    let mut teams: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.currency == currency) {
        let team = r.fields.get("team").cloned().unwrap_or_default();
        let v = teams.entry(team).or_insert_with(|| vec![0.0; xs.len()]);
        if let Some(i) = at.get(&r.start.timestamp()) {
            v[*i] += r.allocated_effective_cost.unwrap_or(r.effective_cost);
        }
    }
    // A team the split left with nothing is no band.
    teams.retain(|_, v| v.iter().any(|x| *x != 0.0));
    let stacks: Vec<Value> = teams
        .into_iter()
        .map(|(label, mut values)| {
            if cumulative {
                let mut sum = 0.0;
                for x in &mut values {
                    sum += *x;
                    *x = sum;
                }
            }
            let values: Vec<Value> = values
                .into_iter()
                .enumerate()
                .map(|(i, v)| if i <= last { json!(v) } else { Value::Null })
                .collect();
            json!({"label": label, "values": values})
        })
        .collect();
    let mut lines = Vec::new();
    if cumulative {
        for b in statuses.iter().filter(|b| b.currency == currency) {
            let (Some(start), Some(done), Some(actual), Some(forecast), Some(end)) = (
                b.period_start,
                b.complete_to,
                b.actual,
                b.forecast,
                b.period_end,
            ) else {
                continue;
            };
            let ts = |d: chrono::NaiveDate| {
                d.and_hms_opt(0, 0, 0)
                    .map_or(0, |t| t.and_utc().timestamp())
            };
            if ts(start) != w.since {
                continue;
            }
            let amount: Vec<Value> = xs.iter().map(|_| json!(b.amount)).collect();
            let forecast_line: Vec<Value> = xs
                .iter()
                .map(|x| {
                    let (d0, d1) = (ts(done), ts(end));
                    if *x < d0 || *x > d1 || d1 == d0 {
                        Value::Null
                    } else {
                        #[allow(clippy::cast_precision_loss)]
                        let f = (x - d0) as f64 / (d1 - d0) as f64;
                        json!(actual + f * (forecast - actual))
                    }
                })
                .collect();
            lines.push(
                json!({"label": format!("{} budget", b.name), "values": amount, "dash": false}),
            );
            lines.push(json!({"label": format!("{} forecast", b.name), "values": forecast_line, "dash": true}));
        }
    }
    json!({
        "x": xs,
        "time": true,
        "y_label": format!("{currency}, effective, allocated"),
        "stacks": stacks,
        "lines": lines,
    })
}

fn budgets_table(statuses: &[BudgetStatus]) -> maud::Markup {
    let pct = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.1}%"));
    let figure = |v: Option<f64>| v.map_or("—".to_owned(), money);
    html! {
        @if statuses.is_empty() {
            p { "No budgets: `[[budgets]]` in the config sets them." }
        } @else {
            table #budgets {
                thead { tr { th { "budget" } th { "period" } th { "complete to" } th { "amount" } th { "actual" } th { "" } th { "forecast" } th { "" } th { "thresholds" } } }
                tbody {
                    @for b in statuses {
                        tr {
                            td { (b.name) }
                            td { (b.period.clone().unwrap_or_else(|| "—".into())) }
                            td { @if let Some(d) = b.complete_to { (d) } @else { span.missing title=[b.waiting.clone()] { "—" } } }
                            td.num { (money(b.amount)) " " (b.currency) }
                            td.num { (figure(b.actual)) } td.num { (pct(b.actual_percent)) }
                            td.num { (figure(b.forecast)) } td.num { (pct(b.forecast_percent)) }
                            td {
                                @for t in &b.thresholds {
                                    span class={ "badge " @if t.state == "crossed" { "stale" } @else { "ok" } } {
                                        (format!("{}% {}", t.percent, t.on.as_str()))
                                    }
                                    " "
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `on_demand`, `spot` or `committed`.
fn kind_group(kind: &str) -> &'static str {
    match UsageKind::parse(kind) {
        Some(UsageKind::OnDemand) => "on_demand",
        Some(UsageKind::Spot) => "spot",
        _ => "committed",
    }
}

pub async fn usage(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, PageError> {
    let p = Params::parse(uri.query(), &["since", "until", "by", "team"])?;
    let team = p.one("team")?;
    let t = team.clone();
    let w = page_window(&state, &p).await?;
    let (since, until, by) = (w.since, w.until, w.by);
    let rows = read(&state, move |store, _, _| {
        let q = BillQuery {
            since,
            until,
            by: Some(by),
            group: vec!["team".to_owned(), "price_kind".to_owned()],
            limit: PAGE_ROWS,
            ..BillQuery::default()
        };
        let mut rows = store.bill_usage(&q)?;
        rows.retain(|r| t.as_ref().is_none_or(|t| r.fields.get("team") == Some(t)));
        Ok(rows)
    })
    .await?;
    let xs: Vec<i64> = rows
        .iter()
        .map(|r| r.start.timestamp())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let at: BTreeMap<i64, usize> = xs.iter().enumerate().map(|(i, x)| (*x, i)).collect();
    let groups = ["on_demand", "spot", "committed"];
    let mut stacks: BTreeMap<&str, Vec<f64>> =
        groups.iter().map(|g| (*g, vec![0.0; xs.len()])).collect();
    let mut by_team: BTreeMap<String, [f64; 3]> = BTreeMap::new();
    for r in &rows {
        let g = kind_group(r.fields.get("price_kind").map_or("", String::as_str));
        if let (Some(v), Some(i)) = (stacks.get_mut(g), at.get(&r.start.timestamp())) {
            v[*i] += r.gpu_hours;
        }
        let slot = groups.iter().position(|x| *x == g).unwrap_or(2);
        by_team
            .entry(r.fields.get("team").cloned().unwrap_or_default())
            .or_default()[slot] += r.gpu_hours;
    }
    let chart = json!({
        "x": xs,
        "time": true,
        "y_label": "GPU-hours",
        "stacks": groups.iter().map(|g| json!({"label": g.replace('_', "-"), "values": stacks[g]})).collect::<Vec<_>>(),
        "lines": [],
    });
    let extra: Vec<(&str, String)> = team.iter().map(|t| ("team", t.clone())).collect();
    let body = html! {
        h1 { "GPU usage by price kind" @if let Some(t) = &team { ": " (t) } }
        (window_links("/ui/usage", &w, &extra))
        form.filters method="get" action="/ui/usage" {
            input type="hidden" name="since" value=(date(w.since));
            input type="hidden" name="until" value=(date(w.until));
            label { "Team " input name="team" value=[team.as_deref()]; }
            button type="submit" { "Show" }
        }
        @if rows.is_empty() {
            p { "No GPU usage in the bills for this window." }
        } @else {
            div.chart id="usage-chart" data-kind="stacked" {}
            (data_island("usage-data", &chart))
        }
        table #usage {
            thead { tr { th { "team" } th { "on-demand GPU-h" } th { "spot GPU-h" } th { "committed GPU-h" } th { "total" } } }
            tbody {
                @for (name, h) in &by_team {
                    tr {
                        td { a href={ "/ui/usage?team=" (form_urlencoded::byte_serialize(name.as_bytes()).collect::<String>()) "&since=" (date(w.since)) "&until=" (date(w.until)) } { (name) } }
                        td.num { (format!("{:.1}", h[0])) } td.num { (format!("{:.1}", h[1])) } td.num { (format!("{:.1}", h[2])) }
                        td.num { (format!("{:.1}", h.iter().sum::<f64>())) }
                    }
                }
            }
        }
    };
    Ok(layout("Usage", "/ui/usage", &body))
}

pub async fn commitments(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, PageError> {
    let p = Params::parse(uri.query(), &["since", "until", "by"])?;
    let w = page_window(&state, &p).await?;
    let (since, until) = (w.since, w.until);
    let (records, days, coverage) = read(&state, move |store, _, _| {
        let records = store.bill_commitments(&[], since, until)?;
        let days = store.bill_commitment_days(since, until)?;
        let coverage = store.bill_coverage(&[], since, until)?;
        Ok((records, days, coverage))
    })
    .await?;
    let xs: Vec<i64> = days
        .iter()
        .map(|d| d.day)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let at: BTreeMap<i64, usize> = xs.iter().enumerate().map(|(i, x)| (*x, i)).collect();
    let mut series: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for d in &days {
        let v = series
            .entry(d.id.clone())
            .or_insert_with(|| vec![Value::Null; xs.len()]);
        if let (Some(i), Some(u)) = (at.get(&d.day), d.utilization()) {
            v[*i] = json!(100.0 * u);
        }
    }
    let chart = json!({
        "x": xs,
        "time": true,
        "y_label": "utilization, %",
        "stacks": [],
        "lines": series.into_iter().map(|(id, values)| json!({"label": short_id(&id), "values": values, "dash": false})).collect::<Vec<_>>(),
    });
    let pct = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{:.1}%", 100.0 * v));
    let body = html! {
        h1 { "Commitments" }
        (window_links("/ui/commitments", &w, &[]))
        @if days.is_empty() {
            p { "No commitment was used or left unused in this window." }
        } @else {
            div.chart id="commitments-chart" data-kind="stacked" {}
            (data_island("commitments-data", &chart))
        }
        table #commitments {
            thead { tr { th { "commitment" } th { "type" } th { "provider" } th { "region" } th { "instance type" } th { "utilization" } th { "covered GPU-h" } th { "last seen" } } }
            tbody {
                @for c in &records {
                    tr {
                        td.id title=(c.id) { (short_id(&c.id)) }
                        td { (c.kind.clone().unwrap_or_default()) } td { (c.provider) }
                        td { (c.region.clone().unwrap_or_else(|| "several".into())) }
                        td { (c.instance_type.clone().unwrap_or_else(|| "several".into())) }
                        td.num { (pct(c.utilization)) } td.num { (format!("{:.1}", c.covered_gpu_hours)) }
                        td { @if let Some(t) = c.last_seen { (t.format("%Y-%m-%d %H:%M")) } }
                    }
                }
            }
        }
        h2 { "Coverage" }
        p.meta { "Committed instance-hours over on-demand plus committed ones, per instance type; spot is outside it." }
        table #coverage {
            thead { tr { th { "provider" } th { "region" } th { "instance type" } th { "on-demand h" } th { "covered h" } th { "coverage" } } }
            tbody {
                @for c in &coverage {
                    tr {
                        td { (c.provider) } td { (c.region) } td { (c.instance_type) }
                        td.num { (format!("{:.1}", c.on_demand_hours)) } td.num { (format!("{:.1}", c.covered_hours)) }
                        td.num { (pct(c.coverage)) }
                    }
                }
            }
        }
    };
    Ok(layout("Commitments", "/ui/commitments", &body))
}

/// The last part of an ARN or resource path: what people call it.
fn short_id(id: &str) -> &str {
    id.rsplit(['/', ':'])
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> i64 {
        s.parse::<DateTime<Utc>>().unwrap().timestamp()
    }

    #[test]
    fn a_month_window_moves_by_calendar_months_and_others_by_their_length() {
        let (earlier, later) = shifted(t("2026-10-01T00:00:00Z"), t("2026-11-01T00:00:00Z"));
        assert_eq!(
            earlier,
            (t("2026-09-01T00:00:00Z"), t("2026-10-01T00:00:00Z"))
        );
        assert_eq!(
            later,
            (t("2026-11-01T00:00:00Z"), t("2026-12-01T00:00:00Z"))
        );
        let (earlier, _) = shifted(t("2026-10-05T00:00:00Z"), t("2026-10-15T00:00:00Z"));
        assert_eq!(
            earlier,
            (t("2026-09-25T00:00:00Z"), t("2026-10-05T00:00:00Z"))
        );
        assert_eq!(
            short_id("arn:aws:ec2:us-east-1:1:reserved-instances/ri-p5"),
            "ri-p5"
        );
    }
}
