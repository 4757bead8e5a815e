#!/usr/bin/env bash
# Shows that `detached` leaves a background service none of its caller's descriptors: a
# process started with it, as the test script starts services (forking into the background),
# must not hold the file this shell opened on descriptor 9. Fails (exit 1) when it does.
set -euo pipefail
cd "$(dirname "$0")/.."
. ./detached.sh
held=$(mktemp)
exec 9>"$held"
marker="inboxed-detached-check-$$"
detached setsid -f bash -c "exec -a $marker sleep 30"
pid=
for _ in $(seq 1 50); do
  pid=$(pgrep -f "^$marker" || true)
  [ -n "$pid" ] && break
  sleep 0.1
done
exec 9>&-
[ -n "$pid" ] || { echo "detached.sh check: the background process did not start" >&2; exit 1; }
leak=$(ls -l "/proc/$pid/fd" 2>/dev/null | grep -F -- "$held" || true)
kill "$pid" 2>/dev/null || true
rm -f "$held"
if [ -n "$leak" ]; then
  echo "detached.sh check: the background process holds the caller's file: $leak" >&2
  exit 1
fi
echo "detached.sh check: the background process holds none of the caller's descriptors"
