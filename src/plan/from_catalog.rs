//! From the catalog and a demand series to an optimizer problem: one offer per
//! (provider, region, instance type) with its current on-demand price, an
//! expected spot price, its reserved / commit / savings-plan options, the
//! capacity caps of price sheets, and an interruption rate from the spot
//! advisor's bucket.
//!
//! - Expected spot price: the time-weighted median of the stored history over
//!   the window (all zones of the region), for sources with history; else the
//!   median of the current spot list prices of the region's zones.
//! - Interruption rate (docs/planning-model.md §2): `ρ = min(1, λ·(d + c/2))` with
//!   `λ` the advisor bucket's upper edge per month / 730 h (30% for the
//!   open-ended ">20%" bucket), `d` the restart plus warm-up hours and `c` the
//!   checkpoint interval in hours.

use std::collections::BTreeMap;
use std::time::Duration;

use gpuplan_providers::{PriceKind, PriceScope};

use crate::catalog::{self, CatalogRecord, Freshness, PriceFilter, SpotQuery};
use crate::optimizer::{
    DemandClass, Offer, Owned, Policy, Problem, ReservedOption, ValidationError,
};
use crate::store::{Store, StoreError};

/// What to take from the catalog.
#[derive(Debug, Clone)]
pub struct CatalogInputs {
    /// GPU models or families (`H100`); empty means all.
    pub gpus: Vec<String>,
    /// Providers (`aws`, `file:onprem`, `file` for every sheet); empty means all.
    pub clouds: Vec<String>,
    /// Regions; empty means all.
    pub regions: Vec<String>,
    /// ISO country codes (see [`PriceFilter::countries`]); empty means all.
    pub countries: Vec<String>,
    pub spot_window: Duration,
    pub restart_hours: f64,
    pub checkpoint_hours: f64,
}

/// A problem built from the catalog, and how fresh its data was.
#[derive(Debug, Clone)]
pub struct Built {
    pub problem: Problem,
    /// Sources whose data behind the offers is stale.
    pub stale_sources: Vec<String>,
}

/// Upper edge of each spot-advisor interruption bucket, as a monthly fraction.
const BUCKET_UPPER: [f64; 5] = [0.05, 0.10, 0.15, 0.20, 0.30];

/// The share of instances interrupted in a month at `bucket`'s upper edge
/// (30% for the open-ended ">20%" bucket).
#[must_use]
pub fn bucket_monthly(bucket: f64) -> f64 {
    BUCKET_UPPER[(bucket.max(0.0) as usize).min(BUCKET_UPPER.len() - 1)]
}

/// `ρ = min(1, λ·(d + c/2))`, `λ` per instance-hour from the monthly bucket.
#[must_use]
pub fn interruption_rate(bucket: f64, restart_hours: f64, checkpoint_hours: f64) -> f64 {
    (bucket_monthly(bucket) / 730.0 * (restart_hours + checkpoint_hours / 2.0)).min(1.0)
}

fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Builds the problem for the demand `classes` under `policy` from the
/// current catalog, with nothing owned yet (see [`attach_owned`]).
///
/// # Errors
/// On a store error.
pub fn build_problem(
    store: &dyn Store,
    fresh: &Freshness,
    classes: Vec<DemandClass>,
    inputs: &CatalogInputs,
    policy: Policy,
) -> Result<Built, StoreError> {
    let (offers, stale_sources) = catalog_offers(store, fresh, inputs)?;
    Ok(Built {
        problem: Problem::from_parts(
            Some("catalog plan".to_owned()),
            classes,
            offers.into_iter().map(|o| o.offer).collect(),
            Vec::new(),
            policy,
        ),
        stale_sources,
    })
}

/// One offer of the catalog and what its figures rest on.
#[derive(Debug, Clone)]
pub struct CatalogOffer {
    pub offer: Offer,
    /// The spot advisor's interruption bucket (0 for "<5%" … 4 for ">20%").
    pub interruption_bucket: Option<f64>,
    /// Observations behind the expected spot price; `None` when it is the
    /// median of current list prices.
    pub spot_observations: Option<usize>,
    /// kg CO2e per running instance-hour, from the region and GPU facts.
    pub kgco2e_per_hour: Option<f64>,
}

