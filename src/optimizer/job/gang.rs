//! A gang (§12.6): one homogeneous cluster of n instances of one offer,
//! running together until the work is done. Every option (offer, n) has a
//! closed form, so the gang is solved by enumerating them: at most
//! 1000 offers × 4096 nodes.

use std::cmp::Ordering;

use serde_json::json;

use super::{
    Eligible, GangRun, JobProblem, JobResult, Objective, Plan, Purchase, Ranked, eligibility,
    offer_rate, within, yield_of,
};

/// The filters of §12.6, in the order they run; an offer without a
/// feasible option is named by the last one that removed its candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Filter {
    Gpus,
    Capacity,
    Yield,
    Deadline,
    Availability,
    Budget,
    Carbon,
}

impl Filter {
    fn name(self) -> &'static str {
        match self {
            Self::Gpus => "gpus",
            Self::Capacity => "capacity",
            Self::Yield => "yield",
            Self::Deadline => "deadline",
            Self::Availability => "availability",
            Self::Budget => "budget",
            Self::Carbon => "carbon",
        }
    }
}

/// One option (k, n) and its figures.
#[derive(Debug, Clone)]
struct Candidate {
    /// Position of the offer among the eligible ones (input order).
    offer: usize,
    nodes: u32,
    efficiency: f64,
    yield_n: f64,
    /// R: reference GPU-hours per hour.
    rate: f64,
    start: f64,
    /// T: hours of running.
    run: f64,
    /// D: the longest run the option can sustain before its end (§12.7).
    sustain: f64,
    cost_usd: f64,
    carbon_kg: Option<f64>,
    total_usd: f64,
}

impl Candidate {
    fn finish(&self) -> f64 {
        self.start + self.run
    }
}

/// `a` and `b` tie within relative 1e-9 (§12.6).
fn ties(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn by_key(a: f64, b: f64) -> Ordering {
    if ties(a, b) {
        Ordering::Equal
    } else {
        a.total_cmp(&b)
    }
}

/// §12.6's order of options under the problem's objective.
fn order(objective: Objective, a: &Candidate, b: &Candidate) -> Ordering {
    let (first, second) = match objective {
        Objective::Cost => (by_key(a.total_usd, b.total_usd), by_key(a.run, b.run)),
        Objective::Time => (
            by_key(a.finish(), b.finish()),
            by_key(a.total_usd, b.total_usd),
        ),
    };
    first
        .then(second)
        .then(a.nodes.cmp(&b.nodes))
        .then(a.offer.cmp(&b.offer))
}

/// `e(n) = s^(log₂ n)`.
fn efficiency(scaling: f64, nodes: u32) -> f64 {
    scaling.powf(f64::from(nodes).log2())
}

/// The hours a run of `run` hours touches (§12.8), at most `hours`.
fn touched(run: f64, hours: usize) -> usize {
    let t = (run - 1e-9).ceil().max(0.0);
    if t >= hours as f64 { hours } else { t as usize }
}

/// Everything about one eligible offer's candidates.
struct OfferOptions {
    /// The options that pass filters 1–3, with the filter each later one
    /// fails (`None`: feasible).
    sized: Vec<(Candidate, Option<Filter>)>,
    /// The last filter that removed candidates, for an offer with no
    /// feasible option.
    reason: Option<Filter>,
}

struct Gang<'a> {
    p: &'a JobProblem,
    nodes_max: u32,
    scaling: f64,
    gpus: Option<f64>,
}

