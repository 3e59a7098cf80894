//! The command line: argument parsing and the output people and scripts read.
//! stdout carries data (tables or `--json`), stderr carries logs and notes.
//! Exit codes: 0 ok, 1 failure, 2 bad input.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use gpuplan_providers::secret::Secret;
use gpuplan_providers::{PriceKind, PriceScope, Scope};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::alerts::deliver;
use crate::catalog::{self, CatalogRecord, Freshness, PriceFilter, SpotHistory, SpotQuery};
use crate::config::{self, Config};
use crate::daemon;
use crate::optimizer::{self, OptimizeError, PlanResult, Problem};
use crate::plan::forecast;
use crate::plan::inputs;
use crate::plan::settings::{self, Overrides};
use crate::plan::{Input, PlanError, PlanRequest, PlanService};
use crate::store::{Location, Pool, Prunable, Store, StoreError};
use crate::telemetry::LogFormat;

mod advise;
mod alerts;
mod bills;
mod config_cmd;
mod facts;
mod job;
mod plan;
mod prices;
mod progress;
mod render;
mod serve;
mod shell;
mod spot_history;
mod store;
mod sync;
mod windows;

pub use alerts::AlertsCommand;
pub use bills::{BillsCommand, CommitmentsArgs, SpendArgs, UsageArgs};
pub use config_cmd::ConfigCommand;
pub use facts::{GpusArgs, PerfArgs, RegionsArgs};
pub use job::JobArgs;
pub use plan::{PlanArgs, PlanCatalogArgs};
pub use prices::PricesArgs;
pub use progress::Progress;
pub use spot_history::SpotHistoryArgs;
pub use store::StoreCommand;
pub use windows::WindowsArgs;

use alerts::run_alerts;
use bills::{run_bills, run_budgets, run_commitments, run_coverage, run_spend, run_usage};
use config_cmd::validate_config;
use plan::run_plan;
use prices::run_prices;
use render::*;
use serve::serve;
use spot_history::run_spot_history;
use store::{run_copy, run_prune};
use sync::run_sync;
use windows::run_windows;

#[derive(Debug, Parser)]
#[command(
    name = "gpuplan",
    version,
    about = "A local catalog of cloud GPU prices, purchase plans and alerts."
)]
pub struct Cli {
    /// Config file (TOML); else the file `GPUPLAN_CONFIG` names, when set and
    /// not empty. Without one, built-in defaults apply.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Draw no progress lines. They are drawn on stderr only when it is a
    /// terminal, never into a pipe or a log.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: scheduled syncs and the HTTP API, until SIGTERM/SIGINT.
    Serve {
        /// Seconds that running syncs and requests get to finish after a stop signal.
        #[arg(long, default_value_t = 30)]
        shutdown_grace_secs: u64,
    },
    /// Sync every enabled provider (or the named ones) into the catalog now.
    Sync {
        /// Only this provider (repeatable), e.g. `file:onprem`.
        #[arg(long = "provider")]
        providers: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// List current prices, cheapest per GPU-hour first.
    Prices(PricesArgs),
    /// Spot price history of one instance type, with min/p50/p95/max.
    SpotHistory(SpotHistoryArgs),
    /// Priced windows (Capacity Blocks): offered now, or vanished lately, with their price.
    Windows(WindowsArgs),
    /// What each GPU can do, from its datasheet: memory, bandwidth, dense TFLOPS, fabric, TDP, MIG.
    Gpus(GpusArgs),
    /// Measured performance per GPU (MLPerf), each row with its source.
    Perf(PerfArgs),
    /// Cloud regions with their country, grid carbon intensity and PUE.
    Regions(RegionsArgs),
    /// Solve a purchase-planning problem (docs/planning-model.md) and print the plan.
    Plan(Box<PlanArgs>),
    /// Where and how to do this much work by a deadline, within a budget:
    /// the plan, its ranking or schedule and its cost against finish time.
    Job(Box<JobArgs>),
    /// Alert rules: their state, what was sent, and test messages.
    #[command(subcommand)]
    Alerts(AlertsCommand),
    /// Check or print configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Maintain the catalog file.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Billing exports (FOCUS, AWS CUR 2.0): load them now, or see what is loaded.
    #[command(subcommand)]
    Bills(BillsCommand),
    /// GPU usage from the bills: instance- and GPU-hours with their cost.
    Usage(UsageArgs),
    /// Spend from the bills, on both cost bases.
    Spend(SpendArgs),
    /// Commitments found in the bills, with their use.
    Commitments(CommitmentsArgs),
    /// Committed share of on-demand plus committed GPU usage, per instance type.
    Coverage(CommitmentsArgs),
    /// Per team: the steady on-demand GPU load of the bills, what to buy for
    /// it, and the saving against going on as billed.
    Advise(advise::AdviseArgs),
    /// Print a completion script for a shell: bash, zsh, fish, elvish or powershell.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a folder.
    Man {
        /// Write gpuplan.1, gpuplan-plan.1, ... here instead of printing gpuplan.1.
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
    /// Each budget of the config: actual and forecast spend, and its thresholds.
    Budgets {
        #[command(flatten)]
        format: Format,
    },
}

/// A command's failure, split by whose fault it is (for the exit code).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0:#}")]
    BadInput(anyhow::Error),
    #[error("{0:#}")]
    Failed(anyhow::Error),
}

impl CliError {
    #[must_use]
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::BadInput(_) => ExitCode::from(2),
            Self::Failed(_) => ExitCode::from(1),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        Self::Failed(e)
    }
}

