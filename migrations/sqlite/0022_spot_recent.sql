-- New spot observations land here first, and move into spot_observations
-- in batches. spot_observations is clustered by series: at tens of millions
-- of observations a sync of 10,000 series wrote 10,000 pages of it (one per
-- series) to the WAL and back, and the write cost per observation grew with
-- the history. This table stays small, so a sync writes a few dozen pages;
-- a merge then writes each series' page once for many observations.
--
-- Every row here is newer than every row of its series in spot_observations
-- (what the writes and the merge keep), so the newest observation of a
-- series before a time is this table's if it has one, else the history's.
-- No foreign key: the sync writes ids it has just read from spot_series, and
-- the history's key checks every row that moves there (a check per row cost
-- PostgreSQL a third of each sync's write).
CREATE TABLE spot_recent (
    series_id       INTEGER NOT NULL,
    observed_at     INTEGER NOT NULL,
    usd_per_hour    REAL    NOT NULL CHECK (usd_per_hour >= 0),
    fx_rate         REAL    CHECK (fx_rate > 0),
    PRIMARY KEY (series_id, observed_at)
) WITHOUT ROWID;
-- Rows written to spot_recent since its last merge (deletes by a prune are
-- not taken off: the merge comes a little early then).
ALTER TABLE catalog_state ADD COLUMN spot_recent_rows INTEGER NOT NULL DEFAULT 0;
