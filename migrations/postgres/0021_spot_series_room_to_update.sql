-- Every spot write stamps the series it touched (0020): a sync a second of
-- 10,000 series updates 10,000 rows a second. With full pages each update
-- writes a new row version elsewhere and new entries in the table's three
-- indexes, and the old versions wait for autovacuum (a minute apart at
-- least): in a minute the table held 30 times its rows, and reading the
-- series a write touched took 5 times as long. Half-empty pages let an
-- update put the new version beside the old one (a HOT update: none of the
-- updated columns is indexed), which the next update of that page clears.
-- CLUSTER rewrites the pages already written with that room.
ALTER TABLE spot_series SET (fillfactor = 50);
CLUSTER spot_series USING spot_series_pkey;
ALTER TABLE spot_series SET WITHOUT CLUSTER;
