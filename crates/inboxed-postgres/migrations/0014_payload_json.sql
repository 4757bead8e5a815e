-- 0014: the operator's search of payloads by JSON path (the console's `json` filter, rows_list
-- and rows_by_key). Same template rules as 0001.
--
-- A payload is raw bytes: JSON, or anything else a producer sent. A cast of a payload that is
-- not UTF-8 JSON raises an error, which would fail the whole search for one odd row; this reads
-- such a payload as NULL instead (never matching), and skips the parse (and the subtransaction
-- of the exception block) for a payload that does not even start like a JSON object or array.
-- Not PARALLEL SAFE: an exception block starts a subtransaction, which a parallel worker cannot
-- ("cannot start subtransactions during a parallel operation", seen by
-- scripts/console-plans.sh on a million rows), so PostgreSQL runs it in the leader.
CREATE FUNCTION {{schema}}."{{prefix}}payload_json"(payload bytea) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $fn$
BEGIN
    IF length(payload) = 0 OR get_byte(payload, 0) NOT IN (123, 91) THEN
        RETURN NULL;
    END IF;
    RETURN convert_from(payload, 'UTF8')::jsonb;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$fn$;
