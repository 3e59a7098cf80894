//! From the catalog and a question ("this much work by then, within this
//! budget, in these countries") to a job problem (planning-model version 4):
//! an on-demand and a spot offer per (provider, region, instance type) as
//! plans take them ([`super::from_catalog::catalog_offers`]), each spot offer
//! with its interruptions per hour from the spot advisor's band, a window per
//! Capacity Block or calendar-mode offering with a start and an end, the
//! factors of the chosen workload or datasheet format, and kg CO2e from the
//! region and GPU facts. Every offer says in its `description` what its
//! figures rest on.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use gpuplan_providers::{PriceKind, PriceScope};

use super::from_catalog::{CatalogInputs, bucket_monthly, catalog_offers};
use crate::catalog::{self, Freshness, PriceFilter};
use crate::facts::{self, DEFAULT_REFERENCE};
use crate::optimizer::ValidationError;
use crate::optimizer::job::{JobProblem, MAX_HOURS, MAX_NODES};
use crate::store::{Store, StoreError};

/// The datasheet format a job is rated by when it names no workload:
/// dense BF16, what training mostly runs in.
pub const DEFAULT_PERF: &str = "spec:bf16";

/// Nodes a gang may have when neither `nodes_max` nor `gpus` says.
pub const DEFAULT_NODES_MAX: u32 = 64;

/// The question, as `gpuplan job` and `POST /v1/jobs` take it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobAsk {
    pub name: Option<String>,
    /// Reference GPU-hours.
    pub work: f64,
    /// The GPU one reference GPU-hour is an hour of [default: `H100-80GB/sxm`].
    pub reference: Option<String>,
    /// Hours from now to the deadline (1 to 2160).
    pub deadline_hours: u64,
    /// `bag` (default) or `gang`.
    pub shape: Option<String>,
    pub nodes_max: Option<u32>,
    pub scaling: Option<f64>,
    pub gpus: Option<f64>,
    pub budget_usd: Option<f64>,
    #[serde(default)]
    pub needs: Vec<String>,
    pub min_gpu_memory_gib: Option<f64>,
    /// GPU models or families to consider; empty means all.
    #[serde(default)]
    pub gpu: Vec<String>,
    #[serde(default)]
    pub clouds: Vec<String>,
    #[serde(default)]
    pub regions: Vec<String>,
    #[serde(default)]
    pub countries: Vec<String>,
    /// How to buy: any of `on_demand`, `spot`, `window`; empty means all.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// A workload of the perf facts, or `spec:<format>` [default: `spec:bf16`].
    pub perf: Option<String>,
    /// `cost` (default) or `time`.
    pub objective: Option<String>,
    pub carbon_usd_per_tonne: Option<f64>,
    pub max_kgco2e: Option<f64>,
    pub checkpoint_hours: Option<f64>,
    pub restart_hours: Option<f64>,
}

/// A job problem built from the catalog, and what it rests on.
#[derive(Debug, Clone)]
pub struct BuiltJob {
    /// The version 4 document, as `--write-problem` saves it.
    pub doc: Value,
    pub problem: JobProblem,
    pub stale_sources: Vec<String>,
    /// The workload or format, the reference and each factor's row.
    pub perf_basis: Value,
}

fn invalid(path: &str, message: impl Into<String>) -> ValidationError {
    ValidationError {
        path: path.to_owned(),
        message: message.into(),
    }
}

const KINDS: [&str; 3] = ["on_demand", "spot", "window"];

