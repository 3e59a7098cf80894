-- Cluster duties (a source's sync, alert evaluation, ...) and the epoch of
-- their current holder: bumped each time a replica takes the duty and checked
-- inside that duty's writes, so a replica that lost its duty cannot write.
-- A single SQLite daemon holds every duty itself and leaves this table empty.
CREATE TABLE leases (
    duty            TEXT    PRIMARY KEY,
    epoch           INTEGER NOT NULL,
    holder          TEXT    NOT NULL,
    taken_at        TEXT    NOT NULL,
    heartbeat_at    TEXT    NOT NULL
) WITHOUT ROWID;
-- Which replica ran a sync, so a replica taking over a source's duty fails
-- only that source's runs left running by a replica that died.
ALTER TABLE sync_runs ADD COLUMN replica TEXT;
