-- PostgreSQL twin of sqlite/0020: each series stamped with the spot write
-- that last touched it, so a reader re-reads only the series touched since.
ALTER TABLE catalog_state ADD COLUMN spot_changes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spot_series ADD COLUMN changed_in BIGINT NOT NULL DEFAULT 0;
