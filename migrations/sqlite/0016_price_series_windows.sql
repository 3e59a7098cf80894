-- A Capacity Block offering reserves a fixed window: one instance type in one
-- zone is offered for several windows and instance counts at once, each its
-- own price. The window (start, end, instance count; '' and 0 for every other
-- kind) joins a series' identity. SQLite cannot change a table's UNIQUE key,
-- so the table is rebuilt with the same rows and ids; the migration runs with
-- foreign keys off and checks them before it commits.
CREATE TABLE price_series_new (
    id              INTEGER PRIMARY KEY,
    provider        TEXT    NOT NULL,
    region          TEXT    NOT NULL,
    zone            TEXT    NOT NULL DEFAULT '',
    instance_type   TEXT    NOT NULL,
    price_kind      TEXT    NOT NULL,
    offering_class  TEXT    NOT NULL DEFAULT '',
    price_scope     TEXT    NOT NULL DEFAULT 'instance'
        CHECK (price_scope IN ('instance', 'gpu_only')),
    window_start    TEXT    NOT NULL DEFAULT '',
    window_end      TEXT    NOT NULL DEFAULT '',
    instance_count  INTEGER NOT NULL DEFAULT 0 CHECK (instance_count >= 0),
    UNIQUE (provider, region, zone, instance_type, price_kind, offering_class,
            window_start, window_end, instance_count),
    FOREIGN KEY (provider, instance_type) REFERENCES instance_types (provider, instance_type)
);
INSERT INTO price_series_new
    (id, provider, region, zone, instance_type, price_kind, offering_class, price_scope)
SELECT id, provider, region, zone, instance_type, price_kind, offering_class, price_scope
FROM price_series;
DROP TABLE price_series;
ALTER TABLE price_series_new RENAME TO price_series;
