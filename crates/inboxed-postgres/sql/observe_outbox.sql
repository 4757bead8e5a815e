-- observe_outbox: the outbox's backlog by destination, for the operator's gauges, health and
-- alerts. No parameters.
--
-- Each status is read through its partial index (pending, sending's lease index, dead), and
-- the sent rows of the last minute through the index on sent_at: never the bulk of sent rows.
-- Times come back as milliseconds since the epoch.
WITH open AS (
    SELECT destination, status, created_at, lease_expires_at, NULL::timestamptz AS sent_at
    FROM {{schema}}."{{prefix}}outbox_messages" WHERE status = 'pending'
    UNION ALL
    SELECT destination, status, created_at, lease_expires_at, NULL
    FROM {{schema}}."{{prefix}}outbox_messages" WHERE status = 'sending'
    UNION ALL
    SELECT destination, status, created_at, lease_expires_at, NULL
    FROM {{schema}}."{{prefix}}outbox_messages" WHERE status = 'dead'
    UNION ALL
    SELECT destination, status, created_at, lease_expires_at, sent_at
    FROM {{schema}}."{{prefix}}outbox_messages"
    WHERE status = 'sent' AND sent_at >= now() - interval '1 minute'
)
SELECT destination,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'sending') AS sending,
       count(*) FILTER (WHERE status = 'dead') AS dead,
       -- Written and not yet confirmed, backoffs included: how far behind the relays are.
       (extract(epoch FROM min(created_at) FILTER (WHERE status IN ('pending', 'sending')))
            * 1000)::bigint AS oldest_unsent_ms,
       count(*) FILTER (WHERE status = 'sending' AND lease_expires_at < now())
           AS expired_leases,
       count(*) FILTER (WHERE status = 'sent') AS sent_last_minute
FROM open
GROUP BY destination
ORDER BY destination
