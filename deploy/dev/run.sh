#!/usr/bin/env bash
# make run: the whole of Takt on this machine, in the foreground.
#
#   web     Django runserver (admin, API)   http://127.0.0.1:${TAKT_WEB_PORT:-8000}/admin/
#   worker  Celery worker on queue "takt"
#   beat    Celery beat with Takt's scheduler
#   flower  Flower                          http://127.0.0.1:${TAKT_FLOWER_PORT:-5555}
#           with basic auth: FLOWER_BASIC_AUTH=user:password, else user
#           "takt" and a random password, printed below
#   redis   a private redis-server on 127.0.0.1:${TAKT_REDIS_PORT:-6380},
#           only when REDIS_URL is not set, with a random password (in
#           REDIS_URL for every process, in var/local.env for a second terminal)
#
# Ctrl-C stops them all (honcho). All state lives under var/, readable by
# this user only (takt_private_var: umask 077, var/ 0700).
set -euo pipefail
# shellcheck source=deploy/dev/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TAKT_ROOT"

takt_bootstrap
takt_private_var "$TAKT_VAR"
export PYTHONUNBUFFERED=1

web_port="${TAKT_WEB_PORT:-8000}"
flower_port="${TAKT_FLOWER_PORT:-5555}"
for p in "$web_port:TAKT_WEB_PORT" "$flower_port:TAKT_FLOWER_PORT"; do
    takt_port_free "${p%%:*}" ||
        takt_die "port ${p%%:*} on 127.0.0.1 is in use (another 'make run'?); pick another with ${p#*:}=PORT"
done
export TAKT_WEB_PORT="$web_port" TAKT_FLOWER_PORT="$flower_port"
# A run's admin page links to its task in this Flower.
export TAKT_FLOWER_URL="${TAKT_FLOWER_URL:-http://127.0.0.1:$flower_port}"
export TAKT_WORKER_CONCURRENCY="${TAKT_WORKER_CONCURRENCY:-2}"
# Flower reads FLOWER_BASIC_AUTH itself (user:password, comma-separated pairs).
if [ -z "${FLOWER_BASIC_AUTH:-}" ]; then
    export FLOWER_BASIC_AUTH="takt:$(takt_random_password)"
    flower_login="user ${FLOWER_BASIC_AUTH%%:*}, password ${FLOWER_BASIC_AUTH#*:}"
else
    flower_login="login from FLOWER_BASIC_AUTH"
fi

processes=(web worker beat flower)
if [ -z "${REDIS_URL:-}" ]; then
    takt_ensure_redis_server "Or use a Redis you already have:
    REDIS_URL=redis://127.0.0.1:6379/0 make run"
    port="${TAKT_REDIS_PORT:-6380}"
    case "$port" in '' | *[!0-9]*) takt_die "TAKT_REDIS_PORT must be a port number, got '$port'" ;; esac
    if ! takt_port_free "$port"; then
        free="$(takt_free_port)"
        takt_say "port $port is taken; the private Redis uses port $free"
        port="$free"
    fi
    mkdir -p var/redis
    # A password of its own at each start: any local user can reach a port
    # on 127.0.0.1. It goes to Redis in a file (owner-only, umask 077), not
    # on the command line, where `ps` shows it to everyone.
    redis_password="$(takt_random_password)"
    printf 'requirepass %s\n' "$redis_password" >var/redis/redis.conf
    export TAKT_REDIS_PORT="$port"
    export REDIS_URL="redis://:$redis_password@127.0.0.1:$port/0"
    processes+=(redis)
    redis_note="(private, stops with make run)"
else
    redis_note="(from REDIS_URL)"
fi

# var/local.env: what this make run chose (the Redis URL, DATABASE_URL if set,
# every TAKT_*/DJANGO_*/CELERY_* variable), read by every process started
# from this checkout: `manage.py shell`, run_job and explain_job in a second
# terminal talk to this Redis and database without exporting anything.
# It holds REDIS_URL's password: mode 0600 (a note on stderr says so).
python -m scheduler_project.localenv write var/local.env REDIS_URL DATABASE_URL >/dev/null ||
    takt_die "could not write var/local.env"

takt_say "Applying migrations ($(takt_describe_db))"
python manage.py migrate --noinput
python manage.py sync_jobs  # jobs declared in code (F-75); the beat syncs them again at start

takt_say "Making sure an admin user exists"
python manage.py takt_ensure_admin ||
    takt_warn "takt_ensure_admin failed (exit $?); continuing. Create a user with: .venv/bin/python manage.py createsuperuser"

cat <<EOF

  Takt is starting (${processes[*]}); Ctrl-C stops everything.
    admin   http://127.0.0.1:$TAKT_WEB_PORT/admin/
    flower  http://127.0.0.1:$TAKT_FLOWER_PORT  ($flower_login)
    redis   $(takt_mask_url "$REDIS_URL") $redis_note
    db      $(takt_describe_db)

  Commands from another terminal in this checkout use the same Redis and
  database (var/local.env), e.g.  .venv/bin/python manage.py run_job 1 --wait

EOF

# -e /dev/null: the environment comes from this shell only, so migrate and the
# processes always see the same DATABASE_URL/REDIS_URL (no stray .env file).
exec honcho start -e /dev/null -f deploy/dev/Procfile.dev "${processes[@]}"
