#!/usr/bin/env bash
# make bench / make bench-quick: set up .venv (with the `bench` extra) and
# redis-server as `make test` does, then run benchmarks/run.py. Arguments go
# to it (e.g. --profile full, --only tick, --db sqlite, --keep).
set -euo pipefail
# shellcheck source=deploy/dev/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../deploy/dev/lib.sh"
cd "$TAKT_ROOT"

takt_bootstrap
takt_ensure_redis_server
if ! "$TAKT_VENV/bin/python" -c 'import psutil, django_celery_beat, psycopg' >/dev/null 2>&1; then
    takt_say "Installing the benchmark extra into .venv"
    "$TAKT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev,bench]' ||
        takt_die "pip install -e '.[dev,bench]' failed (see above)"
fi
exec "$TAKT_VENV/bin/python" -m benchmarks.run "$@"
