-- PostgreSQL twin of sqlite/0022: new spot observations land in a small
-- table and move into spot_observations in batches, so a sync does not
-- write a page of the history's index per series it touches. Every row here
-- is newer than every row of its series in spot_observations. No foreign
-- key: each row's check cost a third of a sync's write, and the history's
-- key checks every row that moves there.
CREATE TABLE spot_recent (
    series_id       BIGINT  NOT NULL,
    observed_at     BIGINT  NOT NULL,
    usd_per_hour    DOUBLE PRECISION NOT NULL CHECK (usd_per_hour >= 0),
    fx_rate         DOUBLE PRECISION CHECK (fx_rate > 0),
    PRIMARY KEY (series_id, observed_at)
);
ALTER TABLE catalog_state ADD COLUMN spot_recent_rows BIGINT NOT NULL DEFAULT 0;
ALTER TABLE catalog_state ADD COLUMN spot_merged_to BIGINT NOT NULL DEFAULT 0;
