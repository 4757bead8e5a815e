#!/usr/bin/env bash
# What building the workspace with all features needs beyond the Rust toolchain and gcc:
# cmake, for librdkafka (feature `kafka`). Installed with apt when running as root; otherwise
# the script fails naming the package. The default features need none of it.
set -euo pipefail
if ! command -v cmake >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    printf 'build-deps.sh: installing cmake from Debian'"'"'s packages\n' >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >/dev/null; }
  fi
  command -v cmake >/dev/null 2>&1 \
    || { printf 'build-deps.sh: cmake is needed for --all-features (feature kafka): install it\n' >&2; exit 1; }
fi
