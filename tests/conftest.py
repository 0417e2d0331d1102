"""Session-wide test setup.

* A private redis-server on a free port (never the machine's own Redis).
* The session runs in Europe/Berlin, to flush out UTC assumptions.
* The sample job callables in tests/sample_jobs.py are registered.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test.utils import override_settings

import tests.sample_jobs  # noqa: F401  (registers the sample callables)
from tests.processes import free_port

TEST_TIME_ZONE = "Europe/Berlin"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.exit(
            "redis-server is not installed: run `make test` (it installs it) or `apt-get install redis-server`",
            2,
        )
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.exit(f"private redis-server on port {port} did not start", 2)
            time.sleep(0.05)
    client.close()
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session", autouse=True)
def _takt_test_settings(redis_url: str) -> Iterator[None]:
    from scheduler_project.celery import app

    with override_settings(
        TIME_ZONE=TEST_TIME_ZONE,
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=redis_url,
        REDIS_SENTINEL=None,  # the private Redis even when the shell sets REDIS_SENTINELS
        TAKT_WATCH_FILES=False,  # a beat made in the test's process starts no watcher thread
    ):
        app.conf.broker_url = redis_url
        yield


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: Any, django_db_blocker: Any) -> None:
    """The migrations make the built-in hourly "Takt maintenance" job; tests
    that count triggers or run a beat must not see it fire, so its trigger
    is switched off in the test databases."""
    from jobs.models import Trigger

    with django_db_blocker.unblock():
        Trigger.objects.filter(job__target="takt.maintenance").update(active=False)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """The private Redis, emptied, with its data as if it began long ago
    (runs/redis_age.py): the grace that the lost-run and lost-message checks
    wait out after a Redis loss is over. Tests of the grace delete
    since_key() or flush."""
    from runs.redis_age import since_key

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.set(since_key(), "0.000")
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    """Each test starts with Django's cache empty (the load forecast keeps
    its counts there for a minute)."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(scope="session", autouse=True)
def _flush_retried() -> Iterator[None]:
    """A transactional test empties its database with TRUNCATE while the
    module's worker process may still write (its liveness, a late run end);
    PostgreSQL can pick the TRUNCATE as the victim of that lock wait. The
    emptying is tried again after a moment, as an operator would, instead
    of failing the test that just passed."""
    from django.core.management.base import CommandError
    from django.db import DatabaseError
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown

    def teardown(self: TransactionTestCase) -> None:
        for attempt in range(4):
            try:
                return original(self)
            except CommandError as exc:
                if attempt == 3 or not isinstance(exc.__cause__, DatabaseError):
                    raise
                time.sleep(0.5 * (attempt + 1))

    TransactionTestCase._fixture_teardown = teardown  # type: ignore[method-assign]
    yield
    TransactionTestCase._fixture_teardown = original  # type: ignore[method-assign]
