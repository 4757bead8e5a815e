-- 0013: the halving of a crashed batch (see the PostgreSQL migration). SQLite's relay holds
-- its rows under a lease only (a transaction open through a publish would hold the database's
-- one write lock), so it needs no record of lock-held batches.
ALTER TABLE {{schema}}."{{prefix}}outbox_messages" ADD COLUMN group_limit INTEGER;
