//! Alert state per (rule, key) and the outbox of messages to deliver.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::sql::{self, Backend, Db, Val};
use super::{StoreError, parse_ts, ts};

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

/// The columns [`message`] reads, in its order.
const MESSAGE_COLUMNS: &str = "id, idempotency_key, rule, channel, payload_json, created_at,
     attempts, next_attempt_at, delivered_at, last_error";

fn message(r: &[Val]) -> Result<OutboxMessage, StoreError> {
    let id = r[0].int()?;
    Ok(OutboxMessage {
        id,
        idempotency_key: r[1].text()?,
        rule: r[2].text()?,
        channel: r[3].text()?,
        payload: serde_json::from_str(&r[4].text()?)
            .map_err(|e| StoreError::Corrupt(format!("outbox {id}: {e}")))?,
        created_at: parse_ts(r[5].as_str()?)?,
        attempts: r[6].int()?,
        next_attempt_at: parse_ts(r[7].as_str()?)?,
        delivered_at: r[8].opt_str()?.map(parse_ts).transpose()?,
        last_error: r[9].opt_text()?,
    })
}

fn messages(db: &dyn Db, sql: &str, params: &[Val]) -> Result<Vec<OutboxMessage>, StoreError> {
    db.rows(sql, params)?.iter().map(|r| message(r)).collect()
}

impl<B: Backend> Alerts for B {
    fn alert_states(&self, rule: Option<&str>) -> Result<Vec<AlertState>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                "SELECT rule, key, fired, last_value, changed_at, last_fired_at FROM alert_state
                 WHERE CAST($1 AS TEXT) IS NULL OR rule = $1 ORDER BY rule, key",
                &[rule.into()],
            )
        })?;
        rows.iter()
            .map(|r| {
                Ok(AlertState {
                    rule: r[0].text()?,
                    key: r[1].text()?,
                    fired: r[2].int()? == 1,
                    last_value: r[3].opt_real()?,
                    changed_at: parse_ts(r[4].as_str()?)?,
                    last_fired_at: r[5].opt_str()?.map(parse_ts).transpose()?,
                })
            })
            .collect()
    }

    fn apply_alerts(
        &mut self,
        states: &[AlertState],
        messages: &[NewMessage],
        forget: &[(String, String)],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.in_transaction(|db| {
            db.check_fence()?;
            for (rule, key) in forget {
                db.exec(
                    "DELETE FROM alert_state WHERE rule = $1 AND key = $2",
                    &[rule.as_str().into(), key.as_str().into()],
                )?;
            }
            for s in states {
                db.exec(
                    "INSERT INTO alert_state (rule, key, fired, last_value, changed_at, last_fired_at)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (rule, key) DO UPDATE SET fired = excluded.fired, last_value = excluded.last_value,
                         changed_at = excluded.changed_at, last_fired_at = excluded.last_fired_at",
                    &[
                        s.rule.as_str().into(),
                        s.key.as_str().into(),
                        i64::from(s.fired).into(),
                        s.last_value.into(),
                        ts(s.changed_at).into(),
                        s.last_fired_at.map(ts).into(),
                    ],
                )?;
            }
            for m in messages {
                db.exec(
                    "INSERT INTO alert_outbox (idempotency_key, rule, channel, payload_json, created_at, next_attempt_at)
                     VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (idempotency_key) DO NOTHING",
                    &[
                        m.idempotency_key.as_str().into(),
                        m.rule.as_str().into(),
                        m.channel.as_str().into(),
                        m.payload.to_string().into(),
                        ts(now).into(),
                    ],
                )?;
            }
            Ok(())
        })
    }

    fn claim_due_messages(
        &mut self,
        now: DateTime<Utc>,
        hold_until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<OutboxMessage>, StoreError> {
        let mut out = self.in_transaction(|db| {
            messages(
                db,
                &format!(
                    "UPDATE alert_outbox SET next_attempt_at = $2
                     WHERE id IN (SELECT id FROM alert_outbox
                                  WHERE delivered_at IS NULL AND next_attempt_at <= $1
                                  ORDER BY id LIMIT $3{})
                     RETURNING {MESSAGE_COLUMNS}",
                    db.dialect().skip_locked()
                ),
                &[
                    ts(now).into(),
                    ts(hold_until).into(),
                    i64::from(limit).into(),
                ],
            )
        })?;
        out.sort_by_key(|m| m.id);
        Ok(out)
    }

    fn message_history(&self, limit: u32) -> Result<Vec<OutboxMessage>, StoreError> {
        self.on_conn(|db| {
            messages(
                db,
                &format!("SELECT {MESSAGE_COLUMNS} FROM alert_outbox ORDER BY id DESC LIMIT $1"),
                &[i64::from(limit).into()],
            )
        })
    }

    fn next_message_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let at = self.on_conn(|db| {
            sql::first(
                db,
                "SELECT min(next_attempt_at) FROM alert_outbox WHERE delivered_at IS NULL",
                &[],
            )
        })?;
        at.map_or(Ok(None), |v| v.opt_text())?
            .as_deref()
            .map(parse_ts)
            .transpose()
    }

    fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.on_conn(|db| {
            db.exec(
                "UPDATE alert_outbox SET delivered_at = $2, attempts = attempts + 1, last_error = NULL WHERE id = $1",
                &[id.into(), ts(at).into()],
            )
        })?;
        Ok(())
    }

    fn release_messages(&self, ids: &[i64], at: DateTime<Utc>) -> Result<(), StoreError> {
        self.on_conn(|db| {
            for &id in ids {
                db.exec(
                    "UPDATE alert_outbox SET next_attempt_at = $2 WHERE id = $1 AND delivered_at IS NULL",
                    &[id.into(), ts(at).into()],
                )?;
            }
            Ok(())
        })
    }

    fn mark_attempt_failed(
        &self,
        id: i64,
        next: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        self.on_conn(|db| {
            db.exec(
                "UPDATE alert_outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3 WHERE id = $1",
                &[id.into(), ts(next).into(), error.into()],
            )
        })?;
        Ok(())
    }

    fn latest_runs(&self) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        let rows = self.on_conn(|db| {
            db.rows(
                &format!(
                    "{} SELECT r.source, r.status, r.error FROM sources s
                     JOIN sync_runs r ON r.id = (
                         SELECT x.id FROM sync_runs x
                         WHERE x.source = s.source AND x.scope = 'full'
                           AND x.finished_at IS NOT NULL
                         ORDER BY x.finished_at DESC, x.id DESC LIMIT 1)
                     ORDER BY r.source",
                    sql::SOURCES
                ),
                &[],
            )
        })?;
        rows.iter()
            .map(|r| Ok((r[0].text()?, r[1].text()?, r[2].opt_text()?)))
            .collect()
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
    /// an alert is queued exactly when its state says it fired, and deletes
    /// the states `forget` names as (rule, key). A message whose idempotency
    /// key is queued already is not queued again.
    ///
    /// # Errors
    /// On a database error (nothing is written).
    fn apply_alerts(
        &mut self,
        states: &[AlertState],
        messages: &[NewMessage],
        forget: &[(String, String)],
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
