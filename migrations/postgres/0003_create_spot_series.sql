-- One row per spot price series (PostgreSQL twin of sqlite/0003).

CREATE TABLE spot_series (
    provider        TEXT    NOT NULL,
    instance_type   TEXT    NOT NULL,
    zone            TEXT    NOT NULL,
    region          TEXT    NOT NULL,
    PRIMARY KEY (provider, instance_type, zone)
);

INSERT INTO spot_series (provider, instance_type, zone, region)
SELECT provider, instance_type, zone, max(region)
FROM spot_observations
GROUP BY provider, instance_type, zone;
