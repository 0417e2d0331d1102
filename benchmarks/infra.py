"""Processes and databases the benchmark owns: a private redis-server on a
free port, a SQLite file in a temporary directory, the PostgreSQL database
``takt_bench`` (created and dropped here), and celery beat/worker children.

Every child runs in its own session and is stopped with its whole process
group; every wait has a deadline. Nothing here touches the machine's own
Redis (6379) or any other database.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.processes import ROOT, free_port
from tests.processes import Proc as BaseProc

PG_DB_NAME = "takt_bench"
DEFAULT_PG_URL = "postgres://postgres@127.0.0.1:5432"
STARTUP_TIMEOUT_S = 60

# Every process started here, so that a crash or Ctrl-C still stops them.
_LIVE: list[Proc] = []


class Proc(BaseProc):
    """A benchmark child process: remembered until stopped, so `stop_all`
    can end whatever an error left running."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        super().__init__(name, argv, env, log_dir)
        _LIVE.append(self)

    def wait_for(self, text: str, timeout: float = STARTUP_TIMEOUT_S) -> None:
        super().wait_for(text, timeout)

    def rss_bytes(self) -> int:
        import psutil

        return int(psutil.Process(self.pid).memory_info().rss)

    def stop(self) -> None:
        super().stop()
        if self in _LIVE:
            _LIVE.remove(self)


def stop_all() -> None:
    for proc in reversed(list(_LIVE)):
        proc.stop()


def start_redis(workdir: Path, log_dir: Path) -> tuple[Proc, str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(workdir)]  # fmt: skip
    proc = Proc("redis", argv, dict(os.environ), log_dir)
    proc.wait_for("Ready to accept connections", timeout=15)
    return proc, f"redis://127.0.0.1:{port}/0"


def sqlite_url(workdir: Path) -> str:
    return f"sqlite:///{workdir / 'bench.sqlite3'}"


def _pg_admin(base_url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(f"{base_url}/postgres", autocommit=True, connect_timeout=3)


def create_postgres(base_url: str = DEFAULT_PG_URL) -> str | None:
    """(Re)create takt_bench; None when PostgreSQL does not answer."""
    try:
        with _pg_admin(base_url) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {PG_DB_NAME} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {PG_DB_NAME}")
    except Exception as exc:  # no server, no driver, no rights: skip the PG rows
        print(f"PostgreSQL at {base_url} unavailable ({type(exc).__name__}: {exc})".strip())
        return None
    return f"{base_url}/{PG_DB_NAME}"


def drop_postgres(base_url: str = DEFAULT_PG_URL) -> None:
    try:
        with _pg_admin(base_url) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {PG_DB_NAME} WITH (FORCE)")
    except Exception as exc:
        print(f"could not drop {PG_DB_NAME}: {exc}")


# One for every child of this run: DEBUG off refuses the development key.
SECRET_KEY = secrets.token_urlsafe(50)


def base_env(db_url: str, redis_url: str, var_dir: Path) -> dict[str, str]:
    """The environment of every benchmark child (Takt settings by default)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAKT_", "DJANGO_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=db_url,
        REDIS_URL=redis_url,
        TAKT_VAR_DIR=str(var_dir),
        TAKT_TIME_ZONE="UTC",
        TAKT_POLL_SECONDS="1",
        # BENCH_EXTRA_MODULES / BENCH_EXTRA_PATH: import a module in every Takt
        # process (e.g. a prototype of a fix, before it lands in the app).
        TAKT_JOB_MODULES=",".join(
            filter(None, ["benchmarks.noop", os.environ.get("BENCH_EXTRA_MODULES")])
        ),
        TAKT_LOG_LEVEL="WARNING",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=SECRET_KEY,
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("BENCH_EXTRA_PATH")])),
        PYTHONUNBUFFERED="1",
    )
    return env


def migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "benchmarks.settings"},
        check=True, timeout=300,
    )  # fmt: skip


def start_beat(env: dict[str, str], log_dir: Path, **extra: str) -> Proc:
    """A real ``celery beat -S runs.beat:TaktScheduler``."""
    argv = [sys.executable, "-m", "celery", "-A", "scheduler_project", "beat", "-l", "info",
            "-S", "runs.beat:TaktScheduler", "--pidfile=",
            "-s", str(log_dir / f"beat-{uuid.uuid4().hex[:6]}")]  # fmt: skip
    proc = Proc("beat", argv, {**env, **extra}, log_dir)
    proc.wait_for("beat: Starting")
    return proc


def start_worker(
    env: dict[str, str], log_dir: Path, concurrency: int = 2, *,
    app: str = "scheduler_project", queue: str = "takt",
) -> Proc:  # fmt: skip
    """A real prefork worker on queue `takt` (Takt's settings: acks late,
    prefetch 1), the same for Takt runs and plain Celery tasks. It logs at
    WARNING, so that per-task log lines do not count against either side.
    Another `app` (benchmarks/plain_app.py, the anchor for a worker's
    memory) runs without Django settings, on its own `queue`."""
    argv = [sys.executable, "-m", "celery", "-A", app, "worker", "-l", "warning",
            "--pool=prefork", f"--concurrency={concurrency}", "-Q", queue,
            "-n", f"bench-{uuid.uuid4().hex[:6]}@%h", "--without-gossip", "--without-mingle",
            "--without-heartbeat"]  # fmt: skip
    if app != "scheduler_project":
        env = {k: v for k, v in env.items() if k != "DJANGO_SETTINGS_MODULE"}
    proc = Proc("worker", argv, env, log_dir)
    proc.wait_for("[queues]")  # the banner; readiness itself: see wait_worker_ready
    return proc


def tree_rss_mb(pid: int) -> tuple[float, list[float]]:
    """RSS (MB) of a worker's main process and of each of its pool children."""
    import psutil

    main = psutil.Process(pid)
    children = [c.memory_info().rss / 2**20 for c in main.children(recursive=True)]
    return main.memory_info().rss / 2**20, children


@contextlib.contextmanager
def private_stack(db: str, pg_url: str = DEFAULT_PG_URL) -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary directory, a private redis-server and a migrated database
    ("sqlite": a file in the directory; "postgresql": takt_bench, dropped at
    the end): yields (the directory, the environment of a Takt process)."""
    with tempfile.TemporaryDirectory(prefix="takt-profile-") as tmp:
        work = Path(tmp)
        redis, redis_url = start_redis(work, work)
        try:
            if db == "sqlite":
                db_url = sqlite_url(work)
            else:
                db_url = create_postgres(pg_url) or sys.exit("PostgreSQL unavailable")
            env = base_env(db_url, redis_url, work / "var")
            migrate(env)
            yield work, env
        finally:
            stop_all()
            redis.stop()
            if db == "postgresql":
                drop_postgres(pg_url)
