use gpuplan_providers::aws::{Credentials as AwsCredentials, Sources as AwsSources};

use super::*;
use crate::bills::budgets::{BudgetPeriod, CostBasis, ThresholdOn};

use proptest::strategy::Strategy as _;

proptest::proptest! {
    /// The config file: a config or errors that each name a dotted path
    /// (or the file itself, for TOML syntax), never a panic.
    #[test]
    fn any_config_text_validates_or_names_each_problem(
        text in "\\PC{0,120}",
        key in proptest::sample::select(vec![
            "sync.max_shrink_pct", "sync.retry_initial_secs", "sync.http_attempts",
            "sync.http_timeout_secs", "planner.max_concurrent_solves", "alerts.retry_max_secs",
            "api.listen", "store.path",
        ]),
        value in proptest::prop_oneof![
            proptest::num::f64::ANY.prop_map(|x| format!("{x:?}")),
            proptest::num::i64::ANY.prop_map(|n| n.to_string()),
            "\\PC{0,12}".prop_map(|s| format!("{s:?}")),
        ],
    ) {
        let (table, field) = key.split_once('.').unwrap();
        let structured = format!("[{table}]\n{field} = {value}\n");
        for t in [text.clone(), structured] {
            if let Err(errors) = Config::parse(t.as_str(), Path::new("")) {
                proptest::prop_assert!(!errors.is_empty());
                for e in errors {
                    proptest::prop_assert!(!e.message.is_empty(), "{e:?}");
                }
            }
        }
    }
}

#[test]
fn channel_urls_come_from_the_file_or_the_environment_and_are_never_echoed() {
    let config = Config::parse(
        "[alerts.channels.a]\ntype = \"slack\"\nurl_env = \"GPUPLAN_SLACK_URL\"\n\
         [alerts.channels.b]\ntype = \"webhook\"\nurl = \"https://h.example/T0/SECRETPATH\"\n",
        Path::new(""),
    )
    .unwrap();
    let channels = &config.alerts.channels;
    assert_eq!(
        channels["a"],
        ChannelConfig::Slack {
            url: ChannelUrl::Env("GPUPLAN_SLACK_URL".into())
        }
    );
    assert!(!format!("{:?}", channels["b"]).contains("SECRETPATH"));
    let errors = errors_of(
        "[alerts.channels.both]\ntype = \"slack\"\nurl = \"https://h.example/x\"\nurl_env = \"V\"\n\
         [alerts.channels.none]\ntype = \"webhook\"\n\
         [alerts.channels.blank]\ntype = \"webhook\"\nurl_env = \" \"\n\
         [alerts.channels.plain]\ntype = \"webhook\"\nurl = \"hooks.example/SECRETPATH\"\n\
         [alerts.channels.log]\ntype = \"log\"\nurl = \"https://h.example/x\"\n",
    )
    .join("\n");
    assert_named(
        &errors,
        &[
            "alerts.channels.both.url: give url or url_env, not both",
            "alerts.channels.none.url: a webhook channel needs url_env",
            "alerts.channels.blank.url_env",
            "alerts.channels.plain.url",
            "alerts.channels.log.url",
        ],
    );
    assert!(!errors.contains("SECRETPATH"), "{errors}");
}

#[test]
fn bad_alert_rules_are_named_by_rule() {
    let errors = errors_of(
        "[alerts.channels.ops]\ntype = \"webhook\"\nurl = \"ftp://x\"\n\
         [alerts.channels.chat]\ntype = \"pager\"\n\
         [[alerts.rules]]\nname = \"cheap\"\nkind = \"price_below\"\nchannels = [\"ops\", \"nope\"]\nprice_kinds = [\"weekly\"]\n\
         [[alerts.rules]]\nname = \"cheap\"\nkind = \"plan_exploded\"\nchannels = [\"ops\"]\n",
    );
    let joined = errors.join("\n");
    assert_named(
        &joined,
        &[
            "alerts.channels.chat.type",
            "alerts.channels.ops.url",
            "alerts.rules[0] (cheap).price_kinds[0]",
            "alerts.rules[0] (cheap).usd_per_gpu_hour",
            "alerts.rules[0] (cheap).channels[1]",
            "alerts.rules[1] (cheap).name",
            "alerts.rules[1] (cheap).kind",
        ],
    );
}

