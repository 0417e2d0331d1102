#!/usr/bin/env bash
# make test-stress [ARGS="..."]: `make test` with as many busy processes
# beside it as the machine has cores (at nice 0, as the tests run), the
# clock left alone: a test that waits for a moment instead of a state fails
# here. TAKT_STRESS_ROUNDS=3 runs the suite three times in a row and stops
# at the first round that fails.
set -euo pipefail
# shellcheck source=deploy/dev/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TAKT_ROOT"

takt_bootstrap
cores="$(nproc 2>/dev/null || echo 1)"
rounds="${TAKT_STRESS_ROUNDS:-1}"
burners=()
stop_burners() {
    if [ "${#burners[@]}" -gt 0 ]; then
        kill "${burners[@]}" 2>/dev/null || true
        wait "${burners[@]}" 2>/dev/null || true
    fi
}
trap stop_burners EXIT
for _ in $(seq "$cores"); do
    nice -n 0 "$TAKT_VENV/bin/python" -c 'while True: pass' &
    burners+=("$!")
done
takt_say "$cores CPU burners started (pids ${burners[*]})"
for round in $(seq "$rounds"); do
    takt_say "Stress round $round of $rounds"
    started=$SECONDS
    bash deploy/dev/test.sh "$@"
    takt_say "Stress round $round passed in $((SECONDS - started)) s"
done
