-- Counting good runs (the catalog's state marker for API caches) without a scan.
CREATE INDEX sync_runs_by_status ON sync_runs (status, id);
