-- Saved purchase plans and alert bookkeeping (filled by the planner and alerts).

CREATE TABLE plans (
    id              INTEGER PRIMARY KEY,
    created_at      TEXT    NOT NULL,
    name            TEXT,
    inputs_hash     TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    objective       REAL,
    problem_json    TEXT    NOT NULL,
    result_json     TEXT    NOT NULL
);
CREATE INDEX plans_by_name ON plans (name, id);

-- Per rule and key (e.g. one offer): whether the alert is currently fired.
CREATE TABLE alert_state (
    rule            TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    fired           INTEGER NOT NULL CHECK (fired IN (0, 1)),
    last_value      REAL,
    changed_at      TEXT    NOT NULL,
    PRIMARY KEY (rule, key)
);

-- Alerts waiting for (or done with) delivery; written with the state change.
CREATE TABLE alert_outbox (
    id              INTEGER PRIMARY KEY,
    idempotency_key TEXT    NOT NULL UNIQUE,
    rule            TEXT    NOT NULL,
    channel         TEXT    NOT NULL,
    payload_json    TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT    NOT NULL,
    delivered_at    TEXT,
    last_error      TEXT
);
CREATE INDEX alert_outbox_pending ON alert_outbox (delivered_at, next_attempt_at);
