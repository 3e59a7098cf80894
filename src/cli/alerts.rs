//! `gpuplan alerts`: rules and their state, what was sent, and test messages.

use super::*;

#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// The configured rules and the state of each of their keys.
    List {
        #[command(flatten)]
        format: Format,
    },
    /// Alerts queued and sent, newest first.
    History {
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[command(flatten)]
        format: Format,
    },
    /// Send a test message through a rule's channels now.
    Test { rule: String },
}

pub(super) async fn run_alerts(
    config: &Config,
    command: AlertsCommand,
) -> Result<ExitCode, CliError> {
    match command {
        AlertsCommand::List { format } => {
            let states = open_store(config)?
                .read(|s| s.alert_states(None))
                .map_err(|e| CliError::Failed(e.into()))?;
            if format.json || format.csv {
                let rules: Vec<serde_json::Value> = config
                    .alerts
                    .rules
                    .iter()
                    .map(|r| {
                        let keys: Vec<_> = states.iter().filter(|s| s.rule == r.name).collect();
                        json!({"name": r.name, "kind": r.kind.as_str(), "channels": r.channels, "state": keys})
                    })
                    .collect();
                format.print(&rules)?;
            } else if config.alerts.rules.is_empty() {
                eprintln!("No alert rules are configured ([[alerts.rules]]).");
            } else {
                print!("{}", rules_table(&config.alerts.rules, &states));
            }
            Ok(ExitCode::SUCCESS)
        }
        AlertsCommand::History { limit, format } => {
            let messages = open_store(config)?
                .read(|s| s.message_history(limit))
                .map_err(|e| CliError::Failed(e.into()))?;
            if !format.print(&messages)? {
                print!("{}", history_table(&messages));
            }
            Ok(ExitCode::SUCCESS)
        }
        AlertsCommand::Test { rule } => {
            let Some(r) = config.alerts.rules.iter().find(|r| r.name == rule) else {
                let names: Vec<&str> = config
                    .alerts
                    .rules
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect();
                return Err(CliError::BadInput(anyhow::anyhow!(
                    "no alert rule `{rule}`; configured: {}",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                )));
            };
            let channels = deliver::channels(&config.alerts.channels)
                .map_err(|e| CliError::BadInput(anyhow::anyhow!(e)))?;
            let http =
                deliver::client(config.alerts.timeout).map_err(|e| CliError::Failed(e.into()))?;
            let payload = json!({
                "rule": r.name, "kind": r.kind.as_str(), "key": "test", "value": 0,
                "message": format!("test message for rule {} from gpuplan", r.name),
                "fired_at": Utc::now(), "test": true,
                "idempotency_key": format!("gpuplan-test-{}", Utc::now().timestamp_micros()),
            });
            let mut failed = 0;
            for name in &r.channels {
                let outcome = match channels.get(name) {
                    Some(ch) => deliver::send(&http, ch, &payload).await,
                    None => Err("not configured".to_owned()),
                };
                match outcome {
                    Ok(()) => println!("{name}: sent"),
                    Err(e) => {
                        failed += 1;
                        println!("{name}: FAILED: {e}");
                    }
                }
            }
            Ok(if failed > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}
