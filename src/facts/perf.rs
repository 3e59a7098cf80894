//! `facts/perf.csv`: measured performance rows, each with its source.

use serde::{Deserialize, Serialize};

use super::FactsError;

const FILE: &str = "perf.csv";

/// One measured figure of one GPU model on one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfRow {
    pub gpu_model: String,
    pub gpu_form_factor: Option<String>,
    /// `<source>/<benchmark>/<scenario>`, e.g.
    /// `mlperf-inference-v6.1/llama2-70b-99.9/offline`.
    pub workload: String,
    pub value: f64,
    pub unit: String,
    /// `gpu` (a system's result over its accelerators) or `system`.
    pub per: String,
    /// Accelerators in the measured system.
    pub n_gpus: u32,
    pub precision: Option<String>,
    pub round: String,
    pub result_id: Option<String>,
    /// Computed from a published figure (a per-GPU value of a system's).
    pub derived: bool,
    pub source_url: String,
    /// When the source was read (ISO date).
    pub retrieved: String,
    pub submitter: Option<String>,
    pub system: Option<String>,
    pub division: Option<String>,
    pub availability: Option<String>,
}

fn check(r: &PerfRow) -> Result<(), String> {
    if gpuplan_providers::gpu::canonical(&r.gpu_model) != Some(r.gpu_model.as_str()) {
        return Err(format!("`{}` is not a catalog GPU name", r.gpu_model));
    }
    if let Some(f) = &r.gpu_form_factor {
        f.parse::<gpuplan_providers::FormFactor>()?;
        if !gpuplan_providers::gpu::sold_in_forms(&r.gpu_model) {
            return Err(format!(
                "gpu_form_factor: {} is sold in one form only; leave it empty",
                r.gpu_model
            ));
        }
    }
    if r.workload.split('/').filter(|p| !p.is_empty()).count() != 3 {
        return Err(format!(
            "workload `{}` is not <source>/<benchmark>/<scenario>",
            r.workload
        ));
    }
    if !(r.value.is_finite() && r.value > 0.0) {
        return Err(format!("value {} is not > 0", r.value));
    }
    if !["gpu", "system"].contains(&r.per.as_str()) {
        return Err(format!("per `{}` is not gpu or system", r.per));
    }
    if r.n_gpus == 0 {
        return Err("n_gpus is 0".into());
    }
    if r.unit.is_empty() || r.round.is_empty() {
        return Err("unit and round are required".into());
    }
    if !r.source_url.starts_with("https://") {
        return Err(format!("source_url `{}` is not an https URL", r.source_url));
    }
    if chrono::NaiveDate::parse_from_str(&r.retrieved, "%Y-%m-%d").is_err() {
        return Err(format!(
            "retrieved `{}` is not a date (YYYY-MM-DD)",
            r.retrieved
        ));
    }
    if r.result_id.is_none() && !r.derived {
        return Err("a row without a result_id is derived".into());
    }
    if r.per == "gpu" && r.n_gpus > 1 && !r.derived {
        return Err("a per-GPU figure of a system of several is derived".into());
    }
    Ok(())
}

pub(super) fn parse(text: &str) -> Result<Vec<PerfRow>, FactsError> {
    let mut out = Vec::new();
    for (i, row) in csv::Reader::from_reader(text.as_bytes())
        .deserialize::<PerfRow>()
        .enumerate()
    {
        // Line 1 is the header.
        let line = i + 2;
        let row = row.map_err(|e| FactsError::new(FILE, format!("line {line}: {e}")))?;
        check(&row).map_err(|e| FactsError::new(FILE, format!("line {line}: {e}")))?;
        out.push(row);
    }
    Ok(out)
}

/// The workloads the rows cover, in order.
#[must_use]
pub fn workloads(rows: &[PerfRow]) -> Vec<&str> {
    let mut out: Vec<&str> = rows.iter().map(|r| r.workload.as_str()).collect();
    out.sort_unstable();
    out.dedup();
    out
}
