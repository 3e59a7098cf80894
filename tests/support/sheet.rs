//! A daemon's usual set-up in the tests: a price sheet of one H100 box
//! (`onprem`), and a config around it, with Azure from a fixture server
//! when given.

use std::path::Path;

use gpuplan::config::Config;
use serde_json::Value;

pub const SHEET: &str = "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\n\
                     onprem-fra,dgx-h100,H100,8,on_demand,18.4\n\
                     onprem-fra,dgx-h100,H100,8,reserved_1y,14\n";

/// Writes the sheet and a config (`extra` appended) into a temp dir.
pub fn config_in(dir: &Path, azure_base: Option<&str>, extra: &str) -> Config {
    std::fs::write(dir.join("onprem.csv"), SHEET).unwrap();
    let azure = match azure_base {
        Some(base) => format!(
            "[providers.aws]\nenabled = false\n[providers.oci]\nenabled = false\n[providers.azure]\nendpoint = \"{base}\"\nregions = [\"eastus\"]\n"
        ),
        None => "[providers.aws]\nenabled = false\n[providers.azure]\nenabled = false\n[providers.oci]\nenabled = false\n".to_owned(),
    };
    let text = format!(
        "[store]\npath = \"catalog.db\"\n\n[sync]\nhttp_attempts = 1\nretry_initial_secs = 0.05\nretry_max_secs = 0.2\n{extra}\n\n{azure}\n[providers.file.onprem]\npath = \"onprem.csv\"\n"
    );
    std::fs::write(dir.join("gpuplan.toml"), &text).unwrap();
    Config::parse(&text, dir).unwrap()
}

/// The statuses of `source`'s runs, newest first.
pub fn statuses(runs: &[Value], source: &str) -> Vec<String> {
    runs.iter()
        .filter(|r| r["source"] == source)
        .map(|r| r["status"].as_str().unwrap().to_owned())
        .collect()
}

/// How many of `source`'s runs are good.
pub fn ok_count(runs: &[Value], source: &str) -> usize {
    statuses(runs, source).iter().filter(|s| *s == "ok").count()
}