impl JobAsk {
    /// Checks what the problem's own validation would name less plainly.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn check(&self) -> Result<(), ValidationError> {
        if !(self.work.is_finite() && self.work > 0.0) {
            return Err(invalid(
                "work",
                format!("must be > 0 reference GPU-hours, found {}", self.work),
            ));
        }
        if !(1..=MAX_HOURS as u64).contains(&self.deadline_hours) {
            return Err(invalid(
                "deadline_hours",
                format!(
                    "must be 1 to {MAX_HOURS} hours from now, found {}",
                    self.deadline_hours
                ),
            ));
        }
        let gang = match self.shape.as_deref() {
            None | Some("bag") => false,
            Some("gang") => true,
            Some(s) => return Err(invalid("shape", format!("must be bag or gang, found {s}"))),
        };
        if !gang
            && let Some(k) = [
                ("nodes_max", self.nodes_max.is_some()),
                ("scaling", self.scaling.is_some()),
                ("gpus", self.gpus.is_some()),
            ]
            .iter()
            .find_map(|(k, set)| set.then_some(*k))
        {
            return Err(invalid(k, "only for shape gang"));
        }
        if let Some(k) = self.kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
            return Err(invalid(
                "kinds",
                format!("`{k}` is not one of {}", KINDS.join(", ")),
            ));
        }
        Ok(())
    }

    fn wants(&self, kind: &str) -> bool {
        self.kinds.is_empty() || self.kinds.iter().any(|k| k == kind)
    }
}

fn key(model: &str, form: Option<&str>) -> String {
    match form {
        Some(f) => format!("{model}/{f}"),
        None => model.to_owned(),
    }
}

/// What the GPU facts say of an offer's GPU.
struct GpuFacts<'a>(&'a facts::Facts);

impl GpuFacts<'_> {
    fn capabilities(&self, model: &str, form: Option<&str>) -> Vec<&'static str> {
        self.0
            .gpu(model, form)
            .map(|g| g.capabilities.clone())
            .unwrap_or_default()
    }

    /// The memory the catalog gives, else the datasheet's; 0 when neither
    /// knows, so that a memory floor leaves the offer out.
    fn memory(&self, model: &str, form: Option<&str>, given: Option<f64>) -> f64 {
        given
            .or_else(|| self.0.gpu(model, form).map(|g| g.memory_gib))
            .unwrap_or(0.0)
    }
}

