#!/usr/bin/env bash
# make test [ARGS="..."]: the pytest suite, with pytest's exit status.
# Arguments go to pytest. DATABASE_URL, if set, selects the database the
# tests run on (e.g. postgres://postgres@127.0.0.1:5432/takt); the default is
# SQLite under var/. The suite starts its own private redis-server on a free
# port, so only the binary must exist; the browser tests (tests/browser) need
# Debian's chromium, installed here like redis-server.
set -euo pipefail
# shellcheck source=deploy/dev/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TAKT_ROOT"

takt_bootstrap
takt_ensure_redis_server
takt_ensure_chromium
takt_say "Running pytest on $(takt_describe_db)"
exec "$TAKT_VENV/bin/pytest" "$@"
