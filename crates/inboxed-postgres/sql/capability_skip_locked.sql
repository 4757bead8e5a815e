-- capability_skip_locked: whether the server takes FOR UPDATE SKIP LOCKED, which the workers'
-- and the relays' claims use. A subquery without a table locks nothing: only the syntax is
-- probed. No parameters.
SELECT 1 FROM (SELECT 1) AS probe FOR UPDATE SKIP LOCKED