/// Runs one command.
///
/// # Errors
/// `BadInput` for a bad config or argument, `Failed` for everything else.
pub async fn run(cli: Cli, progress: &Progress) -> Result<ExitCode, CliError> {
    // Read here, not by clap: clap takes an empty variable for a missing
    // value and refuses even an explicit `--config FILE`.
    let config_file = cli.config.or_else(|| {
        std::env::var_os("GPUPLAN_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    match cli.command {
        Command::Completions { shell } => Ok(shell::completions(shell)),
        Command::Man { out_dir } => shell::man(out_dir.as_deref()),
        Command::Config(ConfigCommand::Example) => {
            print!("{}", config::EXAMPLE);
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(ConfigCommand::Validate { file }) => {
            validate_config(file.as_deref().or(config_file.as_deref()))
        }
        Command::Serve {
            shutdown_grace_secs,
        } => {
            let config = load_config(config_file.as_deref())?;
            serve(config, Duration::from_secs(shutdown_grace_secs)).await
        }
        Command::Sync { providers, json } => {
            let config = load_config(config_file.as_deref())?;
            run_sync(&config, &providers, json, progress).await
        }
        Command::Alerts(command) => {
            let config = load_config(config_file.as_deref())?;
            run_alerts(&config, command).await
        }
        Command::Plan(args) => {
            let config = load_config(config_file.as_deref())?;
            run_plan(&config, &args, progress).await
        }
        Command::Job(args) => {
            let config = load_config(config_file.as_deref())?;
            job::run_job(&config, *args, progress).await
        }
        Command::Prices(args) => {
            let config = load_config(config_file.as_deref())?;
            run_prices(&config, args)
        }
        Command::SpotHistory(args) => {
            let config = load_config(config_file.as_deref())?;
            run_spot_history(&config, &args)
        }
        Command::Gpus(args) => facts::run_gpus(&args),
        Command::Perf(args) => facts::run_perf(&args),
        Command::Regions(args) => facts::run_regions(&args),
        Command::Windows(args) => run_windows(&load_config(config_file.as_deref())?, args),
        Command::Store(StoreCommand::Copy { from, to, json }) => {
            let config = load_config(config_file.as_deref())?;
            run_copy(&config, &from, to.as_deref(), json)
        }
        Command::Store(StoreCommand::Prune { dry_run, json }) => {
            let config = load_config(config_file.as_deref())?;
            run_prune(&config, dry_run, json)
        }
        Command::Bills(command) => {
            let config = load_config(config_file.as_deref())?;
            run_bills(&config, command, progress).await
        }
        Command::Usage(args) => run_usage(&load_config(config_file.as_deref())?, &args),
        Command::Spend(args) => run_spend(&load_config(config_file.as_deref())?, &args),
        Command::Commitments(args) => run_commitments(&load_config(config_file.as_deref())?, &args),
        Command::Coverage(args) => run_coverage(&load_config(config_file.as_deref())?, &args),
        Command::Advise(args) => {
            advise::run_advise(&load_config(config_file.as_deref())?, &args).await
        }
        Command::Budgets { format } => run_budgets(&load_config(config_file.as_deref())?, format),
    }
}

pub(super) fn load_config(path: Option<&Path>) -> Result<Config, CliError> {
    match path {
        Some(path) => Config::load(path).map_err(|e| CliError::BadInput(e.into())),
        None => Ok(Config::default()),
    }
}

pub(super) fn open_store(config: &Config) -> Result<Pool, CliError> {
    Pool::open(&config.store.location, 0).map_err(|e| CliError::Failed(e.into()))
}

pub(super) fn freshness(config: &Config, store: &dyn Store) -> Result<Freshness, CliError> {
    let now = Utc::now();
    Freshness::read(store, config.source_intervals(now), now)
        .map_err(|e| CliError::Failed(e.into()))
}

/// Checks a number flag against its allowed range.
///
/// # Errors
/// A refusal naming the flag and the range.
pub(super) fn in_range(flag: &str, value: f64, min: f64, max: f64) -> Result<f64, String> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "{flag}: {value} is out of range; allowed: {min} to {max}"
        ))
    }
}

