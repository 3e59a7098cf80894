//! Logging setup: tracing to stderr (stdout is for data), as text or JSON lines.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the global subscriber, writing each event through `writer`.
/// `RUST_LOG` overrides the default filter; colours only on a terminal and
/// not with `NO_COLOR`.
pub fn init<W>(format: LogFormat, writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env()
        // aws_config warns on every sync where its credential chain comes up
        // empty, which is the normal case for the public AWS path; gpuplan says
        // so itself, once per sync, at info.
        .unwrap_or_else(|_| {
            EnvFilter::new("warn,gpuplan=info,gpuplan_providers=info,aws_config=error")
        });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(console::colors_enabled_stderr());
    // A second init (tests calling main paths twice) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
