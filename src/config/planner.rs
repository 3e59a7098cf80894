//! `[planner]`: the defaults of every plan.

use super::*;
use crate::plan::inputs::OwnedEntry;
use crate::plan::settings::{self, PlanSettings, PlannerConfig};

/// The default memory bound of one solve: with the default two solves at
/// once, 4 GiB in all, well under the memory of a machine that plans.
pub const DEFAULT_SOLVE_MEMORY_MIB: u32 = 2048;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlanner {
    max_concurrent_solves: Option<i64>,
    max_solve_memory_mib: Option<i64>,
    time_limit_secs: Option<f64>,
    spot_window: Option<String>,
    restart_hours: Option<f64>,
    checkpoint_hours: Option<f64>,
    #[serde(default)]
    owned: Vec<OwnedEntry>,
}

/// `[planner]`.
pub(super) fn validate(raw: RawPlanner, c: &mut Checker) -> PlannerConfig {
    let mut hours = |key: &str, value: Option<f64>, default: f64| {
        value.map_or(default, |h| {
            settings::check_hours(&format!("planner.{key}"), h).unwrap_or_else(|e| {
                c.fail(e.path, e.message);
                default
            })
        })
    };
    let restart_hours = hours("restart_hours", raw.restart_hours, 0.5);
    let checkpoint_hours = hours("checkpoint_hours", raw.checkpoint_hours, 1.0);
    let default_time_limit = Duration::from_secs(300);
    let time_limit = raw.time_limit_secs.map_or(default_time_limit, |t| {
        settings::check_time_limit("planner.time_limit_secs", t).unwrap_or_else(|e| {
            c.fail(e.path, e.message);
            default_time_limit
        })
    });
    let spot_window = match crate::catalog::parse_window(raw.spot_window.as_deref().unwrap_or("7d"))
    {
        Ok(w) => w,
        Err(e) => {
            c.fail("planner.spot_window", e);
            Duration::from_secs(7 * 86_400)
        }
    };
    let owned = raw
        .owned
        .into_iter()
        .enumerate()
        .filter_map(|(i, e)| {
            e.resolve()
                .map_err(|m| c.fail(format!("planner.owned[{i}]"), m))
                .ok()
        })
        .collect();
    PlannerConfig {
        owned,
        max_solve_memory_mib: u64::from(c.bounded(
            "planner.max_solve_memory_mib",
            raw.max_solve_memory_mib,
            DEFAULT_SOLVE_MEMORY_MIB,
            64..=1_048_576,
        )),
        max_concurrent_solves: c.bounded(
            "planner.max_concurrent_solves",
            raw.max_concurrent_solves,
            2,
            1..=64,
        ) as usize,
        defaults: PlanSettings {
            time_limit,
            spot_window,
            restart_hours,
            checkpoint_hours,
        },
    }
}
