//! `GET /`: the cheapest price per GPU model now and how it moved, and the
//! freshness of every source.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use chrono::{Duration, Utc};
use maud::{Markup, html};

use super::{PageError, age, layout, money};
use crate::catalog::{self, Cheapest};
use crate::daemon::http::state::{AppState, COMPARED, cheapest_at, read_in};

/// The three prices a card shows.
const GROUPS: [&str; 3] = catalog::PRICE_GROUPS;

/// A bill source's freshness: the newest day of spend it delivered.
struct BillSource {
    name: String,
    provider: &'static str,
    newest_day: Option<chrono::DateTime<Utc>>,
    loaded_at: Option<chrono::DateTime<Utc>>,
}

/// One source's freshness row.
struct Source {
    name: String,
    last_good: Option<chrono::DateTime<Utc>>,
    stale: bool,
    last_error: Option<String>,
}

pub async fn page(State(state): State<Arc<AppState>>) -> Result<Response, PageError> {
    let (now, then_day, then_week, sources) = read_in(&state, |store, fresh, state, generation| {
        let at = |back: Option<Duration>| cheapest_at(store, (&fresh, generation), state, back);
        let now = at(None)?;
        let [day, week] = COMPARED;
        let (day, week) = (at(Some(day))?, at(Some(week))?);
        let errors: BTreeMap<String, (String, Option<String>)> = store
            .latest_runs()?
            .into_iter()
            .map(|(source, status, error)| (source, (status, error)))
            .collect();
        let sources = fresh
            .sources()
            .into_iter()
            .map(|name| Source {
                last_good: fresh.last_good.get(&name).copied(),
                stale: fresh.is_stale(&name),
                last_error: errors
                    .get(&name)
                    .filter(|(status, _)| status == "failed")
                    .and_then(|(_, e)| e.clone()),
                name,
            })
            .collect::<Vec<_>>();
        let statuses = crate::bills::budgets::budget_statuses(store, &state.bills)?;
        let spans = store.bill_spend_span()?;
        let mut loaded: BTreeMap<String, String> = BTreeMap::new();
        for l in store.bill_loads(None)? {
            let e = loaded.entry(l.source).or_default();
            if l.loaded_at > *e {
                *e = l.loaded_at;
            }
        }
        let bills: Vec<BillSource> = state
            .bills
            .sources
            .iter()
            .map(|s| BillSource {
                name: s.name.clone(),
                provider: s.provider.as_str(),
                newest_day: spans
                    .get(&s.name)
                    .and_then(|span| chrono::DateTime::<Utc>::from_timestamp(span.last, 0)),
                loaded_at: loaded.get(&s.name).and_then(|t| t.parse().ok()),
            })
            .collect();
        Ok((now, day, week, (sources, fresh.now, statuses, bills)))
    })
    .await?;
    let (sources, at, statuses, bills) = sources;
    let models: Vec<&String> = {
        let mut m: Vec<&String> = now.keys().map(|(model, _)| model).collect();
        m.dedup();
        m
    };
    let body = html! {
        h1 { "GPU prices now" }
        @if models.is_empty() {
            p { "No prices yet. The first sync of each source fills the catalog; the table below shows how they are doing." }
        }
        section.cards {
            @for model in &models {
                article.card {
                    h2 { a href={ "/ui/prices?gpu=" (model) "&unit=gpu&sort=usd_per_gpu_hour" } { (model) } }
                    table {
                        thead { tr { th { "" } th { "USD/GPU-h" } th { "24 h" } th { "7 d" } } }
                        tbody {
                            @for g in GROUPS {
                                (card_row(model, g, &now, &then_day, &then_week))
                            }
                        }
                    }
                }
            }
        }
        h2 { "Sources" }
        table.sources {
            thead { tr { th { "source" } th { "last good sync" } th { "age" } th { "state" } th { "last error" } } }
            tbody {
                @for s in &sources {
                    tr {
                        td { (s.name) }
                        td { @if let Some(t) = s.last_good { (t.format("%Y-%m-%d %H:%M UTC")) } @else { "never" } }
                        td { @if let Some(t) = s.last_good { (age(at, t)) } @else { "—" } }
                        td { @if s.stale { span.badge.stale { "stale" } } @else { span.badge.ok { "fresh" } } }
                        td.error { @if let Some(e) = &s.last_error { (e) } }
                    }
                }
            }
        }
        @if !statuses.is_empty() {
            h2 { "Budgets" }
            table.budgets {
                thead { tr { th { "budget" } th { "period" } th { "complete to" } th { "actual" } th { "forecast" } } }
                tbody {
                    @for b in &statuses {
                        tr {
                            td { a href="/ui/spend" { (b.name) } }
                            td { (b.period.clone().unwrap_or_else(|| "—".into())) }
                            td { @if let Some(d) = b.complete_to { (d) } @else { span.missing title=[b.waiting.clone()] { "—" } } }
                            (percent_cell(b.actual_percent))
                            (percent_cell(b.forecast_percent))
                        }
                    }
                }
            }
        }
        @if !bills.is_empty() {
            h2 { "Bill sources" }
            table.sources {
                thead { tr { th { "source" } th { "provider" } th { "newest day" } th { "age" } th { "last loaded" } } }
                tbody {
                    @for b in &bills {
                        tr {
                            td { (b.name) } td { (b.provider) }
                            td { @if let Some(d) = b.newest_day { (d.format("%Y-%m-%d")) } @else { "nothing loaded" } }
                            td { @if let Some(d) = b.newest_day { (age(at, d)) } @else { "—" } }
                            td { @if let Some(t) = b.loaded_at { (t.format("%Y-%m-%d %H:%M UTC")) } @else { "never" } }
                        }
                    }
                }
            }
        }
        p.links {
            a href="/ui/prices" { "All prices" } " · "
            a href="/ui/spot" { "Spot history" } " · "
            a href="/ui/plans/latest" { "The latest plan" } " · "
            a href="/ui/spend" { "Spend" } " · "
            a href="/ui/usage" { "Usage" } " · "
            a href="/ui/commitments" { "Commitments" } " · "
            a href="/ui/alerts" { "Alerts" }
        }
    };
    Ok(layout("Overview", "/", &body))
}

