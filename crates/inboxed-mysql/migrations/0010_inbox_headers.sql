-- 0010: the headers a stored message arrived with, as the other engines have it after their
-- migration 18 (the reasoning is in the PostgreSQL file). Same template rules as 0001; may run
-- twice. MySQL has no `ADD COLUMN IF NOT EXISTS` (MariaDB has): the column is added by a
-- prepared statement only when information_schema does not list it, as in 0003.
SET @inboxed_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE {{schema}}.`{{prefix}}inbox_messages`
                   ADD COLUMN headers LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL',
              'DO 0')
    FROM information_schema.columns
    WHERE CONCAT('`', table_schema, '`') = '{{schema}}'
      AND table_name = '{{prefix}}inbox_messages'
      AND column_name = 'headers'
);
PREPARE inboxed_ddl FROM @inboxed_ddl;
EXECUTE inboxed_ddl;
DEALLOCATE PREPARE inboxed_ddl;