impl Gang<'_> {
    fn options(&self, index: usize, e: &Eligible<'_>) -> OfferOptions {
        let p = self.p;
        let h = p.hours as f64;
        let price = p.carbon.and_then(|c| c.usd_per_tonne).unwrap_or(0.0) / 1000.0;
        let mut sized = Vec::new();
        let mut last = None;
        let mut any_feasible = false;
        for nodes in 1..=self.nodes_max {
            let n = f64::from(nodes);
            let removed = |f: Filter, last: &mut Option<Filter>| {
                *last = Some(last.map_or(f, |l: Filter| l.max(f)));
            };
            if let Some(g) = self.gpus
                && (n * e.offer.gpu_count - g).abs() > 1e-9 * g.max(1.0)
            {
                removed(Filter::Gpus, &mut last);
                continue;
            }
            let limit = match &e.offer.purchase {
                Purchase::OnDemand(hourly) | Purchase::Spot { hourly, .. } => hourly.max_instances,
                Purchase::Window { instances, .. } => Some(*instances),
            };
            if limit.is_some_and(|m| u64::from(nodes) > m) {
                removed(Filter::Capacity, &mut last);
                continue;
            }
            let yield_n = yield_of(&p.job, e.offer, n);
            if yield_n <= 0.0 {
                removed(Filter::Yield, &mut last);
                continue;
            }
            let efficiency = efficiency(self.scaling, nodes);
            let rate = n * e.offer.gpu_count * e.perf * efficiency * yield_n;
            let run = p.job.work / rate;
            let (start, end, cost_usd, available) = match &e.offer.purchase {
                Purchase::OnDemand(hourly) | Purchase::Spot { hourly, .. } => (
                    0.0,
                    h,
                    n * hourly.usd_per_hour * run,
                    hourly.available.as_deref(),
                ),
                Purchase::Window {
                    start_hour,
                    hours,
                    upfront_usd,
                    ..
                } => (
                    *start_hour as f64,
                    start_hour.saturating_add(*hours).min(p.hours) as f64,
                    *upfront_usd,
                    None,
                ),
            };
            let short = |h: &Option<u64>| h.is_some_and(|a| a < u64::from(nodes));
            let sustain = match available {
                Some(a) => a.iter().position(short).unwrap_or(p.hours) as f64,
                None => end - start,
            };
            let carbon_kg = e.offer.kgco2e_per_hour.map(|kg| n * kg * run);
            let option = Candidate {
                offer: index,
                nodes,
                efficiency,
                yield_n,
                rate,
                start,
                run,
                sustain,
                cost_usd,
                carbon_kg,
                total_usd: cost_usd + price * carbon_kg.unwrap_or(0.0),
            };
            let fails = if option.finish() > end + 1e-9 * end.max(1.0) {
                Some(Filter::Deadline)
            } else if available.is_some_and(|a| a[..touched(run, p.hours)].iter().any(short)) {
                Some(Filter::Availability)
            } else if p.job.budget_usd.is_some_and(|b| !within(cost_usd, b)) {
                Some(Filter::Budget)
            } else if let Some(x) = p.carbon.and_then(|c| c.max_kg)
                && !within(carbon_kg.unwrap_or(0.0), x)
            {
                Some(Filter::Carbon)
            } else {
                None
            };
            match fails {
                Some(f) => removed(f, &mut last),
                None => any_feasible = true,
            }
            sized.push((option, fails));
        }
        OfferOptions {
            sized,
            reason: if any_feasible { None } else { last },
        }
    }

    /// The least of `key` over the options that pass every filter before
    /// `upto`.
    fn least(all: &[OfferOptions], upto: Filter, key: impl Fn(&Candidate) -> f64) -> Option<f64> {
        all.iter()
            .flat_map(|o| &o.sized)
            .filter(|(_, f)| f.is_none_or(|f| f >= upto))
            .map(|(o, _)| key(o))
            .min_by(f64::total_cmp)
    }
}

