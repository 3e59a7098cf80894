//! Alert state and the outbox, on PostgreSQL. Due messages are claimed with
//! `FOR UPDATE SKIP LOCKED`, so replicas draining the outbox together never
//! claim the same message.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;

use super::{PgStore, get};
use crate::store::alerts::RawMessage;
use crate::store::{AlertState, Alerts, NewMessage, OutboxMessage, StoreError, parse_ts, ts};

const MESSAGE_COLUMNS: &str =
    "id, idempotency_key, rule, channel, payload_json, created_at, attempts,
     next_attempt_at, delivered_at, last_error";

fn raw_message(r: &Row) -> Result<RawMessage, StoreError> {
    Ok(RawMessage {
        id: get(r, 0)?,
        idempotency_key: get(r, 1)?,
        rule: get(r, 2)?,
        channel: get(r, 3)?,
        payload: get(r, 4)?,
        created: get(r, 5)?,
        attempts: get(r, 6)?,
        next: get(r, 7)?,
        delivered: get(r, 8)?,
        last_error: get(r, 9)?,
    })
}

impl Alerts for PgStore<'_> {
    fn alert_states(&self, rule: Option<&str>) -> Result<Vec<AlertState>, StoreError> {
        let rows = self.query(
            "SELECT rule, key, fired, last_value, changed_at, last_fired_at FROM alert_state
             WHERE $1::text IS NULL OR rule = $1 ORDER BY rule, key",
            &[&rule],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let fired: i64 = get(r, 2)?;
            let changed: String = get(r, 4)?;
            let last_fired: Option<String> = get(r, 5)?;
            out.push(AlertState {
                rule: get(r, 0)?,
                key: get(r, 1)?,
                fired: fired == 1,
                last_value: get(r, 3)?,
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
        let fence = self.fence.clone();
        self.transaction(|tx| {
            tx.check_fence(fence.as_ref())?;
            for s in states {
                tx.execute(
                    "INSERT INTO alert_state (rule, key, fired, last_value, changed_at, last_fired_at)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (rule, key) DO UPDATE SET fired = excluded.fired, last_value = excluded.last_value,
                         changed_at = excluded.changed_at, last_fired_at = excluded.last_fired_at",
                    &[
                        &s.rule,
                        &s.key,
                        &i64::from(s.fired),
                        &s.last_value,
                        &ts(s.changed_at),
                        &s.last_fired_at.map(ts),
                    ],
                )?;
            }
            for m in messages {
                tx.execute(
                    "INSERT INTO alert_outbox (idempotency_key, rule, channel, payload_json, created_at, next_attempt_at)
                     VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (idempotency_key) DO NOTHING",
                    &[
                        &m.idempotency_key,
                        &m.rule,
                        &m.channel,
                        &m.payload.to_string(),
                        &ts(now),
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
        let rows = self.query(
            &format!(
                "UPDATE alert_outbox SET next_attempt_at = $2
                 WHERE id IN (SELECT id FROM alert_outbox
                              WHERE delivered_at IS NULL AND next_attempt_at <= $1
                              ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
                 RETURNING {MESSAGE_COLUMNS}"
            ),
            &[&ts(now), &ts(hold_until), &i64::from(limit)],
        )?;
        let mut out = rows
            .iter()
            .map(|r| raw_message(r)?.parse())
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by_key(|m| m.id);
        Ok(out)
    }

    fn message_history(&self, limit: u32) -> Result<Vec<OutboxMessage>, StoreError> {
        let rows = self.query(
            &format!("SELECT {MESSAGE_COLUMNS} FROM alert_outbox ORDER BY id DESC LIMIT $1"),
            &[&i64::from(limit)],
        )?;
        rows.iter().map(|r| raw_message(r)?.parse()).collect()
    }

    fn next_message_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let at: Option<String> = self
            .query_opt(
                "SELECT min(next_attempt_at) FROM alert_outbox WHERE delivered_at IS NULL",
                &[],
            )?
            .map(|r| get(&r, 0))
            .transpose()?
            .flatten();
        at.as_deref().map(parse_ts).transpose()
    }

    fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.execute(
            "UPDATE alert_outbox SET delivered_at = $2, attempts = attempts + 1, last_error = NULL WHERE id = $1",
            &[&id, &ts(at)],
        )?;
        Ok(())
    }

    fn release_messages(&self, ids: &[i64], at: DateTime<Utc>) -> Result<(), StoreError> {
        self.execute(
            "UPDATE alert_outbox SET next_attempt_at = $2 WHERE id = ANY($1) AND delivered_at IS NULL",
            &[&ids, &ts(at)],
        )?;
        Ok(())
    }

    fn mark_attempt_failed(
        &self,
        id: i64,
        next: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        self.execute(
            "UPDATE alert_outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3 WHERE id = $1",
            &[&id, &ts(next), &error],
        )?;
        Ok(())
    }

    fn latest_runs(&self) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        let rows = self.query(
            "SELECT r.source, r.status, r.error FROM sync_runs r
             WHERE r.id = (SELECT max(id) FROM sync_runs
                           WHERE source = r.source AND status != 'running' AND scope = 'full')",
            &[],
        )?;
        rows.iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?, get(r, 2)?)))
            .collect()
    }
}