#[test]
fn scheduled_plans_are_checked_with_the_models_policy_rules() {
    let errors = errors_of(
        "[alerts.plans.a]\ndemand = \"d.csv\"\nusage = \"u.csv\"\n\
         [alerts.plans.b]\ndemand = \"d.csv\"\n[alerts.plans.b.policy]\nmax_spot_shar = 0.5\n\
         [alerts.channels.log]\ntype = \"log\"\n\
         [[alerts.rules]]\nname = \"moved\"\nkind = \"plan_changed\"\nplans = [\"c\"]\nchannels = [\"log\"]\n",
    );
    let joined = errors.join("\n");
    assert_named(
        &joined,
        &[
            "alerts.plans.a:",
            "alerts.plans.b.policy.max_spot_shar",
            "alerts.rules[0] (moved).plans[0]",
        ],
    );
    let ok = Config::parse(
        "[alerts.plans.w]\nusage = \"u.csv\"\nhorizon_hours = 24\nschedule = \"0 0 6 * * *\"\n[alerts.plans.w.policy]\nmax_spot_share = 0.5\n",
        Path::new("/etc/gpuplan"),
    )
    .unwrap();
    let plan = &ok.alerts.plans["w"];
    assert_eq!(
        plan.input,
        PlanInput::Usage {
            path: PathBuf::from("/etc/gpuplan/u.csv"),
            horizon_hours: 24
        }
    );
    assert_eq!(plan.policy.max_spot_share, Some(0.5));
}

#[test]
fn a_scheduled_plan_can_forecast_from_the_bills() {
    let ok = Config::parse(
        "[alerts.plans.w]\nusage_from_bills = true\nteams = [\"ml\"]\nusage_days = 14\ngpu = [\"H100\"]\n",
        Path::new(""),
    )
    .unwrap();
    assert_eq!(
        ok.alerts.plans["w"].input,
        PlanInput::Bills {
            teams: vec!["ml".into()],
            days: 14,
            horizon_hours: 168
        }
    );
    let errors = errors_of(
        "[alerts.plans.a]\nusage = \"u.csv\"\nusage_from_bills = true\n\
         [alerts.plans.b]\ndemand = \"d.csv\"\nteams = [\"ml\"]\n\
         [alerts.plans.c]\nusage_from_bills = true\nusage_days = 0\n",
    )
    .join("\n");
    assert_named(
        &errors,
        &[
            "alerts.plans.a:",
            "alerts.plans.b.teams",
            "alerts.plans.c.usage_days",
        ],
    );
}

/// Checks that each of `expected` is among `errors`.
fn assert_named(errors: &str, expected: &[&str]) {
    for e in expected {
        assert!(errors.contains(e), "missing {e} in:\n{errors}");
    }
}