pub(super) fn solve(p: &JobProblem) -> JobResult {
    let super::Shape::Gang {
        nodes_max,
        scaling,
        gpus,
    } = p.job.shape
    else {
        unreachable!("gang::solve is called for gangs")
    };
    let gang = Gang {
        p,
        nodes_max,
        scaling,
        gpus,
    };
    let (eligible, excluded) = eligibility(p);
    let mut out = p.frame(excluded);
    out.offers = eligible.iter().map(|e| offer_rate(e, p)).collect();
    let all: Vec<OfferOptions> = eligible
        .iter()
        .enumerate()
        .map(|(i, e)| gang.options(i, e))
        .collect();
    let mut firsts: Vec<Candidate> = all
        .iter()
        .filter_map(|o| {
            o.sized
                .iter()
                .filter(|(_, f)| f.is_none())
                .map(|(o, _)| o)
                .min_by(|a, b| order(p.objective, a, b))
                .cloned()
        })
        .collect();
    firsts.sort_by(|a, b| order(p.objective, a, b));
    let run = |o: &Candidate| gang_run(p, &eligible, o);
    let mut ranking: Vec<Ranked> = firsts
        .iter()
        .map(|o| Ranked::Feasible {
            feasible: true,
            objective: match p.objective {
                Objective::Cost => o.total_usd,
                Objective::Time => o.finish(),
            },
            run: run(o),
        })
        .collect();
    let reasons: Vec<(&str, &'static str)> = eligible
        .iter()
        .zip(&all)
        .filter_map(|(e, o)| o.reason.map(|r| (e.offer.id.as_str(), r.name())))
        .collect();
    ranking.extend(reasons.iter().map(|&(offer, reason)| Ranked::Infeasible {
        offer: offer.to_owned(),
        feasible: false,
        reason,
    }));
    let reason_list = || {
        reasons
            .iter()
            .map(|(offer, reason)| json!({"offer": offer, "reason": reason}))
            .collect::<Vec<_>>()
    };
    out.infeasibility = if eligible.is_empty() {
        Some(json!({"kind": "no_eligible_offers"}))
    } else if all.iter().all(|o| o.sized.is_empty()) {
        Some(json!({"kind": "cluster", "offers": reason_list()}))
    } else if Gang::least(&all, Filter::Budget, |o| o.cost_usd).is_none() {
        let max_work =
            Gang::least(&all, Filter::Deadline, |o| -(o.rate * o.sustain)).map_or(0.0, |w| -w);
        let min_run = Gang::least(&all, Filter::Deadline, |o| o.run);
        Some(json!({
            "kind": "deadline", "work": p.job.work, "hours": p.hours,
            "max_work": max_work, "min_run_hours": min_run, "offers": reason_list(),
        }))
    } else if let Some(budget) = p.job.budget_usd
        && Gang::least(&all, Filter::Carbon, |o| o.cost_usd).is_none()
    {
        Some(json!({
            "kind": "budget", "budget_usd": budget,
            "min_cost": Gang::least(&all, Filter::Budget, |o| o.cost_usd),
            "offers": reason_list(),
        }))
    } else if firsts.is_empty() {
        let max_kg = p.carbon.and_then(|c| c.max_kg);
        Some(json!({
            "kind": "carbon", "max_kg": max_kg,
            "min_carbon_kg": Gang::least(&all, Filter::Carbon, |o| o.carbon_kg.unwrap_or(0.0)),
            "offers": reason_list(),
        }))
    } else {
        None
    };
    let choice = firsts.first().filter(|_| out.infeasibility.is_none());
    if let Some(c) = choice {
        out.status = "optimal";
        out.objective = Some(match p.objective {
            Objective::Cost => c.total_usd,
            Objective::Time => c.finish(),
        });
        out.cost_usd = Some(c.cost_usd);
        out.carbon_kg = c.carbon_kg;
        out.carbon_charge_usd = Some(c.total_usd - c.cost_usd);
        out.total_usd = Some(c.total_usd);
        out.finish_hours = Some(c.finish());
        out.finish_at = super::at(p, c.finish());
        out.work_done = Some(c.rate * c.run);
    }
    out.plan = Plan::Gang {
        gang: choice.map(run),
        ranking,
    };
    out
}

fn gang_run(p: &JobProblem, eligible: &[Eligible<'_>], o: &Candidate) -> GangRun {
    let e = &eligible[o.offer];
    GangRun {
        offer: e.offer.id.clone(),
        kind: e.offer.kind(),
        nodes: o.nodes,
        gpus: f64::from(o.nodes) * e.offer.gpu_count,
        efficiency: o.efficiency,
        yield_n: o.yield_n,
        rate: o.rate,
        start_hours: o.start,
        run_hours: o.run,
        finish_hours: o.finish(),
        cost_usd: o.cost_usd,
        carbon_kg: o.carbon_kg,
        carbon_charge_usd: o.total_usd - o.cost_usd,
        total_usd: o.total_usd,
        start_at: super::at(p, o.start),
    }
}
