//! `GET /ui/plans/latest[?name=]` and `GET /ui/plans/{id}`: a saved plan as
//! a stacked area over its horizon (reserved baseline, spot, on-demand GPUs)
//! under the demand, its costs, the break-even of each reservation, what
//! changed since the previous plan of its name, and a form that runs a new
//! plan through `POST /v1/plans`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use maud::{Markup, html};
use serde_json::{Value, json};

use super::{PageError, data_island, layout, money, not_found};
use crate::daemon::http::error::ApiError;
use crate::daemon::http::params::Params;
use crate::daemon::http::state::{AppState, read};
use crate::store::SavedPlan;

/// What the page shows of one plan.
struct Shown {
    plan: SavedPlan,
    problem: Option<Value>,
    previous: Option<SavedPlan>,
}

pub async fn latest(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, PageError> {
    let p = Params::parse(uri.query(), &["name"])?;
    let name = p.one("name")?;
    let shown = load(&state, None, name.clone()).await?;
    match shown {
        Some(shown) => Ok(render(&shown)),
        None => Ok(empty(name.as_deref())),
    }
}

pub async fn by_id(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let id: i64 = id
        .parse()
        .map_err(|_| ApiError::bad_parameter("id", format!("`{id}` is not a plan id")))?;
    load(&state, Some(id), None)
        .await?
        .map(|shown| render(&shown))
        .ok_or_else(|| not_found(format!("no plan {id}")))
}

async fn load(
    state: &Arc<AppState>,
    id: Option<i64>,
    name: Option<String>,
) -> Result<Option<Shown>, ApiError> {
    read(state, move |store, _, _| {
        let Some(plan) = store.saved_plan(id, name.as_deref())? else {
            return Ok(None);
        };
        let problem = store.saved_plan_problem(plan.id)?;
        let previous = match &plan.name {
            Some(n) => store.previous_plan(plan.id, n)?,
            None => None,
        };
        Ok(Some(Shown {
            plan,
            problem,
            previous,
        }))
    })
    .await
}

fn empty(name: Option<&str>) -> Response {
    let body = html! {
        h1 { "Plans" }
        p { @if let Some(n) = name { "No plan named " code { (n) } " has been saved yet." } @else { "No plan has been saved yet." } }
        (form(name))
    };
    layout("Plans", "/ui/plans/latest", &body)
}

/// The hourly GPUs of one kind: instances per offer per hour times the
/// offer's GPUs per instance.
fn gpus_per_hour(instances: &Value, gpus: &BTreeMap<String, f64>, horizon: usize) -> Vec<f64> {
    let mut out = vec![0.0; horizon];
    if let Some(by_offer) = instances.as_object() {
        for (offer, hours) in by_offer {
            let per = gpus.get(offer).copied().unwrap_or(1.0);
            for (h, n) in hours.as_array().into_iter().flatten().enumerate() {
                if let Some(slot) = out.get_mut(h) {
                    *slot += n.as_f64().unwrap_or(0.0) * per;
                }
            }
        }
    }
    out
}

/// The demand per hour: v1's list, or the classes' lists added up.
fn demand(problem: &Value, horizon: usize) -> Vec<f64> {
    let mut out = vec![0.0; horizon];
    let lists: Vec<&Value> = match problem.get("classes").and_then(Value::as_array) {
        Some(classes) => classes.iter().filter_map(|c| c.get("demand")).collect(),
        None => problem.get("demand").into_iter().collect(),
    };
    for list in lists {
        for (h, v) in list.as_array().into_iter().flatten().enumerate() {
            if let Some(slot) = out.get_mut(h) {
                *slot += v.as_f64().unwrap_or(0.0);
            }
        }
    }
    out
}

fn chart(shown: &Shown) -> Option<Value> {
    let result = &shown.plan.result;
    let horizon = result.get("horizon_hours")?.as_u64()? as usize;
    let problem = shown.problem.as_ref()?;
    let gpus: BTreeMap<String, f64> = problem
        .get("offers")?
        .as_array()?
        .iter()
        .filter_map(|o| {
            Some((
                o.get("id")?.as_str()?.to_owned(),
                o.get("gpus_per_instance")?.as_f64()?,
            ))
        })
        .collect();
    let hourly = result.get("hourly")?;
    let reserved = result
        .get("reserved_gpus")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    Some(json!({
        "hours": (0..horizon).collect::<Vec<_>>(),
        "reserved": vec![reserved; horizon],
        "spot": gpus_per_hour(hourly.get("spot_instances")?, &gpus, horizon),
        "on_demand": gpus_per_hour(hourly.get("on_demand_instances")?, &gpus, horizon),
        "demand": demand(problem, horizon),
    }))
}

fn number(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

/// Reservations by (offer, option): count.
fn purchases(result: &Value) -> BTreeMap<(String, String), f64> {
    result
        .get("reserved")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some((
                (
                    r.get("offer")?.as_str()?.to_owned(),
                    r.get("option")?.as_str()?.to_owned(),
                ),
                r.get("count")?.as_f64()?,
            ))
        })
        .collect()
}

