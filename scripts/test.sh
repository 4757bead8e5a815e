#!/usr/bin/env bash
# The full test suite, on the real engines.
#
# PostgreSQL: DATABASE_URL when set; otherwise the server on localhost:5432 (started with
# pg_ctlcluster when it is installed but down); otherwise a throwaway cluster made with the
# local initdb on port 55432 and stopped afterwards. With none of these the script fails:
# database tests never skip. PgBouncer is installed with apt when missing (its test starts its
# own instance). RabbitMQ and NATS: INBOXED_AMQP_URL / INBOXED_NATS_URL, else the local servers,
# started or installed when missing. SQLite needs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'test.sh: %s\n' "$*" >&2; }

reachable() {
  command -v psql >/dev/null 2>&1 && psql "$1" -tAc 'SELECT 1' >/dev/null 2>&1
}

pg_bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

throwaway_pg() {
  local bin dir port=55432
  bin=$(pg_bin)
  [ -n "$bin" ] || return 1
  dir="$PWD/target/pg-throwaway"
  rm -rf "$dir" && mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    # initdb refuses to run as root.
    chown -R postgres "$dir"
    su postgres -s /bin/sh -c "$bin/initdb -D '$dir/data' -A trust -U postgres >'$dir/initdb.log' 2>&1"
    su postgres -s /bin/sh -c "$bin/pg_ctl -D '$dir/data' -o '-p $port -k $dir -c max_connections=200' -l '$dir/server.log' -w start >/dev/null"
    trap "su postgres -s /bin/sh -c \"$bin/pg_ctl -D '$dir/data' -m immediate stop\" >/dev/null 2>&1 || true" EXIT
  else
    "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1
    "$bin/pg_ctl" -D "$dir/data" -o "-p $port -k $dir -c max_connections=200" -l "$dir/server.log" -w start >/dev/null
    trap "'$bin/pg_ctl' -D '$dir/data' -m immediate stop >/dev/null 2>&1 || true" EXIT
  fi
  export DATABASE_URL="postgres://postgres@localhost:$port/postgres"
}

if [ -n "${DATABASE_URL:-}" ]; then
  reachable "$DATABASE_URL" || { say "DATABASE_URL is set but not reachable"; exit 1; }
else
  local_url="postgres://postgres@localhost:5432/postgres"
  if ! reachable "$local_url" && command -v pg_ctlcluster >/dev/null 2>&1; then
    say "starting the local PostgreSQL cluster"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start || true
    for _ in $(seq 1 20); do reachable "$local_url" && break; sleep 0.5; done
  fi
  if reachable "$local_url"; then
    export DATABASE_URL="$local_url"
  else
    if [ -z "$(pg_bin)" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "installing PostgreSQL from Debian's packages"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    say "starting a throwaway PostgreSQL cluster"
    throwaway_pg || { say "no PostgreSQL available: set DATABASE_URL or install PostgreSQL"; exit 1; }
  fi
fi
say "PostgreSQL: ${DATABASE_URL}"

# The PgBouncer test starts its own pgbouncer; it fails, never skips, without one.
if ! command -v pgbouncer >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  say "installing pgbouncer from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null 2>&1 \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }
fi

# RabbitMQ (the adapter's tests): INBOXED_AMQP_URL when set, else the local broker on 5672,
# started (and installed with apt) when missing. Without one the script fails.
amqp_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }
if [ -z "${INBOXED_AMQP_URL:-}" ] && ! amqp_up; then
  if ! command -v rabbitmq-server >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing RabbitMQ from Debian's packages"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null; }
  fi
  command -v rabbitmq-server >/dev/null 2>&1 || { say "no RabbitMQ: install rabbitmq-server or set INBOXED_AMQP_URL"; exit 1; }
  say "starting RabbitMQ"
  rabbitmq-server -detached >/dev/null 2>&1 || true
  for _ in $(seq 1 120); do amqp_up && break; sleep 0.5; done
  amqp_up || { say "RabbitMQ did not come up on 5672"; exit 1; }
fi
say "RabbitMQ: ${INBOXED_AMQP_URL:-amqp://127.0.0.1:5672}"

# NATS with JetStream (the adapter's tests): INBOXED_NATS_URL when set, else the local server on
# 4222, started (and installed with apt) when missing. Without one the script fails.
nats_up() { (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; }
if [ -z "${INBOXED_NATS_URL:-}" ] && ! nats_up; then
  if ! command -v nats-server >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing nats-server from Debian's packages"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null; }
  fi
  nats=$(command -v nats-server || true)
  [ -n "$nats" ] || { say "no NATS: install nats-server or set INBOXED_NATS_URL"; exit 1; }
  say "starting NATS with JetStream"
  mkdir -p target/nats
  start-stop-daemon --start --oknodo --background --exec "$nats" -- \
    -a 127.0.0.1 -p 4222 -js -sd "$PWD/target/nats" -l "$PWD/target/nats/server.log" >/dev/null 2>&1 || true
  for _ in $(seq 1 40); do nats_up && break; sleep 0.25; done
  nats_up || { say "NATS did not come up on 4222"; exit 1; }
fi
say "NATS: ${INBOXED_NATS_URL:-nats://127.0.0.1:4222}"

# Doctests first, so that the run closes with the main suite's summary.
cargo test --workspace --all-features --doc
# CI's benchmark smoke run: same-run ratios only, failing on a gross regression, never on noise.
if [ -n "${INBOXED_BENCH_QUICK:-}" ]; then
  cargo run -q --release -p inboxed-bench -- --database-url "$DATABASE_URL" inbox --quick
fi
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --all-features --profile "${NEXTEST_PROFILE:-default}"
else
  cargo test --workspace --all-features --lib --bins --tests
fi
