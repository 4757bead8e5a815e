-- 0005: the time-partitioned dedup table, used instead of processed_messages by a store in
-- partitioned mode (PgStore::partitioned). Same columns; partitioned by received_at, so that an
-- expired day of keys goes with one DROP instead of millions of DELETEs. Same template rules as
-- 0001.
--
-- PostgreSQL only allows unique constraints that include the partition key, so this table has
-- no unique key on (consumer_name, message_id), and dedup cannot rest on one. It rests on a
-- lock instead: the claim first takes a transaction-scoped advisory lock on the key (lock_key),
-- then inserts only if no live partition holds the key (claim_partitioned), in a statement of
-- its own, so under READ COMMITTED it sees every commit made before the lock was granted. Two
-- deliveries of one key therefore serialize on the lock whatever partition their received_at
-- falls in, and the second finds the first's row. docs/retention.md gives the whole argument.
CREATE TABLE {{schema}}."{{prefix}}processed_log" (
    consumer_name  text        NOT NULL,
    message_id     text        NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    message_type   text,
    correlation_id text,
    payload_hash   bytea
) PARTITION BY RANGE (received_at);

-- The claim's probe of every live partition, and the lookup after a duplicate.
CREATE INDEX "{{prefix}}processed_log_key_idx"
    ON {{schema}}."{{prefix}}processed_log" (consumer_name, message_id);
-- The stats call's oldest key and last minute.
CREATE INDEX "{{prefix}}processed_log_expiry_idx"
    ON {{schema}}."{{prefix}}processed_log" (consumer_name, received_at);

-- Every partition of processed_log, and every table this mode detached but did not drop yet
-- (an interrupted pass): name (quoted, schema-qualified), bounds in ms since the epoch (NULL for
-- a detached table) and state: attached, pending (a DETACH CONCURRENTLY cut short) or detached.
-- Bounds are read back from the catalog's rendering of them, with DateStyle and TimeZone pinned
-- for the call so that the rendering parses back exactly whatever the session's settings.
CREATE FUNCTION {{schema}}."{{prefix}}processed_log_partitions"()
RETURNS TABLE (partition text, lower_ms float8, upper_ms float8, state text)
LANGUAGE sql STABLE
SET datestyle = 'ISO, YMD' SET timezone = 'UTC'
AS $fn$
    SELECT format('%I.%I', n.nspname, c.relname),
           extract(epoch FROM (regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                            'FROM \(''([^'']+)''\)'))[1]::timestamptz) * 1000,
           extract(epoch FROM (regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                            'TO \(''([^'']+)''\)'))[1]::timestamptz) * 1000,
           CASE WHEN i.inhdetachpending THEN 'pending' ELSE 'attached' END
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE i.inhparent = '{{schema}}."{{prefix}}processed_log"'::regclass
    UNION ALL
    SELECT format('%I.%I', n.nspname, c.relname), NULL, NULL, 'detached'
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.oid = '{{schema}}'::regnamespace
      AND c.relkind = 'r'
      AND c.relname ~ '^{{prefix}}processed_log_p[0-9]+$'
      AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
$fn$;

-- Creates partitions from the end of the last one (or the start of the current `step_secs`
-- period) until `ahead` periods past the current one, each ending on a multiple of
-- `step_secs` since the epoch, named <prefix>processed_log_p<start epoch>. Starting from the
-- last upper bound means a changed step never asks for a range that overlaps an existing
-- partition. Each is built as a plain table and then attached: ATTACH takes only a SHARE
-- UPDATE EXCLUSIVE lock on the parent, which claims do not conflict with, where CREATE TABLE
-- ... PARTITION OF would queue an ACCESS EXCLUSIVE lock behind every open claim and stall the
-- new ones behind it; the lock timeout makes a blocked attach give way rather than wait.
-- Returns how many it created. Serialized across processes by a transaction-scoped lock.
CREATE FUNCTION {{schema}}."{{prefix}}processed_log_create"(step_secs bigint, ahead integer)
RETURNS integer LANGUAGE plpgsql
SET datestyle = 'ISO, YMD' SET timezone = 'UTC' SET lock_timeout = '2s'
AS $fn$
DECLARE
    current_start bigint := floor(extract(epoch FROM now()) / step_secs)::bigint * step_secs;
    horizon bigint := current_start + (ahead + 1) * step_secs;
    last_upper bigint;
    start_s bigint;
    end_s bigint;
    part_name text;
    created integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('{{schema}}.{{prefix}}processed_log', 0));
    SELECT max(upper_ms) / 1000 INTO last_upper
    FROM {{schema}}."{{prefix}}processed_log_partitions"() WHERE state <> 'detached';
    start_s := greatest(current_start, coalesce(last_upper, current_start));
    WHILE start_s < horizon LOOP
        end_s := (floor(start_s::numeric / step_secs)::bigint + 1) * step_secs;
        part_name := '{{prefix}}processed_log_p' || start_s;
        EXECUTE format('CREATE TABLE %s.%I (LIKE {{schema}}."{{prefix}}processed_log" '
                       'INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', '{{schema}}', part_name);
        EXECUTE format('ALTER TABLE {{schema}}."{{prefix}}processed_log" ATTACH PARTITION '
                       '%s.%I FOR VALUES FROM (%L) TO (%L)',
                       '{{schema}}', part_name, to_timestamp(start_s), to_timestamp(end_s));
        created := created + 1;
        start_s := end_s;
    END LOOP;
    RETURN created;
END
$fn$;
