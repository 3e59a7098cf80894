-- Which reading of the files made a stored period (store::bills::period::READER):
-- a period made by an older one is rewritten from its files at the next
-- sync, without counting as a restatement. Periods stored before this step
-- were made by reading 1, which put every row under the source's configured
-- provider; forgetting the files read makes the next sync read them again.
-- Periods whose files are gone keep what they have.
ALTER TABLE bill_loads ADD COLUMN reader BIGINT NOT NULL DEFAULT 1;
DELETE FROM bill_files;
