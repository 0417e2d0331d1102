#!/usr/bin/env bash
# redis-last.sh ARG...: `make run`'s private redis-server (ARG... are its
# options, a config file first if any), stopped last. On Ctrl-C honcho
# sends SIGTERM to every process's group at once; a Redis that quit at
# once left the worker's warm shutdown (a running run's end, its lock, the
# worker's liveness key) talking to no Redis. On SIGTERM or SIGINT this waits until the other processes have
# closed their connections, at most TAKT_REDIS_STOP_WAIT seconds (default
# 4, under honcho's 5 s before SIGKILL), then stops Redis.
set -uo pipefail
port="${TAKT_REDIS_PORT:-6380}"
# The password make run put in REDIS_URL (redis://:password@host:port/0), for
# redis-cli below; in its environment, never on its command line.
password="$(printf '%s\n' "${REDIS_URL:-}" | sed -nE 's#^redis://[^:/@]*:([^@]+)@.*#\1#p')"
[ -n "$password" ] && export REDISCLI_AUTH="$password"
if command -v setpriv >/dev/null && command -v setsid >/dev/null; then
    # A session of its own: honcho signals this script's whole process
    # group, which must not reach Redis; and Redis still dies with this
    # script, should it be killed (--pdeathsig).
    setpriv --pdeathsig TERM setsid redis-server "$@" &
else
    redis-server "$@" &
fi
pid=$!
stopping=""

others() { # connections other than the asking one
    redis-cli -p "$port" client list 2>/dev/null | grep -Evc "cmd=client(\|list)? " || true
}

stop() {
    [ -n "$stopping" ] && return
    stopping=1
    local deadline=$((SECONDS + ${TAKT_REDIS_STOP_WAIT:-4}))
    while [ "$(others)" -gt 0 ] && [ "$SECONDS" -lt "$deadline" ]; do
        sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null
}

trap stop TERM INT
while kill -0 "$pid" 2>/dev/null; do
    wait "$pid"
done
wait "$pid"
