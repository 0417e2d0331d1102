# shellcheck shell=bash
# Shared helpers for the development scripts (run.sh, test.sh, lint.sh).
# Sourced, never executed. Works on a fresh Debian/Ubuntu machine with only
# Python 3.11+, as root or not.
#
#   takt_bootstrap            .venv exists and has `pip install -e '.[dev]'`
#                             for the current pyproject.toml
#   takt_ensure_redis_server  the redis-server binary is on PATH (installs it
#                             with apt-get as root / passwordless sudo, or
#                             explains what to run and exits 1)
#   takt_ensure_chromium      Debian's /usr/bin/chromium (and an emoji font)
#                             for the browser tests, installed like redis-server
#   takt_ensure_faketime      Debian's libfaketime for the skewed-clock tests
#   takt_private_var DIR      DIR (var/) and what this shell writes from now on
#                             readable by the owner only (umask 077, DIR 0700,
#                             its database, env and Redis files 0600)
#   takt_port_free PORT       exit 0 if 127.0.0.1:PORT can be bound
#   takt_free_port            print a free TCP port on 127.0.0.1
#   takt_random_password      print a random password (URL-safe characters)

TAKT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TAKT_VENV="$TAKT_ROOT/.venv"
TAKT_STAMP="$TAKT_VENV/.takt-install-stamp"
TAKT_VAR="$TAKT_ROOT/var"

takt_say() { printf '==> %s\n' "$*" >&2; }
takt_warn() { printf 'warning: %s\n' "$*" >&2; }
takt_die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# Python used before .venv exists: TAKT_PYTHON, else the first python3* that
# is 3.11 or newer.
takt_find_python() {
    local cand
    for cand in ${TAKT_PYTHON:-} python3 python3.14 python3.13 python3.12 python3.11; do
        command -v "$cand" >/dev/null 2>&1 || continue
        if "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            printf '%s\n' "$cand"
            return 0
        fi
    done
    takt_die "Takt needs Python 3.11 or newer (python3 is: $(python3 --version 2>&1 || echo 'not installed')).
Install it, e.g.:
    sudo apt-get install python3 python3-venv
or point TAKT_PYTHON at a python3.11+ interpreter."
}

# takt_apt_install PKG...: apt-get update && apt-get install -y PKG... as root
# or through passwordless sudo. Returns 10 when apt-get is missing, 11 when
# neither root nor passwordless sudo is available, apt-get's status otherwise.
takt_apt_install() {
    local -a sudo=()
    command -v apt-get >/dev/null 2>&1 || return 10
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
            sudo=(sudo -n)
        else
            return 11
        fi
    fi
    takt_say "Installing $* with apt-get"
    ${sudo[@]+"${sudo[@]}"} apt-get update -q &&
        ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends "$@"
}

_takt_venv_ok() {
    [ -x "$TAKT_VENV/bin/python" ] &&
        "$TAKT_VENV/bin/python" -c 'import sys, pip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1
}

_takt_make_venv() { # PYTHON
    rm -rf "$TAKT_VENV"
    if "$1" -m venv "$TAKT_VENV" && _takt_venv_ok; then
        return 0
    fi
    rm -rf "$TAKT_VENV" # a venv without pip is useless; don't leave it behind
    return 1
}

takt_ensure_venv() {
    local py rc=0
    if _takt_venv_ok; then
        return 0
    fi
    py="$(takt_find_python)"
    if [ -e "$TAKT_VENV" ]; then
        takt_say "Recreating the broken virtualenv .venv with $py"
    else
        takt_say "Creating the virtualenv .venv with $py"
    fi
    _takt_make_venv "$py" && return 0

    # Debian and Ubuntu ship venv/ensurepip separately, in python3-venv.
    takt_apt_install python3-venv || rc=$?
    case "$rc" in
    0) _takt_make_venv "$py" && return 0 ;;
    11)
        printf '%s\n' "error: Python's venv module (ensurepip) is missing. Install it with:" \
            "    sudo apt-get install python3-venv" >&2
        exit 1
        ;;
    esac
    takt_die "could not create .venv with '$py -m venv' (see the messages above).
On Debian/Ubuntu the venv module comes from the package python3-venv (python$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv for that interpreter)."
}

_takt_pyproject_hash() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$TAKT_ROOT/pyproject.toml" | cut -d' ' -f1
    else
        "$TAKT_VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' \
            "$TAKT_ROOT/pyproject.toml"
    fi
}

