-- The version of each part of a source that the last good full sync read
-- (PostgreSQL twin of sqlite/0008).
CREATE TABLE source_versions (
    provider        TEXT    NOT NULL,
    part            TEXT    NOT NULL,
    version         TEXT    NOT NULL,
    PRIMARY KEY (provider, part)
);
ALTER TABLE sync_runs ADD COLUMN regions_unchanged BIGINT NOT NULL DEFAULT 0;