/// The catalog's offers, one per (provider, region, instance type), with
/// the sources whose data behind them is stale.
///
/// # Errors
/// On a store error.
pub fn catalog_offers(
    store: &dyn Store,
    fresh: &Freshness,
    inputs: &CatalogInputs,
) -> Result<(Vec<CatalogOffer>, Vec<String>), StoreError> {
    let filter = PriceFilter {
        gpus: inputs.gpus.clone(),
        providers: inputs.clouds.clone(),
        regions: inputs.regions.clone(),
        countries: inputs.countries.clone(),
        // A plan buys machines: a price of GPUs alone leaves out the machine
        // they must be attached to.
        scopes: vec![PriceScope::Instance],
        ..PriceFilter::default()
    };
    let records = catalog::prices(store, fresh, &filter)?;
    let buckets = store.availability_of("interruption_bucket")?;
    let since = fresh.now
        - chrono::Duration::from_std(inputs.spot_window).unwrap_or(chrono::Duration::days(7));

    let mut groups: BTreeMap<(String, String, String), Vec<CatalogRecord>> = BTreeMap::new();
    let bounded = |r: &CatalogRecord| {
        r.price_kind
            .parse::<PriceKind>()
            .is_ok_and(PriceKind::bounded_run)
    };
    for r in records.into_iter().filter(|r| !bounded(r)) {
        groups
            .entry((
                r.provider.clone(),
                r.region.clone(),
                r.instance_type.clone(),
            ))
            .or_default()
            .push(r);
    }
    let mut stale = std::collections::BTreeSet::new();
    let mut offers = Vec::new();
    for ((provider, region, instance_type), recs) in groups {
        let first = &recs[0];
        if recs.iter().any(|r| r.stale) {
            stale.insert(provider.clone());
        }
        let kind = |r: &CatalogRecord| r.price_kind.parse::<PriceKind>().ok();
        let on_demand: Vec<&CatalogRecord> = recs
            .iter()
            .filter(|r| kind(r) == Some(PriceKind::OnDemand))
            .collect();
        let spot: Vec<&CatalogRecord> = recs
            .iter()
            .filter(|r| kind(r) == Some(PriceKind::Spot))
            .collect();
        let mut spot_observations = None;
        let spot_price = if spot.iter().any(|r| r.observed_at.is_some()) {
            let history = catalog::spot_history(
                store,
                &SpotQuery {
                    instance_type: instance_type.clone(),
                    provider: Some(provider.clone()),
                    region: Some(region.clone()),
                    zone: None,
                    since,
                    max_observations: None,
                },
                fresh,
            )?;
            spot_observations = history.stats.as_ref().map(|s| s.observations);
            history.stats.map(|s| s.p50)
        } else {
            median(&mut spot.iter().map(|r| r.usd_per_hour).collect::<Vec<_>>())
        };
        let reserved: Vec<ReservedOption> = recs
            .iter()
            .filter_map(|r| {
                let hours = kind(r)?.term_hours()?;
                Some(ReservedOption {
                    id: match &r.offering_class {
                        Some(class) => format!("{}-{class}", r.price_kind),
                        None => r.price_kind.clone(),
                    },
                    term_hours: hours,
                    hourly_price: r.recurring_usd_per_hour,
                    upfront: r.upfront_usd,
                })
            })
            .collect();
        let cap = |rs: &[&CatalogRecord]| rs.iter().find_map(|r| r.max_instances).map(f64::from);
        let reserved_records: Vec<&CatalogRecord> = recs
            .iter()
            .filter(|r| kind(r).and_then(PriceKind::term).is_some())
            .collect();
        let bucket = buckets
            .get(&(provider.clone(), region.clone(), instance_type.clone()))
            .copied();
        let rate = bucket.map_or(0.0, |b| {
            interruption_rate(b, inputs.restart_hours, inputs.checkpoint_hours)
        });
        let cloud = provider.clone();
        let kgco2e_per_hour = first.kgco2e_per_hour;
        let offer = Offer {
            id: format!("{provider}/{region}/{instance_type}"),
            spot_pool: format!("{provider}/{region}/{instance_type}"),
            cloud,
            region,
            gpu_model: first.gpu_model.clone(),
            gpu_form_factor: first.gpu_form_factor.clone(),
            gpu_memory_gib: first.gpu_memory_gib,
            gpus_per_instance: first.gpu_count,
            on_demand_price: median(
                &mut on_demand.iter().map(|r| r.usd_per_hour).collect::<Vec<_>>(),
            ),
            spot_price: spot_price.into(),
            spot_interruption_rate: rate,
            max_spot_instances: cap(&spot),
            max_on_demand_instances: cap(&on_demand),
            max_reserved_instances: cap(&reserved_records),
            reserved,
            instance_type,
        };
        offers.push(CatalogOffer {
            offer,
            interruption_bucket: bucket,
            spot_observations,
            kgco2e_per_hour,
        });
    }
    Ok((offers, stale.into_iter().collect()))
}

