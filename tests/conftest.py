"""Session-wide test setup.

* A private redis-server on a free port (never the machine's own Redis).
* The session runs in Europe/Berlin, to flush out UTC assumptions.
* The sample job callables in tests/sample_jobs.py are registered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import tests.sample_jobs  # noqa: F401  (registers the sample callables)
from jobs.testing import RedisMissing, private_redis, takt_settings

# The fixtures Takt ships for its users' suites (F-96): `takt`, `takt_redis_url`.
pytest_plugins = ["jobs.pytest_plugin"]

TEST_TIME_ZONE = "Europe/Berlin"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's own redis-server (jobs.testing, the helpers Takt ships
    for its users' suites)."""
    try:
        with private_redis(tmp_path_factory.mktemp("redis")) as url:
            yield url
    except RedisMissing:
        pytest.exit(
            "redis-server is not installed: run `make test` (it installs it) or `apt-get install redis-server`",
            2,
        )


@pytest.fixture(scope="session", autouse=True)
def _takt_test_settings(redis_url: str) -> Iterator[None]:
    # The private Redis even when the shell sets REDIS_SENTINELS; a beat
    # made in the test's process starts no watcher thread.
    with takt_settings(redis_url, TIME_ZONE=TEST_TIME_ZONE):
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
