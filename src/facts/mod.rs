//! Reference facts shipped with gpuplan: what each GPU can do (datasheet
//! figures), measured performance rows (MLPerf), and each cloud region's
//! country and grid carbon. Read from the files under `facts/` at build
//! time, so they need no network, no credentials and no catalog; every
//! figure names where it comes from, and unknown is null, never 0.

mod gpus;
mod perf;
mod regions;
mod work;

use std::collections::HashMap;
use std::sync::LazyLock;

pub use gpus::{Gpu, Interconnect, Tflops};
pub use perf::{PerfRow, workloads};
pub use regions::Region;
pub use work::{DEFAULT_REFERENCE, Factor, ModelForm, Work};

/// A shipped facts file that does not parse or breaks a rule: a bug in the
/// files, named with the file, the row and the rule.
#[derive(Debug, Clone, thiserror::Error)]
#[error("facts/{file}: {message}")]
pub struct FactsError {
    pub file: &'static str,
    pub message: String,
}

impl FactsError {
    fn new(file: &'static str, message: impl Into<String>) -> Self {
        Self {
            file,
            message: message.into(),
        }
    }
}

/// The three tables, parsed and checked once.
#[derive(Debug, Clone)]
pub struct Facts {
    pub gpus: Vec<Gpu>,
    pub perf: Vec<PerfRow>,
    pub regions: Vec<Region>,
    /// Each (provider, region)'s row in `regions`: every catalog record
    /// looks its region up.
    region_index: HashMap<String, HashMap<String, usize>>,
    /// A region name's row, where every cloud that uses the name puts it in
    /// one country: how a price sheet's region (`eu-central-1`) is placed.
    sheet_index: HashMap<String, usize>,
}

const GPUS: &str = include_str!("../../facts/gpus.toml");
const PERF: &str = include_str!("../../facts/perf.csv");
const REGIONS: &str = include_str!("../../facts/regions.csv");

static BUILTIN: LazyLock<Result<Facts, FactsError>> =
    LazyLock::new(|| Facts::parse(GPUS, PERF, REGIONS));

/// The facts shipped in this build.
///
/// # Errors
/// When a shipped file is broken (the tests keep that from happening).
pub fn builtin() -> Result<&'static Facts, &'static FactsError> {
    BUILTIN.as_ref()
}

impl Facts {
    /// The tables from the texts of `gpus.toml`, `perf.csv` and `regions.csv`.
    ///
    /// # Errors
    /// The first row that does not parse or breaks a rule, named.
    pub fn parse(gpus: &str, perf: &str, regions: &str) -> Result<Self, FactsError> {
        let regions = regions::parse(regions)?;
        let mut region_index: HashMap<String, HashMap<String, usize>> = HashMap::new();
        for (i, r) in regions.iter().enumerate() {
            region_index
                .entry(r.provider.clone())
                .or_default()
                .insert(r.region.clone(), i);
        }
        let mut sheet_index: HashMap<String, Option<usize>> = HashMap::new();
        for (i, r) in regions.iter().enumerate() {
            sheet_index
                .entry(r.region.clone())
                .and_modify(|seen| match *seen {
                    Some(j) if regions[j].country != r.country => *seen = None,
                    // The row with a grid figure places a sheet's carbon.
                    Some(j)
                        if regions[j].grid_gco2e_per_kwh.is_none()
                            && r.grid_gco2e_per_kwh.is_some() =>
                    {
                        *seen = Some(i);
                    }
                    _ => {}
                })
                .or_insert(Some(i));
        }
        Ok(Self {
            gpus: gpus::parse(gpus)?,
            perf: perf::parse(perf)?,
            sheet_index: sheet_index
                .into_iter()
                .filter_map(|(name, i)| Some((name, i?)))
                .collect(),
            regions,
            region_index,
        })
    }

    /// The GPU row of a catalog model and form factor: the exact form, or
    /// the model's only row when the catalog names no form.
    #[must_use]
    pub fn gpu(&self, model: &str, form: Option<&str>) -> Option<&Gpu> {
        let mut rows = self.gpus.iter().filter(|g| g.gpu_model == model);
        match form {
            Some(form) => rows.find(|g| g.gpu_form_factor.as_deref() == Some(form)),
            None => {
                let first = rows.next()?;
                // Several forms and none named: which one is unknown.
                rows.next().is_none().then_some(first)
            }
        }
    }

    /// The GPU rows of the models or families `gpus` (all when empty).
    #[must_use]
    pub fn gpus_of(&self, gpus: &[String]) -> Vec<&Gpu> {
        self.gpus
            .iter()
            .filter(|g| any_gpu(gpus, &g.gpu_model))
            .collect()
    }

    /// The performance rows of `workloads` and `gpus` (all when empty).
    ///
    /// # Errors
    /// A workload no row measures, with the ones there are.
    pub fn perf_of(&self, workloads: &[String], gpus: &[String]) -> Result<Vec<&PerfRow>, String> {
        if let Some(unknown) = workloads
            .iter()
            .find(|w| !self.perf.iter().any(|r| &&r.workload == w))
        {
            return Err(format!(
                "no workload `{unknown}`; known: {}",
                perf::workloads(&self.perf).join(", ")
            ));
        }
        Ok(self
            .perf
            .iter()
            .filter(|r| workloads.is_empty() || workloads.contains(&r.workload))
            .filter(|r| any_gpu(gpus, &r.gpu_model))
            .collect())
    }

    /// The regions of `providers` in `countries` (all when empty; country
    /// codes in any case).
    #[must_use]
    pub fn regions_of(&self, providers: &[String], countries: &[String]) -> Vec<&Region> {
        self.regions
            .iter()
            .filter(|r| providers.is_empty() || providers.contains(&r.provider))
            .filter(|r| {
                countries.is_empty()
                    || r.country
                        .as_deref()
                        .is_some_and(|c| countries.iter().any(|w| w.eq_ignore_ascii_case(c)))
            })
            .collect()
    }

    /// The row of `provider`'s `region`. A price sheet (`file:NAME`) that
    /// names its region as a cloud does (`eu-central-1`, `westeurope`) takes
    /// that region's row, where the name means one country on every cloud.
    #[must_use]
    pub fn region(&self, provider: &str, region: &str) -> Option<&Region> {
        let i = if provider.starts_with("file:") {
            self.sheet_index.get(region)
        } else {
            self.region_index.get(provider)?.get(region)
        };
        i.map(|&i| &self.regions[i])
    }
}

fn any_gpu(wanted: &[String], model: &str) -> bool {
    wanted.is_empty()
        || wanted
            .iter()
            .any(|w| gpuplan_providers::gpu::matches(model, w))
}

#[cfg(test)]
mod tests;
