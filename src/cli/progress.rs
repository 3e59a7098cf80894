//! Progress on long work: a line per task on stderr while it runs, drawn
//! only when stderr is a terminal (never into a pipe, a log file or CI, nor
//! with `TERM=dumb`) and not with `--quiet`. Colours follow `NO_COLOR` and
//! `CLICOLOR`. Log lines written meanwhile print above the progress lines
//! instead of through them, and a finished task's line is cleared, so what
//! stays on the screen is the command's own summary.

use std::io::Write as _;
use std::time::Duration;

use indicatif::{HumanBytes, MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug, Clone)]
pub struct Progress {
    lines: MultiProgress,
}

/// How often a line is redrawn: often enough to look alive, seldom enough
/// to cost nothing.
const REDRAWS_PER_SECOND: u8 = 10;

impl Progress {
    #[must_use]
    pub fn new(quiet: bool) -> Self {
        let target = if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_SECOND)
        };
        Self {
            lines: MultiProgress::with_draw_target(target),
        }
    }

    /// A line for one task: a spinner, `name`, what `status` says at each
    /// redraw, and the time since the task began. It is cleared when the
    /// [`Line`] is dropped, however the task ended.
    pub(super) fn line<F>(&self, name: &str, status: F) -> Line
    where
        F: Fn() -> String + Send + Sync + Clone + 'static,
    {
        let style =
            ProgressStyle::with_template("{spinner:.cyan} {prefix:.bold}  {status}  {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .with_key(
                    "status",
                    move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&status());
                    },
                );
        let line = self.lines.add(
            ProgressBar::new_spinner()
                .with_style(style)
                .with_prefix(name.to_owned()),
        );
        // The ticker is a thread redrawing the line: none where nothing is drawn.
        if !self.lines.is_hidden() {
            line.enable_steady_tick(Duration::from_millis(1000 / u64::from(REDRAWS_PER_SECOND)));
        }
        Line(line)
    }

    /// Where logs go: stderr, above any progress lines.
    #[must_use]
    pub fn log_writer(&self) -> LogWriter {
        LogWriter(self.lines.clone())
    }
}

/// One task's progress line, on the screen while this lives.
pub(super) struct Line(ProgressBar);

impl Drop for Line {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// Bytes as people read them (`12.50 MiB`).
pub(super) fn bytes(n: u64) -> String {
    HumanBytes(n).to_string()
}

/// Makes one [`LogLine`] per log event.
pub struct LogWriter(MultiProgress);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine {
            lines: self.0.clone(),
            text: Vec::new(),
        }
    }
}

/// One log event, written to stderr whole once formatted, with the
/// progress lines lifted out of its way.
pub struct LogLine {
    lines: MultiProgress,
    text: Vec<u8>,
}

impl std::io::Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let text = std::mem::take(&mut self.text);
        self.lines.suspend(|| {
            let _ = std::io::stderr().write_all(&text);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_or_piped_run_draws_nothing() {
        // Tests run with stderr captured, as a pipe.
        for quiet in [true, false] {
            let progress = Progress::new(quiet);
            assert!(progress.lines.is_hidden());
            let line = progress.line("aws", || "reading".to_owned());
            assert!(line.0.is_hidden());
        }
    }

    #[test]
    fn bytes_read_as_people_read_them() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(13_107_200), "12.50 MiB");
    }
}
