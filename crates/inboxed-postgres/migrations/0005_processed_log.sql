-- 0005: the time-partitioned dedup table, used instead of processed_messages by a store in
-- partitioned mode (PgStore::partitioned). Same columns; partitioned by received_s, so that an
-- expired day of keys goes with one DROP instead of millions of DELETEs. Same template rules as
-- 0001.
--
-- PostgreSQL only allows unique constraints that include the partition key, so this table has
-- no unique key on (consumer_id, message_key), and dedup cannot rest on one. It rests on a
-- lock instead: the claim first takes a transaction-scoped advisory lock on the key (lock_key),
-- then inserts only if no live partition holds the key (claim_partitioned), in a statement of
-- its own, so under READ COMMITTED it sees every commit made before the lock was granted. Two
-- deliveries of one key therefore serialize on the lock whatever partition their received_s
-- falls in, and the second finds the first's row. docs/retention.md gives the whole argument.
CREATE TABLE {{schema}}."{{prefix}}processed_log" (
    consumer_id  integer NOT NULL,
    received_s   integer NOT NULL
        DEFAULT (floor(extract(epoch FROM now())) - 1577836800)::integer,
    fingerprint  integer,
    message_key  bytea   NOT NULL
) PARTITION BY RANGE (received_s);

-- The claim's probe of every live partition, and the lookup after a duplicate.
CREATE INDEX "{{prefix}}processed_log_key_idx"
    ON {{schema}}."{{prefix}}processed_log" (consumer_id, message_key) WITH (fillfactor = 100);
-- The stats call's last minute and oldest key. A BRIN, a few bytes per thousand rows instead of
-- a btree's 20 a row: a partition is only ever appended to and then dropped whole, never
-- purged row by row, so its heap stays in arrival order and the block ranges stay narrow.
CREATE INDEX "{{prefix}}processed_log_received_idx"
    ON {{schema}}."{{prefix}}processed_log" USING brin (received_s)
    WITH (pages_per_range = 32, autosummarize = on);

-- Every partition of processed_log, and every table this mode detached but did not drop yet
-- (an interrupted pass): name (quoted, schema-qualified), bounds in ms since the epoch (NULL for
-- a detached table) and state: attached, pending (a DETACH CONCURRENTLY cut short) or detached.
-- Bounds are read back from the catalog's rendering of them (integers: seconds since 2020,
-- quoted when negative); a partition this mode did not create (DEFAULT, MINVALUE) gets NULLs.
CREATE FUNCTION {{schema}}."{{prefix}}processed_log_partitions"()
RETURNS TABLE (partition text, lower_ms float8, upper_ms float8, state text)
LANGUAGE sql STABLE
AS $fn$
    SELECT format('%I.%I', n.nspname, c.relname),
           ((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''?(-?[0-9]+)''?\)'))[1]::float8
            + 1577836800) * 1000,
           ((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''?(-?[0-9]+)''?\)'))[1]::float8
            + 1577836800) * 1000,
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
                       '%s.%I FOR VALUES FROM (%s) TO (%s)',
                       '{{schema}}', part_name, start_s - 1577836800, end_s - 1577836800);
        created := created + 1;
        start_s := end_s;
    END LOOP;
    RETURN created;
END
$fn$;

-- The oldest key of consumer `cid` in processed_log, in seconds since 2020, or NULL: the stats
-- call's oldest-key age. The BRIN cannot answer min() and the key index would read every key
-- the consumer has in the partition, so this searches time instead: the first live partition,
-- in bound order, holding any key of the consumer (one probe of its key index, which leads with
-- consumer_id); in it, windows doubling from its lower bound until one holds a key; then that
-- window halved down to one second. Each probe is an EXISTS over the BRIN ranges overlapping
-- its window, which stops at the first key found, so the call reads a few block ranges, not
-- the partition. Partitions without bounds (not created by this mode) are not searched.
CREATE FUNCTION {{schema}}."{{prefix}}processed_log_oldest"(cid integer) RETURNS integer
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    p record;
    probe text;
    has boolean;
    lo bigint;
    hi bigint;
    step bigint;
BEGIN
    FOR p IN SELECT partition, lower_ms, upper_ms
             FROM {{schema}}."{{prefix}}processed_log_partitions"()
             WHERE state = 'attached' AND lower_ms IS NOT NULL AND upper_ms IS NOT NULL
             ORDER BY lower_ms LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE consumer_id = $1)', p.partition)
            INTO has USING cid;
        CONTINUE WHEN NOT has;
        probe := format('SELECT EXISTS (SELECT 1 FROM %s WHERE consumer_id = $1 '
                        'AND received_s >= $2 AND received_s < $3)', p.partition);
        lo := (p.lower_ms / 1000)::bigint - 1577836800;
        hi := (p.upper_ms / 1000)::bigint - 1577836800;
        step := 60;
        LOOP
            EXECUTE probe INTO has USING cid, lo, least(lo + step, hi);
            EXIT WHEN has OR lo + step >= hi;
            lo := lo + step;
            step := step * 2;
        END LOOP;
        CONTINUE WHEN NOT has;
        step := least(lo + step, hi) - lo;
        WHILE step > 1 LOOP
            EXECUTE probe INTO has USING cid, lo, lo + step / 2;
            IF has THEN
                step := step / 2;
            ELSE
                lo := lo + step / 2;
                step := step - step / 2;
            END IF;
        END LOOP;
        RETURN lo;
    END LOOP;
    RETURN NULL;
END
$fn$;
