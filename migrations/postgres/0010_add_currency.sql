-- The currency a source priced in and the rate that converted it (PostgreSQL
-- twin of sqlite/0010).
ALTER TABLE price_versions ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
ALTER TABLE price_versions ADD COLUMN fx_rate DOUBLE PRECISION NOT NULL DEFAULT 1 CHECK (fx_rate > 0);
ALTER TABLE spot_series ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
ALTER TABLE spot_observations ADD COLUMN fx_rate DOUBLE PRECISION CHECK (fx_rate > 0);