fn errors_of(text: &str) -> Vec<String> {
    Config::parse(text, Path::new("/etc/gpuplan"))
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_example_config_is_valid() {
    let config = Config::parse(EXAMPLE, Path::new("/etc/gpuplan")).unwrap();
    assert!(!config.providers.file.is_empty());
}

#[test]
fn aws_keys_are_read_and_checked() {
    let config = Config::parse(
        "[providers.aws]\ncredentials = \"chain\"\ninstance_types = [\"p5.*\"]\n\
         sources = [\"spot_history\", \"placement_scores\"]\nspot_history_days = 7\n\
         ec2_endpoint = \"http://127.0.0.1:9/{region}\"\n",
        Path::new(""),
    )
    .unwrap();
    let aws = &config.providers.aws;
    assert!(matches!(aws.provider.credentials, AwsCredentials::Chain));
    assert_eq!(aws.provider.instance_types, ["p5.*"]);
    assert!(aws.provider.sources.spot_history && aws.provider.sources.placement_scores);
    assert!(!aws.provider.sources.offerings && !aws.provider.sources.spot_advisor);
    assert_eq!(aws.provider.spot_history_days, 7);
    assert_eq!(aws.provider.pricing_endpoint, None);
    let spot = aws.spot_schedule.as_ref().unwrap();
    let next = spot.next_after("2026-11-29T10:00:00Z".parse().unwrap());
    assert_eq!(next.to_rfc3339(), "2026-11-29T10:05:00+00:00");
    let off = Config::parse("[providers.aws]\nspot_schedule = \"off\"\n", Path::new("")).unwrap();
    assert!(off.providers.aws.spot_schedule.is_none());
    // Defaults: the chain when it has keys, every optional source but scores.
    let defaults = Config::parse("", Path::new("")).unwrap().providers.aws;
    assert!(matches!(
        defaults.provider.credentials,
        AwsCredentials::Auto
    ));
    assert_eq!(defaults.provider.sources, AwsSources::default());
    assert!(defaults.provider.sources.capacity_blocks);
    assert_eq!(
        (
            defaults.provider.capacity_block_hours.as_slice(),
            defaults.provider.capacity_block_counts.as_slice()
        ),
        ([24, 168].as_slice(), [1, 4].as_slice())
    );
    let blocks = Config::parse(
        "[providers.aws]\ncapacity_block_hours = [48, 504, 48]\ncapacity_block_counts = [2]\n",
        Path::new(""),
    )
    .unwrap()
    .providers
    .aws;
    assert_eq!(blocks.provider.capacity_block_hours, [48, 504]);
    assert_eq!(blocks.provider.capacity_block_counts, [2]);

    let errors = errors_of(
        "[providers.aws]\ncredentials = \"env\"\ninstance_types = [\"p5 large\"]\n\
         sources = [\"spot\"]\nspot_history_days = 91\npricing_endpoint = \"localhost\"\n\
         spot_schedule = \"every ten minutes\"\n\
         capacity_block_hours = [25, 672, 5000]\ncapacity_block_counts = [0, 65]\n",
    );
    for path in [
        "providers.aws.credentials",
        "providers.aws.instance_types[0]",
        "providers.aws.sources[0]",
        "providers.aws.spot_history_days",
        "providers.aws.pricing_endpoint",
        "providers.aws.spot_schedule",
        "providers.aws.capacity_block_hours[0]",
        "providers.aws.capacity_block_hours[2]",
        "providers.aws.capacity_block_counts[0]",
        "providers.aws.capacity_block_counts[1]",
    ] {
        assert!(
            errors.iter().any(|e| e.starts_with(path)),
            "{path}: {errors:?}"
        );
    }
}

#[test]
fn no_config_means_built_in_defaults() {
    let config = Config::parse("", Path::new("")).unwrap();
    assert_eq!(config.store.location.to_string(), "gpuplan.db");
    // Only the sources that need no credentials.
    let sources: Vec<String> = config
        .enabled_sources()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(sources, vec!["aws", "azure", "oci"]);
    assert!((config.sync.max_shrink - 0.2).abs() < 1e-12);
    assert_eq!(
        Config::default().store.location.to_string(),
        config.store.location.to_string()
    );
}

#[test]
fn relative_paths_are_taken_from_the_config_files_directory() {
    let config = Config::parse(
        "[store]\npath = \"data/catalog.db\"\n[providers.file.onprem]\npath = \"/srv/p.csv\"\n",
        Path::new("/etc/gpuplan"),
    )
    .unwrap();
    assert_eq!(
        config.store.location.to_string(),
        "/etc/gpuplan/data/catalog.db"
    );
    assert_eq!(
        config.providers.file["onprem"].path,
        PathBuf::from("/srv/p.csv")
    );
    let sources: Vec<String> = config
        .enabled_sources()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(sources, vec!["aws", "azure", "oci", "file:onprem"]);
}

#[test]
fn oracle_is_on_by_default_and_its_section_is_checked() {
    let errors =
        errors_of("[providers.oci]\nendpoint = \"apexapps.oracle.com\"\nregions = [\"x\"]\n")
            .join("\n");
    assert!(errors.contains("providers.oci.regions"), "{errors}");
    let errors = errors_of("[providers.oci]\nendpoint = \"apexapps.oracle.com\"\n").join("\n");
    assert!(errors.contains("providers.oci.endpoint"), "{errors}");
    let off = Config::parse("[providers.oci]\nenabled = false\n", Path::new("")).unwrap();
    assert!(!off.enabled_sources().iter().any(|(s, _)| s == "oci"));
}

#[test]
fn alibaba_and_tencent_are_off_unless_enabled_and_a_china_site_needs_its_rate() {
    let config = Config::parse(
        "[providers.alibaba]\nregions = [\"ap-southeast-1\"]\n[providers.tencent]\nregions = [\"ap-singapore\"]\n",
        Path::new(""),
    )
    .unwrap();
    let sources: Vec<String> = config
        .enabled_sources()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert!(
        !sources.iter().any(|s| s == "alibaba" || s == "tencent"),
        "{sources:?}"
    );

    let errors = errors_of(
        "[providers.alibaba]\nenabled = true\nsite = \"china\"\n\
         [providers.tencent]\nenabled = true\nsite = \"mainland\"\n",
    )
    .join("\n");
    assert_named(
        &errors,
        &[
            "providers.alibaba.site: this site prices in CNY; set its rate as `[fx] CNY",
            "providers.tencent.site: `mainland` is not one of",
            "providers.tencent.regions: list the regions",
        ],
    );

    let errors = errors_of("[fx]\nCNY = 0\nusd = 1.0\nUSD = 2.0\n").join("\n");
    assert_named(
        &errors,
        &[
            "fx.CNY: 0 is not a rate",
            "fx.usd: a currency is",
            "fx.USD: USD is",
        ],
    );

    let config = Config::parse(
        "[fx]\nCNY = 7.2\n[providers.tencent]\nenabled = true\nsite = \"china\"\nregions = [\"ap-guangzhou\"]\n",
        Path::new(""),
    )
    .unwrap();
    let tencent = config.providers.tencent.unwrap();
    assert_eq!(tencent.provider.currency.code, "CNY");
    assert_eq!(tencent.provider.currency.per_usd, 7.2);
    assert_eq!(config.fx.currency("cny").map(|c| c.per_usd), Some(7.2));
    assert!(config.fx.currency("EUR").is_none());
}

#[test]
fn an_unknown_key_is_named_by_its_dotted_path_and_line() {
    let errors =
        errors_of("[store]\npath = \"x.db\"\n\n[providers.file.onprem]\npaht = \"p.csv\"\n");
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("providers.file.onprem"), "{errors:?}");
    assert!(errors[0].contains("paht"), "{errors:?}");
}

