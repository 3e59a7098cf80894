-- A Capacity Block offering reserves a fixed window: one instance type in one
-- zone is offered for several windows and instance counts at once, each its
-- own price. The window (start, end, instance count; '' and 0 for every other
-- kind) joins a series' identity.
ALTER TABLE price_series
    ADD COLUMN window_start   TEXT   NOT NULL DEFAULT '',
    ADD COLUMN window_end     TEXT   NOT NULL DEFAULT '',
    ADD COLUMN instance_count BIGINT NOT NULL DEFAULT 0 CHECK (instance_count >= 0);
DO $$
DECLARE key_name TEXT;
BEGIN
    SELECT conname INTO key_name FROM pg_constraint
    WHERE conrelid = 'price_series'::regclass AND contype = 'u';
    EXECUTE format('ALTER TABLE price_series DROP CONSTRAINT %I', key_name);
END $$;
ALTER TABLE price_series ADD CONSTRAINT price_series_identity
    UNIQUE (provider, region, zone, instance_type, price_kind, offering_class,
            window_start, window_end, instance_count);
