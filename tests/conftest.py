"""Session-wide test setup.

* A private redis-server on a free port (never the machine's own Redis).
* The session runs in Europe/Berlin, to flush out UTC assumptions.
* The sample job callables in tests/sample_jobs.py are registered.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import tests.sample_jobs  # noqa: F401  (registers the sample callables)
from jobs.testing import RedisMissing, private_redis, takt_settings
from tests import durations
from tests.live_fixtures import emptied_retried
from tests.processes import free_port

# The fixtures Takt ships for its users' suites (F-96): `takt`, `takt_redis_url`.
pytest_plugins = ["jobs.pytest_plugin"]

TEST_TIME_ZONE = "Europe/Berlin"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On xdist's workers (make test: --dist loadfile), the files in the
    order they are handed out: longest first (tests/durations.py). Within
    a file, the order stays."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    known = durations.load()
    cost = {
        path: durations.estimate(path, known) for path in {i.nodeid.split("::")[0] for i in items}
    }
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's own redis-server (jobs.testing, the helpers Takt ships
    for its users' suites)."""
    try:
        with private_redis(tmp_path_factory.mktemp("redis"), port=free_port) as url:
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
def django_db_setup(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """The migrations make the built-in hourly "Takt maintenance" job; tests
    that count triggers or run a beat must not see it fire, so its trigger
    is switched off in the test databases. At the end, no other session may
    still use the test database (checked before it is dropped)."""
    from jobs.models import Trigger

    with django_db_blocker.unblock():
        Trigger.objects.filter(job__target="takt.maintenance").update(active=False)
        MIGRATED_ROWS.append(_takt_rows())
    yield
    with django_db_blocker.unblock():
        _no_session_left()


@pytest.fixture(scope="module", autouse=True)
def _no_connection_left_by_the_module(
    request: pytest.FixtureRequest, django_db_blocker: Any
) -> Iterator[None]:
    """On PostgreSQL: after a test file (its module-scoped processes
    stopped), no thread of this process may still hold a connection of its
    own. One left open is found here, naming the file, rather than at the
    end, where it kept the test database from being dropped."""
    yield
    if request.path.parent.name == "unit" or not _on_postgresql() or not _test_database_made():
        return
    with django_db_blocker.unblock():
        _no_session_left(f"after {request.path.name}", only_this_process=True)


def _test_database_made() -> bool:
    """Whether this process made its test database yet: a file whose tests
    use none (the embedded project's, its processes on their own database)
    may be the first this xdist worker runs, and the database the settings
    name before that ("takt") is not the suite's to connect to."""
    from django.db import connection

    return str(connection.settings_dict["NAME"]).startswith("test_")


def _on_postgresql() -> bool:
    from django.conf import settings

    return "postgresql" in settings.DATABASES["default"]["ENGINE"]


def _no_session_left(when: str = "at the end", *, only_this_process: bool = False) -> None:
    """PostgreSQL refuses to drop a database another session uses. The
    connections of this process's ended threads are garbage (closed when
    collected); any other session is a process or thread a test left
    running: it is named, ended so the database can go, and fails the run."""
    import gc
    import threading

    from django.db import connection, connections

    if connection.vendor != "postgresql":
        return
    connections.close_all()
    gc.collect()
    ports = _ports_of_this_process() if only_this_process else None
    if ports is not None and not ports:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, application_name, client_port, state, left(query, 200)"
            " FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
            + ("" if ports is None else " AND client_port = ANY(%s)"),
            [] if ports is None else [sorted(ports)],
        )
        others = cursor.fetchall()
        for pid, *_ in others:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    connection.close()
    if others:
        described = "; ".join(
            f"backend {pid} ({app or 'no application name'}, client port {port}"
            f" of {_owner_of_port(port)}, {state}: {query!r})"
            for pid, app, port, state, query in others
        )
        threads = ", ".join(t.name for t in threading.enumerate())
        raise AssertionError(
            f"sessions left on the test database {when}: {described}; this process's"
            f" threads: {threads}"
        )