#[test]
fn a_wrong_type_is_named_by_its_dotted_path() {
    let errors = errors_of("[providers.file.onprem]\npath = \"p.csv\"\nenabled = \"yes\"\n");
    assert!(
        errors[0].starts_with("providers.file.onprem.enabled:"),
        "{errors:?}"
    );
    assert!(errors[0].contains("line 3"), "{errors:?}");
}

#[test]
fn a_syntax_error_gives_its_line() {
    let errors = errors_of("[store\npath = 1\n");
    assert!(errors[0].contains("line 1"), "{errors:?}");
}

#[test]
fn every_semantic_problem_is_reported_at_once() {
    let errors = errors_of(
        "[store]\npath = \"\"\n\
         [providers.file.onprem]\npath = \"p.xlsx\"\nschedule = \"every hour\"\n\
         [providers.file.deals]\npath = \"d.csv\"\nformat = \"excel\"\n\
         [providers.file.Bad]\npath = \"b.json\"\n",
    );
    let paths: Vec<&str> = errors
        .iter()
        .map(|e| e.split(':').next().unwrap())
        .collect();
    assert_eq!(
        paths,
        vec![
            "store.path",
            "providers.file.Bad",
            "providers.file.deals.format",
            "providers.file.onprem.format",
            "providers.file.onprem.schedule",
        ],
        "{errors:#?}"
    );
}

#[test]
fn cloud_sections_are_checked_too() {
    let errors = errors_of(
        "[sync]\nmax_shrink_pct = 150\n\
         [providers.azure]\nregions = [\"eastus\", \"West Europe\"]\nconcurrency = 0\nendpoint = \"prices.azure.com\"\n\
         [providers.gcp]\nbilling_endpoint = \"ftp://x\"\nschedule = \"* * *\"\n\
         [providers.lambda]\nendpoint = \"http://127.0.0.1:9\"\n",
    );
    let paths: Vec<&str> = errors
        .iter()
        .map(|e| e.split(':').next().unwrap())
        .collect();
    assert_eq!(
        paths,
        vec![
            "sync.max_shrink_pct",
            "providers.azure.endpoint",
            "providers.azure.regions[1]",
            "providers.azure.concurrency",
            "providers.gcp.billing_endpoint",
            "providers.gcp.schedule",
        ],
        "{errors:#?}"
    );
}

#[test]
fn gcp_and_lambda_are_enabled_by_their_sections() {
    let config = Config::parse("[providers.aws]\nenabled = false\n[providers.azure]\nenabled = false\n[providers.oci]\nenabled = false\n[providers.gcp]\nproject = \"p\"\n[providers.lambda]\n", Path::new("")).unwrap();
    let sources: Vec<String> = config
        .enabled_sources()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(sources, vec!["gcp", "lambda"]);
    assert_eq!(
        config.providers.gcp.unwrap().provider.project.as_deref(),
        Some("p")
    );
}

#[test]
fn schedule_intervals_follow_the_cron_expression() {
    let now = Utc::now();
    assert_eq!(
        Schedule::parse("0 0 * * * *").unwrap().interval(now),
        Duration::from_secs(3600)
    );
    assert_eq!(
        Schedule::parse("0 */10 * * * *").unwrap().interval(now),
        Duration::from_secs(600)
    );
}

#[test]
fn planner_defaults_follow_the_same_rules_as_flags_and_api_fields() {
    let errors = errors_of(
        "[planner]\nrestart_hours = -1\ncheckpoint_hours = 9000\ntime_limit_secs = 0\nspot_window = \"2026-11-01\"\nmax_solve_memory_mib = 10\n",
    )
    .join("\n");
    assert_named(
        &errors,
        &[
            "planner.restart_hours: -1 is out of range; allowed: 0 to 8760",
            "planner.checkpoint_hours: 9000 is out of range",
            "planner.time_limit_secs: 0 is out of range",
            "planner.spot_window",
            "planner.max_solve_memory_mib",
        ],
    );
}

