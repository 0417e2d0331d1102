"""pytest fixtures for your own test suite (F-96), with jobs.testing.

In your conftest.py::

    pytest_plugins = ["jobs.pytest_plugin"]

* `takt_redis_url` (session): a redis-server of the session's own on a free
  port (jobs.testing.private_redis); fails the session, saying what to
  install, when redis-server is missing.
* `takt` : for one test, Takt pointed at that Redis (locks and broker,
  jobs.testing.takt_settings) with the file watcher off; it is the
  jobs.testing module, so `takt.run_inline(job)`, `takt.tick(now)`,
  `takt.fire_times(...)`. Use it with pytest-django's `db`.

Takt's built-in jobs stay in the test database as its migrations made them
(the hourly "Takt maintenance" enabled): `tick` holds them, unless asked
(`tick(now, builtin_jobs=True)`), so a test sees its own jobs' runs, in a
pytest-django suite, a Django TestCase or a project that sets up its test
database itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from jobs import testing


@pytest.fixture(scope="session")
def takt_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        with testing.private_redis(tmp_path_factory.mktemp("takt-redis")) as url:
            yield url
    except testing.RedisMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def takt(takt_redis_url: str) -> Iterator[ModuleType]:
    with testing.takt_settings(takt_redis_url):
        yield testing
