-- Cluster duties and the epoch of their current holder (PostgreSQL twin of
-- sqlite/0011): bumped when a replica takes the duty under its advisory lock,
-- checked inside that duty's writes.
CREATE TABLE leases (
    duty            TEXT    PRIMARY KEY,
    epoch           BIGINT  NOT NULL,
    holder          TEXT    NOT NULL,
    taken_at        TEXT    NOT NULL,
    heartbeat_at    TEXT    NOT NULL
);
ALTER TABLE sync_runs ADD COLUMN replica TEXT;
