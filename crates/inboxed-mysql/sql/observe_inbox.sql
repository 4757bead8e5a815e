-- observe_inbox: every consumer's store-then-process rows that are not done, by status, for
-- the operator's gauges and health check. No parameters.
--
-- The status test reads the rows through an index that leads with the status (InnoDB has no
-- partial indexes), never through done rows, the bulk of the table. Times are milliseconds
-- since the epoch, as stored; sums are cast, since MySQL sums into DECIMAL.
SELECT CONVERT(consumer_name USING utf8mb4) AS consumer_name,
       CAST(SUM(status = 'pending') AS SIGNED) AS pending,
       CAST(SUM(status = 'processing') AS SIGNED) AS processing,
       CAST(SUM(status = 'dead') AS SIGNED) AS dead,
       -- Rows waiting out a retry backoff are not "behind": only rows ready to be claimed.
       MIN(CASE WHEN status = 'pending'
                 AND available_at <= FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)
            THEN received_at END) AS oldest_pending_ms,
       CAST(SUM(status = 'processing'
                AND lease_expires_at < FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)) AS SIGNED)
           AS expired_leases,
       MIN(CASE WHEN status = 'processing' THEN lease_expires_at END) AS next_lease_expiry_ms,
       -- Aggregates with a dead row: ordered workers park their later rows behind it.
       CAST(COUNT(DISTINCT CASE WHEN status = 'dead' THEN aggregate_id END) AS SIGNED)
           AS parked_aggregates
FROM {{schema}}.`{{prefix}}inbox_messages`
WHERE status IN ('pending', 'processing', 'dead')
GROUP BY consumer_name
ORDER BY consumer_name
