-- Pruning old sync runs must find, for each run, whether a price version still
-- refers to it; without this index that is a scan of every version per run.
CREATE INDEX price_versions_by_run ON price_versions (sync_run_id);
