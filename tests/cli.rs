//! The `gpuplan` binary end to end: real config files, real SQLite files in temp
//! directories, and price sheets as users write them.

mod support;

use std::path::Path;
use std::process::Command;

use gpuplan::store::{SqliteStore, Writes as _};
use gpuplan_providers::{InstanceType, Scope, Snapshot, SpotObservation};
use serde_json::{Value, json};
use support::{NO_CLOUDS, Workspace, gpuplan, seed};

/// A directory with a config naming `sheets` (name, file name) and a catalog file.
fn workspace(sheets: &[(&str, &str)]) -> Workspace {
    // No cloud sources: these tests are about the catalog and the CLI.
    let mut config = format!("[store]\npath = \"catalog.db\"\n\n{NO_CLOUDS}");
    for (name, file) in sheets {
        config.push_str(&format!("\n[providers.file.{name}]\npath = \"{file}\"\n"));
    }
    Workspace::new(&config)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const SHEET: &str = "\
# region,instance_type,... as in the catalog record
region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,gpu_memory_gib,vcpus,memory_gib,max_instances,upfront_usd,source,zone,offering_class,available_regions
onprem-fra,dgx-h100,H100,8,on_demand,18.40,80,224,2048,4,,rack-a,,,
onprem-fra,dgx-h100,H100,8,reserved_1y_partial_upfront,14.00,80,224,2048,4,35040,deal-2026,,convertible,
us-east-1,g6.xlarge,nvidia-l4,1,spot,0.35,,4,16,,,,us-east-1a,,
global,gpu_1x_a10,A10,1,on_demand,0.75,,30,200,,,,,,us-east-1;us-west-1
";

#[test]
fn prices_json_round_trips_the_normalized_fields() {
    let ws = workspace(&[("onprem", "onprem.csv")]);
    ws.write("onprem.csv", SHEET);
    let sync = ws.run(&["sync"]);
    assert!(sync.status.success(), "{}", text(&sync.stderr));
    let records = ws.json(&["prices", "--json"]);
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 4);
    let dgx = records
        .iter()
        .find(|r| r["price_kind"] == "reserved_1y_partial_upfront")
        .unwrap();
    assert_eq!(dgx["gpu_model"], "H100-80GB");
    assert_eq!(dgx["offering_class"], "convertible");
    assert_eq!(dgx["usd_per_gpu_hour"], 1.75);
    assert_eq!(dgx["recurring_usd_per_hour"], 10.0);
    assert_eq!(dgx["stale"], false);

    // Feed the records back in as a JSON sheet: the catalog must come out the same.
    let fields = [
        "region",
        "zone",
        "instance_type",
        "gpu_model",
        "gpu_count",
        "gpu_memory_gib",
        "vcpus",
        "memory_gib",
        "price_kind",
        "offering_class",
        "usd_per_hour",
        "upfront_usd",
        "source",
        "available_regions",
        "max_instances",
    ];
    let sheet: Vec<Value> = records
        .iter()
        .map(|r| {
            Value::Object(
                fields
                    .iter()
                    .map(|f| ((*f).to_owned(), r[*f].clone()))
                    .collect(),
            )
        })
        .collect();
    let copy = workspace(&[("onprem", "copy.json")]);
    copy.write("copy.json", &serde_json::to_string_pretty(&sheet).unwrap());
    let out = copy.run(&["sync"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let again = copy.json(&["prices", "--json"]);
    let strip = |v: &Value| {
        let mut v = v.clone();
        for r in v.as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("fetched_at");
        }
        v
    };
    assert_eq!(strip(&again), strip(&Value::Array(records.clone())));
}

#[test]
fn listings_print_csv_with_the_json_fields_as_columns() {
    let ws = workspace(&[("onprem", "onprem.csv")]);
    ws.write("onprem.csv", SHEET);
    assert!(ws.run(&["sync"]).status.success());
    let records = ws.json(&["prices", "--json"]);
    let out = ws.run(&["prices", "--csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut reader = csv::Reader::from_reader(out.stdout.as_slice());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let records = records.as_array().unwrap();
    assert_eq!(rows.len(), records.len());
    for key in records[0].as_object().unwrap().keys() {
        assert!(header.contains(key), "no column {key} in {header:?}");
    }
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (row, record) in rows.iter().zip(records) {
        assert_eq!(
            row[col("instance_type")],
            *record["instance_type"].as_str().unwrap()
        );
        assert_eq!(
            row[col("usd_per_hour")].parse::<f64>().unwrap(),
            record["usd_per_hour"].as_f64().unwrap()
        );
        // null is an empty cell; a list is its JSON.
        if record["zone"].is_null() {
            assert_eq!(&row[col("zone")], "");
        }
        let regions: Value = serde_json::from_str(&row[col("available_regions")]).unwrap();
        assert_eq!(regions, record["available_regions"]);
    }

    // Every listing takes it; with --json it is refused as bad input.
    for args in [
        &["alerts", "list", "--csv"][..],
        &["alerts", "history", "--csv"],
        &["bills", "status", "--csv"],
        &["budgets", "--csv"],
    ] {
        let out = ws.run(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let both = ws.run(&["prices", "--csv", "--json"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(
        text(&both.stderr).contains("--json"),
        "{}",
        text(&both.stderr)
    );
}

#[test]
fn filters_select_by_gpu_family_kind_region_and_price() {
    let ws = workspace(&[("onprem", "onprem.csv")]);
    ws.write("onprem.csv", SHEET);
    assert!(ws.run(&["sync"]).status.success());
    let kinds = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["prices", "--json"];
        full.extend_from_slice(args);
        ws.json(&full)
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["instance_type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(kinds(&["--gpu", "h100"]), vec!["dgx-h100", "dgx-h100"]);
    assert_eq!(kinds(&["--kind", "spot"]), vec!["g6.xlarge"]);
    assert_eq!(kinds(&["--region", "us-west-1"]), vec!["gpu_1x_a10"]);
    assert_eq!(kinds(&["--max-usd-per-gpu-hour", "0.5"]), vec!["g6.xlarge"]);
    assert_eq!(kinds(&["--provider", "file"]).len(), 4);
    assert!(kinds(&["--provider", "aws"]).is_empty());
    // The table is sorted by price per GPU-hour and shows the data's age.
    let table = text(&ws.run(&["prices"]).stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("PROVIDER") && lines[0].ends_with("AGE"),
        "{table}"
    );
    assert!(
        lines[1].contains("g6.xlarge") && lines[4].contains("on_demand"),
        "{table}"
    );
}

#[test]
fn a_bad_sheet_row_is_named_and_the_previous_data_stays() {
    let ws = workspace(&[("onprem", "onprem.csv")]);
    ws.write("onprem.csv", SHEET);
    assert!(ws.run(&["sync"]).status.success());
    let before = ws.json(&["prices", "--json"]);

    ws.write("onprem.csv", &SHEET.replace("0.35", "cheap"));
    let out = ws.run(&["sync"]);
    assert_eq!(out.status.code(), Some(1));
    let report = text(&out.stdout);
    assert!(
        report.contains("onprem.csv:5: field `usd_per_hour`"),
        "{report}"
    );
    assert_eq!(ws.json(&["prices", "--json"]), before);

    let out = ws.run(&["sync", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs[0]["status"], "failed");
    assert!(
        runs[0]["error"]
            .as_str()
            .unwrap()
            .contains("`cheap` is not a number")
    );
}

#[test]
fn a_missing_sheet_fails_the_sync_naming_the_file() {
    let ws = workspace(&[("onprem", "nowhere.csv")]);
    let out = ws.run(&["sync"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("nowhere.csv"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn bad_config_and_arguments_exit_2_naming_what_is_wrong() {
    let ws = workspace(&[]);
    ws.write(
        "gpuplan.toml",
        &format!("[store]\npath = \"c.db\"\n{NO_CLOUDS}[providers.file.onprem]\npath = \"p.csv\"\nschedule = \"hourly\"\n"),
    );
    let out = ws.run(&["sync"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("providers.file.onprem.schedule"),
        "{}",
        text(&out.stderr)
    );

    let ws = workspace(&[("onprem", "p.csv")]);
    let out = ws.run(&["sync", "--provider", "aws"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--provider aws"),
        "{}",
        text(&out.stderr)
    );

    let out = ws.run(&["prices", "--max-usd-per-gpu-hour", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = ws.run(&[
        "spot-history",
        "--instance",
        "p5.48xlarge",
        "--since",
        "yesterday",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--since"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_printed_example_config_validates() {
    let ws = workspace(&[]);
    let example = ws.run(&["config", "example"]);
    assert!(example.status.success());
    ws.write("example.toml", &text(&example.stdout));
    let out = ws.run(&[
        "config",
        "validate",
        ws.path("example.toml").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ok"));
}

#[test]
fn spot_history_summarizes_each_zone() {
    let ws = workspace(&[("spot", "spot.csv")]);
    ws.write(
        "spot.csv",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\nr,t,L4,1,on_demand,1\n",
    );
    assert!(ws.run(&["sync"]).status.success());
    let history = ws.json(&["spot-history", "--instance", "g6.xlarge", "--json"]);
    assert_eq!(history["series"], json!([]));
    assert_eq!(history["stats"], Value::Null);

    // Spot history as a provider with history writes it: two zones, two hours ago.
    let now = chrono::Utc::now();
    let point = |zone: &str, hours_ago: i64, usd: f64| SpotObservation {
        region: "us-east-1".into(),
        zone: zone.into(),
        instance_type: "g6.xlarge".into(),
        usd_per_hour: usd,
        observed_at: now - chrono::Duration::hours(hours_ago),
    };
    let snapshot = Snapshot {
        scope: Scope::SpotHistory,
        instance_types: vec![InstanceType {
            gpu_form_factor: None,
            instance_type: "g6.xlarge".into(),
            gpu_model: "L4".into(),
            gpu_count: 1.0,
            gpu_memory_gib: Some(24.0),
            vcpus: Some(4),
            memory_gib: Some(16.0),
            mig_profile: None,
        }],
        spot_observations: vec![
            point("us-east-1a", 2, 0.40),
            point("us-east-1a", 1, 0.50),
            point("us-east-1b", 2, 0.30),
        ],
        ..Snapshot::default()
    };
    let mut store = SqliteStore::open(&ws.path("catalog.db")).unwrap();
    let run = store
        .begin_run("aws", gpuplan_providers::Scope::Full, now)
        .unwrap();
    store
        .write_snapshot(run, "aws", &snapshot, &[], now, now)
        .unwrap();
    drop(store);

    let history = ws.json(&[
        "spot-history",
        "--instance",
        "g6.xlarge",
        "--since",
        "1d",
        "--json",
    ]);
    let zones: Vec<&str> = history["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["zone"].as_str().unwrap())
        .collect();
    assert_eq!(zones, vec!["us-east-1a", "us-east-1b"]);
    assert_eq!(history["series"][0]["stats"]["observations"], 2);
    assert_eq!(
        (
            history["stats"]["min"].as_f64(),
            history["stats"]["max"].as_f64()
        ),
        (Some(0.30), Some(0.50))
    );
    let table = text(
        &ws.run(&["spot-history", "--instance", "g6.xlarge", "--since", "1d"])
            .stdout,
    );
    assert!(
        table.contains("us-east-1b") && table.lines().any(|l| l.starts_with("all")),
        "{table}"
    );
    // CSV lists the observations, one row each.
    let csv = text(
        &ws.run(&[
            "spot-history",
            "--instance",
            "g6.xlarge",
            "--since",
            "1d",
            "--csv",
        ])
        .stdout,
    );
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "provider,region,zone,instance_type,observed_at,usd_per_hour"
    );
    assert_eq!(lines.len(), 1 + 3, "{csv}");
    assert!(
        lines[1].starts_with("aws,us-east-1,us-east-1a,g6.xlarge,"),
        "{csv}"
    );
}

#[test]
fn no_config_file_uses_the_defaults_in_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = gpuplan()
        .args(["prices", "--json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!([])
    );
    assert!(Path::new(&dir.path().join("gpuplan.db")).exists());
}

#[test]
fn store_prune_counts_in_a_dry_run_and_keeps_current_prices() {
    let ws = workspace(&[("onprem", "onprem.csv")]);
    ws.write("onprem.csv", SHEET);
    for _ in 0..3 {
        assert!(ws.run(&["sync"]).status.success());
    }
    let before = ws.json(&["prices", "--json"]);
    // Everything is younger than any retention: nothing to prune.
    let dry = ws.json(&["store", "prune", "--dry-run", "--json"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["rows"]["sync_runs"], 0, "{dry}");
    let table = ws.run(&["store", "prune"]);
    assert!(table.status.success(), "{}", text(&table.stderr));
    let shown = text(&table.stdout);
    assert!(
        shown.contains("sync_runs") && shown.contains("deleted 0 rows in all"),
        "{shown}"
    );
    assert_eq!(ws.json(&["prices", "--json"]), before);

    // A bad retention setting is refused by its path.
    let mut config = std::fs::read_to_string(ws.path("gpuplan.toml")).unwrap();
    config = config.replace(
        "[store]\npath = \"catalog.db\"\n",
        "[store]\npath = \"catalog.db\"\n[store.retention]\nspot_history_days = -1\nschedule = \"daily\"\n",
    );
    ws.write("gpuplan.toml", &config);
    let bad = ws.run(&["store", "prune"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = text(&bad.stderr);
    assert!(
        err.contains("store.retention.spot_history_days")
            && err.contains("store.retention.schedule"),
        "{err}"
    );
}

#[test]
fn config_validate_warns_about_a_channel_variable_this_environment_lacks() {
    let ws = workspace(&[]);
    ws.write(
        "gpuplan.toml",
        &format!(
            "[store]\npath = \"c.db\"\n{NO_CLOUDS}\
             [alerts.channels.chat]\ntype = \"slack\"\nurl_env = \"GPUPLAN_TEST_SURELY_UNSET_SLACK_URL\"\n"
        ),
    );
    let out = ws.run(&["config", "validate"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("alerts.channels.chat.url_env")
            && err.contains("GPUPLAN_TEST_SURELY_UNSET_SLACK_URL is not set"),
        "{err}"
    );
}

#[test]
fn the_form_factor_tells_an_h100_sxm_from_a_pcie_and_filters_by_it() {
    let ws = workspace(&[("lab", "lab.csv")]);
    // One form given in a column, one read from the GPU's name, one model
    // with a single form (none).
    ws.write(
        "lab.csv",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,gpu_form_factor\n\
         fra,hgx-h100,H100,8,on_demand,24.0,sxm\n\
         fra,pcie-h100,H100 PCIe,2,on_demand,4.4,\n\
         fra,l4-box,L4,1,on_demand,0.6,\n",
    );
    assert!(ws.run(&["sync"]).status.success());
    let all = ws.json(&["prices", "--json"]);
    let form = |t: &str| {
        all.as_array()
            .unwrap()
            .iter()
            .find(|r| r["instance_type"] == t)
            .map(|r| r["gpu_form_factor"].clone())
            .unwrap()
    };
    assert_eq!(form("hgx-h100"), "sxm");
    assert_eq!(form("pcie-h100"), "pcie");
    assert_eq!(form("l4-box"), Value::Null);
    let pcie = ws.json(&["prices", "--form-factor", "pcie", "--json"]);
    assert_eq!(pcie.as_array().unwrap().len(), 1);
    assert_eq!(pcie[0]["gpu_model"], "H100-80GB");
    let table = text(&ws.run(&["prices", "--gpu", "H100"]).stdout);
    assert!(
        table.contains("H100-80GB sxm") && table.contains("H100-80GB pcie"),
        "{table}"
    );
    let bad = ws.run(&["prices", "--form-factor", "oam"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("not a GPU form factor"));
    // A sheet with a form factor it cannot read names the line and column.
    ws.write(
        "lab.csv",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,gpu_form_factor\n\
         fra,hgx-h100,H100,8,on_demand,24.0,oam\n",
    );
    let failed = ws.run(&["sync"]);
    assert!(!failed.status.success());
    assert!(
        text(&failed.stderr).contains("gpu_form_factor"),
        "{}",
        text(&failed.stderr)
    );
}

#[test]
fn completions_load_in_bash_and_the_man_pages_render() {
    let ws = workspace(&[]);
    let bash = ws.run(&["completions", "bash"]);
    assert!(bash.status.success());
    let script = ws.path("gpuplan.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    // Bash itself reads the script and completes a subcommand with it.
    let probe = format!(
        "source {}; COMP_WORDS=(gpuplan bud); COMP_CWORD=1; _gpuplan gpuplan bud gpuplan; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).lines().any(|l| l == "budgets"),
        "{}",
        text(&out.stdout)
    );
    for (shell, marker) in [
        ("zsh", "#compdef gpuplan"),
        ("fish", "complete -c gpuplan"),
        ("elvish", "edit:completion:arg-completer[gpuplan]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = ws.run(&["completions", shell]);
        assert!(
            out.status.success() && text(&out.stdout).contains(marker),
            "{shell}"
        );
    }
    assert_eq!(ws.run(&["completions", "tcsh"]).status.code(), Some(2));

    // groff renders the page, and it names the commands.
    let page = ws.run(&["man"]);
    assert!(page.status.success());
    let roff = ws.path("gpuplan.1");
    std::fs::write(&roff, &page.stdout).unwrap();
    let rendered = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww"])
        .arg(&roff)
        .output()
        .unwrap();
    assert!(
        rendered.status.success() && rendered.stderr.is_empty(),
        "{}",
        text(&rendered.stderr)
    );
    let rendered = text(&rendered.stdout);
    assert!(
        rendered.contains("gpuplan") && rendered.contains("budgets"),
        "{rendered}"
    );
    let dir = ws.path("man");
    assert!(
        ws.run(&["man", "--out-dir", dir.to_str().unwrap()])
            .status
            .success()
    );
    for page in ["gpuplan.1", "gpuplan-plan.1", "gpuplan-bills-sync.1"] {
        assert!(dir.join(page).exists(), "{page}");
    }
}

/// A price that falls to a twentieth is stored, but `gpuplan sync` says so,
/// `--json` lists it with what it was, and the same price again is not news.
#[test]
fn a_price_that_falls_below_a_tenth_is_stored_and_reported_as_suspicious() {
    let ws = workspace(&[("onprem", "sheet.csv")]);
    let sheet = |usd: &str| {
        format!(
            "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\nfra,l4-box,L4,1,on_demand,{usd}\nfra,l4-pair,L4,2,on_demand,1.6\n"
        )
    };
    ws.write("sheet.csv", &sheet("0.8"));
    let first = ws.run(&["sync"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(!text(&first.stdout).contains("SUSPICIOUS"));

    ws.write("sheet.csv", &sheet("0.04"));
    let second = ws.run(&["sync"]);
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert!(
        text(&second.stdout).contains(
            "SUSPICIOUS price stored: l4-box on_demand in fra at 0.0400 USD/h, was 0.8000"
        ),
        "{}",
        text(&second.stdout)
    );
    let prices = ws.json(&["prices", "--json"]);
    assert!(
        prices
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["instance_type"] == "l4-box" && r["usd_per_hour"] == 0.04)
    );

    let third = ws.json(&["sync", "--json"]);
    assert_eq!(third[0]["stats"]["suspicious"], json!([]));
    ws.write("sheet.csv", &sheet("0.003"));
    let fourth = ws.json(&["sync", "--json"]);
    let flagged = &fourth[0]["stats"]["suspicious"];
    assert_eq!(flagged.as_array().unwrap().len(), 1, "{fourth}");
    assert_eq!(flagged[0]["reason"], "below_previous");
    assert_eq!(flagged[0]["reference_usd"], 0.04);
    assert_eq!(flagged[0]["gpu_model"], "L4");
}

#[test]
fn slices_of_owned_gpus_print_as_shares_and_windows_list_offered_and_vanished_blocks() {
    let ws = workspace(&[("lab", "lab.csv")]);
    ws.write(
        "lab.csv",
        "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,gpu_memory_gib,mig_profile\n\
         fra,h100-mig-1g,H100,1/7,on_demand,0.5,,1g.10gb\n\
         fra,h100-box,H100,8,on_demand,24.0,80,\n",
    );
    assert!(ws.run(&["sync"]).status.success());
    let table = text(&ws.run(&["prices", "--gpu", "H100"]).stdout);
    let slice = table.lines().find(|l| l.contains("h100-mig-1g")).unwrap();
    // A seventh of a GPU at 0.5 an hour is 3.5 per whole-GPU hour.
    assert!(
        slice.split_whitespace().any(|c| c == "1/7") && slice.contains("3.5000"),
        "{table}"
    );
    let json = ws.json(&["prices", "--gpu", "H100", "--json"]);
    let mig = json
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["instance_type"] == "h100-mig-1g")
        .unwrap();
    assert_eq!(
        (&mig["mig_profile"], &mig["gpu_memory_gib"]),
        (&json!("1g.10gb"), &json!(10.0))
    );
    assert!((mig["gpu_count"].as_f64().unwrap() - 1.0 / 7.0).abs() < 1e-12);

    let none = ws.run(&["windows"]);
    assert!(none.status.success() && text(&none.stderr).contains("No priced windows"));
    // Two syncs as the aws source with credentials writes them: a week and a
    // day from midnight two days on; the second no longer lists the day.
    let now = chrono::Utc::now();
    let mut snapshot = Snapshot {
        instance_types: vec![seed::p5()],
        prices: vec![seed::p5_block(168, 3.5), seed::p5_block(24, 4.0)],
        ..Snapshot::default()
    };
    for (hours_ago, prices) in [(2, 2), (1, 1)] {
        snapshot.prices.truncate(prices);
        seed::write(
            &ws.path("catalog.db"),
            &snapshot,
            now - chrono::Duration::hours(hours_ago),
        );
    }

    let listed = ws.json(&["windows", "--json"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let (day, week) = (&listed[0], &listed[1]);
    assert_eq!(
        (&day["status"], &day["window_hours"]),
        (&json!("vanished"), &json!(24.0))
    );
    assert!(day["vanished_at"].is_string());
    // 4,704 for a week of 8 GPUs is 3.5 per GPU-hour.
    assert_eq!(
        (
            &week["status"],
            &week["usd_per_gpu_hour"],
            &week["upfront_usd"],
            &week["prices"]
        ),
        (&json!("offered"), &json!(3.5), &json!(4704.0), &json!(1))
    );
    let table = text(&ws.run(&["windows", "--gpu", "H100"]).stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("STATUS") && lines[0].contains("USD/GPU-H"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("vanished") && lines[2].starts_with("offered"),
        "{table}"
    );
    assert!(
        lines[2].contains("168.00") && lines[2].contains("3.5000"),
        "{table}"
    );
    // At least a week: only the week; the vanished day is history, not news.
    assert_eq!(
        ws.json(&["windows", "--min-days", "7", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let csv = text(&ws.run(&["windows", "--csv"]).stdout);
    assert!(
        csv.starts_with("status,provider,region,zone,instance_type,"),
        "{csv}"
    );
    let bad = ws.run(&["windows", "--min-days", "-1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("--min-days"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn the_config_comes_from_the_flag_else_a_non_empty_gpuplan_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.toml");
    std::fs::write(&file, "[store]\npath = \"from-file.db\"\n").unwrap();
    let validate = |flag: bool, env: Option<&std::path::Path>| {
        let mut c = gpuplan();
        c.current_dir(dir.path()).env_remove("GPUPLAN_CONFIG");
        if flag {
            c.args(["--config", file.to_str().unwrap()]);
        }
        c.args(["config", "validate"]);
        if let Some(v) = env {
            c.env("GPUPLAN_CONFIG", v);
        }
        c.output().unwrap()
    };
    // An empty variable is no config, and never stands in the flag's way.
    let empty = std::path::Path::new("");
    for (flag, env) in [
        (true, Some(empty)),
        (true, None),
        (false, Some(file.as_path())),
    ] {
        let out = validate(flag, env);
        assert!(
            out.status.success(),
            "{flag} {env:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stdout).contains("mine.toml"),
            "{}",
            text(&out.stdout)
        );
    }
    let out = validate(false, Some(empty));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("mine.toml"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn the_facts_commands_print_cited_rows_and_prices_use_them() {
    // No config and no catalog: the facts are built in.
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        gpuplan()
            .args(args)
            .current_dir(dir.path())
            .env_remove("GPUPLAN_CONFIG")
            .output()
            .unwrap()
    };
    let json = |args: &[&str]| {
        let out = run(args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let w = "mlperf-inference-v6.1/llama2-70b-99.9/offline";
    let perf = json(&["perf", "--workload", w, "--gpu", "B300", "--json"]);
    let perf = perf.as_array().unwrap();
    assert!(perf.len() >= 10);
    assert!(perf.iter().all(|r| {
        r["gpu_model"] == "B300"
            && r["derived"] == true
            && r["source_url"]
                .as_str()
                .unwrap()
                .starts_with("https://github.com/mlcommons/")
    }));
    let bad = run(&["perf", "--workload", "mlperf/x/y"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains(w), "{}", text(&bad.stderr));

    let german = json(&["regions", "--country", "de", "--json"]);
    let german = german.as_array().unwrap();
    assert!(german.iter().all(|r| r["country"] == "DE"));
    assert!(
        german
            .iter()
            .any(|r| r["provider"] == "gcp" && r["region"] == "europe-west3")
    );
    let table = text(&run(&["regions", "--provider", "aws"]).stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("aws") && l.contains("us-east-1") && l.contains("379.069")),
        "{table}"
    );
    let csv = text(&run(&["regions", "--csv"]).stdout);
    assert!(
        csv.starts_with("provider,region,country,grid_gco2e_per_kwh,"),
        "{csv}"
    );

    let gpus = json(&["gpus", "--gpu", "H100", "--json"]);
    let sxm = gpus
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["gpu_model"] == "H100-80GB" && g["gpu_form_factor"] == "sxm")
        .unwrap();
    assert!(!sxm["sources"].as_array().unwrap().is_empty());
    assert_eq!(sxm["tdp_watts"], 700.0);
    let csv = text(&run(&["gpus", "--csv"]).stdout);
    assert!(csv.lines().next().unwrap().contains("tflops.bf16"), "{csv}");

    // A p5 in us-east-1: its carbon from eight H100s' power and the grid there.
    let ws = workspace(&[]);
    let snapshot = Snapshot {
        instance_types: vec![seed::p5()],
        prices: vec![gpuplan_providers::PriceRecord {
            zone: None,
            price_kind: gpuplan_providers::PriceKind::OnDemand,
            usd_per_hour: 55.04,
            upfront_usd: 0.0,
            recurring_usd_per_hour: 55.04,
            window: None,
            ..seed::p5_block(1, 1.0)
        }],
        ..Snapshot::default()
    };
    seed::write(&ws.path("catalog.db"), &snapshot, chrono::Utc::now());
    let prices = ws.json(&["prices", "--json"]);
    let p5 = &prices[0];
    let carbon = &p5["carbon"];
    let expected =
        8.0 * carbon["gpu_tdp_watts"].as_f64().unwrap() / 1000.0 * 1.135 * 379.069 / 1000.0;
    assert!(
        (p5["kgco2e_per_hour"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{p5}"
    );
    assert_eq!(
        (
            carbon["pue_assumed"].as_bool(),
            carbon["grid_year"].as_i64()
        ),
        (Some(false), Some(2020))
    );
    assert_eq!(
        ws.json(&["prices", "--country", "US", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(
        ws.json(&["prices", "--country", "DE", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Per unit of work, by the datasheets' dense BF16 against an H100 SXM:
    // the p5 is the reference itself.
    let per_work = ws.json(&["prices", "--per-work", "spec:bf16", "--json"]);
    let work = &per_work[0]["per_work"];
    assert_eq!(
        (work["factor"].as_f64(), work["estimate"].as_bool()),
        (Some(1.0), Some(true))
    );
    assert!((work["usd_per_reference_gpu_hour"].as_f64().unwrap() - 55.04 / 8.0).abs() < 1e-9);
    let table = text(&ws.run(&["prices", "--per-work", "spec:bf16"]).stdout);
    assert!(
        table.contains("USD/H100-80GB/sxm-H") && table.contains("~1.000"),
        "{table}"
    );
    // MLPerf v6.1 has no H100 row: the factor is unknown, not 0.
    let measured = ws.json(&["prices", "--per-work", w, "--reference", "B300", "--json"]);
    assert_eq!(measured[0]["per_work"]["factor"], Value::Null);
    let bad = ws.run(&["prices", "--per-work", w]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("has no row"),
        "{}",
        text(&bad.stderr)
    );
}
