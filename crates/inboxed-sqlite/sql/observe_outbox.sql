-- observe_outbox: the outbox's backlog by destination (see the PostgreSQL version). No
-- parameters. Times are milliseconds since the epoch.
WITH now_ms AS (SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS t),
open AS (
    SELECT destination, status, created_at, lease_expires_at
    FROM {{schema}}."{{prefix}}outbox_messages" WHERE status = 'pending'
    UNION ALL
    SELECT destination, status, created_at, lease_expires_at
    FROM {{schema}}."{{prefix}}outbox_messages" WHERE status = 'sending'
    UNION ALL
    SELECT destination, status, created_at, lease_expires_at
    FROM {{schema}}."{{prefix}}outbox_messages" WHERE status = 'dead'
    UNION ALL
    SELECT destination, status, created_at, lease_expires_at
    FROM {{schema}}."{{prefix}}outbox_messages"
    WHERE status = 'sent' AND sent_at >= (SELECT t FROM now_ms) - 60000
)
SELECT destination,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'sending') AS sending,
       count(*) FILTER (WHERE status = 'dead') AS dead,
       min(created_at) FILTER (WHERE status IN ('pending', 'sending')) AS oldest_unsent_ms,
       count(*) FILTER (WHERE status = 'sending' AND lease_expires_at < (SELECT t FROM now_ms))
           AS expired_leases,
       count(*) FILTER (WHERE status = 'sent') AS sent_last_minute
FROM open
GROUP BY destination
ORDER BY destination