#[test]
fn owned_reservations_and_plan_classes_are_checked_by_path() {
    let errors = errors_of(
        "[[planner.owned]]\noffer = \"aws/us-east-1/p5.48xlarge\"\noption = \"reserved_1y\"\ncount = -2\n\
         [[planner.owned]]\noption = \"reserved_1y\"\ncount = 1\n\
         [alerts.plans.u]\nusage = \"u.csv\"\nclasses = \"c.toml\"\n",
    )
    .join("\n");
    assert_named(
        &errors,
        &[
            "planner.owned[0]: `count` -2 is out of range",
            "planner.owned[1]: name the offer",
            "alerts.plans.u.classes: goes with demand",
        ],
    );
    let ok = Config::parse(
        "[[planner.owned]]\nprovider = \"gcp\"\nregion = \"us-central1\"\ninstance_type = \"a2-highgpu-1g\"\n\
         option = \"commit_1y\"\ncount = 6\nremaining_hours = 700\n\
         [alerts.plans.two]\ndemand = \"d.csv\"\nclasses = \"c.toml\"\nowned = \"owned.csv\"\n",
        Path::new("/etc/gpuplan"),
    )
    .unwrap();
    assert_eq!(ok.planner.owned[0].offer, "gcp/us-central1/a2-highgpu-1g");
    assert_eq!(ok.planner.owned[0].remaining_hours, Some(700));
    let plan = &ok.alerts.plans["two"];
    assert_eq!(
        plan.classes.as_deref(),
        Some(Path::new("/etc/gpuplan/c.toml"))
    );
    assert_eq!(
        plan.owned.as_deref(),
        Some(Path::new("/etc/gpuplan/owned.csv"))
    );
}

#[test]
fn a_postgres_store_url_is_checked_and_never_shown_with_its_password() {
    let config = Config::parse(
        "[store]\nurl = \"postgres://gpuplan:hunter2@db.internal:6432/catalog\"\n",
        Path::new("/etc/gpuplan"),
    )
    .unwrap();
    assert!(config.store.location.is_shared());
    let shown = config.store.location.to_string();
    assert_eq!(shown, "postgres://gpuplan@db.internal:6432/catalog");
    assert!(!format!("{:?}", config.store).contains("hunter2"));

    let both = Config::parse(
        "[store]\npath = \"a.db\"\nurl = \"postgres://u:hunter2@h/d\"\n",
        Path::new(""),
    )
    .unwrap_err();
    let both = format!("{both:?}");
    assert!(
        both.contains("store.url") && both.contains("store.path"),
        "{both}"
    );
    for bad in ["mysql://u:hunter2@h/d", "postgres://u:hunter2@h:notaport/d"] {
        let err = Config::parse(&format!("[store]\nurl = \"{bad}\"\n"), Path::new("")).unwrap_err();
        let err = format!("{err:?}");
        assert!(err.contains("store.url"), "{err}");
        assert!(!err.contains("hunter2"), "the password leaked: {err}");
    }
}

