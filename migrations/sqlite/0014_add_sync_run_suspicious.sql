-- Prices a sync stored although they look wrong (far below the same price
-- before, or far below the catalog's median for the GPU and kind): a JSON
-- array kept with the run for its report and the suspicious_price alerts.
ALTER TABLE sync_runs ADD COLUMN suspicious_json TEXT NOT NULL DEFAULT '[]';
-- Alert evaluation reads the recent runs that have some; they are rare.
CREATE INDEX sync_runs_suspicious ON sync_runs (finished_at) WHERE suspicious_json <> '[]';
