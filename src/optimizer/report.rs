//! From solver values to the result document (§4.2, §10.13): integers
//! rounded, tiny values cleaned, and every cost recomputed from the plan as
//! reported, never copied from the solver.

use std::collections::{BTreeMap, BTreeSet};

use super::build::{Kind, Vars};
use super::lp::Milp;
use super::setup::{Setup, active_hours};
use super::{
    ClassHourly, ClassReport, CostBreakdown, GpuHours, Hourly, ModelStats, OwnedReport, PlanResult,
    ReservedPurchase, Served, SolveOptions, Timings, V2Result, lp,
};

/// The result before solving: infeasible, no plan, what was excluded.
pub(super) fn empty(setup: &Setup<'_>, opts: &SolveOptions) -> PlanResult {
    let problem = setup.problem;
    let v2 = problem.schema_version >= 2;
    let demand: f64 = problem.classes.iter().flat_map(|c| &c.demand).sum();
    PlanResult {
        schema_version: problem.schema_version,
        name: problem.name.clone(),
        mode: if opts.relax { "lp" } else { "mip" },
        horizon_hours: problem.horizon(),
        status: "infeasible",
        objective: None,
        cost_breakdown: None,
        reserved: Vec::new(),
        hourly: Hourly::default(),
        baseline_on_demand_cost: None,
        savings: None,
        savings_pct: None,
        reserved_gpus: 0.0,
        gpu_hours: GpuHours {
            demand,
            owned: v2.then(|| owned_gpu_hours(setup)),
            ..GpuHours::default()
        },
        spot_share_of_demand: 0.0,
        reserved_utilization: None,
        excluded_offers: setup.excluded.clone(),
        infeasibility: None,
        model_stats: ModelStats::default(),
        timings: Timings::default(),
        mip_gap: if opts.relax {
            0.0
        } else {
            f64::from(lp::MIP_GAP)
        },
        best_bound: None,
        stopped_by: None,
        gap: None,
        v2: v2.then(|| v2_base(setup)),
        v3: None,
    }
}

/// `Σ_e n_e·g·H_e` over every owned entry, usable or not.
fn owned_gpu_hours(setup: &Setup<'_>) -> f64 {
    let problem = setup.problem;
    problem
        .owned
        .iter()
        .filter_map(|e| {
            let o = problem.offers.iter().find(|o| o.id == e.offer)?;
            let hours = active_hours(e.remaining_hours, problem.horizon()) as f64;
            Some(e.count * o.gpus_per_instance * hours)
        })
        .sum()
}

fn v2_base(setup: &Setup<'_>) -> V2Result {
    let problem = setup.problem;
    let mut owned = Vec::new();
    let mut sunk = 0.0;
    for e in &problem.owned {
        let Some(o) = problem.offers.iter().find(|o| o.id == e.offer) else {
            continue;
        };
        let Some(opt) = o.reserved.iter().find(|r| r.id == e.option) else {
            continue;
        };
        let hours = active_hours(e.remaining_hours, problem.horizon());
        let r = opt.effective_hourly();
        let cost = e.count * r * hours as f64;
        sunk += cost;
        owned.push(OwnedReport {
            offer: e.offer.clone(),
            option: e.option.clone(),
            count: e.count,
            remaining_hours: e.remaining_hours,
            active_hours: hours,
            gpus: e.count * o.gpus_per_instance,
            effective_hourly_price: r,
            sunk_cost: cost,
            usable: setup.offers.iter().any(|k| k.offer.id == o.id),
        });
    }
    let classes = problem
        .classes
        .iter()
        .zip(&setup.classes)
        .map(|(c, info)| ClassReport {
            id: c.id.clone(),
            perf_basis: c.perf_basis.clone(),
            demand_units: c.demand.iter().sum(),
            eligible_offers: info.eligible,
            served_units: Served::default(),
            spot_share_of_demand: 0.0,
            excluded_offers: info.excluded.clone(),
        })
        .collect();
    V2Result {
        sunk_cost: sunk,
        total_cost: None,
        owned,
        owned_utilization: None,
        classes,
    }
}

