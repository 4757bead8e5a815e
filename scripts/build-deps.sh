#!/usr/bin/env bash
# What building the workspace with all features needs beyond the Rust toolchain and gcc, both
# for librdkafka (feature `kafka`): cmake, and libcurl's headers (librdkafka 2.12's
# rdkafka_conf.c includes <curl/curl.h> even when built without curl, because its config.h
# defines WITH_OAUTHBEARER_OIDC as 0 and the source tests it with #ifdef). Installed with apt
# when running as root; otherwise the script fails naming the package. The default features
# need none of it.
set -euo pipefail

# `need <command> <Debian package that provides it>`
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    printf 'build-deps.sh: installing %s from Debian'"'"'s packages\n' "$2" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }
  fi
  command -v "$1" >/dev/null 2>&1 \
    || { printf 'build-deps.sh: %s is needed for --all-features (feature kafka): install it\n' "$2" >&2; exit 1; }
}

need cmake cmake
# curl-config comes with the headers.
need curl-config libcurl4-openssl-dev