#[test]
fn bill_sources_are_read_and_each_problem_named_by_its_path() {
    let config = Config::parse(
        "[bills.aws-payer]\nformat = \"cur2\"\nprovider = \"aws\"\npath = \"bills/aws\"\n\
         team_tags = [\"team\"]\nteams_by_account = { \"1\" = \"ml\" }\n",
        Path::new("/etc/gpuplan"),
    )
    .unwrap();
    let s = &config.bills["aws-payer"].source;
    assert_eq!(
        s.location,
        crate::bills::BillLocation::Folder("/etc/gpuplan/bills/aws".into())
    );
    assert_eq!(s.grace_days, 15);
    assert_eq!(s.teams_by_account["1"], "ml");
    let config = Config::parse(
        "[bills.x]\nformat = \"focus\"\nprovider = \"aws\"\nurl = \"s3://bills-bucket/exports/\"\n\
         endpoint = \"http://127.0.0.1:9000/\"\nregion = \"eu-west-1\"\n",
        Path::new(""),
    )
    .unwrap();
    assert_eq!(
        config.bills["x"].source.location.to_string(),
        "s3://bills-bucket/exports"
    );

    // Azure's three URL forms and GCS's: the container, account and prefix
    // each names, and the URL as messages show it.
    let cloud = |url: &str| {
        let text =
            format!("[bills.x]\nformat = \"focus\"\nprovider = \"azure\"\nurl = \"{url}\"\n");
        Config::parse(&text, Path::new("")).map(|c| c.bills["x"].source.location.clone())
    };
    let azure = |account: Option<&str>, container: &str, prefix: &str, url: &str| {
        crate::bills::BillLocation::Azure(crate::bills::CloudLocation {
            url: url.to_owned(),
            account: account.map(str::to_owned),
            container: container.to_owned(),
            prefix: prefix.to_owned(),
        })
    };
    assert_eq!(
        cloud("az://costs/exports/focus/").unwrap(),
        azure(None, "costs", "exports/focus", "az://costs/exports/focus")
    );
    assert_eq!(
        cloud("abfss://costs@contoso1.dfs.core.windows.net/exports").unwrap(),
        azure(
            Some("contoso1"),
            "costs",
            "exports",
            "abfss://costs@contoso1.dfs.core.windows.net/exports"
        )
    );
    assert_eq!(
        cloud("https://contoso1.blob.core.windows.net/costs/exports/focus").unwrap(),
        azure(
            Some("contoso1"),
            "costs",
            "exports/focus",
            "https://contoso1.blob.core.windows.net/costs/exports/focus"
        )
    );
    assert_eq!(
        cloud("gs://acme-billing/focus").unwrap(),
        crate::bills::BillLocation::Gcs(crate::bills::CloudLocation {
            url: "gs://acme-billing/focus".into(),
            account: None,
            container: "acme-billing".into(),
            prefix: "focus".into(),
        })
    );
    // A SAS pasted with the URL is refused without being repeated.
    let sas = cloud("https://contoso1.blob.core.windows.net/costs?sv=2023-11-03&sig=c2VjcmV0")
        .unwrap_err();
    let shown = format!("{sas:?}");
    assert!(
        shown.contains("AZURE_STORAGE_SAS_TOKEN") && !shown.contains("c2VjcmV0"),
        "{shown}"
    );
    for (url, why) in [
        ("https://example.com/costs/x", "is not a bill URL"),
        ("az://UPPER/x", "is not an Azure container name"),
        (
            "abfss://costs@bad-account.dfs.core.windows.net/x",
            "is not an Azure storage account name",
        ),
        ("gs://x/y", "is not a Cloud Storage bucket name"),
        ("gs://bucket/a/../b", "must not hold `..`"),
        ("ftp://bucket/x", "is not a bill URL"),
    ] {
        let errors = cloud(url).unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.path == "bills.x.url" && e.to_string().contains(why)),
            "{url}: {errors:?}"
        );
    }
    // endpoint and region are S3's.
    let errors = Config::parse(
        "[bills.x]\nformat = \"focus\"\nprovider = \"gcp\"\nurl = \"gs://acme-billing/f\"\nregion = \"us\"\n",
        Path::new(""),
    )
    .unwrap_err();
    assert!(
        errors.iter().any(|e| e.path == "bills.x.region"),
        "{errors:?}"
    );

    let errors = Config::parse(
        "[bills.Bad]\nformat = \"csv\"\nprovider = \"ibm\"\n\
         [bills.two]\nformat = \"cur2\"\nprovider = \"azure\"\npath = \"a\"\nurl = \"s3://b/p\"\n\
         [bills.three]\nformat = \"cur2\"\nprovider = \"aws\"\nurl = \"s3://My_Bucket/x\"\n\
         [bills.four]\nformat = \"cur2\"\nprovider = \"aws\"\npath = \"p\"\nregion = \"us-east-1\"\n\
         team_tags = [\"\"]\nschedule = \"hourly\"\nrestated_after_days = 999\n",
        Path::new(""),
    )
    .unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    for want in [
        "bills.Bad",
        "bills.Bad.format",
        "bills.Bad.provider",
        "bills.two.provider",
        "bills.two.url",
        "bills.four.team_tags[0]",
        "bills.four.schedule",
        "bills.four.restated_after_days",
        "bills.three.url",
        "bills.four.region",
    ] {
        assert!(paths.contains(&want), "{want} not in {paths:?}");
    }
}

