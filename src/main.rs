use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = gpuplan::cli::Cli::parse();
    gpuplan::telemetry::init(cli.log_format);
    match gpuplan::cli::run(cli).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            err.exit_code()
        }
    }
}
