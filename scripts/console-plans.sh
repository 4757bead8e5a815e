#!/usr/bin/env bash
# The console's searches on a million rows: fills a scratch schema of PostgreSQL with 1,000,000
# store-then-process rows, 1,000,000 dead letters and 1,000,000 outbox rows, then runs each list statement the console
# runs (the files themselves, from crates/inboxed-postgres/sql) under EXPLAIN ANALYZE, with the
# generic plan PostgreSQL falls back to for a prepared statement (plan_cache_mode =
# force_generic_plan: no parameter folded in), for filters that match a lot, little and nothing.
# Prints each plan's rows read and time, and fails when a plan reads more than the window
# (100,000 rows and the 100 listed) from a table, or scans one whole.
#
#   DATABASE_URL=postgres://… scripts/console-plans.sh [rows]      (default 1000000)
#
# The schema (`console_plans`) is dropped at the start and at the end. 100,000 audit records
# (a tenth of the rows) stand for a long trail.
set -euo pipefail
url="${DATABASE_URL:-postgres://postgres@localhost:5432/test}"
rows="${1:-1000000}"
here="$(cd "$(dirname "$0")/.." && pwd)"
sql="${SQL_DIR:-$here/crates/inboxed-postgres/sql}"
inboxed="${INBOXED:-$here/target/debug/inboxed}"
schema=console_plans
window=100000

psql() { command psql "$url" -v ON_ERROR_STOP=1 -qtAX "$@"; }
render() { sed -e "s/{{schema}}/$schema/g" -e 's/{{prefix}}/inboxed_/g' "$sql/$1.sql"; }

psql -c "DROP SCHEMA IF EXISTS $schema CASCADE" 2>/dev/null
trap 'psql -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true' EXIT
"$inboxed" migrate --database-url "$url" --schema "$schema" >/dev/null

started=$(date +%s)
psql <<SQL
SET search_path = $schema;
INSERT INTO inboxed_inbox_messages
    (consumer_name, message_id, aggregate_id, payload, payload_hash, status, done_at, attempts)
SELECT 'consumer-' || (g % 10), 'm-' || g, 'acct-' || (g % 5000),
       convert_to('{"order":{"id":' || g || ',"cents":' || (g % 997) || '}}', 'UTF8'), '\x00',
       CASE WHEN g % 1000 = 0 THEN 'dead' WHEN g > $rows - 50 THEN 'pending' ELSE 'done' END,
       CASE WHEN g % 1000 = 0 OR g > $rows - 50 THEN NULL ELSE now() END, 1
FROM generate_series(1, $rows) g;
INSERT INTO inboxed_dead_letters
    (consumer_name, message_id, payload, reason, error, attempts, first_failed_at, last_failed_at)
SELECT 'consumer-' || (g % 10), 'm-' || g, convert_to('{"n":' || g || '}', 'UTF8'),
       CASE WHEN g % 100 = 0 THEN 'conflict' ELSE 'permanent' END,
       'refused: amount ' || g, 1, now() - (g || ' seconds')::interval,
       now() - (($rows - g) || ' seconds')::interval
FROM generate_series(1, $rows) g;
INSERT INTO inboxed_redrive_audit
    (actor, reason, consumer_name, selector, row_count, done_count, ids, action)
SELECT 'ops', 'replayed ' || g, 'consumer-' || (g % 10), 'all', 1, 0, ARRAY[g]::bigint[], 'replay'
FROM generate_series(1, $rows / 10) g;
INSERT INTO inboxed_outbox_messages
    (message_id, destination, ordering_key, payload, status, sent_at, attempts, last_error)
SELECT 'o-' || g, 'dest-' || (g % 10), CASE WHEN g % 7 = 0 THEN 'acct-' || (g % 5000) END,
       convert_to('{"order":{"id":' || g || ',"cents":' || (g % 997) || '}}', 'UTF8'),
       CASE WHEN g % 1000 = 0 THEN 'dead' WHEN g > $rows - 50 THEN 'pending' ELSE 'sent' END,
       CASE WHEN g % 1000 = 0 OR g > $rows - 50 THEN NULL ELSE now() END, 1,
       CASE WHEN g % 1000 = 0 THEN 'NOT_ROUTED' END
FROM generate_series(1, $rows) g;
ANALYZE inboxed_outbox_messages;
ANALYZE inboxed_inbox_messages;
ANALYZE inboxed_dead_letters;
ANALYZE inboxed_redrive_audit;
SQL
echo "filled $rows rows, $rows dead letters, $rows outbox rows and $(( rows / 10 )) audit records in $(( $(date +%s) - started ))s"

