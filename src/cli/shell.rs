//! `gpuplan completions SHELL` and `gpuplan man`: what a shell and `man`
//! need, generated from the same argument definitions the CLI parses with,
//! so they never drift from it.

use clap::CommandFactory as _;

use super::*;

/// Prints the completion script for `shell` to stdout.
pub(super) fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "gpuplan", &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// Prints the man page of `gpuplan` to stdout, or writes one page per
/// command (`gpuplan.1`, `gpuplan-plan.1`, ...) into `out_dir`.
pub(super) fn man(out_dir: Option<&Path>) -> Result<ExitCode, CliError> {
    let cmd = Cli::command();
    match out_dir {
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .context("Failed to render the man page.")?;
            std::io::Write::write_all(&mut std::io::stdout(), &out)
                .context("Failed to write the man page.")?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                CliError::BadInput(anyhow::anyhow!("--out-dir {}: {e}", dir.display()))
            })?;
            clap_mangen::generate_to(cmd, dir).map_err(|e| {
                CliError::Failed(anyhow::anyhow!(
                    "Failed to write the man pages into {}: {e}",
                    dir.display()
                ))
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
