-- What pruning spot history has done, so that a reader can tell a prune
-- from any other change: how many batches it has deleted, and the latest
-- cutoff it pruned before (microseconds since the epoch). Spot history read
-- from that time on is as it was before every prune so far, and a daemon
-- keeps such reads across a prune instead of reading them again after each
-- of its batches.
ALTER TABLE catalog_state ADD COLUMN spot_prunes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE catalog_state ADD COLUMN spot_pruned_before INTEGER NOT NULL DEFAULT 0;
