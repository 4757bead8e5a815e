#!/usr/bin/env bash
# A relay + worker pair: `inboxed relay` moves RabbitMQ messages into the inbox table (store,
# commit, ack), and this example's worker claims the rows and processes each one once.
#
# Run it (with RabbitMQ on localhost:5672 and PostgreSQL on localhost:5432, or AMQP_URL and
# DATABASE_URL set):
#
#   examples/relay-worker/run.sh
set -euo pipefail
cd "$(dirname "$0")"
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@localhost:5432/postgres}
export AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}

# INBOXED_BIN, RELAY_WORKER_BIN: binaries already built (the test script passes its own).
if [ -z "${INBOXED_BIN:-}" ] || [ -z "${RELAY_WORKER_BIN:-}" ]; then
  cargo build -q -p inboxed-cli -p relay-worker
  target=$(cargo metadata -q --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  INBOXED_BIN=${INBOXED_BIN:-$target/debug/inboxed}
  RELAY_WORKER_BIN=${RELAY_WORKER_BIN:-$target/debug/relay-worker}
fi

# The producer publishes first; the relay declares nothing, so the queue must exist.
"$RELAY_WORKER_BIN" publish
"$INBOXED_BIN" relay --from "$AMQP_URL" --queue inboxed-example-relay \
  --to "$DATABASE_URL" --consumer shipping &
relay=$!
trap 'kill -TERM $relay 2>/dev/null; wait $relay 2>/dev/null || true' EXIT
"$RELAY_WORKER_BIN" work
