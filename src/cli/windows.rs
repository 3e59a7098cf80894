//! `gpuplan windows`: priced windows (Capacity Block offerings), offered now
//! or vanished lately, with their price.

use super::*;

#[derive(Debug, Args)]
pub struct WindowsArgs {
    #[command(flatten)]
    offers: super::prices::OfferArgs,
    /// Also list the windows that vanished since then: a duration back from
    /// now (`30d`, `36h`), a date (`2026-11-01`) or an RFC 3339 time.
    #[arg(long, default_value = "30d")]
    since: String,
    /// Only windows at least this many days long.
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| parse_number(s).and_then(|d| in_range("--min-days", d, 0.0, 366.0)))]
    min_days: Option<f64>,
    /// Only windows at or below this many USD per GPU-hour.
    #[arg(long, allow_negative_numbers = true, value_parser = super::prices::parse_price)]
    max_usd_per_gpu_hour: Option<f64>,
    #[command(flatten)]
    format: Format,
}

fn parse_number(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("`{s}` is not a number"))
}

pub(super) fn run_windows(config: &Config, args: WindowsArgs) -> Result<ExitCode, CliError> {
    let now = Utc::now();
    let since = catalog::parse_since(&args.since, now)
        .map_err(|e| CliError::BadInput(anyhow::anyhow!("--since: {e}")))?;
    let filter = PriceFilter {
        gpus: args.offers.gpus,
        providers: args.offers.providers,
        regions: args.offers.regions,
        max_usd_per_gpu_hour: args.max_usd_per_gpu_hour,
        ..PriceFilter::default()
    };
    let pool = open_store(config)?;
    let records = pool
        .read(|s| catalog::windows(s, &filter, since, args.min_days.unwrap_or(0.0) * 24.0))
        .map_err(|e| CliError::Failed(e.into()))?;
    if args.format.print(&records)? {
        return Ok(ExitCode::SUCCESS);
    }
    if records.is_empty() {
        eprintln!(
            "No priced windows match since {}. Capacity Blocks come from the aws source with credentials (sources: capacity_blocks).",
            since.to_rfc3339()
        );
    } else {
        print!("{}", windows_table(&records, now));
    }
    Ok(ExitCode::SUCCESS)
}
