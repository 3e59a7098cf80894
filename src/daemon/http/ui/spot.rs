//! `GET /ui/spot?instance=…&region=…[&zone=…][&range=…]`: spot price
//! history, one line per zone, with the on-demand and best committed prices
//! as reference lines, and the same statistics as `gpuplan spot-history`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use maud::html;
use serde_json::json;

use super::{PageError, data_island, layout, money};
use crate::catalog::{self, MAX_SPOT_OBSERVATIONS, PriceFilter, SpotQuery};
use crate::daemon::http::error::ApiError;
use crate::daemon::http::params::Params;
use crate::daemon::http::state::{AppState, read};

const RANGES: [&str; 5] = ["24h", "7d", "30d", "90d", "all"];

fn since(range: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, ApiError> {
    let back = match range {
        "24h" => Duration::hours(24),
        "7d" => Duration::days(7),
        "30d" => Duration::days(30),
        "90d" => Duration::days(90),
        "all" => return Ok(DateTime::<Utc>::UNIX_EPOCH),
        other => {
            return Err(ApiError::bad_parameter(
                "range",
                format!("`{other}` is not one of {}", RANGES.join(", ")),
            ));
        }
    };
    Ok(now - back)
}

pub async fn page(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
) -> Result<Response, PageError> {
    let p = Params::parse(
        uri.query(),
        &["instance", "provider", "region", "zone", "range"],
    )?;
    let range = p.one("range")?.unwrap_or_else(|| "7d".to_owned());
    let since = since(&range, Utc::now())?;
    let Some(instance) = p.one("instance")? else {
        return pick(state).await;
    };
    let (provider, region, zone) = (p.one("provider")?, p.one("region")?, p.one("zone")?);
    let query = SpotQuery {
        instance_type: instance.clone(),
        provider: provider.clone(),
        region: region.clone(),
        zone: zone.clone(),
        since,
        max_observations: Some(MAX_SPOT_OBSERVATIONS),
    };
    let (history, on_demand, committed) = read(&state, move |store, fresh, _| {
        let history = catalog::spot_history(store, &query, &fresh)?;
        // Reference lines: the cheapest on-demand and committed prices of the
        // same type where the history is.
        let filter = PriceFilter {
            providers: provider.into_iter().collect(),
            regions: region.into_iter().collect(),
            ..PriceFilter::default()
        };
        let prices: Vec<_> = catalog::prices(store, &fresh, &filter)?
            .into_iter()
            .filter(|r| r.instance_type == instance)
            .collect();
        let cheapest = |pick: &dyn Fn(&str) -> bool| {
            prices
                .iter()
                .filter(|r| pick(&r.price_kind))
                .map(|r| r.usd_per_hour)
                .min_by(f64::total_cmp)
        };
        let on_demand = cheapest(&|k| k == "on_demand");
        let committed = cheapest(&|k| k != "on_demand" && k != "spot");
        Ok((history, on_demand, committed))
    })
    .await?;
    let chart = json!({
        // With `range=all` the window opens at the first observation.
        "since": history.series.iter().flat_map(|s| s.points.first())
            .map(|p| p.observed_at.timestamp()).min().unwrap_or(0).max(history.since.timestamp()),
        "until": history.until.timestamp(),
        "on_demand": on_demand,
        "committed": committed,
        "series": history.series.iter().map(|s| json!({
            "label": format!("{} {}", s.provider, s.zone),
            "points": s.points.iter().map(|p| [p.observed_at.timestamp() as f64, p.usd_per_hour]).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    let base = |r: &str| {
        let mut pairs = vec![
            ("instance", history.instance_type.clone()),
            ("range", r.to_owned()),
        ];
        for (key, value) in [
            ("provider", p.one("provider")),
            ("region", p.one("region")),
            ("zone", p.one("zone")),
        ] {
            if let Ok(Some(v)) = value {
                pairs.push((key, v));
            }
        }
        format!(
            "/ui/spot?{}",
            form_urlencoded::Serializer::new(String::new())
                .extend_pairs(pairs)
                .finish()
        )
    };
    let body = html! {
        h1 { "Spot history: " (history.instance_type) }
        p.ranges {
            @for r in RANGES {
                @if r == range { strong { (r) } } @else { a href=(base(r)) { (r) } }
                " "
            }
        }
        @if history.series.is_empty() {
            p { "No spot observations of " code { (history.instance_type) } " in this window." }
        } @else {
            div.chart id="spot-chart" data-kind="spot" {}
            (data_island("spot-data", &chart))
        }
        table.stats #spot-stats {
            thead { tr { th { "provider" } th { "zone" } th { "observations" } th { "min" } th { "p50" } th { "p95" } th { "max" } } }
            tbody {
                @for s in &history.series {
                    tr {
                        td { (s.provider) } td { (s.zone) } td.num { (s.stats.observations) }
                        td.num { (money(Some(s.stats.min), "")) } td.num { (money(Some(s.stats.p50), "")) }
                        td.num { (money(Some(s.stats.p95), "")) } td.num { (money(Some(s.stats.max), "")) }
                    }
                }
                @if let Some(all) = &history.stats {
                    tr.total {
                        td colspan="2" { "all zones" } td.num { (all.observations) }
                        td.num { (money(Some(all.min), "")) } td.num { (money(Some(all.p50), "")) }
                        td.num { (money(Some(all.p95), "")) } td.num { (money(Some(all.max), "")) }
                    }
                }
            }
        }
        p { "USD per instance-hour. On-demand: " (money(on_demand, "no on-demand price of this type here"))
            " · best committed: " (money(committed, "no committed price of this type here")) }
    };
    Ok(layout("Spot history", "/ui/spot", &body))
}

/// With no instance chosen: the instance types that have a spot price now.
async fn pick(state: Arc<AppState>) -> Result<Response, PageError> {
    let choices = read(&state, |store, fresh, _| {
        let filter = PriceFilter {
            kinds: vec![gpuplan_providers::PriceKind::Spot],
            ..PriceFilter::default()
        };
        Ok(catalog::prices(store, &fresh, &filter)?
            .into_iter()
            .map(|r| (r.gpu_model, r.instance_type, r.provider, r.region))
            .collect::<BTreeSet<_>>())
    })
    .await?;
    let body = html! {
        h1 { "Spot history" }
        form method="get" action="/ui/spot" {
            label { "Instance type " input name="instance" required; }
            label { "Region " input name="region"; }
            button type="submit" { "Show" }
        }
        @if choices.is_empty() {
            p { "No spot prices in the catalog yet." }
        } @else {
            table {
                thead { tr { th { "GPU" } th { "instance" } th { "provider" } th { "region" } } }
                tbody {
                    @for (gpu, instance, provider, region) in &choices {
                        tr {
                            td { (gpu) }
                            td { a href={ "/ui/spot?instance=" (urlencode(instance)) "&region=" (urlencode(region)) "&provider=" (urlencode(provider)) } { (instance) } }
                            td { (provider) } td { (region) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Spot history", "/ui/spot", &body))
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
