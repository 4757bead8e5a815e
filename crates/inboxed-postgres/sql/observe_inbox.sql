-- observe_inbox: every consumer's store-then-process rows that are not done, by status, for
-- the operator's gauges and health check. No parameters.
--
-- Each status is read through the partial index that serves it (pending: the claim index,
-- processing: the lease index, dead: migration 8's), never through done rows, which are the
-- bulk of the table: the cost follows the backlog. Times come back as milliseconds since the
-- epoch, as in every backend.
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
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'processing') AS processing,
       count(*) FILTER (WHERE status = 'dead') AS dead,
       -- Rows waiting out a retry backoff are not "behind": only rows ready to be claimed.
       (extract(epoch FROM min(received_at)
            FILTER (WHERE status = 'pending' AND available_at <= now())) * 1000)::bigint
           AS oldest_pending_ms,
       count(*) FILTER (WHERE status = 'processing' AND lease_expires_at < now())
           AS expired_leases,
       (extract(epoch FROM min(lease_expires_at) FILTER (WHERE status = 'processing'))
            * 1000)::bigint AS next_lease_expiry_ms,
       -- Aggregates with a dead row: ordered workers park their later rows behind it.
       count(DISTINCT aggregate_id) FILTER (WHERE status = 'dead') AS parked_aggregates
FROM open
GROUP BY consumer_name
ORDER BY consumer_name