/// Builds the job problem `ask` describes from the current catalog, with
/// hour 0 at `fresh.now`.
///
/// # Errors
/// `Ok(Err(_))` for a question the facts or the model refuse (an unknown
/// workload, a field out of range), naming the field; `Err` on a store
/// error.
pub fn build_job(
    store: &dyn Store,
    fresh: &Freshness,
    ask: &JobAsk,
    inputs: &CatalogInputs,
) -> Result<Result<BuiltJob, ValidationError>, StoreError> {
    if let Err(e) = ask.check() {
        return Ok(Err(e));
    }
    let facts = match facts::builtin() {
        Ok(f) => f,
        Err(e) => return Ok(Err(invalid("perf", e.to_string()))),
    };
    let workload = ask.perf.clone().unwrap_or_else(|| DEFAULT_PERF.to_owned());
    let reference = ask
        .reference
        .clone()
        .unwrap_or_else(|| DEFAULT_REFERENCE.to_owned());
    let work = match facts.work(&workload, &reference) {
        Ok(w) => w,
        Err(e) => {
            let about_workload =
                e.starts_with("no workload") || e.contains("is not a datasheet format");
            let field = if about_workload { "perf" } else { "reference" };
            return Ok(Err(invalid(field, e)));
        }
    };
    let now = fresh.now;
    let hours = usize::try_from(ask.deadline_hours).unwrap_or(MAX_HOURS);
    let lambda = |bucket: f64| bucket_monthly(bucket) / 730.0;
    let mut perf = Map::new();
    let mut factors = Map::new();
    let mut rate = |model: &str, form: Option<&str>| {
        let k = key(model, form);
        if !perf.contains_key(&k)
            && let Some(f) = work.factor(model, form)
        {
            perf.insert(k.clone(), json!(f.factor));
            factors.insert(k, json!({"factor": f.factor, "row": f.row}));
        }
    };
    let reference_label = work.reference();
    let (ref_model, ref_form) = match reference_label.split_once('/') {
        Some((m, f)) => (m.to_owned(), Some(f.to_owned())),
        None => (reference_label.clone(), None),
    };
    rate(&ref_model, ref_form.as_deref());
    let gpu = GpuFacts(facts);

    let (grouped, stale_sources) = catalog_offers(store, fresh, inputs)?;
    let mut offers = Vec::new();
    for g in &grouped {
        let o = &g.offer;
        let form = o.gpu_form_factor.as_deref();
        rate(&o.gpu_model, form);
        let base = json!({
            "gpu_model": o.gpu_model, "gpu_form_factor": o.gpu_form_factor,
            "gpu_count": o.gpus_per_instance,
            "gpu_memory_gib": gpu.memory(&o.gpu_model, form, o.gpu_memory_gib),
            "capabilities": gpu.capabilities(&o.gpu_model, form),
            "kgco2e_per_hour": g.kgco2e_per_hour,
            "cloud": o.cloud, "region": o.region, "instance_type": o.instance_type,
        });
        if let Some(price) = o.on_demand_price.filter(|_| ask.wants("on_demand")) {
            let mut d = base.clone();
            d["id"] = json!(format!("{}/on_demand", o.id));
            d["kind"] = json!("on_demand");
            d["usd_per_hour"] = json!(price);
            d["max_instances"] = json!(o.max_on_demand_instances.map(|m| m.floor() as u64));
            d["description"] = json!(format!("on-demand at ${price:.4}/h, the median list price"));
            offers.push(d);
        }
        if let Some(price) = o.spot_price.at(0).filter(|_| ask.wants("spot")) {
            let (per_hour, band) = match g.interruption_bucket {
                Some(b) => (
                    lambda(b),
                    format!(
                        "the spot advisor's band {b} ({:.0}% a month)",
                        bucket_monthly(b) * 100.0
                    ),
                ),
                None => (
                    lambda(4.0),
                    "no advisor band for it, so the worst band (30% a month) is assumed".to_owned(),
                ),
            };
            let priced = match g.spot_observations {
                Some(n) => format!("the median of {n} spot observations over the spot window"),
                None => "the median of its zones' current spot prices".to_owned(),
            };
            let mut d = base.clone();
            d["id"] = json!(format!("{}/spot", o.id));
            d["kind"] = json!("spot");
            d["usd_per_hour"] = json!(price);
            d["max_instances"] = json!(o.max_spot_instances.map(|m| m.floor() as u64));
            d["interruptions_per_hour"] = json!(per_hour);
            d["description"] = json!(format!(
                "spot at ${price:.4}/h, {priced}; {per_hour:.6} interruptions an hour from {band}"
            ));
            offers.push(d);
        }
    }
    if ask.wants("window") {
        for d in windows(store, fresh, inputs, now, hours, &gpu)? {
            let model = d["gpu_model"].as_str().unwrap_or_default().to_owned();
            let form = d["gpu_form_factor"].as_str().map(str::to_owned);
            rate(&model, form.as_deref());
            offers.push(d);
        }
    }

    let gang = ask.shape.as_deref() == Some("gang");
    let mut job = json!({
        "shape": if gang { "gang" } else { "bag" },
        "work": ask.work,
        "reference": key(&ref_model, ref_form.as_deref()),
        "min_gpu_memory_gib": ask.min_gpu_memory_gib,
        "needs": ask.needs,
        "checkpoint_hours": ask.checkpoint_hours.unwrap_or(inputs.checkpoint_hours),
        "restart_hours": ask.restart_hours.unwrap_or(inputs.restart_hours),
        "budget_usd": ask.budget_usd,
    });
    if gang {
        let smallest = offers
            .iter()
            .filter_map(|o| o["gpu_count"].as_f64())
            .fold(f64::INFINITY, f64::min);
        let nodes_max = ask.nodes_max.unwrap_or_else(|| match ask.gpus {
            Some(g) if smallest.is_finite() && smallest > 0.0 => {
                ((g / smallest).ceil() as u32).clamp(1, MAX_NODES)
            }
            _ => DEFAULT_NODES_MAX,
        });
        job["nodes_max"] = json!(nodes_max);
        job["scaling"] = json!(ask.scaling.unwrap_or(1.0));
        job["gpus"] = json!(ask.gpus);
    }
    let carbon = match (ask.max_kgco2e, ask.carbon_usd_per_tonne) {
        (None, None) => Value::Null,
        (max_kg, price) => json!({"max_kg": max_kg, "usd_per_tonne": price}),
    };
    let doc = json!({
        "schema_version": 4, "kind": "job",
        "name": ask.name.clone().unwrap_or_else(|| "catalog job".to_owned()),
        "start": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "hours": hours,
        "objective": ask.objective.clone().unwrap_or_else(|| "cost".to_owned()),
        "job": job,
        "offers": offers,
        "perf": perf,
        "carbon": carbon,
    });
    let perf_basis = json!({
        "workload": work.workload(),
        "reference": reference_label,
        "estimate": work.is_estimate(),
        "reference_row": work.reference_row(),
        "factors": factors,
    });
    Ok(JobProblem::from_json(&doc).map(|problem| BuiltJob {
        doc,
        problem,
        stale_sources,
        perf_basis,
    }))
}

