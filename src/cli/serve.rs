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

/// Completes on SIGTERM or SIGINT. The handlers are installed here, before
/// the daemon starts anything, not when the daemon first waits for them: a
/// signal that comes while it starts its syncs stops it gracefully instead of
/// killing it.
fn stop_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        let received = |s: Option<Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        async move {
            tokio::select! {
                () = received(term) => {}
                () = received(int) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
