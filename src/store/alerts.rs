//! Alert state per (rule, key) and the outbox of messages to deliver.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{StoreError, parse_ts};

/// Where a (rule, key) stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertState {
    pub rule: String,
    pub key: String,
    pub fired: bool,
    pub last_value: Option<f64>,
    pub changed_at: DateTime<Utc>,
    pub last_fired_at: Option<DateTime<Utc>>,
}

/// One message for one channel, waiting for or done with delivery.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutboxMessage {
    pub id: i64,
    pub idempotency_key: String,
    pub rule: String,
    pub channel: String,
    pub payload: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub attempts: i64,
    pub next_attempt_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// A new message to queue.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub idempotency_key: String,
    pub rule: String,
    pub channel: String,
    pub payload: serde_json::Value,
}

/// An outbox row before its text columns are parsed.
pub(super) struct RawMessage {
    pub(super) id: i64,
    pub(super) idempotency_key: String,
    pub(super) rule: String,
    pub(super) channel: String,
    pub(super) payload: String,
    pub(super) created: String,
    pub(super) attempts: i64,
    pub(super) next: String,
    pub(super) delivered: Option<String>,
    pub(super) last_error: Option<String>,
}

impl RawMessage {
    pub(super) fn parse(self) -> Result<OutboxMessage, StoreError> {
        let id = self.id;
        Ok(OutboxMessage {
            id,
            idempotency_key: self.idempotency_key,
            rule: self.rule,
            channel: self.channel,
            payload: serde_json::from_str(&self.payload)
                .map_err(|e| StoreError::Corrupt(format!("outbox {id}: {e}")))?,
            created_at: parse_ts(&self.created)?,
            attempts: self.attempts,
            next_attempt_at: parse_ts(&self.next)?,
            delivered_at: self.delivered.as_deref().map(parse_ts).transpose()?,
            last_error: self.last_error,
        })
    }
}

/// Alert state per (rule, key) and the outbox.
pub trait Alerts {
    /// Every state row, of one rule when given.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn alert_states(&self, rule: Option<&str>) -> Result<Vec<AlertState>, StoreError>;

    /// Writes state changes and the messages they queue in one transaction, so
    /// an alert is queued exactly when its state says it fired. A message
    /// whose idempotency key is queued already is not queued again.
    ///
    /// # Errors
    /// On a database error (nothing is written).
    fn apply_alerts(
        &mut self,
        states: &[AlertState],
        messages: &[NewMessage],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Claims up to `limit` undelivered messages that are due at `now`, oldest
    /// first: each claimed message is not due again before `hold_until`, so
    /// another deliverer (another replica) skips it while this one sends it,
    /// and picks it up if this one dies before recording the outcome.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn claim_due_messages(
        &mut self,
        now: DateTime<Utc>,
        hold_until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<OutboxMessage>, StoreError>;

    /// The newest messages, delivered or not.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn message_history(&self, limit: u32) -> Result<Vec<OutboxMessage>, StoreError>;

    /// When the next undelivered message is due, if any.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    fn next_message_due(&self) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// Records a delivery the receiver accepted.
    ///
    /// # Errors
    /// On a database error.
    fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Gives claimed, undelivered messages back to be due at `at`, without
    /// counting an attempt: a daemon stopping mid-batch must not leave the
    /// rest of its claim held for the whole hold time.
    ///
    /// # Errors
    /// On a database error.
    fn release_messages(&self, ids: &[i64], at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Records a failed attempt and when to try again.
    ///
    /// # Errors
    /// On a database error.
    fn mark_attempt_failed(
        &self,
        id: i64,
        next: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError>;

    /// The newest full run of each source: (source, status, error). Spot-only
    /// runs are left out, so one that works cannot hide a failing list sync.
    ///
    /// # Errors
    /// On a database error.
    fn latest_runs(&self) -> Result<Vec<(String, String, Option<String>)>, StoreError>;
}
