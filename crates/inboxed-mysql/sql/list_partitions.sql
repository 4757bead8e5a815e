-- list_partitions: the partitions of the time-partitioned table, in order: name, upper bound
-- (ms since the epoch of the id's time; NULL for pMAX) and InnoDB's row estimate. No
-- parameters. The schema compares in its rendered, quoted form (as migration 0003).
SELECT PARTITION_NAME,
       CASE WHEN PARTITION_DESCRIPTION = 'MAXVALUE' THEN NULL
            ELSE CAST(PARTITION_DESCRIPTION AS SIGNED) END AS upper_ms,
       CAST(coalesce(TABLE_ROWS, 0) AS SIGNED) AS row_estimate
FROM information_schema.PARTITIONS
WHERE CONCAT('`', TABLE_SCHEMA, '`') = '{{schema}}'
  AND TABLE_NAME = '{{prefix}}processed_log'
ORDER BY PARTITION_ORDINAL_POSITION
