-- PostgreSQL twin of sqlite/0023: how many batches pruning spot history has
-- deleted, and the latest cutoff it pruned before (microseconds since the
-- epoch), so that reads of spot history from that time on outlive a prune.
ALTER TABLE catalog_state ADD COLUMN spot_prunes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE catalog_state ADD COLUMN spot_pruned_before BIGINT NOT NULL DEFAULT 0;
