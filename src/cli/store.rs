//! `gpuplan store prune` (retention by hand) and `gpuplan store copy` (a
//! SQLite catalog into PostgreSQL).

use super::*;

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Delete history older than `[store.retention]` allows (the daemon does
    /// this on `store.retention.schedule`). Current prices and the newest spot
    /// observation of every pool always stay.
    Prune {
        /// Only count what would go.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
    /// Copy a whole SQLite catalog (spot history, plans and alerts included)
    /// into an empty PostgreSQL one, then check that both give the same
    /// current prices. The target is `--to`, or the configured store
    /// (`store.url` / GPUPLAN_STORE_URL, which keeps a password off the
    /// command line).
    Copy {
        /// `sqlite:PATH` of the catalog file to copy.
        #[arg(long)]
        from: String,
        /// A `postgres://` URL; default: the configured store.
        #[arg(long)]
        to: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run_copy(
    config: &Config,
    from: &str,
    to: Option<&str>,
    json: bool,
) -> Result<ExitCode, CliError> {
    let bad = |flag: &str, why: String| CliError::BadInput(anyhow::anyhow!("{flag}: {why}"));
    let path = from
        .strip_prefix("sqlite:")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| bad("--from", "must be sqlite:PATH".to_owned()))?;
    if !Path::new(path).is_file() {
        return Err(bad("--from", format!("{path} is not a file")));
    }
    let target = match to {
        Some(url) => Location::Postgres(Secret::new(url)),
        None => config.store.location.clone(),
    };
    if !target.is_shared() {
        return Err(bad(
            "--to",
            "give a postgres:// URL (the configured store is a SQLite file)".to_owned(),
        ));
    }
    target.check().map_err(|e| bad("--to", e.to_string()))?;
    let pool = Pool::open(&target, 0).map_err(|e| CliError::Failed(e.into()))?;
    let report = crate::store::copy::copy_sqlite(Path::new(path), &pool)
        .map_err(|e| CliError::Failed(e.into()))?;
    if json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 2]> = report
        .rows
        .iter()
        .map(|(table, n)| [table.clone(), n.to_string()])
        .collect();
    println!(
        "{}",
        render_table(&["TABLE", "ROWS"], &rows, &[1]).trim_end()
    );
    println!(
        "copied {path} to {target}; {} current prices, checksum {} on both sides",
        report.current_prices, report.target_checksum
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn run_prune(config: &Config, dry_run: bool, json: bool) -> Result<ExitCode, CliError> {
    let pool = Pool::open(&config.store.location, 0)
        .with_context(|| format!("Failed to open {}.", config.store.location))?;
    let counts = crate::store::prune(&pool, &config.store.retention, Utc::now(), dry_run)
        .map_err(|e| CliError::Failed(e.into()))?;
    if json {
        print_json(&json!({"dry_run": dry_run, "rows": counts}))?;
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if dry_run { "would delete" } else { "deleted" };
    let mut rows: Vec<[String; 2]> = Prunable::ALL
        .iter()
        .map(|k| [k.name().to_owned(), counts.get(*k).to_string()])
        .collect();
    rows.push(["bill periods".to_owned(), counts.bill_periods.to_string()]);
    println!(
        "{}",
        render_table(&["TABLE", "ROWS"], &rows, &[1]).trim_end()
    );
    println!("{verb} {} rows in all", counts.total());
    Ok(ExitCode::SUCCESS)
}
