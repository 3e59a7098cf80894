//! `gpuplan gpus`, `gpuplan perf` and `gpuplan regions`: the reference facts
//! shipped with gpuplan. They read no config, catalog or network.

use super::*;
use crate::facts::{self, Facts, Gpu, PerfRow, Region};

#[derive(Debug, Args)]
pub struct GpusArgs {
    /// GPU model or family, e.g. `H100` (repeatable).
    #[arg(long = "gpu")]
    gpus: Vec<String>,
    #[command(flatten)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct PerfArgs {
    /// Workload, e.g. `mlperf-inference-v6.1/llama2-70b-99.9/offline` (repeatable).
    #[arg(long = "workload")]
    workloads: Vec<String>,
    /// GPU model or family (repeatable).
    #[arg(long = "gpu")]
    gpus: Vec<String>,
    #[command(flatten)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct RegionsArgs {
    /// Provider: aws, azure, gcp, oci, alibaba or tencent (repeatable).
    #[arg(long = "provider")]
    providers: Vec<String>,
    /// ISO country code, e.g. `DE` (repeatable).
    #[arg(long = "country")]
    countries: Vec<String>,
    #[command(flatten)]
    format: Format,
}

fn builtin() -> Result<&'static Facts, CliError> {
    facts::builtin().map_err(|e| CliError::Failed(anyhow::anyhow!("{e}")))
}

/// A figure for a table: `-` when unknown.
fn figure(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v}"))
}

pub(super) fn run_gpus(args: &GpusArgs) -> Result<ExitCode, CliError> {
    let rows: Vec<&Gpu> = builtin()?.gpus_of(&args.gpus);
    if args.format.print(&rows)? {
        return Ok(ExitCode::SUCCESS);
    }
    let header = [
        "GPU",
        "FORM",
        "ARCHITECTURE",
        "GB",
        "TB/S",
        "FP64",
        "BF16",
        "FP8",
        "FP4",
        "LINK",
        "LINK GB/S",
        "TDP W",
        "MIG",
        "CAPABILITIES",
    ];
    let table: Vec<[String; 14]> = rows
        .iter()
        .map(|g| {
            [
                g.gpu_model.clone(),
                g.gpu_form_factor.clone().unwrap_or_else(|| "-".to_owned()),
                g.architecture.clone(),
                figure(Some(g.memory_gib)),
                figure(g.memory_bandwidth_tbps),
                figure(g.tflops.fp64),
                figure(g.tflops.bf16),
                figure(g.tflops.fp8),
                figure(g.tflops.fp4),
                g.interconnect.kind.clone(),
                figure(g.interconnect.gbps),
                figure(g.tdp_watts),
                g.mig_max_instances.to_string(),
                g.capabilities.join(","),
            ]
        })
        .collect();
    print!(
        "{}",
        render_table(&header, &table, &[3, 4, 5, 6, 7, 8, 10, 11, 12])
    );
    println!("Dense peak TFLOPS (int8 TOPS); sources: gpuplan gpus --json.");
    Ok(ExitCode::SUCCESS)
}

pub(super) fn run_perf(args: &PerfArgs) -> Result<ExitCode, CliError> {
    let rows: Vec<&PerfRow> = builtin()?
        .perf_of(&args.workloads, &args.gpus)
        .map_err(|e| CliError::BadInput(anyhow::anyhow!("--workload: {e}")))?;
    if args.format.print(&rows)? {
        return Ok(ExitCode::SUCCESS);
    }
    let header = [
        "WORKLOAD",
        "GPU",
        "FORM",
        "VALUE",
        "UNIT",
        "PER",
        "GPUS",
        "PRECISION",
        "SUBMITTER",
        "SYSTEM",
    ];
    let table: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.workload.clone(),
                r.gpu_model.clone(),
                r.gpu_form_factor.clone().unwrap_or_else(|| "-".to_owned()),
                format!("{:.1}", r.value),
                r.unit.clone(),
                r.per.clone(),
                r.n_gpus.to_string(),
                r.precision.clone().unwrap_or_else(|| "-".to_owned()),
                r.submitter.clone().unwrap_or_else(|| "-".to_owned()),
                r.system.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    print!("{}", render_table(&header, &table, &[3, 6]));
    Ok(ExitCode::SUCCESS)
}

pub(super) fn run_regions(args: &RegionsArgs) -> Result<ExitCode, CliError> {
    let rows: Vec<&Region> = builtin()?.regions_of(&args.providers, &args.countries);
    if args.format.print(&rows)? {
        return Ok(ExitCode::SUCCESS);
    }
    let header = ["PROVIDER", "REGION", "COUNTRY", "GCO2E/KWH", "YEAR", "PUE"];
    let table: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.provider.clone(),
                r.region.clone(),
                r.country.clone().unwrap_or_else(|| "-".to_owned()),
                figure(r.grid_gco2e_per_kwh),
                r.carbon_year
                    .map_or_else(|| "-".to_owned(), |y| y.to_string()),
                figure(r.pue),
            ]
        })
        .collect();
    print!("{}", render_table(&header, &table, &[3, 4, 5]));
    Ok(ExitCode::SUCCESS)
}
