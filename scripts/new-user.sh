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

# The Nth block (1-based) of a language (`rust`, `toml`) of a Markdown file, without fences.
block() {
  awk -v want="$2" -v lang="$3" '
    $0 ~ "^```" lang { n++; if (n == want) { on = 1; next } }
    /^```/ && on { exit }
    on { print }
  ' "$1"
}

# The crate's README (crates.io, docs.rs) carries the same quick start as the repository's.
for lang in toml rust; do
  diff <(block README.md 1 $lang) <(block crates/inboxed/README.md 1 $lang) >/dev/null \
    || { say "README.md's quick start ($lang) differs from crates/inboxed/README.md's: keep them the same"; exit 1; }
done

dir=target/new-user
rm -rf "$dir/src" "$dir/migrations" && mkdir -p "$dir/src" "$dir/migrations"
# The user's own schema, which `#[sqlx::test]` applies to each test's database.
echo 'CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);' \
  >"$dir/migrations/0001_accounts.sql"
# The manifest: the quick start's dependencies and the guide's dev-dependencies, as written,
# with the library's own crates taken from this checkout instead of crates.io.
local_crates() {
  sed -E "s#^(inboxed(-testkit)?) = \\{ version = \"[^\"]*\"#\\1 = { path = \"$root/crates/\\1\"#; s#^(inboxed(-testkit)?) = \"[^\"]*\"#\\1 = { path = \"$root/crates/\\1\" }#"
}
{
  printf '[package]\nname = "new-user"\nversion = "0.1.0"\nedition = "2024"\npublish = false\n\n'
  printf '# Not a member of the project'"'"'s workspace: a project of its own, as a user'"'"'s is.\n[workspace]\n\n'
  # The workspace's debug-info settings, so that the dependencies it built already (with the
  # same features) are reused from the shared target directory rather than built again: a
  # profile of its own gave every artefact another fingerprint. What is checked (the quick
  # start and the guide's test compile, and run) does not depend on debug information.
  sed -n '/^\[profile\.dev\]/,$p' Cargo.toml
  printf '\n'
  block README.md 1 toml | local_crates
  printf '\n'
  block docs/testing-your-handlers.md 1 toml | local_crates
} >"$dir/Cargo.toml"
grep -q "^inboxed = { path" "$dir/Cargo.toml" && grep -q "^inboxed-testkit = { path" "$dir/Cargo.toml" \
  || { cat "$dir/Cargo.toml"; say "the quick start's or the guide's dependencies do not name inboxed as expected"; exit 1; }
# The project's lock file: the same versions the workspace was tested with.
cp Cargo.lock "$dir/Cargo.lock"
{
  block README.md 1 rust
  printf '\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n'
  block docs/testing-your-handlers.md 1 rust | sed 's/^\(.\)/    \1/'
  printf '}\n'
} >"$dir/src/main.rs"
grep -q 'Consumer::new' "$dir/src/main.rs" || { say "README.md's first Rust block is not the quick start"; exit 1; }
grep -q 'sqlx::test' "$dir/src/main.rs" || { say "the guide's first Rust block is not the handler test"; exit 1; }
say "quick start: $(block README.md 1 rust | wc -l) lines; handler test: $(block docs/testing-your-handlers.md 1 rust | wc -l) lines"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
(cd "$dir" && cargo build -q && cargo test -q --no-run)

# The same server, another database: the URL's path swapped, its query kept.
db=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/inboxed_new_user")))' "$DATABASE_URL")
PGOPTIONS='-c client_min_messages=warning' psql -q "$DATABASE_URL" -c 'DROP DATABASE IF EXISTS inboxed_new_user WITH (FORCE)' -c 'CREATE DATABASE inboxed_new_user'
trap 'psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS inboxed_new_user WITH (FORCE)" >/dev/null 2>&1 || true' EXIT

say "the guide's handler test"
(cd "$dir" && DATABASE_URL="$db" cargo test -q)

say "the quick start, on RabbitMQ and PostgreSQL"
psql -q "$db" -f "$dir/migrations/0001_accounts.sql" -c "INSERT INTO accounts VALUES ('alice', 1000)"
python3 -c 'import pika' 2>/dev/null || python3 -m pip install -q 'pika==1.4.4' >/dev/null 2>&1 || true
python3 -c 'import pika' 2>/dev/null \
  || { say "pika (the Python AMQP client the producer uses) cannot be installed: pip install pika"; exit 1; }
# A queue left by an earlier run would hand its messages to this one: the consumer declares it
# afresh.
python3 - "$amqp" <<'PY'
import sys, pika
conn = pika.BlockingConnection(pika.URLParameters(sys.argv[1]))
conn.channel().queue_delete("charges")
conn.close()
PY
DATABASE_URL="$db" AMQP_URL="$amqp" "$CARGO_TARGET_DIR/debug/new-user" </dev/null >"$dir/run.log" 2>&1 &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null || true; psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS inboxed_new_user WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
fail() {
  cat "$dir/run.log"
  say "$*"
  exit 1
}
python3 - "$amqp" <<'PY' || fail "could not publish the charge"
import sys, time, uuid, pika
params = pika.URLParameters(sys.argv[1])
deadline = time.time() + 60
while True:  # the consumer declares the queue as it starts
    conn = pika.BlockingConnection(params)
    try:
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
PY
balance() { psql -tAq "$db" -c "SELECT balance FROM accounts WHERE id = 'alice'"; }
for _ in $(seq 1 60); do [ "$(balance)" = 750 ] && break; sleep 0.5; done
sleep 2 # the duplicate's turn
[ "$(balance)" = 750 ] || fail "alice's balance is $(balance), not 750"
kill -0 "$pid" 2>/dev/null || fail "the quick start stopped on its own"
kill -INT "$pid"
for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$pid" 2>/dev/null; then fail "Ctrl-C did not stop the quick start within 15 s"; fi
status=0
wait "$pid" || status=$?
[ "$status" = 0 ] || fail "the quick start exited with status $status"
# Both deliveries were acked (an unacked one would be back in the queue now that the consumer
# is gone), one key is recorded, and nothing was dead-lettered.
left=$(python3 - "$amqp" <<'PY'
import sys, pika
conn = pika.BlockingConnection(pika.URLParameters(sys.argv[1]))
print(conn.channel().queue_declare("charges", passive=True).method.message_count)
conn.close()
PY
)
[ "$left" = 0 ] || fail "$left deliveries were left unacked in the queue"
keys=$(psql -tAq "$db" -c "SELECT count(*) FROM inboxed_processed_messages")
dead=$(psql -tAq "$db" -c "SELECT count(*) FROM inboxed_dead_letters")
[ "$keys" = 1 ] && [ "$dead" = 0 ] || fail "$keys processed keys and $dead dead letters, not 1 and 0"
say "passed: the charge applied once (alice 1000 -> 750), both deliveries acked, one key, the consumer stopped cleanly"
