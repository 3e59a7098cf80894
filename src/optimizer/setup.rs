//! What the model is built from: which offers serve which classes, at what
//! performance, the hours grouped into levels, and the exact reductions.

use std::collections::HashMap;

use super::Excluded;
use super::model::{DemandClass, Offer, Policy, Problem};

/// The filters one eligibility check applies: the policy's, or a class's.
struct Filters<'a> {
    clouds: &'a Option<Vec<String>>,
    regions: &'a Option<Vec<String>>,
    models: &'a Option<Vec<String>>,
    min_memory: Option<f64>,
}

impl Filters<'_> {
    /// The first filter `o` fails, in the order cloud, region, gpu_model, gpu_memory.
    fn reason(&self, o: &Offer) -> Option<&'static str> {
        let outside = |list: &Option<Vec<String>>, v: &str| {
            list.as_ref().is_some_and(|l| !l.iter().any(|x| x == v))
        };
        if outside(self.clouds, &o.cloud) {
            Some("cloud")
        } else if outside(self.regions, &o.region) {
            Some("region")
        } else if outside(self.models, &o.gpu_model) {
            Some("gpu_model")
        } else if self
            .min_memory
            .is_some_and(|min| o.gpu_memory_gib.is_none_or(|m| m < min))
        {
            Some("gpu_memory")
        } else {
            None
        }
    }
}

fn policy_filters(p: &Policy) -> Filters<'_> {
    Filters {
        clouds: &p.allowed_clouds,
        regions: &p.allowed_regions,
        models: &p.gpu_models,
        min_memory: p.min_gpu_memory_gib,
    }
}

fn class_filters(c: &DemandClass) -> Filters<'_> {
    Filters {
        clouds: &c.allowed_clouds,
        regions: &c.allowed_regions,
        models: &c.gpu_models,
        min_memory: c.min_gpu_memory_gib,
    }
}

/// A class with its effective share caps.
pub(super) struct ClassInfo {
    pub sigma: Option<f64>,
    pub pi: Option<f64>,
    /// Whether spot may serve it at all (`σ_c ≠ 0` and `π_c ≠ 0`).
    pub spot_ok: bool,
    pub eligible: usize,
    pub excluded: Vec<Excluded>,
}

/// An offer that serves at least one class.
pub(super) struct OfferInfo<'a> {
    pub offer: &'a Offer,
    pub g: f64,
    pub gamma: f64,
    /// `φ_ck` for each class `c` the offer may serve, `None` where it may not.
    pub phi: Vec<Option<f64>>,
    /// Whether it can run spot in some hour (γ > 0, cap ≠ 0, a price).
    pub spot: bool,
    /// Whether its on-demand capacity gets variables (after reductions).
    pub on_demand: bool,
    /// Which reserved options get variables (after reductions).
    pub options: Vec<bool>,
    /// Owned instances as `(hours active, count)`.
    pub owned: Vec<(usize, f64)>,
}

impl OfferInfo<'_> {
    /// `W_kt`: owned instances active in hour `t`.
    pub fn owned_at(&self, t: usize) -> f64 {
        self.owned
            .iter()
            .filter(|(h, _)| t < *h)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn has_reserved(&self) -> bool {
        !self.offer.reserved.is_empty()
    }
}

/// Hours that share every hour-dependent input: each class's demand, the
/// hourly spot prices and the owned capacity.
pub(super) struct Level {
    /// How many hours share it.
    pub hours: f64,
    /// Its first hour, which stands for all of them.
    pub first: usize,
    /// `D_c` per class.
    pub demand: Vec<f64>,
}

pub(super) struct Setup<'a> {
    pub problem: &'a Problem,
    pub classes: Vec<ClassInfo>,
    pub offers: Vec<OfferInfo<'a>>,
    pub excluded: Vec<Excluded>,
    pub levels: Vec<Level>,
    pub level_of: Vec<usize>,
    /// Offers with reserved capacity (options or owned instances), pooled
    /// when they do the same work per instance for every class.
    pub reserved_pools: Vec<Vec<usize>>,
    /// Per class, the cheapest uncapped on-demand offer serving it and its
    /// price per unit of work, once [`Setup::reduce`] ran (none with whole
    /// hourly counts): supply no cheaper for that class is dropped.
    pub anchors: Vec<Option<(usize, f64)>>,
    /// With whole hourly counts, once [`Setup::reduce`] ran: the offers
    /// whose on-demand is uncapped, which can stand in, instance for
    /// instance, for whatever costs no less and does no more work
    /// ([`Setup::swapped_out`]).
    pub stand_ins: Vec<usize>,
}

