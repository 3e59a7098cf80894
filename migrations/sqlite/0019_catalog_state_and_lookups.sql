-- The catalog's state markers for the API's caches, raised in the transaction
-- of every good sync and every prune batch that deletes, so a request reads
-- them in one lookup (counting good runs took milliseconds once the sync log
-- held a season of 10-minute syncs). `list_generation` moves only when list
-- prices or instance types may have changed: a spot sync leaves it, and what
-- was read of list prices stays good.
CREATE TABLE catalog_state (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    generation      INTEGER NOT NULL,
    list_generation INTEGER NOT NULL
);
INSERT INTO catalog_state (id, generation, list_generation)
    SELECT 1, count(*), count(*) FROM sync_runs WHERE status = 'ok';

-- Each source's newest finished run and newest good one (freshness, the
-- overview's errors) are index seeks, however long the sync log.
CREATE INDEX sync_runs_newest ON sync_runs (source, scope, finished_at, id);

-- Current prices of some instance types (a GPU's, a provider's) are looked up
-- by type; the series' unique key starts with the region.
CREATE INDEX price_series_by_type ON price_series (provider, instance_type);