fn changes(shown: &Shown) -> Markup {
    let Some(previous) = &shown.previous else {
        return html! { p { "No earlier plan of this name to compare with." } };
    };
    let (now, before) = (&shown.plan.result, &previous.result);
    let (new, old) = (purchases(now), purchases(before));
    let mut keys: Vec<&(String, String)> = new.keys().chain(old.keys()).collect();
    keys.sort();
    keys.dedup();
    // A v3 objective may be risk-adjusted: compare expected costs there.
    let cost = |r: &Value| number(r.get("expected_cost")).or_else(|| number(r.get("objective")));
    let (cost_now, cost_before) = (cost(now), cost(before));
    html! {
        p {
            "Against plan " a href={ "/ui/plans/" (previous.id) } { "#" (previous.id) }
            " of " (previous.created_at.format("%Y-%m-%d %H:%M UTC")) ": cost "
            (money(cost_before, "no cost")) " → " (money(cost_now, "no cost")) " USD"
            @if let (Some(a), Some(b)) = (cost_now, cost_before) { " (" (format!("{:+.2}", a - b)) ")" }
        }
        table {
            thead { tr { th { "offer" } th { "option" } th { "before" } th { "now" } } }
            tbody {
                @for key in keys {
                    @let (b, n) = (old.get(key).copied().unwrap_or(0.0), new.get(key).copied().unwrap_or(0.0));
                    tr class=[(b != n).then_some("changed")] {
                        td { (key.0) } td { (key.1) } td.num { (b) } td.num { (n) }
                    }
                }
            }
        }
    }
}

/// The risk frontier of a version 3 plan: each λ's mean cost against its
/// CVaR, drawn as an SVG line (no script needed), and the table behind it.
fn frontier(r: &Value, points: &[Value]) -> Markup {
    let fig = |p: &Value, k: &str| number(p.get(k)).unwrap_or(0.0);
    let (w, h, pad) = (480.0, 220.0, 40.0);
    let xs: Vec<f64> = points.iter().map(|p| fig(p, "expected_cost")).collect();
    let ys: Vec<f64> = points.iter().map(|p| fig(p, "cvar_cost")).collect();
    let span = |v: &[f64]| {
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                (a.min(*x), b.max(*x))
            });
        if hi - lo > 1e-9 {
            (lo, hi)
        } else {
            (lo - 1.0, hi + 1.0)
        }
    };
    let ((x0, x1), (y0, y1)) = (span(&xs), span(&ys));
    let at = |x: f64, y: f64| {
        (
            pad + (x - x0) / (x1 - x0) * (w - 2.0 * pad),
            h - pad - (y - y0) / (y1 - y0) * (h - 2.0 * pad),
        )
    };
    let line: Vec<String> = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| {
            let (px, py) = at(*x, *y);
            format!("{px:.1},{py:.1}")
        })
        .collect();
    let beta = number(r.get("risk").and_then(|k| k.get("beta"))).unwrap_or(0.95);
    let flat = r.get("frontier_flat").and_then(Value::as_bool);
    html! {
        h2 { "Risk frontier" }
        p {
            @match flat {
                Some(true) => "Flat: risk does not change the purchase; the risk-neutral plan is the recommendation.",
                Some(false) => "Not flat: paying more on average buys a thinner tail. Each point is a plan; how much to pay is your call.",
                None => "",
            }
        }
        svg.frontier width=(w) height=(h) viewBox={ "0 0 " (w) " " (h) } role="img"
            aria-label="mean cost against CVaR for each λ" {
            line x1=(pad) y1=(h - pad) x2=(w - pad) y2=(h - pad) stroke="currentColor" {}
            line x1=(pad) y1=(pad) x2=(pad) y2=(h - pad) stroke="currentColor" {}
            text x=(w / 2.0) y=(h - 8.0) text-anchor="middle" { "mean cost, USD" }
            text x="12" y=(h / 2.0) transform={ "rotate(-90 12 " (h / 2.0) ")" } text-anchor="middle" {
                (format!("CVaR {:.0}%, USD", beta * 100.0))
            }
            polyline points=(line.join(" ")) fill="none" stroke="currentColor" stroke-width="1.5" {}
            @for (p, (x, y)) in points.iter().zip(xs.iter().zip(&ys)) {
                @let (px, py) = at(*x, *y);
                circle cx=(format!("{px:.1}")) cy=(format!("{py:.1}")) r=(if p.get("primary") == Some(&Value::Bool(true)) { 6 } else { 4 }) {}
                text x=(format!("{:.1}", px + 6.0)) y=(format!("{:.1}", py - 6.0)) { "λ " (fig(p, "lambda")) }
            }
        }
        table {
            thead { tr { th { "λ" } th { "reserved" } th { "mean" } th { "P95" } th { (format!("CVaR {:.0}%", beta * 100.0)) } } }
            tbody {
                @for p in points {
                    tr class=[(p.get("primary") == Some(&Value::Bool(true))).then_some("changed")] {
                        td.num { (fig(p, "lambda")) }
                        td { @for h in p.get("reserved").and_then(Value::as_array).into_iter().flatten() {
                            (number(h.get("count")).unwrap_or(0.0)) " × "
                            (h.get("offer").and_then(Value::as_str).unwrap_or("")) " "
                        } }
                        td.num { (money(Some(fig(p, "expected_cost")), "")) }
                        td.num { (money(Some(fig(p, "p95_cost")), "")) }
                        td.num { (money(Some(fig(p, "cvar_cost")), "")) }
                    }
                }
            }
        }
    }
}

