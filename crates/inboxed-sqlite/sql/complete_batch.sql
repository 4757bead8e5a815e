-- complete_batch: marks every row of a batch done in one statement (see the PostgreSQL
-- version). ?1 ids (JSON array), ?2 claim token. Returns the ids it completed.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'done', done_at = CAST(unixepoch('subsec') * 1000 AS INTEGER), claim_token = NULL,
    lease_expires_at = NULL, last_error = NULL
WHERE id IN (SELECT value FROM json_each(?1)) AND claim_token = ?2 AND status = 'processing'
RETURNING id