def _ports_of_this_process() -> set[int]:
    """The local TCP ports of this process's sockets (/proc/net/tcp)."""
    fds = Path("/proc/self/fd")
    inodes = set()
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _owner_of_port(port: int | None) -> str:
    """The process holding a local TCP port, as `ss` names it."""
    import subprocess

    if port is None or port < 0:
        return "a Unix socket"
    try:
        out = subprocess.run(
            ["ss", "-tnpH", f"sport = :{port}"], capture_output=True, text=True, timeout=5
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "an unknown process"
    pids = re.findall(r"pid=(\d+)", out)
    names = []
    for pid in dict.fromkeys(pids):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            cmd = "?"
        mine = " (this pytest process)" if int(pid) == os.getpid() else ""
        names.append(f"pid {pid}{mine}: {cmd.strip()[:160]}")
    return ", ".join(names) or "an unknown process"


# Takt's rows as the migrations left them (the built-in jobs, the disabled
# Hello-world job), taken once by django_db_setup: every test starts with
# them, whichever test ran before it on its xdist worker.
MIGRATED_ROWS: list[str] = []
TAKT_APPS = ("takt_jobs", "takt_runs", "takt_heartbeats")


def _takt_rows() -> str:
    from django.apps import apps
    from django.core import serializers

    models = [m for label in TAKT_APPS for m in apps.get_app_config(label).get_models()]
    ordered = serializers.sort_dependencies([(None, models)], allow_cycles=True)
    return serializers.serialize(
        "json", [o for m in ordered for o in m._base_manager.order_by("pk")]
    )


def _restore_migrated_rows() -> None:
    """Put back the rows of MIGRATED_ROWS after a transactional test's flush.

    Ids go on growing as before: a restored row keeps its id, and no id is
    handed out twice in a session (an earlier test's lock or cancel marker
    in Redis for job 7 must not meet a later test's job 7). SQLite moves its
    counter past an id inserted by hand; PostgreSQL's sequences are moved
    here, only ever forward."""
    from django.core import serializers
    from django.db import connection

    if not MIGRATED_ROWS:
        return
    models = set()
    for obj in serializers.deserialize("json", MIGRATED_ROWS[0]):
        obj.save()
        models.add(type(obj.object))
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model in models:
            table, pk = model._meta.db_table, model._meta.pk.column
            cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, pk])
            sequence = cursor.fetchone()[0]
            if sequence:
                cursor.execute(
                    f'SELECT setval(%s, GREATEST((SELECT MAX("{pk}") FROM "{table}"),'
                    f" (SELECT last_value FROM {sequence})))",
                    [sequence],
                )


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """The private Redis, emptied, with its data as if it began long ago
    (runs/redis_age.py): the grace that the lost-run and lost-message checks
    wait out after a Redis loss is over. Tests of the grace delete
    since_key() or flush."""
    from runs.redis_age import set_data_age

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    set_data_age(client, 365 * 86400)
    yield client
    client.close()


# Takt's keys that belong to a live process rather than to the database's
# rows: a module's worker keeps its liveness key, and the start of Redis's
# data stays known (runs/redis_age.py).
PROCESS_KEYS = ("alive:", "redis:since")


# kombu's Redis transport: the messages workers received and did not
# acknowledge (a worker SIGKILLed by a test leaves them for 12 h).
KOMBU_UNACKED = ("unacked", "unacked_index", "unacked_mutex")


def forget_takt_keys() -> None:
    """Delete Takt's keys (TAKT_KEY_PREFIX) in the private Redis but the
    live processes' own (PROCESS_KEYS), and the broker's messages: the
    queues' lists and kombu's unacknowledged set. Run ids start again
    (flushes with reset_sequences, SQLite's rollbacks), so a message an
    earlier test left would stand for a run of this one (seen in CI: the
    warm-shutdown test found a SIGKILLed worker's takt-run-5 in `unacked`).
    The queues' bindings stay: a module's live worker declared them."""
    from django.conf import settings

    from runs.locks import get_redis

    prefix = f"{settings.TAKT_KEY_PREFIX}:"
    keep = tuple(prefix + k for k in PROCESS_KEYS)
    client = get_redis()
    keys = [
        k
        for k in client.scan_iter(match=prefix + "*", count=1000)
        if not k.decode().startswith(keep)
    ]
    keys += [k.encode() for k in KOMBU_UNACKED]
    keys += [
        k
        for k in client.scan_iter(count=1000, _type="list")
        if not k.decode(errors="replace").startswith(prefix)
    ]
    client.delete(*keys)


@pytest.fixture(autouse=True)
def _redis_as_new(request: pytest.FixtureRequest) -> None:
    """Each test starts without the Redis state of the tests before it on
    its xdist worker: their database rows are gone (rolled back or flushed),
    and so go the keys that mirror them or hang on their ids (a job's lock,
    a run's cancel marker, the queue's pause and maintenance switches, the
    group slots). Ids may be handed out again: a rolled-back transaction
    gives SQLite's back, the browser tests restart them."""
    if request.path.parent.name != "unit":
        forget_takt_keys()


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
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown

    def teardown(self: TransactionTestCase) -> None:
        emptied_retried(lambda: original(self))
        _restore_migrated_rows()

    TransactionTestCase._fixture_teardown = teardown  # type: ignore[method-assign]
    yield
    TransactionTestCase._fixture_teardown = original  # type: ignore[method-assign]
