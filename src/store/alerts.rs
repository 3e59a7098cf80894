//! Alert state per (rule, key) and the outbox of messages to deliver.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Store, StoreError, parse_ts, ts};

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

impl Store {
    /// Every state row, of one rule when given.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    pub fn alert_states(&self, rule: Option<&str>) -> Result<Vec<AlertState>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT rule, key, fired, last_value, changed_at, last_fired_at FROM alert_state
             WHERE ?1 IS NULL OR rule = ?1 ORDER BY rule, key",
        )?;
        let rows = stmt.query_map([rule], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, bool>(2)?,
                r.get::<_, Option<f64>>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (rule, key, fired, last_value, changed, last_fired) = row?;
            out.push(AlertState {
                rule,
                key,
                fired,
                last_value,
                changed_at: parse_ts(&changed)?,
                last_fired_at: last_fired.as_deref().map(parse_ts).transpose()?,
            });
        }
        Ok(out)
    }

    /// Writes state changes and the messages they queue in one transaction, so
    /// an alert is queued exactly when its state says it fired.
    ///
    /// # Errors
    /// On a database error (nothing is written).
    pub fn apply_alerts(
        &mut self,
        states: &[AlertState],
        messages: &[NewMessage],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        {
            let mut upsert = tx.prepare_cached(
                "INSERT INTO alert_state (rule, key, fired, last_value, changed_at, last_fired_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (rule, key) DO UPDATE SET fired = excluded.fired, last_value = excluded.last_value,
                     changed_at = excluded.changed_at, last_fired_at = excluded.last_fired_at",
            )?;
            for s in states {
                upsert.execute(params![
                    s.rule,
                    s.key,
                    s.fired,
                    s.last_value,
                    ts(s.changed_at),
                    s.last_fired_at.map(ts)
                ])?;
            }
            let mut queue = tx.prepare_cached(
                "INSERT OR IGNORE INTO alert_outbox (idempotency_key, rule, channel, payload_json, created_at, next_attempt_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
            )?;
            for m in messages {
                queue.execute(params![
                    m.idempotency_key,
                    m.rule,
                    m.channel,
                    m.payload.to_string(),
                    ts(now)
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Messages not yet delivered whose next attempt is due, oldest first.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    pub fn due_messages(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<OutboxMessage>, StoreError> {
        self.messages(
            "WHERE delivered_at IS NULL AND next_attempt_at <= ?1 ORDER BY id LIMIT ?2",
            params![ts(now), limit],
        )
    }

    /// The newest messages, delivered or not.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    pub fn message_history(&self, limit: u32) -> Result<Vec<OutboxMessage>, StoreError> {
        self.messages(
            "WHERE ?1 IS NOT NULL ORDER BY id DESC LIMIT ?2",
            params!["", limit],
        )
    }

    /// When the next undelivered message is due, if any.
    ///
    /// # Errors
    /// On a database error or an unreadable stored value.
    pub fn next_message_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let at: Option<String> = self
            .conn
            .query_row(
                "SELECT min(next_attempt_at) FROM alert_outbox WHERE delivered_at IS NULL",
                [],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        at.as_deref().map(parse_ts).transpose()
    }

    fn messages(
        &self,
        tail: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<OutboxMessage>, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT id, idempotency_key, rule, channel, payload_json, created_at, attempts, next_attempt_at,
                    delivered_at, last_error FROM alert_outbox {tail}"
        ))?;
        let rows = stmt.query_map(args, |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, String>(7)?,
                r.get::<_, Option<String>>(8)?,
                r.get::<_, Option<String>>(9)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (
                id,
                idempotency_key,
                rule,
                channel,
                payload,
                created,
                attempts,
                next,
                delivered,
                last_error,
            ) = row?;
            out.push(OutboxMessage {
                id,
                idempotency_key,
                rule,
                channel,
                payload: serde_json::from_str(&payload)
                    .map_err(|e| StoreError::Corrupt(format!("outbox {id}: {e}")))?,
                created_at: parse_ts(&created)?,
                attempts,
                next_attempt_at: parse_ts(&next)?,
                delivered_at: delivered.as_deref().map(parse_ts).transpose()?,
                last_error,
            });
        }
        Ok(out)
    }

    /// Records a delivery the receiver accepted.
    ///
    /// # Errors
    /// On a database error.
    pub fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE alert_outbox SET delivered_at = ?2, attempts = attempts + 1, last_error = NULL WHERE id = ?1",
            params![id, ts(at)],
        )?;
        Ok(())
    }

    /// Records a failed attempt and when to try again.
    ///
    /// # Errors
    /// On a database error.
    pub fn mark_attempt_failed(
        &self,
        id: i64,
        next: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE alert_outbox SET attempts = attempts + 1, next_attempt_at = ?2, last_error = ?3 WHERE id = ?1",
            params![id, ts(next), error],
        )?;
        Ok(())
    }

    /// The newest full run of each source: (source, status, error). Spot-only
    /// runs are left out, so one that works cannot hide a failing list sync.
    ///
    /// # Errors
    /// On a database error.
    pub fn latest_runs(&self) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.source, r.status, r.error FROM sync_runs r
             WHERE r.id = (SELECT max(id) FROM sync_runs
                           WHERE source = r.source AND status != 'running' AND scope = 'full')",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
