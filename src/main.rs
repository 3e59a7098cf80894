use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = gpuplan::cli::Cli::parse();
    let progress = gpuplan::cli::Progress::new(cli.quiet);
    gpuplan::telemetry::init(cli.log_format, progress.log_writer());
    match gpuplan::cli::run(cli, &progress).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            err.exit_code()
        }
    }
}
