//! `gpuplan store prune`: retention by hand.

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
    let rows: Vec<[String; 2]> = Prunable::ALL
        .iter()
        .map(|k| [k.name().to_owned(), counts.get(*k).to_string()])
        .collect();
    println!(
        "{}",
        render_table(&["TABLE", "ROWS"], &rows, &[1]).trim_end()
    );
    println!("{verb} {} rows in all", counts.total());
    Ok(ExitCode::SUCCESS)
}
