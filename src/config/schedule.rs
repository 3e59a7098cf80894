//! Cron schedules with seconds, in UTC.

use super::*;

/// A cron schedule (UTC, with a seconds field) and the text it came from.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub expr: String,
    parsed: cron::Schedule,
}

impl FromStr for Schedule {
    type Err = String;

    fn from_str(expr: &str) -> Result<Self, String> {
        Self::parse(expr)
    }
}

impl Schedule {
    pub(super) fn parse(expr: &str) -> Result<Self, String> {
        let parsed = cron::Schedule::from_str(expr).map_err(|e| {
            // The cron crate's message spans lines with a caret diagram; keep its words.
            let detail = e.to_string().split_whitespace().filter(|w| *w != "^").collect::<Vec<_>>().join(" ");
            format!("`{expr}` is not a cron schedule (sec min hour day-of-month month day-of-week [year]): {detail}")
        })?;
        if parsed.upcoming(Utc).next().is_none() {
            return Err(format!("`{expr}` never fires again"));
        }
        Ok(Self {
            expr: expr.to_owned(),
            parsed,
        })
    }

    /// The first run strictly after `t`.
    #[must_use]
    pub fn next_after(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        // Validation checked that the schedule fires again; a schedule that ran
        // out (a year field in the past) falls back to a day later.
        self.parsed
            .after(&t)
            .next()
            .unwrap_or(t + chrono::Duration::days(1))
    }

    /// The longest gap between consecutive runs over the next few runs after
    /// `from`: data older than twice this is stale.
    #[must_use]
    pub fn interval(&self, from: DateTime<Utc>) -> Duration {
        let fires: Vec<DateTime<Utc>> = self.parsed.after(&from).take(25).collect();
        fires
            .windows(2)
            .filter_map(|w| (w[1] - w[0]).to_std().ok())
            .max()
            .unwrap_or(Duration::from_secs(3600))
    }
}
