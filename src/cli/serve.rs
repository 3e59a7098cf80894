//! `gpuplan serve`: the daemon on the configured listener until SIGTERM or SIGINT.

use super::*;

pub(super) async fn serve(config: Config, grace: Duration) -> Result<ExitCode, CliError> {
    let listen = config.api.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("Failed to listen on {listen} (api.listen)."))?;
    let options = daemon::Options {
        grace,
        token: Secret::from_env(daemon::TOKEN_ENV),
    };
    daemon::run(config, listener, options, stop_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Completes on SIGTERM or SIGINT.
async fn stop_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
