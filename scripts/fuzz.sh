#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ for a bounded time (FUZZ_SECONDS each, default 3) on a copy
# of its committed corpus, and fails on the first crash, printing the input that caused it.
# Installs cargo-fuzz (crates.io) when it is missing. Targets are built unoptimised (--dev):
# CI's short run wants the build to be quick more than the runs to be fast; for a long hunt run
# `cargo fuzz run TARGET -s none` in fuzz/ yourself.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-3}

say() { printf 'fuzz.sh: %s\n' "$*" >&2; }

if ! cargo fuzz --version >/dev/null 2>&1; then
  say "installing cargo-fuzz from crates.io"
  cargo install --locked -q cargo-fuzz
fi
cargo fuzz build -s none --dev
# `fuzz.sh --build-only`: CI builds the targets in the background, at low priority, while the
# test suite waits on its databases and brokers, then runs them.
[ "${1:-}" = "--build-only" ] && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in $(cargo fuzz list); do
  mkdir -p "$work/$target"
  cp -r "corpus/$target/." "$work/$target/" 2>/dev/null || true
  if ! cargo fuzz run -s none --dev "$target" "$work/$target" -- \
      -max_total_time="$seconds" -artifact_prefix="$work/" >"$work/$target.log" 2>&1; then
    say "$target failed:"
    tail -n 40 "$work/$target.log" >&2
    exit 1
  fi
  say "$target: $(grep -o 'Done [0-9]* runs' "$work/$target.log" || echo 'ran')"
done