#[test]
fn budgets_and_allocation_are_read_and_each_problem_named_by_its_path() {
    let config = Config::parse(
        "[alerts.channels.ops]\ntype = \"log\"\n\n[allocation]\nunallocated = \"proportional\"\n\n\
         [[budgets]]\nname = \"ml-monthly\"\namount = 10000.0\ncurrency = \"USD\"\nperiod = \"quarter\"\n\
         basis = \"billed\"\nteams = [\"ml\"]\nproviders = [\"aws\"]\ngpu_only = true\n\
         thresholds = [{ percent = 80, on = \"actual\" }, { percent = 100, on = \"forecast\" }]\n\
         channels = [\"ops\"]\n",
        Path::new(""),
    )
    .unwrap();
    assert!(config.allocation.proportional);
    let b = &config.budgets[0];
    assert_eq!(
        (b.period, b.basis, b.thresholds.len()),
        (BudgetPeriod::Quarter, CostBasis::Billed, 2)
    );
    assert!(b.scope.gpu_only);
    assert_eq!(b.thresholds[1].on, ThresholdOn::Forecast);

    let errors = errors_of(
        "[allocation]\nunallocated = \"even\"\n\n\
         [[budgets]]\nname = \"a\"\namount = -1\ncurrency = \"usd\"\nperiod = \"week\"\nbasis = \"cash\"\n\
         providers = [\"ibm\"]\nthresholds = [{ percent = 0 }, { percent = 50, on = \"maybe\" }]\n\
         channels = [\"nowhere\"]\n\n\
         [[budgets]]\nname = \"a\"\namount = 5\ncurrency = \"EUR\"\nthresholds = [{ percent = 80 }]\n",
    );
    assert_named(
        &errors.join("\n"),
        &[
            "allocation.unallocated: `even` is not one of: keep, proportional",
            "budgets[0] (a).amount: -1 is not an amount > 0",
            "budgets[0] (a).currency: `usd` is not an ISO 4217 code",
            "budgets[0] (a).period: `week` is not one of: month, quarter, year",
            "budgets[0] (a).basis: `cash` is not one of: effective, billed",
            "budgets[0] (a).providers[0]: `ibm` is not a bill provider",
            "budgets[0] (a).thresholds[0].percent: 0 is not a percent",
            "budgets[0] (a).thresholds[1].on: `maybe` is not one of: actual, forecast",
            "budgets[0] (a).channels[0]: no channel `nowhere`",
            "budgets[1] (a).name: `a` names another budget too",
            "budgets[1] (a).channels: thresholds need at least one channel",
        ],
    );
}

#[test]
fn rules_over_the_bills_take_percent_days_and_amount_and_others_refuse_them() {
    let errors = errors_of(
        "[alerts.channels.ops]\ntype = \"log\"\n\n\
         [[alerts.rules]]\nname = \"idle\"\nkind = \"commitment_underused\"\nchannels = [\"ops\"]\n\n\
         [[alerts.rules]]\nname = \"restated\"\nkind = \"bill_restated\"\nchannels = [\"ops\"]\n\n\
         [[alerts.rules]]\nname = \"cover\"\nkind = \"coverage_below\"\npercent = 150\ndays = 0\nchannels = [\"ops\"]\n\n\
         [[alerts.rules]]\nname = \"cheap\"\nkind = \"price_below\"\nusd_per_gpu_hour = 2.0\npercent = 5\nchannels = [\"ops\"]\n\n\
         [[alerts.rules]]\nname = \"untagged\"\nkind = \"unallocated_spend\"\npercent = 10\namount = 5\nchannels = [\"ops\"]\n",
    );
    assert_named(
        &errors.join("\n"),
        &[
            "alerts.rules[0] (idle).percent: missing; the percent threshold",
            "alerts.rules[1] (restated).percent: a bill_restated rule needs percent or amount",
            "alerts.rules[2] (cover).percent: 150 is not a percent in (0, 100]",
            "alerts.rules[2] (cover).days:",
            "alerts.rules[3] (cheap).percent: a price_below rule has no percent",
            "alerts.rules[4] (untagged).amount: only bill_restated rules take an amount",
        ],
    );
    let ok = Config::parse(
        "[alerts.channels.ops]\ntype = \"log\"\n\n\
         [[alerts.rules]]\nname = \"restated\"\nkind = \"bill_restated\"\namount = 500\nchannels = [\"ops\"]\n",
        Path::new(""),
    )
    .unwrap();
    let r = &ok.alerts.rules[0];
    assert_eq!((r.amount, r.percent, r.days), (Some(500.0), None, 7));
}

#[test]
fn window_rules_take_min_days_and_an_optional_price_cap() {
    let errors = errors_of(
        "[alerts.channels.ops]\ntype = \"log\"\n\n\
         [[alerts.rules]]\nname = \"week\"\nkind = \"window_offered\"\nmin_days = 0\nchannels = [\"ops\"]\n\n\
         [[alerts.rules]]\nname = \"cheap\"\nkind = \"price_below\"\nusd_per_gpu_hour = 2.0\nmin_days = 7\nchannels = [\"ops\"]\n",
    );
    assert_named(
        &errors.join("\n"),
        &[
            "alerts.rules[0] (week).min_days: 0 is not a number of days in (0, 366]",
            "alerts.rules[1] (cheap).min_days: a price_below rule has no min_days",
        ],
    );
    let ok = Config::parse(
        "[alerts.channels.ops]\ntype = \"log\"\n\n\
         [[alerts.rules]]\nname = \"week\"\nkind = \"window_offered\"\ngpu_models = [\"H100\"]\nmin_days = 7\nusd_per_gpu_hour = 3.5\nchannels = [\"ops\"]\n\n\
         [[alerts.rules]]\nname = \"any\"\nkind = \"window_offered\"\nchannels = [\"ops\"]\n",
        Path::new(""),
    )
    .unwrap();
    let (week, any) = (&ok.alerts.rules[0], &ok.alerts.rules[1]);
    assert_eq!(
        (week.min_days, week.threshold),
        (Some(7.0), Some(Threshold::PerGpuHour(3.5)))
    );
    assert_eq!((any.min_days, any.threshold), (None, None));
}