/// How a listing prints: a table for people (the default), `--json` as the
/// API answers, or `--csv` for spreadsheets.
#[derive(Debug, Clone, Copy, Args)]
pub struct Format {
    /// Print JSON, in the API's shapes.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV with a header row: one row per record, nested fields as
    /// dotted columns (`converted.per_hour`), lists as JSON text.
    #[arg(long)]
    csv: bool,
}

impl Format {
    /// Prints `rows` as JSON or CSV when either was asked for; `false`
    /// leaves the table to the caller.
    pub(super) fn print<T: serde::Serialize>(self, rows: &T) -> Result<bool, CliError> {
        if self.json {
            print_json(rows)?;
        } else if self.csv {
            let value = serde_json::to_value(rows).context("Failed to encode the output.")?;
            print!("{}", csv_text(value)?);
        } else {
            return Ok(false);
        }
        Ok(true)
    }
}

/// JSON records (a list, or one object) as CSV. Columns are every field any
/// record has, in the order first seen (serde_json keeps a struct's field
/// order); an object field becomes `field.key` columns, a list (or a deeper
/// object) one cell of JSON, null an empty cell.
fn csv_text(json: serde_json::Value) -> Result<String, CliError> {
    use serde_json::Value;
    fn cell(v: &Value) -> String {
        match v {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
    fn flatten(record: Value) -> Result<Vec<(String, String)>, String> {
        let Value::Object(fields) = record else {
            return Err(format!("a record is {record}, not a JSON object"));
        };
        let mut out = Vec::new();
        for (k, v) in fields {
            match v {
                Value::Object(mut inner) => {
                    // Nested columns have always come in name order; keeping
                    // it keeps spreadsheets that read columns by position.
                    inner.sort_keys();
                    for (ik, iv) in &inner {
                        out.push((format!("{k}.{ik}"), cell(iv)));
                    }
                }
                other => out.push((k, cell(&other))),
            }
        }
        Ok(out)
    }
    let failed =
        |e: &dyn std::fmt::Display| CliError::Failed(anyhow::anyhow!("Failed to write CSV: {e}"));
    let records = match json {
        Value::Array(list) => list,
        one => vec![one],
    };
    let records: Vec<Vec<(String, String)>> = records
        .into_iter()
        .map(flatten)
        .collect::<Result<_, _>>()
        .map_err(|e| failed(&e))?;
    if records.is_empty() {
        return Ok(String::new());
    }
    let mut columns: Vec<String> = Vec::new();
    for r in &records {
        for (k, _) in r {
            if !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&columns).map_err(|e| failed(&e))?;
    for r in &records {
        let row = columns.iter().map(|c| {
            r.iter()
                .find(|(k, _)| k == c)
                .map_or("", |(_, v)| v.as_str())
        });
        w.write_record(row).map_err(|e| failed(&e))?;
    }
    let bytes = w.into_inner().map_err(|e| failed(&e))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

pub(super) fn print_json<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let text =
        serde_json::to_string_pretty(value).context("Failed to encode the output as JSON.")?;
    println!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_cells_flattens_one_level_and_leaves_missing_fields_empty() {
        let rows = r#"[
            {"name": "a, \"b\"", "n": 1, "converted": {"per_hour": 2.5, "currency": "CNY"}, "list": ["x", "y"]},
            {"name": "c", "extra": true, "converted": null}
        ]"#;
        let text = csv_text(serde_json::from_str(rows).unwrap()).unwrap();
        assert_eq!(
            text,
            "name,n,converted.currency,converted.per_hour,list,extra,converted\n\
             \"a, \"\"b\"\"\",1,CNY,2.5,\"[\"\"x\"\",\"\"y\"\"]\",,\n\
             c,,,,,true,\n"
        );
        let text = |json: &str| csv_text(serde_json::from_str(json).unwrap()).unwrap();
        assert_eq!(text("[]"), "");
        assert_eq!(text(r#"{"b": 1, "a": 2}"#), "b,a\n1,2\n");
        assert!(csv_text(json!([1, 2])).is_err());
    }
}
