-- GPU counts become numbers: an instance that rents a slice of one GPU (an
-- eighth of an L4 is 0.125) is recorded like any other, and a price sheet may
-- name the MIG profile of a slice of an owned GPU. SQLite cannot change a
-- column's type, so the table is rebuilt with the same rows; whole counts read
-- back as the same numbers. The migration runs with foreign keys off and checks
-- them before it commits.
CREATE TABLE instance_types_new (
    provider        TEXT    NOT NULL,
    instance_type   TEXT    NOT NULL,
    gpu_model       TEXT    NOT NULL,
    gpu_count       REAL    NOT NULL CHECK (gpu_count >= 0),
    gpu_memory_gib  REAL,
    vcpus           INTEGER,
    memory_gib      REAL,
    first_seen_run  INTEGER NOT NULL REFERENCES sync_runs (id),
    gpu_form_factor TEXT    CHECK (gpu_form_factor IN ('sxm', 'pcie', 'nvl')),
    mig_profile     TEXT,
    PRIMARY KEY (provider, instance_type)
);
INSERT INTO instance_types_new
    (provider, instance_type, gpu_model, gpu_count, gpu_memory_gib, vcpus, memory_gib,
     first_seen_run, gpu_form_factor)
SELECT provider, instance_type, gpu_model, gpu_count, gpu_memory_gib, vcpus, memory_gib,
       first_seen_run, gpu_form_factor
FROM instance_types;
DROP TABLE instance_types;
ALTER TABLE instance_types_new RENAME TO instance_types;
