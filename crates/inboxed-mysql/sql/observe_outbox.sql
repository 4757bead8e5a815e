-- observe_outbox: the outbox's rows that are not sent, and those sent in the last minute, by
-- destination, for the operator's gauges. No parameters.
--
-- Read through the indexes that lead with the status (InnoDB has no partial indexes), never
-- through the sent rows of more than a minute ago, the bulk of the table. Sums are cast, since
-- MySQL sums into DECIMAL.
SELECT destination,
       CAST(SUM(status = 'pending') AS SIGNED) AS pending,
       CAST(SUM(status = 'sending') AS SIGNED) AS sending,
       CAST(SUM(status = 'dead') AS SIGNED) AS dead,
       MIN(CASE WHEN status IN ('pending', 'sending') THEN created_at END) AS oldest_unsent_ms,
       CAST(SUM(status = 'sending'
                AND lease_expires_at < FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)) AS SIGNED)
           AS expired_leases,
       CAST(SUM(status = 'sent') AS SIGNED) AS sent_last_minute
FROM (
    SELECT destination, status, created_at, lease_expires_at
    FROM {{schema}}.`{{prefix}}outbox_messages`
    WHERE status IN ('pending', 'sending', 'dead')
    UNION ALL
    SELECT destination, status, created_at, lease_expires_at
    FROM {{schema}}.`{{prefix}}outbox_messages`
    WHERE status = 'sent' AND sent_at >= FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) - 60000
) AS open_rows
GROUP BY destination
ORDER BY destination
