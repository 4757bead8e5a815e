-- observe_inbox: every consumer's store-then-process rows that are not done, by status, for
-- the operator's gauges and health check. No parameters.
--
-- Each status is read through the partial index that serves it, never through done rows (the
-- bulk of the table). Times are milliseconds since the epoch, as stored.
WITH open AS (
    SELECT consumer_name, status, aggregate_id, received_at, available_at, lease_expires_at
    FROM {{schema}}."{{prefix}}inbox_messages" WHERE status = 'pending'
    UNION ALL
    SELECT consumer_name, status, aggregate_id, received_at, available_at, lease_expires_at
    FROM {{schema}}."{{prefix}}inbox_messages" WHERE status = 'processing'
    UNION ALL
    SELECT consumer_name, status, aggregate_id, received_at, available_at, lease_expires_at
    FROM {{schema}}."{{prefix}}inbox_messages" WHERE status = 'dead'
)
SELECT consumer_name,
       sum(status = 'pending') AS pending,
       sum(status = 'processing') AS processing,
       sum(status = 'dead') AS dead,
       -- Rows waiting out a retry backoff are not "behind": only rows ready to be claimed.
       min(CASE WHEN status = 'pending'
                 AND available_at <= CAST(unixepoch('subsec') * 1000 AS INTEGER)
            THEN received_at END) AS oldest_pending_ms,
       sum(status = 'processing'
           AND lease_expires_at < CAST(unixepoch('subsec') * 1000 AS INTEGER)) AS expired_leases,
       min(CASE WHEN status = 'processing' THEN lease_expires_at END) AS next_lease_expiry_ms,
       -- Aggregates with a dead row: ordered workers park their later rows behind it.
       count(DISTINCT CASE WHEN status = 'dead' THEN aggregate_id END) AS parked_aggregates
FROM open
GROUP BY consumer_name
ORDER BY consumer_name
