-- A year of spot history across every region of every cloud is tens of
-- millions of observations. Each is kept as (series id, microseconds since
-- the epoch, price), clustered by series and time, instead of four texts and
-- a second index: a fifth of the bytes, and a series' window is one range
-- of one index. Each series carries its newest observation, kept by the
-- sync, so current spot prices are read from the series alone.
CREATE TABLE spot_series_new (
    id                  INTEGER PRIMARY KEY,
    provider            TEXT    NOT NULL,
    instance_type       TEXT    NOT NULL,
    zone                TEXT    NOT NULL,
    region              TEXT    NOT NULL,
    currency            TEXT    NOT NULL DEFAULT 'USD',
    last_observed_at    INTEGER,
    last_usd_per_hour   REAL,
    last_fx_rate        REAL,
    UNIQUE (provider, instance_type, zone)
);
INSERT INTO spot_series_new (provider, instance_type, zone, region, currency)
SELECT provider, instance_type, zone, region, currency FROM spot_series
ORDER BY instance_type, zone, provider;
-- An observation whose series row is missing keeps its history too.
INSERT INTO spot_series_new (provider, instance_type, zone, region)
SELECT provider, instance_type, zone, max(region) FROM spot_observations o
WHERE NOT EXISTS (SELECT 1 FROM spot_series_new s
                  WHERE s.provider = o.provider AND s.instance_type = o.instance_type
                    AND s.zone = o.zone)
GROUP BY provider, instance_type, zone;
CREATE INDEX spot_series_by_type ON spot_series_new (instance_type);

CREATE TABLE spot_observations_new (
    series_id       INTEGER NOT NULL REFERENCES spot_series_new (id),
    observed_at     INTEGER NOT NULL,
    usd_per_hour    REAL    NOT NULL CHECK (usd_per_hour >= 0),
    fx_rate         REAL    CHECK (fx_rate > 0),
    PRIMARY KEY (series_id, observed_at)
) WITHOUT ROWID;
-- The old times are RFC 3339 texts in UTC ('...T10:00:00.123456Z'): whole
-- seconds from unixepoch(), the fraction's digits padded to microseconds.
-- Series ids follow the old key's order (instance type, zone, provider), so
-- the old table's rows arrive in the new key's order without a sort.
INSERT INTO spot_observations_new (series_id, observed_at, usd_per_hour, fx_rate)
SELECT s.id,
       unixepoch(o.observed_at) * 1000000
         + CASE WHEN instr(o.observed_at, '.') > 0
                THEN CAST(substr(substr(o.observed_at, instr(o.observed_at, '.') + 1,
                                        length(o.observed_at) - instr(o.observed_at, '.') - 1)
                                 || '000000', 1, 6) AS INTEGER)
                ELSE 0 END,
       o.usd_per_hour, o.fx_rate
FROM spot_observations o
JOIN spot_series_new s
  ON s.provider = o.provider AND s.instance_type = o.instance_type AND s.zone = o.zone;

UPDATE spot_series_new
SET (last_observed_at, last_usd_per_hour, last_fx_rate) = (
    SELECT observed_at, usd_per_hour, fx_rate FROM spot_observations_new
    WHERE series_id = spot_series_new.id ORDER BY observed_at DESC LIMIT 1);

DROP TABLE spot_observations;
DROP TABLE spot_series;
ALTER TABLE spot_series_new RENAME TO spot_series;
ALTER TABLE spot_observations_new RENAME TO spot_observations;
