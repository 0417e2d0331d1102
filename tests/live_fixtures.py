"""Fixtures for the tests that run against live processes: real `celery
worker`, `celery beat` and `manage.py runserver` on the test database and
the private Redis. tests/e2e/conftest.py and tests/browser/conftest.py
import them; each directory gets its own copy, so a directory can override
`server_env` (the browser tests run their servers in UTC)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.processes import ROOT, Proc, free_port

STARTUP_TIMEOUT_S = 30
# Variables of the test process that must not reach its children.
PRIVATE_VARIABLES = ("DJANGO_ALLOW_ASYNC_UNSAFE",)


def database_url() -> str:
    """The test database as a DATABASE_URL, for the child processes."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    auth = s.get("USER") or ""
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    return f"postgres://{auth}@{host}:{port}/{s['NAME']}"


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `predicate` every 0.1 s until it is truthy and return its value;
    raise AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def emptied_retried(empty: Callable[[], object]) -> None:
    """Call `empty` (a flush of the test database) and, when PostgreSQL
    picked its TRUNCATE as the victim of a lock wait with a live process of
    the test (tests/conftest.py `_flush_retried`), call it again after a moment, up to
    four times in all."""
    from django.core.management.base import CommandError
    from django.db import DatabaseError

    for attempt in range(4):
        try:
            empty()
            return
        except CommandError as exc:
            if attempt == 3 or not isinstance(exc.__cause__, DatabaseError):
                raise
            time.sleep(0.5 * (attempt + 1))


def holds_for(predicate: Callable[[], Any], seconds: float, what: str) -> None:
    """Poll `predicate` every 0.1 s for `seconds` seconds: it must stay
    truthy the whole time (AssertionError naming `what` when it does not).
    For assertions about time itself: a lock that outlives its TTL."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            raise AssertionError(f"{what} did not hold for {seconds} s")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def server_env() -> dict[str, str]:
    """Variables every live process gets on top of `live_env`; a test
    directory's conftest may override this fixture."""
    return {}


@pytest.fixture(scope="session")
def live_env(
    redis_url: str, server_env: dict[str, str], django_db_setup: Any, django_db_blocker: Any
) -> dict[str, str]:
    """The environment of the live processes: the test database, the
    private Redis, the sample jobs, short poll and lock times."""
    with django_db_blocker.unblock():
        url = database_url()
    env = {k: v for k, v in os.environ.items() if k not in PRIVATE_VARIABLES}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=url,
        REDIS_URL=redis_url,
        REDIS_SENTINELS="",  # a test that wants Sentinel sets it (tests/e2e/test_sentinel_e2e.py)
        TAKT_JOB_MODULES="tests.sample_jobs",
        TAKT_TIME_ZONE="Europe/Berlin",
        TAKT_POLL_SECONDS="0.2",
        TAKT_LOCK_TTL_SECONDS="3",
        TAKT_REPUBLISH_AFTER_SECONDS="3",
        TAKT_WATCH_FILES="true",  # the beats watch folders (tests/e2e/test_file_triggers_e2e.py)
        TAKT_CLOCK="database",  # as in production; the test process's own reads its clock
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    env.update(server_env)
    return env


@pytest.fixture(scope="session")
def live_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("live-logs")


