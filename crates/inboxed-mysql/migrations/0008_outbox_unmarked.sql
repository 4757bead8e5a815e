-- 0008: the record of the outbox relay's lock-held batches takes the name of what it holds, as
-- the other engines' migration 16 does (the reasoning is in the PostgreSQL file). Same template
-- rules as 0001; may run twice, and after migration 5 ran again (each DDL statement commits on
-- its own, so a cut-short run starts over), which creates the old table anew, empty: the old
-- table is renamed while the new one is not there, and dropped once it is.
SET @inboxed_ddl = (
    SELECT CASE
        WHEN SUM(table_name = '{{prefix}}outbox_unsettled') = 1
             AND SUM(table_name = '{{prefix}}outbox_unmarked') = 0
        THEN 'RENAME TABLE {{schema}}.`{{prefix}}outbox_unsettled`
                  TO {{schema}}.`{{prefix}}outbox_unmarked`'
        WHEN SUM(table_name = '{{prefix}}outbox_unsettled') = 1
        THEN 'DROP TABLE {{schema}}.`{{prefix}}outbox_unsettled`'
        ELSE 'DO 0'
    END
    FROM information_schema.tables
    WHERE CONCAT('`', table_schema, '`') = '{{schema}}'
      AND table_name IN ('{{prefix}}outbox_unsettled', '{{prefix}}outbox_unmarked')
);
PREPARE inboxed_ddl FROM @inboxed_ddl;
EXECUTE inboxed_ddl;
DEALLOCATE PREPARE inboxed_ddl;
