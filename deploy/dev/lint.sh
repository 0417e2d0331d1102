#!/usr/bin/env bash
# make lint: ruff check and ruff format --check over the whole repository
# (settings in pyproject.toml), and mypy --strict on the pure core. Runs both and fails if either does.
set -euo pipefail
# shellcheck source=deploy/dev/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TAKT_ROOT"

takt_bootstrap
rc=0
takt_say "ruff check"
ruff check . || rc=1
takt_say "ruff format --check"
ruff format --check . || rc=1
takt_say "mypy --strict on the pure core"
mypy --strict --follow-imports=silent jobs/core runs/core heartbeats/core || rc=1
exit "$rc"
