"""One local set-up for every process started from the checkout.

`make run` decides where Redis is (a private redis-server on 6380 unless
REDIS_URL is set), which database is used, and whatever TAKT_*/DJANGO_*
variables it was started with; it writes them to ``var/local.env``. Every
process started from the same checkout afterwards (``manage.py shell``,
``run_job``, ``explain_job``, a second ``celery worker``) reads that file
when its settings load, so it talks to the same Redis and database
without exporting anything. A variable set in the environment wins over
the file. The test suite never reads it (pytest sets PYTEST_VERSION), so
a `make run` never changes what `make test` uses.

``TAKT_LOCAL_ENV_FILE`` names another file; empty means none.

The file holds passwords (the private Redis's, those of a DATABASE_URL or
REDIS_URL given to make run): it is written with mode 0600 whatever the
umask, in a folder made 0700, and make run names the variables that carry
one.

    python -m scheduler_project.localenv write VAR...   (used by make run)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from dotenv import dotenv_values, set_key

FILE_NAME = "local.env"
# Variables make run passes on (besides REDIS_URL and DATABASE_URL).
PREFIXES = ("TAKT_", "DJANGO_", "CELERY_")
# Set by the entry points themselves (manage.py, scheduler_project/celery.py).
NOT_WRITTEN = frozenset({"TAKT_LOCAL_ENV_FILE", "DJANGO_SETTINGS_MODULE", "CELERY_SKIP_CHECKS"})
# What each setting's value came from, for messages ("cannot reach Redis at …").
SOURCES: dict[str, str] = {}


def local_env_path(base_dir: Path) -> Path | None:
    """The file to read: TAKT_LOCAL_ENV_FILE if set (empty: none), else
    var/local.env in the checkout (also when make run was given another
    TAKT_VAR_DIR: the file names it)."""
    raw = os.environ.get("TAKT_LOCAL_ENV_FILE")
    if raw is None:
        return base_dir / "var" / FILE_NAME
    return Path(raw) if raw.strip() else None


def load_local_env(base_dir: Path) -> dict[str, str]:
    """Set each variable of the local file that the environment lacks;
    returns the ones taken from the file. Records where REDIS_URL and
    DATABASE_URL came from in SOURCES."""
    taken: dict[str, str] = {}
    path = local_env_path(base_dir)
    if path is not None and "PYTEST_VERSION" not in os.environ and path.is_file():
        for key, value in dotenv_values(path).items():
            if value is not None and key not in os.environ:
                os.environ[key] = value
                taken[key] = value
    for name in ("REDIS_URL", "DATABASE_URL"):
        if name in taken:
            SOURCES[name] = f"from {path}, written by make run"
        elif os.environ.get(name):
            SOURCES[name] = "from the environment"
        else:
            SOURCES[name] = "the default"
    return taken


def source_of(name: str) -> str:
    """Where setting `name` came from: "from the environment", "from
    …/var/local.env, written by make run", or "the default"."""
    return SOURCES.get(name, "the default")


def holds_password(value: str) -> bool:
    """Whether `value` is a URL with a password in it (redis://:pw@…)."""
    try:
        return bool(urlsplit(value).password)
    except ValueError:  # not a URL (a bad port, a stray bracket): nothing to find
        return False


def write_local_env(path: Path, names: list[str]) -> list[str]:
    """Write the named variables (and every TAKT_/DJANGO_/CELERY_ one) of
    this process's environment to `path`, replacing the file, mode 0600
    (its folder made 0700 if new) whatever the umask. Returns the names
    written."""
    names = sorted({*names, *(k for k in os.environ if k.startswith(PREFIXES))})
    names = [n for n in names if os.environ.get(n) and n not in NOT_WRITTEN]
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)  # a left-over one may be readable by others
    # Created owner-only, before a secret is in it: os.open's mode, not a
    # chmod afterwards, so it is never readable by others for a moment.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(
            "# Written by `make run` (deploy/dev/run.sh): the set-up every process started\n"
            "# from this checkout uses. A variable set in the environment wins.\n"
            "# It holds passwords: owner-only (0600), never commit or share it.\n"
        )
    for name in names:
        set_key(tmp, name, os.environ[name], quote_mode="always")
    os.chmod(tmp, 0o600)  # set_key rewrites the file through a temporary one of its own
    tmp.replace(path)
    return names


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "write":
        print("usage: python -m scheduler_project.localenv write FILE [VAR ...]", file=sys.stderr)
        return 2
    written = write_local_env(Path(argv[1]), argv[2:])
    print(f"{argv[1]}: {', '.join(written)}")
    secret = [name for name in written if holds_password(os.environ[name])]
    if secret:
        print(
            f"note: {argv[1]} holds the password of {', '.join(secret)} (mode 0600, "
            "readable by you only); keep it out of backups and bug reports",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