/// The catalog's reservation windows that end after `now`: each offering
/// with a start and an end, placed on the job's hours (its first whole hour
/// to its last), as a window offer.
fn windows(
    store: &dyn Store,
    fresh: &Freshness,
    inputs: &CatalogInputs,
    now: DateTime<Utc>,
    hours: usize,
    gpu: &GpuFacts<'_>,
) -> Result<Vec<Value>, StoreError> {
    let filter = PriceFilter {
        gpus: inputs.gpus.clone(),
        providers: inputs.clouds.clone(),
        regions: inputs.regions.clone(),
        countries: inputs.countries.clone(),
        kinds: vec![PriceKind::CapacityBlock, PriceKind::Calendar],
        scopes: vec![PriceScope::Instance],
        ..PriceFilter::default()
    };
    let mut out = Vec::new();
    for r in catalog::prices(store, fresh, &filter)? {
        let (Some(start), Some(end)) = (r.window_start, r.window_end) else {
            continue;
        };
        let secs = |t: DateTime<Utc>| (t - now).num_seconds() as f64 / 3600.0;
        // Only whole hours of the job's grid inside the window count.
        let first = secs(start).max(0.0).ceil();
        let last = secs(end).floor();
        if start < now || last - first < 1.0 || first >= hours as f64 {
            continue;
        }
        let form = r.gpu_form_factor.as_deref();
        let instances = r.instance_count.unwrap_or(1);
        // A calendar-mode reservation is priced by the hour, all of it paid.
        let upfront = if r.upfront_usd > 0.0 {
            r.upfront_usd
        } else {
            r.usd_per_hour * f64::from(instances) * (secs(end) - secs(start))
        };
        let at = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%MZ").to_string();
        out.push(json!({
            "id": format!("{}/{}/{}/{}/{}/{}..{}", r.provider, r.region, r.zone.as_deref().unwrap_or("-"),
                          r.instance_type, r.price_kind, at(start), at(end)),
            "kind": "window",
            "gpu_model": r.gpu_model, "gpu_form_factor": r.gpu_form_factor,
            "gpu_count": r.gpu_count,
            "gpu_memory_gib": gpu.memory(&r.gpu_model, form, r.gpu_memory_gib),
            "capabilities": gpu.capabilities(&r.gpu_model, form),
            "kgco2e_per_hour": r.kgco2e_per_hour,
            "window": {"start_hour": first as u64, "hours": (last - first) as u64,
                       "instances": instances, "upfront_usd": upfront},
            "cloud": r.provider, "region": r.region, "zone": r.zone, "instance_type": r.instance_type,
            "description": format!(
                "{} of {instances} instance(s) from {} to {}, ${:.2} up front",
                r.price_kind, start.format("%Y-%m-%d %H:%M UTC"), end.format("%Y-%m-%d %H:%M UTC"), upfront
            ),
        }));
    }
    Ok(out)
}
