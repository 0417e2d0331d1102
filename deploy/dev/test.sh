#!/usr/bin/env bash
# make test [ARGS="..."]: the pytest suite, with pytest's exit status.
# Arguments go to pytest. DATABASE_URL, if set, selects the database the
# tests run on (e.g. postgres://postgres@127.0.0.1:5432/takt); the default is
# SQLite under var/. The suite starts its own private redis-server on a free
# port, so only the binary must exist; the browser tests (tests/browser) need
# Debian's chromium, and the skewed-clock tests Debian's libfaketime, both
# installed here like redis-server.
#
# The files run in parallel on TAKT_TEST_WORKERS pytest-xdist workers
# (default: twice the CPU cores, as most tests wait on processes they
# started), each with its own test database and Redis (docs/testing.md);
# ARGS="-n 0" runs them one after another in this process.
set -euo pipefail
# shellcheck source=deploy/dev/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TAKT_ROOT"

takt_bootstrap
takt_ensure_redis_server
takt_ensure_chromium
takt_ensure_faketime
# Every test process, worker and beat imports Takt's modules, and each xdist
# worker collects the whole suite: Python's and pytest's compiled-code
# caches (__pycache__, assertion rewriting) save most of that. They are on
# by default; a shell with PYTHONDONTWRITEBYTECODE set would turn them off.
unset PYTHONDONTWRITEBYTECODE
workers="${TAKT_TEST_WORKERS:-$(($(nproc 2>/dev/null || echo 1) * 2))}"
takt_say "Running pytest on $(takt_describe_db), $workers workers"
exec "$TAKT_VENV/bin/pytest" -n "$workers" "$@"
