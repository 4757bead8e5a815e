-- extend_leases: the heartbeat. ?1 claim token, ?2 lease (ms), ?3 now (ms; NULL: this clock),
-- ?4 the batch's ids (JSON array; the claim token's index finds the rows, the ids narrow them)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET lease_expires_at = coalesce(?3, CAST(unixepoch('subsec') * 1000 AS INTEGER)) + ?2
WHERE claim_token = ?1 AND status = 'processing'
  AND id IN (SELECT value FROM json_each(?4))
