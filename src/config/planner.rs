//! `[planner]`: the defaults of every plan.

use super::*;

#[derive(Debug, Clone)]
pub struct PlannerConfig {
    /// Solves run at once; more API requests get 503 with `Retry-After`, and
    /// scheduled plans and the CLI wait for a slot.
    pub max_concurrent_solves: usize,
    /// The defaults of every plan (CLI flags and API fields override them).
    pub time_limit: Duration,
    pub spot_window: Duration,
    pub restart_hours: f64,
    pub checkpoint_hours: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlanner {
    max_concurrent_solves: Option<i64>,
    time_limit_secs: Option<f64>,
    spot_window: Option<String>,
    restart_hours: Option<f64>,
    checkpoint_hours: Option<f64>,
}

/// `[planner]`.
pub(super) fn validate(raw: RawPlanner, c: &mut Checker) -> PlannerConfig {
    let mut hours = |key: &str, value: Option<f64>, default: f64| match value {
        None => default,
        Some(h) if (0.0..=8760.0).contains(&h) => h,
        Some(h) => {
            c.fail(
                format!("planner.{key}"),
                format!("{h} is out of range; allowed: 0 to 8760"),
            );
            default
        }
    };
    let restart_hours = hours("restart_hours", raw.restart_hours, 0.5);
    let checkpoint_hours = hours("checkpoint_hours", raw.checkpoint_hours, 1.0);
    let time_limit = match raw.time_limit_secs {
        None => Duration::from_secs(300),
        Some(t) if t > 0.0 && t <= 86_400.0 => Duration::from_secs_f64(t),
        Some(t) => {
            c.fail(
                "planner.time_limit_secs",
                format!("{t} is out of range; allowed: more than 0, up to 86400"),
            );
            Duration::from_secs(300)
        }
    };
    let spot_window = match crate::catalog::parse_window(raw.spot_window.as_deref().unwrap_or("7d"))
    {
        Ok(w) => w,
        Err(e) => {
            c.fail("planner.spot_window", e);
            Duration::from_secs(7 * 86_400)
        }
    };
    PlannerConfig {
        max_concurrent_solves: c.bounded(
            "planner.max_concurrent_solves",
            raw.max_concurrent_solves,
            2,
            1..=64,
        ) as usize,
        time_limit,
        spot_window,
        restart_hours,
        checkpoint_hours,
    }
}