/// A budget's percent, marked when it is over the amount.
fn percent_cell(percent: Option<f64>) -> Markup {
    html! {
        td.num class=[percent.filter(|p| *p >= 100.0).map(|_| "up")] {
            (percent.map_or("—".to_owned(), |p| format!("{p:.1}%")))
        }
    }
}

fn card_row(
    model: &str,
    group: &'static str,
    now: &Cheapest,
    day: &Cheapest,
    week: &Cheapest,
) -> Markup {
    let key = (model.to_owned(), group);
    let current = now.get(&key);
    let label = match group {
        "on_demand" => "on-demand",
        "spot" => "spot",
        _ => "best committed",
    };
    let change = |past: &Cheapest| -> Markup {
        match (current, past.get(&key)) {
            (Some(c), Some(p)) if p.usd_per_gpu_hour > 0.0 => {
                let pct = (c.usd_per_gpu_hour / p.usd_per_gpu_hour - 1.0) * 100.0;
                let class = if pct < -0.05 {
                    "down"
                } else if pct > 0.05 {
                    "up"
                } else {
                    "flat"
                };
                html! { span class=(class) { (format!("{pct:+.1}%")) } }
            }
            _ => html! { span.missing title="no price then" { "—" } },
        }
    };
    html! {
        tr {
            th { (label) }
            td title=[current.map(|c| format!("{} {} {} {}", c.provider, c.region, c.instance_type, c.price_kind))] {
                (money(current.map(|c| c.usd_per_gpu_hour), "no current price of this kind"))
            }
            td { (change(day)) }
            td { (change(week)) }
        }
    }
}
