#!/usr/bin/env bash
# A new user's first hour, from outside the workspace: a scratch crate that depends on the
# library by path and holds exactly README.md's quick start (src/main.rs) and the handler test
# of docs/testing-your-handlers.md (pasted below it, in a `#[cfg(test)] mod tests`, as the
# guide says). It builds, its test passes on PostgreSQL, and the quick start runs on RabbitMQ
# and PostgreSQL: a charge published twice (a producer's retry, from Python) moves the balance
# once, and Ctrl-C stops it cleanly.
#
# Needs DATABASE_URL (a PostgreSQL server; a database `inboxed_new_user` is made and dropped on
# it) and INBOXED_AMQP_URL (default the local RabbitMQ); scripts/test.sh calls it with both.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { printf 'new-user.sh: %s\n' "$*" >&2; }
: "${DATABASE_URL:?DATABASE_URL must name a PostgreSQL server}"
amqp=${INBOXED_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}

# The Nth ```rust block (1-based) of a Markdown file, without its fences.
block() {
  awk -v want="$2" '
    /^```rust/ { n++; if (n == want) { on = 1; next } }
    /^```/ && on { exit }
    on { print }
  ' "$1"
}

# The crate's README (crates.io, docs.rs) carries the same quick start as the repository's.
diff <(block README.md 1) <(block crates/inboxed/README.md 1) >/dev/null \
  || { say "README.md's quick start differs from crates/inboxed/README.md's: keep them the same"; exit 1; }

dir=target/new-user
rm -rf "$dir/src" "$dir/migrations" && mkdir -p "$dir/src" "$dir/migrations"
# The user's own schema, which `#[sqlx::test]` applies to each test's database.
echo 'CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);' \
  >"$dir/migrations/0001_accounts.sql"
cat >"$dir/Cargo.toml" <<EOF
[package]
name = "new-user"
version = "0.1.0"
edition = "2024"
publish = false

# Not a member of the project's workspace: a project of its own, as a user's is.
[workspace]

[dependencies]
inboxed = { path = "$root/crates/inboxed", features = ["postgres", "rabbitmq"] }
serde = { version = "1", features = ["derive"] }
sqlx = { version = "0.9", features = ["postgres"] }
tokio = { version = "1", features = ["macros", "rt-multi-thread", "signal"] }

[dev-dependencies]
inboxed-testkit = { path = "$root/crates/inboxed-testkit" }
sqlx = { version = "0.9", features = ["postgres", "macros", "migrate"] }
EOF
# The project's lock file: the same versions the workspace was tested with.
cp Cargo.lock "$dir/Cargo.lock"
{
  block README.md 1
  printf '\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n'
  block docs/testing-your-handlers.md 1 | sed 's/^\(.\)/    \1/'
  printf '}\n'
} >"$dir/src/main.rs"
grep -q 'Consumer::new' "$dir/src/main.rs" || { say "README.md's first Rust block is not the quick start"; exit 1; }
grep -q 'sqlx::test' "$dir/src/main.rs" || { say "the guide's first Rust block is not the handler test"; exit 1; }
say "quick start: $(block README.md 1 | wc -l) lines; handler test: $(block docs/testing-your-handlers.md 1 | wc -l) lines"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
(cd "$dir" && cargo build -q && cargo test -q --no-run)

server=${DATABASE_URL%/*}
db="$server/inboxed_new_user"
PGOPTIONS='-c client_min_messages=warning' psql -q "$DATABASE_URL" -c 'DROP DATABASE IF EXISTS inboxed_new_user WITH (FORCE)' -c 'CREATE DATABASE inboxed_new_user'
trap 'psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS inboxed_new_user WITH (FORCE)" >/dev/null 2>&1 || true' EXIT

say "the guide's handler test"
(cd "$dir" && DATABASE_URL="$db" cargo test -q)

say "the quick start, on RabbitMQ and PostgreSQL"
psql -q "$db" -f "$dir/migrations/0001_accounts.sql" -c "INSERT INTO accounts VALUES ('alice', 1000)"
python3 -c 'import pika' 2>/dev/null || pip install -q pika >/dev/null 2>&1 \
  || { say "pika (the Python AMQP client the producer uses) cannot be installed"; exit 1; }
DATABASE_URL="$db" AMQP_URL="$amqp" "$CARGO_TARGET_DIR/debug/new-user" </dev/null >"$dir/run.log" 2>&1 &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null || true; psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS inboxed_new_user WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
python3 - "$amqp" <<'EOF'
import sys, time, uuid, pika
params = pika.URLParameters(sys.argv[1])
deadline = time.time() + 60
while True:  # the consumer declares the queue as it starts
    try:
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        ch.queue_declare("charges", passive=True)
        break
    except pika.exceptions.ChannelClosedByBroker:
        conn.close()
        if time.time() > deadline:
            sys.exit("the quick start did not declare its queue within 60 s")
        time.sleep(0.5)
ch.confirm_delivery()
body = b'{"account":"alice","cents":250}'
props = pika.BasicProperties(message_id=str(uuid.uuid4()), delivery_mode=2)
for _ in range(2):  # a producer's retry: the same message, twice
    ch.basic_publish("", "charges", body, props)
conn.close()
EOF
balance() { psql -tAq "$db" -c "SELECT balance FROM accounts WHERE id = 'alice'"; }
for _ in $(seq 1 60); do [ "$(balance)" = 750 ] && break; sleep 0.5; done
sleep 2 # the duplicate's turn
[ "$(balance)" = 750 ] || { cat "$dir/run.log"; say "alice's balance is $(balance), not 750"; exit 1; }
kill -INT "$pid"
for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$pid" 2>/dev/null; then cat "$dir/run.log"; say "Ctrl-C did not stop the quick start within 15 s"; exit 1; fi
wait "$pid" || { cat "$dir/run.log"; say "the quick start exited with status $?"; exit 1; }
say "passed: the charge applied once (alice 1000 -> 750), the consumer stopped cleanly"
