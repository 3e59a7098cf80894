-- The price catalog: what each sync saw, and every price's history.

CREATE TABLE sync_runs (
    id              INTEGER PRIMARY KEY,
    source          TEXT    NOT NULL,
    started_at      TEXT    NOT NULL,
    finished_at     TEXT,
    status          TEXT    NOT NULL CHECK (status IN ('running', 'ok', 'failed')),
    instance_types  INTEGER NOT NULL DEFAULT 0,
    prices_seen     INTEGER NOT NULL DEFAULT 0,
    prices_changed  INTEGER NOT NULL DEFAULT 0,
    prices_withdrawn INTEGER NOT NULL DEFAULT 0,
    spot_seen       INTEGER NOT NULL DEFAULT 0,
    spot_added      INTEGER NOT NULL DEFAULT 0,
    availability    INTEGER NOT NULL DEFAULT 0,
    skipped_json    TEXT    NOT NULL DEFAULT '{}',
    error           TEXT
);
CREATE INDEX sync_runs_by_source ON sync_runs (source, status, id);

CREATE TABLE instance_types (
    provider        TEXT    NOT NULL,
    instance_type   TEXT    NOT NULL,
    gpu_model       TEXT    NOT NULL,
    gpu_count       INTEGER NOT NULL CHECK (gpu_count >= 0),
    gpu_memory_gib  REAL,
    vcpus           INTEGER,
    memory_gib      REAL,
    first_seen_run  INTEGER NOT NULL REFERENCES sync_runs (id),
    PRIMARY KEY (provider, instance_type)
);

-- One row per distinct price identity; its values live in price_versions.
-- zone and offering_class use '' for "none" so the UNIQUE key treats them as values.
CREATE TABLE price_series (
    id              INTEGER PRIMARY KEY,
    provider        TEXT    NOT NULL,
    region          TEXT    NOT NULL,
    zone            TEXT    NOT NULL DEFAULT '',
    instance_type   TEXT    NOT NULL,
    price_kind      TEXT    NOT NULL,
    offering_class  TEXT    NOT NULL DEFAULT '',
    UNIQUE (provider, region, zone, instance_type, price_kind, offering_class),
    FOREIGN KEY (provider, instance_type) REFERENCES instance_types (provider, instance_type)
);

-- A new row only when something about the price changed, or it disappeared
-- (withdrawn = 1). The current price is the newest row of a series, if not withdrawn.
CREATE TABLE price_versions (
    id                      INTEGER PRIMARY KEY,
    series_id               INTEGER NOT NULL REFERENCES price_series (id),
    sync_run_id             INTEGER NOT NULL REFERENCES sync_runs (id),
    valid_from              TEXT    NOT NULL,
    withdrawn               INTEGER NOT NULL DEFAULT 0 CHECK (withdrawn IN (0, 1)),
    usd_per_hour            REAL    CHECK (usd_per_hour >= 0),
    upfront_usd             REAL    CHECK (upfront_usd >= 0),
    recurring_usd_per_hour  REAL    CHECK (recurring_usd_per_hour >= 0),
    source                  TEXT,
    available_regions       TEXT    NOT NULL DEFAULT '[]',
    max_instances           INTEGER CHECK (max_instances >= 0)
);
CREATE INDEX price_versions_by_series ON price_versions (series_id, id);

-- Every spot observation once; re-syncing the same history adds nothing.
CREATE TABLE spot_observations (
    provider        TEXT    NOT NULL,
    region          TEXT    NOT NULL,
    zone            TEXT    NOT NULL,
    instance_type   TEXT    NOT NULL,
    observed_at     TEXT    NOT NULL,
    usd_per_hour    REAL    NOT NULL CHECK (usd_per_hour >= 0),
    -- Instance type first: every history query names one.
    PRIMARY KEY (instance_type, zone, provider, observed_at)
) WITHOUT ROWID;
CREATE INDEX spot_observations_by_region ON spot_observations (provider, region, observed_at);

-- The latest availability signals of each provider; replaced whole by each good sync.
CREATE TABLE availability (
    provider        TEXT    NOT NULL,
    region          TEXT    NOT NULL,
    zone            TEXT    NOT NULL DEFAULT '',
    instance_type   TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    value           REAL    NOT NULL,
    sync_run_id     INTEGER NOT NULL REFERENCES sync_runs (id),
    PRIMARY KEY (provider, region, zone, instance_type, kind)
);
