-- Which spot write last touched each series, so that a reader holding every
-- series' current price reads again only those touched since (a sync every
-- second would otherwise have it read all 18,000 of a whole market again
-- after each). `spot_changes` counts spot writes; each stamps the series it
-- touches with its number, in its own transaction.
ALTER TABLE catalog_state ADD COLUMN spot_changes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spot_series ADD COLUMN changed_in INTEGER NOT NULL DEFAULT 0;
