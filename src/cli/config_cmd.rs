//! `gpuplan config validate` and `gpuplan config example`.

use super::*;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file (default: --config), reporting every problem.
    Validate { file: Option<PathBuf> },
    /// Print the example config, which documents every key.
    Example,
}

pub(super) fn validate_config(path: Option<&Path>) -> Result<ExitCode, CliError> {
    let Some(path) = path else {
        println!(
            "no config file given: the built-in defaults apply (see `gpuplan config example`)"
        );
        return Ok(ExitCode::SUCCESS);
    };
    let config = load_config(Some(path))?;
    let sources: Vec<String> = config
        .enabled_sources()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    println!(
        "{}: ok; store {}; {} provider{} enabled{}{}",
        path.display(),
        config.store.location,
        sources.len(),
        if sources.len() == 1 { "" } else { "s" },
        if sources.is_empty() { "" } else { ": " },
        sources.join(", ")
    );
    // The file is valid; whether this environment holds the variables it
    // names is the daemon's concern at start, but worth saying here.
    if let Err(missing) = deliver::channels(&config.alerts.channels) {
        eprintln!("warning: {missing}; `gpuplan serve` will refuse to start without it");
    }
    Ok(ExitCode::SUCCESS)
}
