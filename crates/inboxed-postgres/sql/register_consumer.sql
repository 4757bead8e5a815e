-- register_consumer: gives consumer $1 its compact id in the registry, once, before its
-- processor's first claim. Idempotent.
-- $1 consumer_name
--
-- Its own statement, outside any handler transaction (see migration 1). The NOT EXISTS keeps a
-- registered consumer from drawing an identity value on every start; ON CONFLICT settles two
-- processes registering the same new name at once.
INSERT INTO {{schema}}."{{prefix}}consumers" (name)
SELECT $1
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}."{{prefix}}consumers" WHERE name = $1)
ON CONFLICT (name) DO NOTHING
