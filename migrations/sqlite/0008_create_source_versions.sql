-- The version of each part of a source (a region's offer file, an index's
-- ETag) that the last good full sync read, so the next sync can skip what was
-- not republished; and how many regions a run found unchanged.
CREATE TABLE source_versions (
    provider        TEXT    NOT NULL,
    part            TEXT    NOT NULL,
    version         TEXT    NOT NULL,
    PRIMARY KEY (provider, part)
) WITHOUT ROWID;
ALTER TABLE sync_runs ADD COLUMN regions_unchanged INTEGER NOT NULL DEFAULT 0;