# pip install -e '.[dev]' only when pyproject.toml changed since the last
# successful install (its hash is kept in .venv/.takt-install-stamp).
takt_ensure_deps() {
    local want have=""
    want="$(_takt_pyproject_hash)"
    [ -f "$TAKT_STAMP" ] && have="$(cat "$TAKT_STAMP")"
    if [ "$want" = "$have" ]; then
        return 0
    fi
    takt_say "Installing Takt and its dev dependencies into .venv (pyproject.toml changed; takes a minute the first time)"
    (cd "$TAKT_ROOT" && "$TAKT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]') ||
        takt_die "pip install -e '.[dev]' failed (see above); fix it and run again"
    printf '%s\n' "$want" >"$TAKT_STAMP"
}

# .venv plus dependencies. A lock keeps two scripts started at once (make run
# and make test) from installing into the same .venv together.
takt_bootstrap() {
    mkdir -p "$TAKT_VAR"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$TAKT_VAR/.bootstrap.lock"
        flock 9
    fi
    takt_ensure_venv
    takt_ensure_deps
    if command -v flock >/dev/null 2>&1; then
        flock -u 9
        exec 9>&-
    fi
    export VIRTUAL_ENV="$TAKT_VENV"
    export PATH="$TAKT_VENV/bin:$PATH"
}

# takt_ensure_redis_server [HINT]: HINT is an extra line printed when Redis
# cannot be installed (e.g. how to use an existing Redis instead).
takt_ensure_redis_server() {
    local hint="${1:-}" rc=0
    command -v redis-server >/dev/null 2>&1 && return 0
    takt_say "redis-server is not installed"
    takt_apt_install redis-server || rc=$?
    if [ "$rc" -eq 0 ] && command -v redis-server >/dev/null 2>&1; then
        return 0
    fi
    case "$rc" in
    0)
        printf '%s\n' "error: apt-get installed redis-server, but it is not on PATH ($PATH)." >&2
        ;;
    10)
        printf '%s\n' "error: redis-server is not installed and this is not a Debian/Ubuntu system." \
            "Install Redis (the redis-server binary) with your package manager, e.g.:" \
            "    brew install redis        # macOS" \
            "    sudo dnf install redis    # Fedora" >&2
        ;;
    11)
        printf '%s\n' "error: redis-server is not installed. Install it with:" \
            "    sudo apt-get update && sudo apt-get install -y redis-server" >&2
        ;;
    *)
        printf '%s\n' "error: installing redis-server with apt-get failed (see above). Try:" \
            "    sudo apt-get update && sudo apt-get install -y redis-server" >&2
        ;;
    esac
    [ -n "$hint" ] && printf '%s\n' "$hint" >&2
    exit 1
}

# takt_ensure_chromium: the browser tests (tests/browser) drive Debian's
# Chromium at /usr/bin/chromium through Playwright; Playwright's own browser
# download is never used (it needs the internet). The emoji font is there
# so that screenshots show the admin's ✅ and ❌ rather than empty boxes;
# without it the tests still run (a warning says so).
TAKT_CHROMIUM=/usr/bin/chromium
TAKT_EMOJI_FONT=/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf
takt_ensure_chromium() {
    local rc=0
    [ -x "$TAKT_CHROMIUM" ] && [ -f "$TAKT_EMOJI_FONT" ] && return 0
    takt_say "Chromium or its emoji font is not installed; the browser tests need them"
    takt_apt_install chromium fonts-noto-color-emoji || rc=$?
    if [ -x "$TAKT_CHROMIUM" ]; then
        [ -f "$TAKT_EMOJI_FONT" ] ||
            takt_warn "no emoji font: screenshots show boxes for emoji (sudo apt-get install -y fonts-noto-color-emoji)"
        return 0
    fi
    case "$rc" in
    0)
        printf '%s\n' "error: apt-get installed chromium, but $TAKT_CHROMIUM is missing." >&2
        ;;
    10)
        printf '%s\n' "error: $TAKT_CHROMIUM is missing and this is not a Debian/Ubuntu system." \
            "The browser tests launch Chromium from $TAKT_CHROMIUM: install Chromium and" \
            "link its binary there, or run the tests on Debian/Ubuntu." >&2
        ;;
    *)
        printf '%s\n' "error: Chromium is not installed (the browser tests need it). Install it with:" \
            "    sudo apt-get update && sudo apt-get install -y chromium fonts-noto-color-emoji" >&2
        ;;
    esac
    exit 1
}

# takt_ensure_faketime: the tests of a machine whose clock is off
# (tests/e2e/test_skewed_clock_e2e.py) shift one process's clock with
# Debian's libfaketime, installed like redis-server.
TAKT_LIBFAKETIME=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
takt_ensure_faketime() {
    [ -f "$TAKT_LIBFAKETIME" ] && return 0
    takt_say "libfaketime is not installed; the tests of skewed clocks need it"
    takt_apt_install faketime || true
    [ -f "$TAKT_LIBFAKETIME" ] && return 0
    printf '%s\n' "error: libfaketime is not installed ($TAKT_LIBFAKETIME). Install it with:" \
        "    sudo apt-get update && sudo apt-get install -y faketime" >&2
    exit 1
}

# takt_private_var DIR: var/ holds the SQLite database (every job, run
# output, API token hash, session), var/local.env (the Redis password) and
# the private Redis's files; on a shared machine none of it is anyone
# else's business. umask 077 makes everything this shell and its children
# (migrate, web, worker, beat, Redis) create owner-only; DIR itself becomes
# 0700, and the files an older make run left readable are closed too.
takt_private_var() { # DIR
    local dir="$1"
    umask 077
    mkdir -p "$dir"
    chmod 700 "$dir"
    find "$dir" -maxdepth 2 \( -name '*.sqlite3*' -o -name '*.env' -o -name '*.conf' \
        -o -name 'celerybeat-schedule*' -o -path "$dir/redis" \) -exec chmod go-rwx {} + 2>/dev/null ||
        takt_warn "could not make every file in $dir owner-only (chmod go-rwx failed)"
}

_takt_py() {
    if [ -x "$TAKT_VENV/bin/python" ]; then
        "$TAKT_VENV/bin/python" "$@"
    else
        "$(takt_find_python)" "$@"
    fi
}

takt_port_free() { # PORT
    _takt_py - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as redis-server does
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
}

takt_free_port() {
    _takt_py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# 32 URL-safe characters (A-Z a-z 0-9 - _): fits in a URL and a config
# file as it is.
takt_random_password() {
    _takt_py -c 'import secrets; print(secrets.token_urlsafe(24))'
}

# A URL with its password replaced by ***.
takt_mask_url() {
    printf '%s\n' "$1" | sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#'
}

# Print DATABASE_URL without its password, or the SQLite default.
takt_describe_db() {
    if [ -n "${DATABASE_URL:-}" ]; then
        takt_mask_url "$DATABASE_URL"
    else
        printf 'SQLite, %s\n' "${TAKT_VAR_DIR:-var}/takt.sqlite3"
    fi
}
