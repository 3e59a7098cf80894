//! `[store]`: the catalog file and its retention.

use super::*;

pub(super) const DEFAULT_STORE_PATH: &str = "gpuplan.db";

/// Pruning runs daily at a quiet minute, away from the hourly syncs at :00.
pub(super) const DEFAULT_PRUNE_SCHEDULE: &str = "0 17 3 * * *";

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub path: PathBuf,
    pub retention: Retention,
    /// When the daemon prunes what `retention` lets go.
    pub prune_schedule: Schedule,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    path: Option<String>,
    #[serde(default)]
    retention: RawRetention,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetention {
    spot_history_days: Option<i64>,
    price_history_days: Option<i64>,
    sync_runs_days: Option<i64>,
    plans_days: Option<i64>,
    delivered_alerts_days: Option<i64>,
    schedule: Option<String>,
}

/// `[store]`, with paths resolved by `resolve`.
pub(super) fn validate(
    raw: RawStore,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> StoreConfig {
    let store_path = raw.path.unwrap_or_else(|| DEFAULT_STORE_PATH.to_owned());
    if store_path.trim().is_empty() {
        c.fail("store.path", "must not be empty");
    }
    let raw_retention = raw.retention;
    let defaults = Retention::default();
    let mut days = |key: &str, value: Option<i64>, default: Option<Duration>| {
        let default_days = default.map_or(0, |d| d.as_secs() / 86_400);
        match c.bounded(
            &format!("store.retention.{key}"),
            value,
            u32::try_from(default_days).unwrap_or(0),
            0..=36_500,
        ) {
            0 => None,
            n => Some(Duration::from_secs(u64::from(n) * 86_400)),
        }
    };
    let retention = Retention {
        spot_history: days(
            "spot_history_days",
            raw_retention.spot_history_days,
            defaults.spot_history,
        ),
        price_history: days(
            "price_history_days",
            raw_retention.price_history_days,
            defaults.price_history,
        ),
        sync_runs: days(
            "sync_runs_days",
            raw_retention.sync_runs_days,
            defaults.sync_runs,
        ),
        plans: days("plans_days", raw_retention.plans_days, defaults.plans),
        delivered_alerts: days(
            "delivered_alerts_days",
            raw_retention.delivered_alerts_days,
            defaults.delivered_alerts,
        ),
    };
    let prune_schedule = c.schedule(
        "store.retention.schedule",
        Some(
            raw_retention
                .schedule
                .as_deref()
                .unwrap_or(DEFAULT_PRUNE_SCHEDULE),
        ),
    );
    StoreConfig {
        path: resolve(&store_path),
        retention,
        prune_schedule,
    }
}
