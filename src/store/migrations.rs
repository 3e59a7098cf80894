//! The list of schema migrations, one SQL file per step and backend
//! (`migrations/sqlite/`, `migrations/postgres/`): the same steps under the same
//! names, so a catalog at version N has the same tables on either backend.
//! Append-only: a released step is never edited.

macro_rules! steps {
    ($backend:literal: $($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../migrations/", $backend, "/", $name, ".sql")))),*]
    };
}

macro_rules! all_steps {
    ($backend:literal) => {
        steps!($backend:
            "0001_create_catalog",
            "0002_create_plans_and_alerts",
            "0003_create_spot_series",
            "0004_add_alert_fired_at",
            "0005_index_sync_runs_by_status",
            "0006_add_sync_run_scope",
            "0007_index_price_versions_by_run",
            "0008_create_source_versions",
            "0009_add_price_scope",
            "0010_add_currency",
            "0011_create_leases",
            "0012_create_bills",
            "0013_add_gpu_form_factor",
            "0014_add_sync_run_suspicious",
            "0015_gpu_count_as_number",
            "0016_price_series_windows",
            "0017_bill_loads_reader",
            "0018_spot_history_by_series",
            "0019_catalog_state_and_lookups",
            "0020_spot_series_changes",
            "0021_spot_series_room_to_update",
            "0022_spot_recent",
            "0023_spot_prune_marker",
        )
    };
}

pub(super) const SQLITE: &[(&str, &str)] = all_steps!("sqlite");
pub(super) const POSTGRES: &[(&str, &str)] = all_steps!("postgres");

pub(super) fn latest_version() -> i64 {
    SQLITE.len() as i64
}