impl<'a> Setup<'a> {
    pub fn new(problem: &'a Problem) -> Self {
        let p = &problem.policy;
        let policy = policy_filters(p);
        let mut classes: Vec<ClassInfo> = problem
            .classes
            .iter()
            .map(|c| {
                let sigma = c.max_spot_share.unwrap_or(p.max_spot_share);
                let pi = c.max_pool_share.unwrap_or(p.max_pool_share);
                ClassInfo {
                    sigma,
                    pi,
                    spot_ok: sigma != Some(0.0) && pi != Some(0.0),
                    eligible: 0,
                    excluded: Vec::new(),
                }
            })
            .collect();
        let mut excluded = Vec::new();
        let mut offers = Vec::new();
        for o in &problem.offers {
            if let Some(reason) = policy.reason(o) {
                excluded.push(Excluded {
                    offer: o.id.clone(),
                    reason,
                });
                continue;
            }
            let mut phi = Vec::with_capacity(problem.classes.len());
            for (c, class) in problem.classes.iter().enumerate() {
                let factor = match class_filters(class).reason(o) {
                    Some(reason) => Err(reason),
                    None => match &class.perf {
                        None => Ok(1.0),
                        Some(perf) => o.perf_in(perf).ok_or("perf"),
                    },
                };
                match factor {
                    Ok(f) => {
                        classes[c].eligible += 1;
                        phi.push(Some(f));
                    }
                    Err(reason) => {
                        classes[c].excluded.push(Excluded {
                            offer: o.id.clone(),
                            reason,
                        });
                        phi.push(None);
                    }
                }
            }
            if phi.iter().all(Option::is_none) {
                excluded.push(Excluded {
                    offer: o.id.clone(),
                    reason: "no_class",
                });
                continue;
            }
            let gamma = o.spot_yield(p.spot_overhead_factor);
            let owned = problem
                .owned
                .iter()
                .filter(|e| e.offer == o.id)
                .map(|e| (active_hours(e.remaining_hours, problem.horizon()), e.count))
                .filter(|(h, n)| *h > 0 && *n > 0.0)
                .collect();
            offers.push(OfferInfo {
                offer: o,
                g: o.gpus_per_instance,
                gamma,
                phi,
                spot: !o.spot_price.is_none() && gamma > 0.0 && o.max_spot_instances != Some(0.0),
                on_demand: o.on_demand_price.is_some() && o.max_on_demand_instances != Some(0.0),
                options: vec![o.max_reserved_instances != Some(0.0); o.reserved.len()],
                owned,
            });
        }
        let (levels, level_of) = levels(problem, &offers);
        let mut pools: Vec<(Vec<Option<u64>>, Vec<usize>)> = Vec::new();
        for (k, e) in offers.iter().enumerate() {
            if !e.has_reserved() && e.owned.is_empty() {
                continue;
            }
            let key: Vec<Option<u64>> = e
                .phi
                .iter()
                .map(|f| f.map(|f| (f * e.g).to_bits()))
                .collect();
            match pools.iter_mut().find(|(k2, _)| *k2 == key) {
                Some((_, members)) => members.push(k),
                None => pools.push((key, vec![k])),
            }
        }
        let reserved_pools = pools.into_iter().map(|(_, members)| members).collect();
        Self {
            anchors: vec![None; classes.len()],
            stand_ins: Vec::new(),
            problem,
            classes,
            offers,
            excluded,
            levels,
            level_of,
            reserved_pools,
        }
    }

    /// `φ_ck·g_k`: work units per instance-hour of offer `k` for class `c`.
    pub fn units(&self, k: usize, c: usize) -> Option<f64> {
        let o = &self.offers[k];
        o.phi[c].map(|f| f * o.g)
    }

