//! `[store]`: where the catalog lives (a SQLite file, or a shared PostgreSQL
//! database) and its retention.

use super::*;

pub(super) const DEFAULT_STORE_PATH: &str = "gpuplan.db";

/// Overrides `store.url`, so a password need not be in the file.
pub const STORE_URL_ENV: &str = "GPUPLAN_STORE_URL";

/// Pruning runs daily at a quiet minute, away from the hourly syncs at :00.
pub(super) const DEFAULT_PRUNE_SCHEDULE: &str = "0 17 3 * * *";

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub location: Location,
    pub retention: Retention,
    /// When the daemon prunes what `retention` lets go.
    pub prune_schedule: Schedule,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    path: Option<String>,
    url: Option<String>,
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
    bills_days: Option<i64>,
    schedule: Option<String>,
}

/// `[store]`, with paths resolved by `resolve`.
pub(super) fn validate(
    raw: RawStore,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> StoreConfig {
    let url = Secret::from_env(STORE_URL_ENV)
        .map(|u| (STORE_URL_ENV.to_owned(), u))
        .or_else(|| raw.url.map(|u| ("store.url".to_owned(), Secret::new(u))));
    let location = match (url, raw.path) {
        (Some((from, _)), Some(_)) => {
            c.fail(&from, "store.path is set too; use one or the other");
            Location::Sqlite(PathBuf::new())
        }
        (Some((from, url)), None) => {
            if let Err(why) = check_url(url.expose()) {
                c.fail(&from, &why);
            }
            Location::Postgres(url)
        }
        (None, path) => {
            let path = path.unwrap_or_else(|| DEFAULT_STORE_PATH.to_owned());
            if path.trim().is_empty() {
                c.fail("store.path", "must not be empty");
            }
            Location::Sqlite(resolve(&path))
        }
    };
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
        bills: days("bills_days", raw_retention.bills_days, defaults.bills),
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
        location,
        retention,
        prune_schedule,
    }
}

/// A `postgres://` or `postgresql://` URL the driver accepts. The reason
/// never repeats the URL: it may hold a password.
fn check_url(url: &str) -> Result<(), String> {
    let scheme_ok = ["postgres://", "postgresql://"].iter().any(|s| {
        url.get(..s.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(s))
    });
    if !scheme_ok {
        return Err("must be a postgres:// or postgresql:// URL".to_owned());
    }
    Location::Postgres(Secret::new(url))
        .check()
        .map_err(|e| e.to_string())
}
