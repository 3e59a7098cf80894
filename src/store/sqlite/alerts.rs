//! Alert state and the outbox, on SQLite.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use crate::store::alerts::RawMessage;
use crate::store::{AlertState, Alerts, NewMessage, OutboxMessage, StoreError, parse_ts, ts};

const MESSAGE_COLUMNS: &str =
    "id, idempotency_key, rule, channel, payload_json, created_at, attempts,
     next_attempt_at, delivered_at, last_error";

fn raw_message(r: &Row<'_>) -> rusqlite::Result<RawMessage> {
    Ok(RawMessage {
        id: r.get(0)?,
        idempotency_key: r.get(1)?,
        rule: r.get(2)?,
        channel: r.get(3)?,
        payload: r.get(4)?,
        created: r.get(5)?,
        attempts: r.get(6)?,
        next: r.get(7)?,
        delivered: r.get(8)?,
        last_error: r.get(9)?,
    })
}

impl Alerts for SqliteStore {
    fn alert_states(&self, rule: Option<&str>) -> Result<Vec<AlertState>, StoreError> {
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

    fn apply_alerts(
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

    fn claim_due_messages(
        &mut self,
        now: DateTime<Utc>,
        hold_until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<OutboxMessage>, StoreError> {
        let tx = self.conn.transaction()?;
        let raw = {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM alert_outbox
                 WHERE delivered_at IS NULL AND next_attempt_at <= ?1 ORDER BY id LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![ts(now), limit], raw_message)?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        let mut hold =
            tx.prepare_cached("UPDATE alert_outbox SET next_attempt_at = ?2 WHERE id = ?1")?;
        for m in &raw {
            hold.execute(params![m.id, ts(hold_until)])?;
        }
        drop(hold);
        tx.commit()?;
        raw.into_iter().map(RawMessage::parse).collect()
    }

    fn message_history(&self, limit: u32) -> Result<Vec<OutboxMessage>, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM alert_outbox ORDER BY id DESC LIMIT ?1"
        ))?;
        let rows = stmt.query_map([limit], raw_message)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row?.parse()?);
        }
        Ok(out)
    }

    fn next_message_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
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

    fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE alert_outbox SET delivered_at = ?2, attempts = attempts + 1, last_error = NULL WHERE id = ?1",
            params![id, ts(at)],
        )?;
        Ok(())
    }

    fn release_messages(&self, ids: &[i64], at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "UPDATE alert_outbox SET next_attempt_at = ?2 WHERE id = ?1 AND delivered_at IS NULL",
        )?;
        for id in ids {
            stmt.execute(params![id, ts(at)])?;
        }
        Ok(())
    }

    fn mark_attempt_failed(
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

    fn latest_runs(&self) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.source, r.status, r.error FROM sync_runs r
             WHERE r.id = (SELECT max(id) FROM sync_runs
                           WHERE source = r.source AND status != 'running' AND scope = 'full')",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
