-- load_attempts: the attempt counters of several keys of one consumer, read without counting
-- (see the PostgreSQL file). Keys without a counter are left out.
-- $1 consumer_name, $2 message ids as a JSON array of strings
--
-- A join from the list by primary key: `message_id IN (SELECT … FROM JSON_TABLE …)` is
-- planned as a walk of every counter of the consumer with the list as a dependent subquery.
SELECT STRAIGHT_JOIN CONVERT(a.message_id USING utf8mb4), GREATEST(a.attempts - a.forgiven, 0)
FROM JSON_TABLE($2, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k
JOIN {{schema}}.`{{prefix}}attempts` a
    ON a.consumer_name = $1 AND a.message_id = CAST(k.id AS BINARY)