@pytest.fixture(scope="session")
def start_process(live_env: dict[str, str], live_log_dir: Path) -> Iterator[Callable[..., Proc]]:
    """start(kind, concurrency=2, name=None, **env): a `celery worker` (kind
    "worker", queue takt, prefork; `name`: its hostname, else a fresh one)
    or `celery beat` (kind "beat", Takt's scheduler), ready when it returns; `env` adds to `live_env`. Whatever is still
    running at the session's end is stopped then."""
    started: list[Proc] = []

    def start(kind: str, concurrency: int = 2, name: str | None = None, **env: str) -> Proc:
        celery = [sys.executable, "-m", "celery", "-A", "scheduler_project"]
        if kind == "worker":
            argv = celery + [
                "worker",
                "-l",
                "info",
                "--pool=prefork",
                f"--concurrency={concurrency}",
                "-Q",
                "takt",
                "-n",
                name or f"e2e-{uuid.uuid4().hex[:6]}@%h",
                "--without-gossip",
                "--without-mingle",
            ]
            ready = "ready."
        else:
            argv = celery + [
                "beat",
                "-l",
                "info",
                "-S",
                "runs.beat:TaktScheduler",
                "--pidfile=",
                "-s",
                str(live_log_dir / f"beat-{uuid.uuid4().hex[:6]}"),
            ]
            ready = "beat: Starting"
        proc = Proc(kind, argv, {**live_env, **env}, live_log_dir)
        started.append(proc)
        proc.wait_for(ready, STARTUP_TIMEOUT_S)
        return proc

    start.started = started  # type: ignore[attr-defined]  # see _stop_what_the_test_started
    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(scope="module")
def worker(start_process: Callable[..., Proc], django_db_blocker: Any) -> Iterator[Proc]:
    """A worker for the module's tests, stopped at its end (a worker left
    running would take the runs that later tests publish)."""
    proc = start_process("worker")
    yield proc
    proc.stop()
    forget_process_heartbeats(django_db_blocker)


def forget_process_heartbeats(django_db_blocker: Any) -> None:
    """Delete the heartbeats of Takt's processes (`worker:<name>`,
    `beat@<host>`) once they are stopped. A worker reports from a thread of
    its own every 30 s and a beat from its tick, also after the last test's
    flush: the row would stay for the tests after it on this xdist worker
    (a landing page counting one heartbeat `up` too many)."""
    from django.db.models import Q

    from heartbeats.models import Heartbeat

    with django_db_blocker.unblock():
        Heartbeat.objects.filter(
            Q(name__startswith="worker:") | Q(name__startswith="beat@"), job__isnull=True
        ).delete()


@pytest.fixture
def beat(start_process: Callable[..., Proc]) -> Iterator[Callable[..., Proc]]:
    """start(**env): a beat, stopped when the test ends."""
    mine: list[Proc] = []

    def start(**env: str) -> Proc:
        proc = start_process("beat", **env)
        mine.append(proc)
        return proc

    yield start
    for proc in mine:
        proc.stop()


@contextlib.contextmanager
def serve_web(env: dict[str, str], log_dir: Path) -> Iterator[str]:
    """`manage.py runserver` on a free port with `env`, answering when this
    yields its URL ("http://127.0.0.1:PORT"); stopped on leaving."""
    port = free_port()
    argv = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    proc = Proc("web", argv, env, log_dir)
    try:
        proc.wait_for("Quit the server with", STARTUP_TIMEOUT_S)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(url), 10, "the web server answers")
        yield url
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def web(live_env: dict[str, str], live_log_dir: Path) -> Iterator[str]:
    """The web server of the module's tests (`serve_web` with `live_env`)."""
    with serve_web(live_env, live_log_dir) as url:
        yield url


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/admin/login/", timeout=2).close()
    except OSError:
        return False
    return True


@pytest.fixture(autouse=True)
def _stop_what_the_test_started(request: pytest.FixtureRequest) -> Iterator[None]:
    """Processes a test started itself through `start_process` are stopped
    when it ends, passed or failed: one left running would take the runs
    that later tests publish (and, started on another database, run
    another database's run ids)."""
    if "start_process" not in request.fixturenames:
        yield
        return
    started: list[Proc] = request.getfixturevalue("start_process").started
    blocker = request.getfixturevalue("django_db_blocker")
    before = len(started)
    yield
    for proc in started[before:]:
        proc.stop()
        # Shown by pytest with a failed test's report only: what each
        # process the test started said.
        print(f"----- {proc.name} ({proc.log_path}) -----\n{proc.log()[-6000:]}")
    if started[before:]:
        forget_process_heartbeats(blocker)
