-- load_attempts: the attempt counters of several keys of one consumer, read without counting
-- (see the PostgreSQL file). Keys without a counter are left out.
-- $1 consumer_name, $2 message ids as a JSON array of strings
SELECT CONVERT(message_id USING utf8mb4), attempts
FROM {{schema}}.`{{prefix}}attempts`
WHERE consumer_name = $1 AND message_id IN (
    SELECT CAST(k.id AS BINARY)
    FROM JSON_TABLE($2, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k
)