/// A solved plan as reported.
#[derive(Clone)]
pub(super) struct Plan {
    pub breakdown: CostBreakdown,
    pub reserved: Vec<ReservedPurchase>,
    /// New instances bought per eligible offer.
    pub bought: Vec<f64>,
    pub reserved_gpus: f64,
    pub hourly: Hourly,
    pub gpu_hours: GpuHours,
    pub served: Vec<Served>,
}

impl Plan {
    pub fn objective(&self) -> f64 {
        self.breakdown.reserved + self.breakdown.spot + self.breakdown.on_demand
    }
}

/// Reads the plan out of the solver's `values`; `owned` is the owned
/// GPU-hours the result already counts (v2).
pub(super) fn extract(
    setup: &Setup<'_>,
    milp: &Milp,
    vars: &Vars,
    values: &[f64],
    owned: Option<f64>,
) -> Plan {
    let problem = setup.problem;
    let v2 = problem.schema_version >= 2;
    let value = |var: usize| {
        let v = values[var];
        if milp.vars[var].integer {
            v.round()
        } else if v.abs() < 1e-9 {
            0.0
        } else {
            v
        }
    };
    let t_len = problem.horizon();
    let horizon = t_len as f64;
    let mut breakdown = CostBreakdown {
        reserved: 0.0,
        spot: 0.0,
        on_demand: 0.0,
    };
    let mut reserved = Vec::new();
    let mut bought = vec![0.0; setup.offers.len()];
    for (k, e) in setup.offers.iter().enumerate() {
        for (j, opt) in e.offer.reserved.iter().enumerate() {
            let Some(var) = vars.reserved[k][j] else {
                continue;
            };
            let count = value(var);
            if count <= 0.0 {
                continue;
            }
            let r = opt.effective_hourly();
            breakdown.reserved += horizon * r * count;
            bought[k] += count;
            reserved.push(ReservedPurchase {
                offer: e.offer.id.clone(),
                option: opt.id.clone(),
                count,
                gpus: e.g * count,
                effective_hourly_price: r,
                horizon_cost: horizon * r * count,
                term_hours: opt.term_hours,
                commitment_liability: count * (opt.upfront + opt.hourly_price * opt.term_hours),
                break_even_utilization: e.offer.on_demand_price.filter(|o| *o > 0.0).map(|o| r / o),
            });
        }
    }
    let reserved_gpus: f64 = setup.offers.iter().zip(&bought).map(|(e, n)| e.g * n).sum();

    // Per level: each offer's spot and on-demand totals, and each class's shares.
    let mut totals: Vec<Vec<(usize, f64, f64)>> = Vec::with_capacity(vars.levels.len());
    let mut shares: Vec<Vec<(usize, usize, Kind, f64)>> = Vec::with_capacity(vars.levels.len());
    for (l, lv) in vars.levels.iter().enumerate() {
        let mut by_offer: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
        let mut has_total: BTreeSet<(usize, Kind)> = BTreeSet::new();
        for (k, kind, var) in &lv.totals {
            let slot = by_offer.entry(*k).or_default();
            match kind {
                Kind::Spot => slot.0 += value(*var),
                Kind::OnDemand => slot.1 += value(*var),
                Kind::Reserved => {}
            }
            has_total.insert((*k, *kind));
        }
        let mut level_shares = Vec::new();
        let t = setup.levels[l].first;
        // A pool's reserved share is handed to its offers in order, each up
        // to what it holds: the pool's split never exceeds their sum.
        let mut room: BTreeMap<usize, f64> = BTreeMap::new();
        for part in &lv.parts {
            let x = value(part.var);
            if part.kind == Kind::Reserved {
                let mut left = x;
                for &k in &setup.reserved_pools[part.offer] {
                    let free = room
                        .entry(k)
                        .or_insert_with(|| bought[k] + setup.offers[k].owned_at(t));
                    let take = left.min(*free);
                    if take > 0.0 {
                        *free -= take;
                        left -= take;
                        level_shares.push((k, part.class, Kind::Reserved, take));
                    }
                }
                // The solver's tolerance can leave a sliver over the pool's
                // capacity; it stays with the class rather than vanish.
                if left > 0.0
                    && let Some(&k) = setup.reserved_pools[part.offer].last()
                {
                    level_shares.push((k, part.class, Kind::Reserved, left));
                }
                continue;
            }
            if !has_total.contains(&(part.offer, part.kind)) {
                let slot = by_offer.entry(part.offer).or_default();
                match part.kind {
                    Kind::Spot => slot.0 += x,
                    _ => slot.1 += x,
                }
            }
            level_shares.push((part.offer, part.class, part.kind, x));
        }
        for (k, c) in &lv.whole_reserved {
            let capacity = bought[*k] + setup.offers[*k].owned_at(t);
            level_shares.push((*k, *c, Kind::Reserved, capacity));
        }
        totals.push(by_offer.into_iter().map(|(k, (s, o))| (k, s, o)).collect());
        shares.push(level_shares);
    }

    let mut gpu_hours = GpuHours {
        demand: problem.classes.iter().flat_map(|c| &c.demand).sum(),
        reserved: reserved_gpus * horizon,
        owned,
        ..GpuHours::default()
    };
    let mut spot_series: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut od_series: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for (t, l) in setup.level_of.iter().enumerate() {
        for &(k, s, o) in &totals[*l] {
            let e = &setup.offers[k];
            if s > 0.0 {
                spot_series.entry(k).or_insert_with(|| vec![0.0; t_len])[t] = s;
                breakdown.spot += e.offer.spot_price.at(t).unwrap_or(0.0) * s;
                gpu_hours.spot_paid += e.g * s;
                gpu_hours.spot_effective += e.gamma * e.g * s;
            }
            if o > 0.0 {
                od_series.entry(k).or_insert_with(|| vec![0.0; t_len])[t] = o;
                breakdown.on_demand += e.offer.on_demand_price.unwrap_or(0.0) * o;
                gpu_hours.on_demand += e.g * o;
            }
        }
    }
    let name = |k: usize| setup.offers[k].offer.id.clone();
    let mut hourly = Hourly {
        spot_instances: spot_series.into_iter().map(|(k, v)| (name(k), v)).collect(),
        on_demand_instances: od_series.into_iter().map(|(k, v)| (name(k), v)).collect(),
        classes: None,
        scenarios: None,
    };

    let mut served = vec![Served::default(); problem.classes.len()];
    if v2 {
        let mut split: Vec<ClassHourly> = vec![ClassHourly::default(); problem.classes.len()];
        for (t, l) in setup.level_of.iter().enumerate() {
            for &(k, c, kind, x) in &shares[*l] {
                if x <= 0.0 {
                    continue;
                }
                let e = &setup.offers[k];
                let units = setup.units(k, c).unwrap_or(0.0);
                let (series, served_units) = match kind {
                    Kind::Reserved => (&mut split[c].reserved_instances, &mut served[c].reserved),
                    Kind::Spot => (&mut split[c].spot_instances, &mut served[c].spot),
                    Kind::OnDemand => (&mut split[c].on_demand_instances, &mut served[c].on_demand),
                };
                series
                    .entry(e.offer.id.clone())
                    .or_insert_with(|| vec![0.0; t_len])[t] += x;
                *served_units += units * x * if kind == Kind::Spot { e.gamma } else { 1.0 };
            }
        }
        hourly.classes = Some(
            problem
                .classes
                .iter()
                .zip(split)
                .map(|(c, h)| (c.id.clone(), h))
                .collect(),
        );
    }
    Plan {
        breakdown,
        reserved,
        bought,
        reserved_gpus,
        hourly,
        gpu_hours,
        served,
    }
}