failed=0
# plan NAME FILE ARGS: EXPLAIN ANALYZE of FILE's statement with ARGS, under a generic plan.
plan() {
  local name="$1" file="$2" args="$3" out read ms
  out=$(psql <<SQL
SET search_path = $schema;
SET plan_cache_mode = force_generic_plan;
PREPARE q AS $(render "$file");
EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE q($args);
SQL
)
  read=$(printf '%s' "$out" | python3 -c '
import json, sys
plan = json.load(sys.stdin)[0]
def walk(node, acc):
    if node.get("Relation Name", "").startswith("inboxed_"):
        acc.append((node["Node Type"], node["Relation Name"],
                    node.get("Actual Rows", 0) * node.get("Actual Loops", 1)
                    + node.get("Rows Removed by Filter", 0) * node.get("Actual Loops", 1)))
    for child in node.get("Plans", []):
        walk(child, acc)
    return acc
nodes = walk(plan["Plan"], [])
print("%.1f" % plan["Execution Time"], max((n[2] for n in nodes), default=0),
      ";".join("%s on %s: %d" % n for n in nodes))')
  set -- $read
  ms=$1; local most=$2; shift 2
  printf '%-46s %8s ms  %8s rows read at most  %s\n' "$name" "$ms" "$most" "$*"
  if [ "$most" -gt $(( window + 1000 )) ] || printf '%s' "$*" | grep -q 'Seq Scan'; then
    echo "  ^ reads past the window" >&2
    failed=1
  fi
}

plan "rows: one consumer, any status"  rows_list "'consumer-3', NULL, NULL, NULL, NULL, NULL, NULL, 100, $window, NULL, NULL"
plan "rows: dead (1 in 1000)"          rows_list "NULL, 'dead', NULL, NULL, NULL, NULL, NULL, 100, $window, NULL, NULL"
plan "rows: matching nothing"          rows_list "'nobody', NULL, NULL, NULL, NULL, NULL, NULL, 100, $window, NULL, NULL"
plan "rows: payload contains, nothing" rows_list "NULL, NULL, NULL, NULL, NULL, NULL, '\\x6e6f7468696e67'::bytea, 100, $window, NULL, NULL"
plan "rows: json path, 1 in 997"      rows_list "'consumer-1', NULL, NULL, NULL, NULL, NULL, NULL, 100, $window, '[\"order\",\"cents\"]', '5'"
plan "rows: an aggregate"              rows_list "'consumer-1', NULL, 'acct-11', NULL, NULL, NULL, NULL, 100, $window, NULL, NULL"
plan "rows: a consumer's message id"   rows_by_key "'consumer-1', NULL, NULL, 'm-11', NULL, NULL, NULL, 100, NULL, NULL"
plan "letters: newest failures"        list_dead_letters "NULL, NULL, NULL, NULL, 100, NULL, NULL, $window, NULL, NULL, NULL"
plan "letters: a reason (1 in 100)"    list_dead_letters "NULL, 'conflict', NULL, NULL, 100, NULL, NULL, $window, NULL, NULL, NULL"
plan "letters: error text, nothing"    list_dead_letters "NULL, NULL, NULL, 'no such text', 100, NULL, NULL, $window, NULL, NULL, NULL"
plan "letters: payload contains, nothing" list_dead_letters "NULL, NULL, NULL, NULL, 100, NULL, NULL, $window, '\\x6e6f7468696e67'::bytea, NULL, NULL"
plan "letters: json path, 1 in 1000"   list_dead_letters "NULL, NULL, NULL, NULL, 100, NULL, NULL, $window, NULL, '[\"n\"]', '5000'"
plan "letters: a message id"           list_dead_letters "NULL, NULL, NULL, NULL, 100, NULL, 'm-999999', $window, NULL, NULL, NULL"
plan "outbox: newest, any status"      outbox_browse "NULL, NULL, NULL, NULL, NULL, 100, $window, NULL, NULL"
plan "outbox: dead (1 in 1000)"        outbox_browse "'dead', NULL, NULL, NULL, NULL, 100, $window, NULL, NULL"
plan "outbox: a destination, nothing"  outbox_browse "NULL, 'nowhere', NULL, NULL, NULL, 100, $window, NULL, NULL"
plan "outbox: payload contains, nothing" outbox_browse "NULL, NULL, NULL, NULL, '\\x6e6f7468696e67'::bytea, 100, $window, NULL, NULL"
plan "outbox: json path, 1 in 997"     outbox_browse "NULL, 'dest-1', NULL, NULL, NULL, 100, $window, '[\"order\",\"cents\"]', '5'"
plan "outbox: a message id"            outbox_load "NULL, 'o-999999'"
plan "outbox: dead of a destination"   outbox_select_dead "NULL, NULL, 'dest-3', NULL"
plan "audit: newest"                   audit_list "NULL, 100"
plan "audit: one consumer"             audit_list "'consumer-3', 100"
exit $failed
