-- outbox_select_dead: the dead rows a filter selects, locked for the retry or discard that
-- follows in the same transaction, in insert order.
-- $1 row ids (a JSON array, or NULL), $2 message_id, $3 destination, $4 ordering_key (each
-- NULL: any)
SELECT id
FROM {{schema}}.`{{prefix}}outbox_messages`
WHERE status = 'dead'
  AND ($1 IS NULL OR JSON_CONTAINS($1, CAST(id AS CHAR)))
  AND ($2 IS NULL OR message_id = $2)
  AND ($3 IS NULL OR destination = $3)
  AND ($4 IS NULL OR ordering_key = $4)
ORDER BY id
FOR UPDATE
