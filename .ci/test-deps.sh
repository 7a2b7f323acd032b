#!/usr/bin/env bash
# The system tools the test suite needs, installed when missing (`make test-deps`, run by
# `make test`): headless Chromium (the MLflow UI checks), a PostgreSQL server (the
# PostgreSQL-backed MLflow tests) and docker-compose (validates docker/compose.yaml; no
# Docker engine needed). Debian/Ubuntu packages, installed with apt-get when this runs as
# root; otherwise it says what is missing and how to install it, and the tests that need
# a missing tool fail with the same advice.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
  || missing+=(chromium)
{ ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
  || [ -n "${SUBLAYER_PG_BIN:-}" ]; } || missing+=(postgresql)
{ command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1; } \
  || missing+=(docker-compose)

if [ ${#missing[@]} -eq 0 ]; then
  echo "test-deps: chromium, postgresql and docker-compose are present"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: installing ${missing[*]} with apt-get (about a minute)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  for pkg in "${missing[@]}"; do
    # docker-compose would recommend the whole Docker engine: only the CLI is needed
    extra=(); [ "$pkg" = docker-compose ] && extra=(--no-install-recommends)
    apt-get install -y -qq "${extra[@]}" "$pkg" >/dev/null
  done
  echo "test-deps: installed ${missing[*]}"
else
  echo "test-deps: missing ${missing[*]}; the tests that need them will fail." >&2
  echo "test-deps: install them as root: apt-get install -y ${missing[*]}" >&2
fi
