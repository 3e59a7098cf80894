-- GPU counts become numbers: an instance that rents a slice of one GPU (an
-- eighth of an L4 is 0.125) is recorded like any other, and a price sheet may
-- name the MIG profile of a slice of an owned GPU. Every stored whole count is
-- exact in double precision.
ALTER TABLE instance_types ALTER COLUMN gpu_count TYPE DOUBLE PRECISION;
ALTER TABLE instance_types ADD COLUMN mig_profile TEXT;
