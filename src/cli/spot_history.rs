//! `gpuplan spot-history`: one instance type's spot prices over a window.

use super::*;

#[derive(Debug, Args)]
pub struct SpotHistoryArgs {
    /// Instance type, e.g. `p5.48xlarge`.
    #[arg(long)]
    instance: String,
    #[arg(long)]
    provider: Option<String>,
    #[arg(long)]
    region: Option<String>,
    #[arg(long)]
    zone: Option<String>,
    /// Window start: a duration back from now (`7d`, `36h`, `90m`), a date
    /// (`2026-11-01`) or an RFC 3339 time.
    #[arg(long, default_value = "7d")]
    since: String,
    #[command(flatten)]
    format: Format,
}

pub(super) fn run_spot_history(
    config: &Config,
    args: &SpotHistoryArgs,
) -> Result<ExitCode, CliError> {
    let now = Utc::now();
    let since = catalog::parse_since(&args.since, now)
        .map_err(|e| CliError::BadInput(anyhow::anyhow!("--since: {e}")))?;
    let pool = open_store(config)?;
    let fresh = pool.read(|s| freshness(config, s))?;
    let query = SpotQuery {
        instance_type: args.instance.clone(),
        provider: args.provider.clone(),
        region: args.region.clone(),
        zone: args.zone.clone(),
        since,
        max_observations: Some(catalog::MAX_SPOT_OBSERVATIONS),
    };
    let history = pool
        .read(|s| catalog::spot_history(s, &query, &fresh))
        .map_err(|e| match e {
            e @ StoreError::TooLarge { .. } => {
                CliError::BadInput(anyhow::anyhow!("--since, --region, --zone: {e}"))
            }
            e => CliError::Failed(e.into()),
        })?;
    // CSV lists the observations; JSON keeps the series and statistics.
    let printed = if args.format.json {
        args.format.print(&history)?
    } else {
        let points: Vec<catalog::SpotPointOf> = history
            .series
            .iter()
            .flat_map(catalog::SpotSeries::points)
            .collect();
        args.format.print(&points)?
    };
    if printed {
        return Ok(ExitCode::SUCCESS);
    }
    if history.series.is_empty() {
        eprintln!(
            "No spot history for {} since {}.",
            args.instance,
            since.to_rfc3339()
        );
    } else {
        print!("{}", spot_table(&history));
    }
    Ok(ExitCode::SUCCESS)
}