/// Adds owned reservations to a catalog problem, which then plans as
/// version 2. An entry whose offer or option the problem lacks is an error
/// naming `owned[i]` when the request gave it (`strict`); `[planner.owned]`
/// entries are the team's whole portfolio, so those outside this plan's
/// filters are left out and returned, one line each, for the result to show.
///
/// # Errors
/// A given entry that matches no offer or option of the problem.
pub fn attach_owned(
    problem: &mut Problem,
    owned: Vec<Owned>,
    strict: bool,
) -> Result<Vec<String>, ValidationError> {
    let mut skipped = Vec::new();
    let mut kept = Vec::new();
    for (i, mut e) in owned.into_iter().enumerate() {
        // An entry without an option (a reservation found in the bills, which
        // do not name the term) takes the offer's shortest-term option.
        if e.option.is_empty()
            && let Some(r) = problem
                .offers
                .iter()
                .find(|o| o.id == e.offer)
                .and_then(|o| {
                    o.reserved
                        .iter()
                        .min_by(|a, b| a.term_hours.total_cmp(&b.term_hours))
                })
        {
            e.option = r.id.clone();
        }
        let why = match problem.offers.iter().find(|o| o.id == e.offer) {
            None => Some(format!(
                "offer `{}` is not among this plan's catalog offers (check its GPU, cloud and region filters)",
                e.offer
            )),
            Some(o) if !o.reserved.iter().any(|r| r.id == e.option) => Some(format!(
                "offer `{}` has no reserved option `{}` in the catalog; it has: {}",
                e.offer,
                e.option,
                o.reserved
                    .iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Some(_) => None,
        };
        match why {
            None => kept.push(e),
            Some(message) if strict => {
                return Err(ValidationError {
                    path: format!("owned[{i}]"),
                    message,
                });
            }
            Some(message) => skipped.push(message),
        }
    }
    if !kept.is_empty() {
        problem.schema_version = 2;
        problem.owned.extend(kept);
    }
    Ok(skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::SpotPrice;

    fn one() -> Vec<DemandClass> {
        vec![DemandClass::default_class(vec![1.0])]
    }
    use crate::store::test_support::{at, snapshot, synced};

    #[test]
    fn offers_come_from_the_catalog_with_history_based_spot_and_staleness() {
        // gpu0: on-demand 3.0, commit_1y with 876 upfront, spot 1.0 then 2.0.
        let (_dir, store) = synced(&snapshot(2, 3.0));
        let inputs = CatalogInputs {
            gpus: vec![],
            clouds: vec![],
            regions: vec![],
            countries: vec![],
            spot_window: Duration::from_secs(7 * 86400),
            restart_hours: 0.5,
            checkpoint_hours: 1.0,
        };
        let fresh = |now| Freshness::read(&store, BTreeMap::new(), now).unwrap();
        // Two hours after the sync: exactly twice the (default hourly) interval, not stale yet.
        let built =
            build_problem(&store, &fresh(at(2)), one(), &inputs, Policy::default()).unwrap();
        assert_eq!(built.problem.offers.len(), 2);
        let gpu0 = &built.problem.offers[0];
        assert_eq!(gpu0.id, "aws/us-east-1/gpu0.xlarge");
        assert_eq!(gpu0.on_demand_price, Some(3.0));
        // 1.0 held for an hour, then 2.0 for an hour: the time-weighted median is 1.0.
        assert_eq!(gpu0.spot_price, SpotPrice::Flat(1.0));
        assert_eq!(gpu0.reserved.len(), 1);
        assert_eq!(
            (gpu0.reserved[0].id.as_str(), gpu0.reserved[0].upfront),
            ("commit_1y", 876.0)
        );
        assert!(built.stale_sources.is_empty());

        let later =
            build_problem(&store, &fresh(at(30)), one(), &inputs, Policy::default()).unwrap();
        assert_eq!(later.stale_sources, vec!["aws"]);
    }

    #[test]
    fn countries_keep_the_offers_of_their_regions_only() {
        // Both offers are in us-east-1 (the United States).
        let (_dir, store) = synced(&snapshot(2, 3.0));
        let fresh = Freshness::read(&store, BTreeMap::new(), at(1)).unwrap();
        let offers = |countries: &[&str]| {
            let inputs = CatalogInputs {
                gpus: vec![],
                clouds: vec![],
                regions: vec![],
                countries: countries.iter().map(|c| (*c).to_owned()).collect(),
                spot_window: Duration::from_secs(7 * 86400),
                restart_hours: 0.5,
                checkpoint_hours: 1.0,
            };
            build_problem(&store, &fresh, one(), &inputs, Policy::default())
                .unwrap()
                .problem
                .offers
                .len()
        };
        assert_eq!(offers(&["us"]), 2);
        assert_eq!(offers(&["DE", "FR"]), 0);
        assert_eq!(offers(&[]), 2);
    }

    #[test]
    fn advisor_buckets_become_small_interruption_rates() {
        // <5%/month, 30 min restart, hourly checkpoints: 0.05/730 x 1 h.
        assert!((interruption_rate(0.0, 0.5, 1.0) - 0.05 / 730.0).abs() < 1e-12);
        assert!((interruption_rate(4.0, 0.5, 1.0) - 0.30 / 730.0).abs() < 1e-12);
        assert_eq!(interruption_rate(9.0, 1e9, 0.0), 1.0);
    }

    #[test]
    fn medians_of_even_and_odd_lists() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
