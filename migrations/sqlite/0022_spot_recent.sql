-- New spot observations land here first, and move into spot_observations
-- a series at a time. spot_observations is clustered by series: at tens of
-- millions of observations a sync of 10,000 series wrote 10,000 pages of it
-- (one per series) to the WAL and back, and the write cost per observation
-- grew with the history. This table stays small, and a series' rows move
-- together, writing its last page of the history once for many of them.
--
-- Every row here is newer than every row of its series in spot_observations
-- (what the writes and the moves keep), so the newest observation of a
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
-- The rows spot_recent holds (each spot write moves those beyond a number
-- into the history), and the series the last move ended with: the next
-- one starts after it, going round the series.
ALTER TABLE catalog_state ADD COLUMN spot_recent_rows INTEGER NOT NULL DEFAULT 0;
ALTER TABLE catalog_state ADD COLUMN spot_merged_to INTEGER NOT NULL DEFAULT 0;