#[test]
fn runpod_is_off_unless_enabled_and_its_section_is_checked() {
    let names = |text: &str| -> Vec<String> {
        Config::parse(text, Path::new(""))
            .unwrap()
            .enabled_sources()
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    assert!(!names("[providers.runpod]\n").contains(&"runpod".to_owned()));
    assert!(names("[providers.runpod]\nenabled = true\n").contains(&"runpod".to_owned()));
    let errors = errors_of(
        "[providers.runpod]\nenabled = true\nendpoint = \"ftp://x\"\nschedule = \"often\"\n",
    )
    .join("\n");
    assert_named(
        &errors,
        &["providers.runpod.endpoint", "providers.runpod.schedule"],
    );
}

#[test]
fn nebius_needs_its_projects_and_is_on_when_its_section_exists() {
    let config = Config::parse(
        "[providers.nebius]\nprojects = { eu-north1 = \"project-e00a\" }\ncredentials_file = \"/etc/nebius.json\"\n",
        Path::new(""),
    )
    .unwrap();
    assert!(config.enabled_sources().iter().any(|(n, _)| n == "nebius"));
    assert!(
        !Config::parse("", Path::new(""))
            .unwrap()
            .enabled_sources()
            .iter()
            .any(|(n, _)| n == "nebius")
    );
    let errors = errors_of(
        "[providers.nebius]\nprojects = { \"EU\" = \"p\", eu-west1 = \"\" }\ncalculator_endpoint = \"calc:443\"\nschedule = \"often\"\nregion = \"x\"\n",
    )
    .join("\n");
    assert_named(&errors, &["providers.nebius", "region"]);
    let errors = errors_of(
        "[providers.nebius]\nprojects = { \"EU\" = \"p\", eu-west1 = \"\" }\ncalculator_endpoint = \"calc:443\"\nschedule = \"often\"\n",
    )
    .join("\n");
    assert_named(
        &errors,
        &[
            "providers.nebius.projects.EU",
            "providers.nebius.projects.eu-west1",
            "providers.nebius.calculator_endpoint",
            "providers.nebius.schedule",
        ],
    );
    let errors = errors_of("[providers.nebius]\n").join("\n");
    assert_named(&errors, &["providers.nebius.projects"]);
}

#[test]
fn vast_is_off_unless_enabled_and_syncs_every_ten_minutes_by_default() {
    let config = Config::parse("[providers.vast]\n", Path::new("")).unwrap();
    assert!(!config.enabled_sources().iter().any(|(n, _)| n == "vast"));
    let config = Config::parse("[providers.vast]\nenabled = true\n", Path::new("")).unwrap();
    let now = Utc::now();
    let intervals = config.source_intervals(now);
    assert_eq!(intervals["vast"], std::time::Duration::from_secs(600));
    let errors = errors_of("[providers.vast]\nenabled = true\nendpoint = \"x\"\n").join("\n");
    assert_named(&errors, &["providers.vast.endpoint"]);
}

#[test]
fn a_dotted_source_name_is_said_to_need_quotes() {
    let text = "[bills.v1.2-aws]\nformat = \"focus\"\nprovider = \"aws\"\npath = \"bills\"\n";
    let errors = Config::parse(text, Path::new("/tmp")).unwrap_err();
    let e = errors[0].to_string();
    assert!(e.contains("unknown field `2-aws`"), "{e}");
    assert!(
        e.contains("`[bills.v1.2-aws]` reads as a table `2-aws` inside `bills.v1`: a name with a dot must be quoted, as in [bills.\"v1.2-aws\"]"),
        "{e}"
    );
    // Quoted, the name is one key, and its dot is then named as the fault.
    let text = "[bills.\"v1.2-aws\"]\nformat = \"focus\"\nprovider = \"aws\"\npath = \"bills\"\n";
    let errors = Config::parse(text, Path::new("/tmp")).unwrap_err();
    assert!(
        errors.iter().any(|e| e
            .to_string()
            .contains("a source name may only use a-z, 0-9, '-' and '_'")),
        "{errors:?}"
    );
}
