-- outbox_delete_sent: deletes claimed rows the broker confirmed, in place of marking them
-- sent, for a relay that keeps no sent rows (`sent_retention` zero); the ids deleted.
-- $1 row ids (int8[]), $2 claim token
--
-- Fenced by the token, as outbox_sent.sql is. A delete writes no second version of the row
-- (the mark does, with new entries in its indexes): the cheaper mark when no record of
-- sent messages is wanted. A deleted row counts as sent for its ordering key's later rows.
DELETE FROM {{schema}}."{{prefix}}outbox_messages"
WHERE id = ANY($1) AND claim_token = $2 AND status = 'sending'
RETURNING id
