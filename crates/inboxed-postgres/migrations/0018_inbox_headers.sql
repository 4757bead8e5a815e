-- 0018: the headers a stored message arrived with (a trace's traceparent, a tenant, a schema
-- version), so that a worker's handler sees what the consumer's would have. Same template
-- rules as 0001.
--
-- Text, not jsonb: a JSON array of [name, value] pairs in arrival order, the value a string,
-- or {"hex": "..."} for bytes that are not text or hold a NUL (docs/inbox-contract.md). NULL
-- when the message had none, so rows without headers store nothing. Nothing queries inside
-- it: the library reads it back whole with the row.
ALTER TABLE {{schema}}."{{prefix}}inbox_messages" ADD COLUMN headers text;
