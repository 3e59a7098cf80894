-- The currency a source priced in and the rate (its units per US dollar) that
-- turned the price into usd_per_hour. USD sources are 'USD' at 1.
ALTER TABLE price_versions ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
ALTER TABLE price_versions ADD COLUMN fx_rate REAL NOT NULL DEFAULT 1 CHECK (fx_rate > 0);
-- A spot series keeps its source's currency; each observation keeps the rate
-- it was converted at, NULL for USD, so that long USD histories stay small.
ALTER TABLE spot_series ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
ALTER TABLE spot_observations ADD COLUMN fx_rate REAL CHECK (fx_rate > 0);
