-- complete_batch: marks every row of a batch done in one statement, inside the batch's
-- transaction, after all of its handlers succeeded (the worker's fast path).
-- $1 ids (bigint[]), $2 claim token
--
-- Fenced like complete.sql. Returns the ids it completed: if any is missing (its lease was
-- reaped), the worker rolls the whole batch back and redoes it row by row behind savepoints,
-- so that no business write of a lost row commits.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'done', done_at = now(), claim_token = NULL, lease_expires_at = NULL,
    last_error = NULL
WHERE id = ANY($1) AND claim_token = $2 AND status = 'processing'
RETURNING id
