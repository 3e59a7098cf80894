-- Billing exports (PostgreSQL twin of sqlite/0012): what gpuplan keeps of each (source, billing account,
-- billing period). Raw rows are never stored, only these aggregates; a load
-- replaces all of a period's rows in one transaction. Hours and days are Unix
-- seconds (BIGINT): these tables hold up to millions of rows and are read by
-- range, so the compact form keeps them small and their indexes fast.

CREATE TABLE bill_loads (
    source          TEXT    NOT NULL,
    billing_account TEXT    NOT NULL,
    billing_period  TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    period_start    BIGINT  NOT NULL,
    period_end      BIGINT  NOT NULL,
    generation      BIGINT  NOT NULL CHECK (generation >= 1),
    state           TEXT    NOT NULL CHECK (state IN ('open', 'closing', 'final')),
    row_count       BIGINT  NOT NULL,
    gpu_rows        BIGINT  NOT NULL,
    gpu_hours       DOUBLE PRECISION    NOT NULL,
    -- [{currency, rows, billed_cost, effective_cost}]: never summed across currencies.
    totals_json     TEXT    NOT NULL,
    unmapped_json   TEXT    NOT NULL DEFAULT '{}',
    loaded_at       TEXT    NOT NULL,
    checked_at      TEXT    NOT NULL,
    PRIMARY KEY (source, billing_account, billing_period)
);

CREATE TABLE bill_restatements (
    source          TEXT    NOT NULL,
    billing_account TEXT    NOT NULL,
    billing_period  TEXT    NOT NULL,
    generation      BIGINT  NOT NULL,
    restated_at     TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    currency        TEXT    NOT NULL,
    row_count       BIGINT  NOT NULL,
    billed_cost     DOUBLE PRECISION    NOT NULL,
    effective_cost  DOUBLE PRECISION    NOT NULL,
    gpu_hours       DOUBLE PRECISION    NOT NULL,
    PRIMARY KEY (source, billing_account, billing_period, generation)
);

-- Rows billed in billing_period that correct the earlier period `corrects`.
CREATE TABLE bill_corrections (
    source          TEXT    NOT NULL,
    billing_account TEXT    NOT NULL,
    billing_period  TEXT    NOT NULL,
    corrects        TEXT    NOT NULL,
    currency        TEXT    NOT NULL,
    row_count       BIGINT  NOT NULL,
    billed_cost     DOUBLE PRECISION    NOT NULL,
    effective_cost  DOUBLE PRECISION    NOT NULL,
    PRIMARY KEY (source, billing_account, billing_period, corrects, currency)
);

CREATE TABLE bill_usage_hours (
    source          TEXT    NOT NULL,
    billing_account TEXT    NOT NULL,
    billing_period  TEXT    NOT NULL,
    start           BIGINT  NOT NULL,
    provider        TEXT    NOT NULL,
    account         TEXT    NOT NULL,
    team            TEXT    NOT NULL,
    region          TEXT    NOT NULL,
    instance_type   TEXT    NOT NULL,
    gpu_model       TEXT    NOT NULL,
    price_kind      TEXT    NOT NULL,
    currency        TEXT    NOT NULL,
    instance_hours  DOUBLE PRECISION,
    gpu_hours       DOUBLE PRECISION    NOT NULL,
    billed_cost     DOUBLE PRECISION    NOT NULL,
    effective_cost  DOUBLE PRECISION    NOT NULL
);
CREATE INDEX bill_usage_hours_by_load ON bill_usage_hours (source, billing_account, billing_period);
CREATE INDEX bill_usage_hours_by_start ON bill_usage_hours (start);

-- The same rows summed per UTC day, so answers by day or month over a year
-- read days, not hours.
CREATE TABLE bill_usage_days (
    source          TEXT    NOT NULL,
    billing_account TEXT    NOT NULL,
    billing_period  TEXT    NOT NULL,
    start           BIGINT  NOT NULL,
    provider        TEXT    NOT NULL,
    account         TEXT    NOT NULL,
    team            TEXT    NOT NULL,
    region          TEXT    NOT NULL,
    instance_type   TEXT    NOT NULL,
    gpu_model       TEXT    NOT NULL,
    price_kind      TEXT    NOT NULL,
    currency        TEXT    NOT NULL,
    instance_hours  DOUBLE PRECISION,
    gpu_hours       DOUBLE PRECISION    NOT NULL,
    billed_cost     DOUBLE PRECISION    NOT NULL,
    effective_cost  DOUBLE PRECISION    NOT NULL
);
CREATE INDEX bill_usage_days_by_load ON bill_usage_days (source, billing_account, billing_period);
CREATE INDEX bill_usage_days_by_start ON bill_usage_days (start);

CREATE TABLE bill_spend_days (
    source          TEXT    NOT NULL,
    billing_account TEXT    NOT NULL,
    billing_period  TEXT    NOT NULL,
    start           BIGINT  NOT NULL,
    provider        TEXT    NOT NULL,
    account         TEXT    NOT NULL,
    team            TEXT    NOT NULL,
    service_category TEXT   NOT NULL,
    charge_category TEXT    NOT NULL,
    gpu             BIGINT  NOT NULL CHECK (gpu IN (0, 1)),
    currency        TEXT    NOT NULL,
    billed_cost     DOUBLE PRECISION    NOT NULL,
    effective_cost  DOUBLE PRECISION    NOT NULL
);
CREATE INDEX bill_spend_days_by_load ON bill_spend_days (source, billing_account, billing_period);
CREATE INDEX bill_spend_days_by_start ON bill_spend_days (start);

CREATE TABLE bill_commitments (
    source          TEXT    NOT NULL,
    billing_account TEXT    NOT NULL,
    billing_period  TEXT    NOT NULL,
    commitment_id   TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    kind            TEXT,
    category        TEXT,
    unit            TEXT,
    regions_json    TEXT    NOT NULL,
    instance_types_json TEXT NOT NULL,
    untyped_cover   BIGINT  NOT NULL CHECK (untyped_cover IN (0, 1)),
    first_seen      BIGINT  NOT NULL,
    last_seen       BIGINT ,
    currency        TEXT    NOT NULL,
    PRIMARY KEY (source, billing_account, billing_period, commitment_id)
);

CREATE TABLE bill_commitment_hours (
    source          TEXT    NOT NULL,
    billing_account TEXT    NOT NULL,
    billing_period  TEXT    NOT NULL,
    commitment_id   TEXT    NOT NULL,
    start           BIGINT  NOT NULL,
    used_quantity   DOUBLE PRECISION,
    unused_quantity DOUBLE PRECISION,
    used_cost       DOUBLE PRECISION    NOT NULL,
    unused_cost     DOUBLE PRECISION    NOT NULL,
    covered_instance_hours DOUBLE PRECISION NOT NULL,
    covered_gpu_hours DOUBLE PRECISION  NOT NULL
);
CREATE INDEX bill_commitment_hours_by_load ON bill_commitment_hours (source, billing_account, billing_period);
CREATE INDEX bill_commitment_hours_by_start ON bill_commitment_hours (start);

-- Files read, as they were: one whose fingerprint (size, modification time)
-- is unchanged is not parsed again. periods_json lists the
-- [billing_account, billing_period] pairs it held.
CREATE TABLE bill_files (
    source          TEXT    NOT NULL,
    path            TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    periods_json    TEXT    NOT NULL,
    read_at         TEXT    NOT NULL,
    PRIMARY KEY (source, path)
);
