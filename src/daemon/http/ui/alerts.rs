//! `GET /ui/alerts`: the configured rules, the state of each (rule, key),
//! and the newest messages with their delivery status.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use maud::html;

use super::{PageError, layout};
use crate::daemon::http::state::{AppState, read};

/// The newest messages shown.
const MESSAGES: u32 = 100;

pub async fn page(State(state): State<Arc<AppState>>) -> Result<Response, PageError> {
    let (states, messages) = read(&state, |store, _, _| {
        Ok((store.alert_states(None)?, store.message_history(MESSAGES)?))
    })
    .await?;
    let body = html! {
        h1 { "Alerts" }
        h2 { "Rules" }
        @if state.rules.is_empty() {
            p { "No rules configured. Add " code { "[[alerts.rules]]" } " to the config." }
        } @else {
            table {
                thead { tr { th { "rule" } th { "kind" } th { "GPUs" } th { "kinds" } th { "channels" } } }
                tbody {
                    @for r in &state.rules {
                        tr {
                            td { (r.name) }
                            td { (r.kind.as_str()) }
                            td { (r.gpu_models.join(", ")) }
                            td { (r.price_kinds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")) }
                            td { (r.channels.join(", ")) }
                        }
                    }
                }
            }
        }
        h2 { "State" }
        @if states.is_empty() { p { "No rule has been evaluated yet." } } @else {
            table {
                thead { tr { th { "rule" } th { "key" } th { "state" } th { "last value" } th { "since" } th { "last fired" } } }
                tbody {
                    @for s in &states {
                        tr {
                            td { (s.rule) } td { (s.key) }
                            td { @if s.fired { span.badge.stale { "firing" } } @else { span.badge.ok { "ok" } } }
                            td.num { @if let Some(v) = s.last_value { (format!("{v:.4}")) } @else { "—" } }
                            td { (s.changed_at.format("%Y-%m-%d %H:%M UTC")) }
                            td { @if let Some(t) = s.last_fired_at { (t.format("%Y-%m-%d %H:%M UTC")) } @else { "never" } }
                        }
                    }
                }
            }
        }
        h2 { "Messages" }
        @if messages.is_empty() { p { "No messages yet." } } @else {
            table {
                thead { tr { th { "created" } th { "rule" } th { "channel" } th { "delivery" } th { "attempts" } th { "summary" } } }
                tbody {
                    @for m in &messages {
                        tr {
                            td { (m.created_at.format("%Y-%m-%d %H:%M UTC")) }
                            td { (m.rule) } td { (m.channel) }
                            td {
                                @if let Some(t) = m.delivered_at { span.badge.ok { "delivered" } " " (t.format("%H:%M")) }
                                @else if let Some(e) = &m.last_error { span.badge.stale title=(e) { "retrying" } }
                                @else { span.badge { "queued" } }
                            }
                            td.num { (m.attempts) }
                            td { (m.payload.get("message").and_then(|t| t.as_str()).unwrap_or("")) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Alerts", "/ui/alerts", &body))
}