fn render(shown: &Shown) -> Response {
    let plan = &shown.plan;
    let r = &plan.result;
    let breakdown = r.get("cost_breakdown");
    let part = |k: &str| number(breakdown.and_then(|b| b.get(k)));
    let title = plan
        .name
        .clone()
        .unwrap_or_else(|| format!("plan {}", plan.id));
    let body = html! {
        h1 { "Plan: " (title) }
        p.meta {
            "#" (plan.id) " · saved " (plan.created_at.format("%Y-%m-%d %H:%M UTC"))
            " · status " strong { (r.get("status").and_then(Value::as_str).unwrap_or("?")) }
            " · horizon " (r.get("horizon_hours").and_then(Value::as_u64).unwrap_or(0)) " h"
        }
        @if let Some(data) = chart(shown) {
            div.chart id="plan-chart" data-kind="plan" {}
            (data_island("plan-data", &data))
        }
        h2 { "Cost" }
        table.costs {
            tbody {
                tr { th { "reserved" } td.num { (money(part("reserved"), "no plan")) } }
                tr { th { "spot" } td.num { (money(part("spot"), "no plan")) } }
                tr { th { "on-demand" } td.num { (money(part("on_demand"), "no plan")) } }
                @if let Some(expected) = number(r.get("expected_cost")) {
                    tr.total { th { "expected total" } td.num { (money(Some(expected), "no plan")) } }
                    tr { th { "P95 over the scenarios" } td.num { (money(number(r.get("p95_cost")), "no plan")) } }
                } @else {
                    tr.total { th { "total" } td.num { (money(number(r.get("objective")), "no plan")) } }
                }
                tr { th { "all on-demand" } td.num { (money(number(r.get("baseline_on_demand_cost")), "no baseline")) } }
                tr { th { "savings" } td.num {
                    (money(number(r.get("savings")), "no baseline"))
                    @if let Some(pct) = number(r.get("savings_pct")) { " (" (format!("{pct:.1}")) " %)" }
                } }
            }
        }
        @if let Some(points) = r.get("frontier").and_then(Value::as_array) {
            (frontier(r, points))
        }
        h2 { "Reservations" }
        @let reserved = r.get("reserved").and_then(Value::as_array).cloned().unwrap_or_default();
        @if reserved.is_empty() { p { "None: spot and on-demand serve all demand." } } @else {
            table {
                thead { tr { th { "offer" } th { "option" } th { "count" } th { "GPUs" } th { "USD/h each" } th { "break-even utilisation" } } }
                tbody {
                    @for p in &reserved {
                        tr {
                            td { (p.get("offer").and_then(Value::as_str).unwrap_or("")) }
                            td { (p.get("option").and_then(Value::as_str).unwrap_or("")) }
                            td.num { (number(p.get("count")).unwrap_or(0.0)) }
                            td.num { (number(p.get("gpus")).unwrap_or(0.0)) }
                            td.num { (money(number(p.get("effective_hourly_price")), "")) }
                            td.num { @match number(p.get("break_even_utilization")) {
                                Some(u) => (format!("{:.0} %", u * 100.0)),
                                None => span.missing title="no on-demand price to compare with" { "—" },
                            } }
                        }
                    }
                }
            }
        }
        h2 { "What changed" }
        (changes(shown))
        (form(plan.name.as_deref()))
    };
    layout(&title, "/ui/plans/latest", &body)
}

/// Runs a new plan from pasted or uploaded demand: the script sends it to
/// `POST /v1/plans?save=true` as JSON, like any API client.
fn form(name: Option<&str>) -> Markup {
    html! {
        h2 { "Run a new plan" }
        form #plan-form method="post" action="/v1/plans?save=true" {
            label { "Name " input name="name" value=(name.unwrap_or("dashboard")) required; }
            label { "GPU " input name="gpu" placeholder="H100-80GB" required; }
            label.wide { "Demand: GPUs per hour, one number per line or comma-separated"
                textarea name="demand" rows="6" placeholder="8\n8\n12" required {} }
            label { "or a file " input type="file" name="demand_file" accept=".csv,.txt"; }
            button type="submit" { "Plan" }
            p #plan-status role="status" {}
        }
        noscript { p { "Running a plan from this page needs JavaScript; "
            code { "gpuplan plan --demand FILE" } " does the same from a shell." } }
    }
}