    /// Per class, the cheapest uncapped on-demand offer serving it, by
    /// price per unit of work; none with whole hourly counts.
    fn find_anchors(&self, mip: bool) -> Vec<Option<(usize, f64)>> {
        if mip && self.problem.policy.integer_hourly {
            return vec![None; self.classes.len()];
        }
        (0..self.classes.len())
            .map(|c| {
                self.offers
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.on_demand && e.offer.max_on_demand_instances.is_none())
                    .filter_map(|(k, e)| {
                        let units = self.units(k, c)?;
                        Some((k, e.offer.on_demand_price.unwrap_or(f64::INFINITY) / units))
                    })
                    .min_by(|a, b| a.1.total_cmp(&b.1))
            })
            .collect()
    }

    /// Applies the reserved-option reductions of the module docs and finds
    /// the on-demand anchors the build drops dominated supply by; returns how
    /// many reserved variables were removed.
    pub fn reduce(&mut self, mip: bool) -> usize {
        let mut removed = 0;
        for e in &mut self.offers {
            let best = e
                .offer
                .reserved
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.effective_hourly().total_cmp(&b.1.effective_hourly()))
                .map(|(j, _)| j);
            for (j, keep) in e.options.iter_mut().enumerate() {
                if *keep && Some(j) != best {
                    *keep = false;
                    removed += 1;
                }
            }
        }
        self.anchors = self.find_anchors(mip);
        if mip && self.problem.policy.integer_hourly {
            self.stand_ins = (0..self.offers.len())
                .filter(|k| {
                    let e = &self.offers[*k];
                    e.on_demand && e.offer.max_on_demand_instances.is_none()
                })
                .collect();
        }
        for k in 0..self.offers.len() {
            // A new reservation is dominated when, for every class it could
            // serve, the anchor's on-demand unit costs no more than its own.
            let per_unit: Vec<Option<(f64, f64)>> = (0..self.classes.len())
                .map(|c| Some((self.units(k, c)?, self.anchors[c].map_or(-1.0, |a| a.1))))
                .collect();
            let e = &mut self.offers[k];
            for (j, keep) in e.options.iter_mut().enumerate() {
                let r = e.offer.reserved[j].effective_hourly();
                let dominated = per_unit
                    .iter()
                    .flatten()
                    .all(|(units, b)| *b >= 0.0 && r / units >= *b);
                if *keep && dominated {
                    *keep = false;
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Whether on-demand of offer `k` serving class `c` is dominated by the
    /// class's anchor.
    pub fn od_dominated(&self, k: usize, c: usize) -> bool {
        self.anchors[c].is_some_and(|(anchor, b)| {
            k != anchor
                && self.offers[k]
                    .offer
                    .on_demand_price
                    .unwrap_or(f64::INFINITY)
                    / self.units(k, c).unwrap_or(0.0)
                    >= b
        })
    }

    /// Whether whole instances of offer `k` at `price` an hour, each doing
    /// `units(c)` work for the classes `classes`, are never needed: an
    /// uncapped on-demand offer costs no more and does at least as much work
    /// for each of them. Swapping one instance for one keeps every coverage
    /// row met, caps no tighter (it has none) and the spot shares no
    /// tighter (on-demand counts in none), so an optimal plan without `k`
    /// exists. `k`'s own on-demand can stand in for its spot; for its
    /// on-demand, of two that match in price and work the first is kept.
    pub fn swapped_out(
        &self,
        k: usize,
        price: f64,
        units: impl Fn(usize) -> f64,
        classes: &[usize],
        on_demand: bool,
    ) -> bool {
        self.stand_ins.iter().any(|&s| {
            let Some(p) = self.offers[s].offer.on_demand_price else {
                return false;
            };
            let theirs = |c: usize| self.units(s, c).unwrap_or(0.0);
            let covers = classes
                .iter()
                .all(|&c| self.units(s, c).is_some() && theirs(c) >= units(c));
            let does_more = classes.iter().any(|&c| theirs(c) > units(c));
            (s != k || !on_demand)
                && p <= price
                && covers
                && (!on_demand || p < price || does_more || s < k)
        })
    }

    /// Whether spot of offer `k` at `price` serving class `c` is dominated by
    /// the class's anchor.
    pub fn spot_dominated(&self, k: usize, c: usize, price: f64) -> bool {
        self.anchors[c].is_some_and(|(_, b)| {
            price / (self.units(k, c).unwrap_or(0.0) * self.offers[k].gamma) >= b
        })
    }
}

/// `H_e = min(T, remaining_hours)`.
pub(super) fn active_hours(remaining: Option<u64>, horizon: usize) -> usize {
    remaining.map_or(horizon, |h| {
        usize::try_from(h).unwrap_or(usize::MAX).min(horizon)
    })
}

/// Groups equal hours, in order of first appearance.
fn levels(problem: &Problem, offers: &[OfferInfo<'_>]) -> (Vec<Level>, Vec<usize>) {
    let t_len = problem.horizon();
    let hourly_spot: Vec<&OfferInfo<'_>> = offers
        .iter()
        .filter(|e| matches!(e.offer.spot_price, super::model::SpotPrice::Hourly(_)))
        .collect();
    let with_owned: Vec<&OfferInfo<'_>> = offers.iter().filter(|e| !e.owned.is_empty()).collect();
    let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut levels: Vec<Level> = Vec::new();
    let mut level_of = Vec::with_capacity(t_len);
    let mut key = Vec::new();
    for t in 0..t_len {
        key.clear();
        key.extend(problem.classes.iter().map(|c| c.demand[t].to_bits()));
        key.extend(
            hourly_spot
                .iter()
                .map(|e| e.offer.spot_price.at(t).map_or(u64::MAX, f64::to_bits)),
        );
        key.extend(with_owned.iter().map(|e| e.owned_at(t).to_bits()));
        let l = match index.get(&key) {
            Some(&l) => l,
            None => {
                index.insert(key.clone(), levels.len());
                levels.push(Level {
                    hours: 0.0,
                    first: t,
                    demand: problem.classes.iter().map(|c| c.demand[t]).collect(),
                });
                levels.len() - 1
            }
        };
        levels[l].hours += 1.0;
        level_of.push(l);
    }
    (levels, level_of)
}
