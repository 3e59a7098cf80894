-- One row per spot price series (provider, instance type, zone), so the current
-- spot price is one index lookup per series instead of a scan of all history.

CREATE TABLE spot_series (
    provider        TEXT    NOT NULL,
    instance_type   TEXT    NOT NULL,
    zone            TEXT    NOT NULL,
    region          TEXT    NOT NULL,
    PRIMARY KEY (provider, instance_type, zone)
) WITHOUT ROWID;

INSERT INTO spot_series (provider, instance_type, zone, region)
SELECT provider, instance_type, zone, max(region)
FROM spot_observations
GROUP BY provider, instance_type, zone;
