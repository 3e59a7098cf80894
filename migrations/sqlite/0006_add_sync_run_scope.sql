-- Spot-only syncs (AWS's spot_schedule) are runs too, but they leave list
-- prices and availability as they were: they must not count as a source's last
-- good full sync (freshness, failed-sync alerts).
ALTER TABLE sync_runs ADD COLUMN scope TEXT NOT NULL DEFAULT 'full'
    CHECK (scope IN ('full', 'spot_history'));
