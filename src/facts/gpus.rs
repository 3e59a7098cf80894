//! `facts/gpus.toml`: one row per GPU model and form factor, with the
//! datasheet's figures as printed and the dense figures gpuplan uses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::FactsError;

const FILE: &str = "gpus.toml";

/// The number formats a GPU's figures are given in.
pub const FORMATS: [&str; 8] = ["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8"];
const VENDORS: [&str; 2] = ["NVIDIA", "AMD"];
const ARCHITECTURES: [&str; 7] = [
    "Turing",
    "Ampere",
    "Ada Lovelace",
    "Hopper",
    "Blackwell",
    "CDNA 3",
    "CDNA 4",
];

/// Dense peak figures (no 2:4 sparsity), TFLOPS (`int8` in TOPS): `fp64`
/// and `fp32` from the vector units, the rest from the tensor or matrix
/// units; null where the GPU lacks the format or no figure is published.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tflops {
    pub fp64: Option<f64>,
    pub fp32: Option<f64>,
    pub tf32: Option<f64>,
    pub bf16: Option<f64>,
    pub fp16: Option<f64>,
    pub fp8: Option<f64>,
    pub fp4: Option<f64>,
    pub int8: Option<f64>,
}

impl Tflops {
    /// The figure of format `name` (one of [`FORMATS`]).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<f64> {
        match name {
            "fp64" => self.fp64,
            "fp32" => self.fp32,
            "tf32" => self.tf32,
            "bf16" => self.bf16,
            "fp16" => self.fp16,
            "fp8" => self.fp8,
            "fp4" => self.fp4,
            "int8" => self.int8,
            _ => None,
        }
    }

    fn from_map(map: &BTreeMap<String, f64>) -> Self {
        let at = |k: &str| map.get(k).copied();
        Self {
            fp64: at("fp64"),
            fp32: at("fp32"),
            tf32: at("tf32"),
            bf16: at("bf16"),
            fp16: at("fp16"),
            fp8: at("fp8"),
            fp4: at("fp4"),
            int8: at("int8"),
        }
    }
}

/// The GPU-to-GPU fabric (`pcie` when there is none) and its per-GPU
/// bidirectional bandwidth as the vendor states it, GB/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interconnect {
    pub kind: String,
    pub gbps: Option<f64>,
}

/// What one GPU can do, from its datasheet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu {
    pub gpu_model: String,
    pub gpu_form_factor: Option<String>,
    pub vendor: String,
    pub architecture: String,
    /// The vendor's nominal capacity ("GB" on the datasheet).
    pub memory_gib: f64,
    pub memory_bandwidth_tbps: Option<f64>,
    pub tflops: Tflops,
    pub interconnect: Interconnect,
    pub tdp_watts: Option<f64>,
    /// NVIDIA MIG's most instances; 0 without MIG.
    pub mig_max_instances: u32,
    pub capabilities: Vec<&'static str>,
    pub sources: Vec<String>,
    pub notes: Option<String>,
    /// The datasheet's figures as printed, and which of them are given with
    /// 2:4 sparsity: what the dense `tflops` are derived from.
    #[serde(skip)]
    pub datasheet: BTreeMap<String, f64>,
    #[serde(skip)]
    pub datasheet_sparse: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    gpu: Vec<RawGpu>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGpu {
    gpu_model: String,
    gpu_form_factor: Option<String>,
    vendor: String,
    architecture: String,
    memory_gib: f64,
    memory_bandwidth_tbps: Option<f64>,
    tdp_watts: Option<f64>,
    mig_max_instances: u32,
    sparsity: bool,
    interconnect: Interconnect,
    #[serde(default)]
    datasheet: BTreeMap<String, f64>,
    #[serde(default)]
    datasheet_sparse: Vec<String>,
    #[serde(default)]
    tflops: BTreeMap<String, f64>,
    sources: Vec<String>,
    notes: Option<String>,
}

/// The capabilities the figures imply (docs/catalog.md, "GPU facts").
fn capabilities(g: &RawGpu, tflops: &Tflops) -> Vec<&'static str> {
    let mut out = Vec::new();
    if let (Some(fp64), Some(fp32)) = (tflops.fp64, tflops.fp32)
        && fp64 * 4.0 >= fp32
    {
        out.push("fp64");
    }
    if tflops.fp8.is_some() {
        out.push("fp8");
    }
    if tflops.fp4.is_some() {
        out.push("fp4");
    }
    if g.mig_max_instances > 0 {
        out.push("mig");
    }
    match g.interconnect.kind.as_str() {
        "nvlink" => out.push("nvlink"),
        "infinity_fabric" => out.push("infinity_fabric"),
        _ => {}
    }
    if g.sparsity {
        out.push("sparsity");
    }
    out
}

