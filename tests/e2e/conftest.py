"""Real `celery worker` and `celery beat` processes against the test
database and the private Redis."""

from __future__ import annotations

import os
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from tests.processes import ROOT, Proc, free_port

STARTUP_TIMEOUT_S = 30


def database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    auth = s.get("USER") or ""
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    return f"postgres://{auth}@{host}:{port}/{s['NAME']}"


@pytest.fixture(scope="session")
def e2e_env(redis_url: str, django_db_setup: Any, django_db_blocker: Any) -> dict[str, str]:
    with django_db_blocker.unblock():
        url = database_url()
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=url,
        REDIS_URL=redis_url,
        TAKT_JOB_MODULES="tests.sample_jobs",
        TAKT_TIME_ZONE="Europe/Berlin",
        TAKT_POLL_SECONDS="0.2",
        TAKT_LOCK_TTL_SECONDS="3",
        TAKT_REPUBLISH_AFTER_SECONDS="3",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture(scope="session")
def start_process(
    e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Proc]]:
    log_dir = tmp_path_factory.mktemp("e2e-logs")
    started: list[Proc] = []

    def start(kind: str, concurrency: int = 2, **env: str) -> Proc:
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
                f"e2e-{uuid.uuid4().hex[:6]}@%h",
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
                "jobs.beat:TaktScheduler",
                "--pidfile=",
                "-s",
                str(log_dir / f"beat-{uuid.uuid4().hex[:6]}"),
            ]
            ready = "beat: Starting"
        proc = Proc(kind, argv, {**e2e_env, **env}, log_dir)
        started.append(proc)
        proc.wait_for(ready, STARTUP_TIMEOUT_S)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(scope="module")
def worker(start_process: Callable[..., Proc]) -> Iterator[Proc]:
    proc = start_process("worker")
    yield proc
    proc.stop()


@pytest.fixture
def beat(start_process: Callable[..., Proc]) -> Iterator[Callable[..., Proc]]:
    mine: list[Proc] = []

    def start(**env: str) -> Proc:
        proc = start_process("beat", **env)
        mine.append(proc)
        return proc

    yield start
    for proc in mine:
        proc.stop()


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `predicate` every 0.1 s until it is truthy; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def web(e2e_env: dict[str, str], tmp_path: Any) -> Iterator[str]:
    """`manage.py runserver` on a free port; its URL."""
    port = free_port()
    proc = Proc(
        "web",
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        e2e_env,
        tmp_path,
    )
    proc.wait_for("Quit the server with", 30)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _answers(url), 10, "the web server answers")
    yield url
    proc.stop()


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/admin/login/", timeout=2).close()
    except OSError:
        return False
    return True