fn check(g: &RawGpu) -> Result<(), String> {
    if gpuplan_providers::gpu::canonical(&g.gpu_model) != Some(g.gpu_model.as_str()) {
        return Err(format!("`{}` is not a catalog GPU name", g.gpu_model));
    }
    match (
        &g.gpu_form_factor,
        gpuplan_providers::gpu::sold_in_forms(&g.gpu_model),
    ) {
        (Some(f), true) => {
            f.parse::<gpuplan_providers::FormFactor>()?;
        }
        (None, true) => {
            return Err("gpu_form_factor is required: the model is sold in several forms".into());
        }
        (Some(_), false) => {
            return Err("gpu_form_factor: the model is sold in one form only; leave it out".into());
        }
        (None, false) => {}
    }
    if !VENDORS.contains(&g.vendor.as_str()) {
        return Err(format!("vendor `{}` is not one of {VENDORS:?}", g.vendor));
    }
    if !ARCHITECTURES.contains(&g.architecture.as_str()) {
        return Err(format!(
            "architecture `{}` is not one of {ARCHITECTURES:?}",
            g.architecture
        ));
    }
    let positive = |name: &str, v: Option<f64>| match v {
        Some(v) if !(v.is_finite() && v > 0.0) => Err(format!(
            "{name} is {v}; a figure is > 0, and an unknown one is left out"
        )),
        _ => Ok(()),
    };
    positive("memory_gib", Some(g.memory_gib))?;
    positive("memory_bandwidth_tbps", g.memory_bandwidth_tbps)?;
    positive("tdp_watts", g.tdp_watts)?;
    positive("interconnect.gbps", g.interconnect.gbps)?;
    if !["nvlink", "infinity_fabric", "pcie"].contains(&g.interconnect.kind.as_str()) {
        return Err(format!(
            "interconnect.kind `{}` is not nvlink, infinity_fabric or pcie",
            g.interconnect.kind
        ));
    }
    for (table, map) in [("tflops", &g.tflops), ("datasheet", &g.datasheet)] {
        for (k, v) in map {
            if !FORMATS.contains(&k.as_str()) {
                return Err(format!("{table}.{k} is not one of {FORMATS:?}"));
            }
            positive(&format!("{table}.{k}"), Some(*v))?;
        }
    }
    for k in &g.datasheet_sparse {
        if !g.datasheet.contains_key(k) {
            return Err(format!(
                "datasheet_sparse names {k}, which datasheet does not give"
            ));
        }
    }
    if g.sources.is_empty() || g.sources.iter().any(|s| !s.starts_with("https://")) {
        return Err("sources must list the https URLs the figures come from".into());
    }
    Ok(())
}

pub(super) fn parse(text: &str) -> Result<Vec<Gpu>, FactsError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| FactsError::new(FILE, e.to_string()))?;
    let mut out: Vec<Gpu> = Vec::new();
    for g in raw.gpu {
        let label = format!(
            "{}{}",
            g.gpu_model,
            g.gpu_form_factor
                .as_deref()
                .map(|f| format!(" {f}"))
                .unwrap_or_default()
        );
        check(&g).map_err(|e| FactsError::new(FILE, format!("{label}: {e}")))?;
        if out
            .iter()
            .any(|o| o.gpu_model == g.gpu_model && o.gpu_form_factor == g.gpu_form_factor)
        {
            return Err(FactsError::new(FILE, format!("{label} is listed twice")));
        }
        let tflops = Tflops::from_map(&g.tflops);
        out.push(Gpu {
            capabilities: capabilities(&g, &tflops),
            tflops,
            gpu_model: g.gpu_model,
            gpu_form_factor: g.gpu_form_factor,
            vendor: g.vendor,
            architecture: g.architecture,
            memory_gib: g.memory_gib,
            memory_bandwidth_tbps: g.memory_bandwidth_tbps,
            interconnect: g.interconnect,
            tdp_watts: g.tdp_watts,
            mig_max_instances: g.mig_max_instances,
            sources: g.sources,
            notes: g.notes,
            datasheet: g.datasheet,
            datasheet_sparse: g.datasheet_sparse,
        });
    }
    Ok(out)
}
