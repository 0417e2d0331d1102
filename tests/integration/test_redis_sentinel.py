"""Redis Sentinel (F-85) against real redis-server and sentinel processes
(tests/sentinelcluster.py): the settings choose the broker's sentinel
transport and Takt's Sentinel client; locks, metrics and the decision log
follow the master through a failover; a run's end recorded during the
failover is not lost; an unreachable set-up is named in the error."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.core.management.base import CommandError
from django.test import override_settings
from redis.backoff import NoBackoff
from redis.retry import Retry

from runs.connectivity import require_redis
from runs.decisions import Decision
from runs.locks import get_redis, job_lock
from runs.metrics import release_and_count
from runs.redis_client import retry_connection_errors, write_through_failover
from scheduler_project.redisconfig import sentinel_config
from tests.processes import ROOT, free_port
from tests.sentinelcluster import MASTER_NAME, SentinelCluster


def settings_for(cluster: SentinelCluster) -> override_settings:
    config = sentinel_config(
        cluster.sentinels_setting, master=MASTER_NAME, password="", sentinel_password="", db=0
    )
    return override_settings(REDIS_SENTINEL=config)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    setup = SentinelCluster(tmp_path)
    try:
        setup.start()
        yield setup
    finally:
        setup.stop()


def on(address: tuple[str, int] | None) -> redis.Redis:
    assert address is not None
    return redis.Redis(host=address[0], port=address[1], socket_timeout=2)


def load_settings(**env: str) -> subprocess.CompletedProcess[str]:
    """Load the settings and Celery's broker in a new process with `env`."""
    code = (
        "import json, django; django.setup()\n"
        "from django.conf import settings\n"
        "from scheduler_project.celery import app\n"
        "conn = app.connection_for_write()\n"
        "print(json.dumps({'broker': settings.CELERY_BROKER_URL,"
        " 'transport': conn.transport_cls, 'alt': conn.alt,"
        " 'options': app.conf.broker_transport_options}))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REDIS_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "scheduler_project.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_with_sentinels_celery_uses_the_sentinel_transport_and_keeps_takts_options():
    done = load_settings(
        REDIS_SENTINELS="10.0.0.1:26379,10.0.0.2:26379",
        REDIS_SENTINEL_MASTER="takt",
        REDIS_SENTINEL_PASSWORD="sentinel-pw",
        REDIS_PASSWORD="master-pw",
        REDIS_DB="2",
        REDIS_URL="redis://ignored:6379/0",
        TAKT_VISIBILITY_TIMEOUT="600",
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["broker"] == (
        "sentinel://:master-pw@10.0.0.1:26379/2;sentinel://:master-pw@10.0.0.2:26379/2"
    )
    assert seen["transport"] == "sentinel"
    assert len(seen["alt"]) == 2
    options = seen["options"]
    assert options["master_name"] == "takt"
    assert options["sentinel_kwargs"] == {"password": "sentinel-pw"}
    assert options["visibility_timeout"] == 600
    # A master that hangs with its connections open is given up on.
    assert (options["socket_timeout"], options["health_check_interval"]) == (3, 2)
    assert options["priority_steps"] == list(range(10))


def test_without_sentinels_the_broker_is_redis_url():
    done = load_settings(REDIS_URL="redis://127.0.0.1:6390/4")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["broker"], seen["transport"]) == ("redis://127.0.0.1:6390/4", "redis")
    assert "master_name" not in seen["options"]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("REDIS_SENTINELS", "x", "REDIS_SENTINELS: expected host:port, got 'x'"),
        ("REDIS_SENTINELS", "s1:26379,s2", "REDIS_SENTINELS: expected host:port, got 's2'"),
        ("REDIS_SENTINEL_MASTER", "my master", "REDIS_SENTINEL_MASTER: expected the master's"),
        ("REDIS_DB", "two", "REDIS_DB: expected a whole number, got 'two'"),
        ("REDIS_DB", "-1", "REDIS_DB: must be between 0 and 100000, got '-1'"),
    ],
)
def test_a_bad_value_stops_the_process_naming_the_setting(variable, value, message):
    done = load_settings(**{"REDIS_SENTINELS": "s1:26379", variable: value})
    assert done.returncode != 0
    assert f"ImproperlyConfigured: {message}" in done.stderr


def test_get_redis_talks_to_the_master_the_sentinels_name(cluster, redis_client):
    with settings_for(cluster):
        client = get_redis()
        client.set("takt-test:where", "sentinel")
        pool = client.connection_pool
    assert pool.service_name == MASTER_NAME and pool.is_master
    # A command on a dead or silent master is retried on a new connection.
    assert pool.connection_kwargs["retry"].get_retries() == 10
    assert pool.connection_kwargs["socket_timeout"] == 3
    assert on(cluster.master_address()).get("takt-test:where") == b"sentinel"
    assert redis_client.get("takt-test:where") is None  # not REDIS_URL's Redis
    assert get_redis().connection_pool.connection_kwargs["port"] == redis_client.connection_pool.connection_kwargs["port"]  # fmt: skip


def test_a_lock_and_a_runs_end_follow_the_master_through_a_failover(cluster, caplog):
    caplog.set_level(logging.WARNING, logger="takt")
    with settings_for(cluster):
        lock = job_lock(41, run_id=7, ttl_s=30)
        assert lock.acquire()
        old = cluster.master_address()
        on(old).execute_command("WAIT", 1, 2000)  # the replica has the lock
        cluster.kill_master()
        started = time.monotonic()
        # The run's end comes in while the sentinels are still agreeing
        # (as runs/execution.py records it).
        end = Decision("end", 41, 7, detail="done")
        released = write_through_failover(
            lambda: release_and_count(lock, status="succeeded", lag_s=0.2, decision=end),
            what="releasing",
        )
        took = time.monotonic() - started
        new = cluster.wait_for_failover(old)
        assert released is True, caplog.text
        assert took < 15
        master = on(new)
        assert master.get(lock.key) is None  # released on the new master
        assert master.hgetall("takt:metrics:runs") == {b"succeeded": b"1"}
        (entry,) = master.xrange("takt:decisions")
        assert entry[1][b"kind"] == b"end" and entry[1][b"run"] == b"7"

        # A lock taken after the failover lives on the new master, and the
        # old client renews it there.
        after = job_lock(42, run_id=8, ttl_s=30)
        assert after.acquire() and after.renew()
        assert master.get(after.key) == after.token.encode()


def test_an_unreachable_sentinel_set_up_is_named_in_the_error():
    dead = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    config = sentinel_config(dead, master="takt", password="", sentinel_password="", db=0)
    with override_settings(REDIS_SENTINEL=config), pytest.raises(CommandError) as failed:
        require_redis()
    text = str(failed.value)
    assert text.startswith(
        f"cannot reach the Redis master 'takt' via sentinels {dead.replace(',', ', ')}"
        " (from REDIS_SENTINELS and REDIS_SENTINEL_MASTER): "
    )
    assert "set REDIS_SENTINELS to the sentinels the workers use" in text


def test_a_write_is_tried_again_until_redis_answers(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="takt.redis")
    port = free_port()
    client = redis.Redis(port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    argv += ["--appendonly", "no", "--dir", str(tmp_path)]
    servers: list[subprocess.Popen[bytes]] = []
    later = threading.Timer(1.2, lambda: servers.append(subprocess.Popen(argv)))
    later.start()
    try:
        n = retry_connection_errors(lambda: client.incr("k"), what="counting", pause_s=0.5)
    finally:
        later.join()
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
    assert n == 1
    assert "counting: Error 111" in caplog.text and "trying again (2 of 5)" in caplog.text


def test_a_write_gives_up_after_its_attempts_with_the_last_error():
    client = redis.Redis(port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        retry_connection_errors(client.ping, what="ping", attempts=3, pause_s=0.2)
    assert 0.4 <= time.monotonic() - started < 3


def test_a_runs_last_write_that_cannot_reach_redis_is_logged_not_raised(caplog):
    client = redis.Redis(port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    started = time.monotonic()
    done = write_through_failover(
        client.ping, what="releasing lock L at the end of run 9", extra={"run_id": 9}
    )
    assert done is None
    assert 3.5 <= time.monotonic() - started < 10  # 5 tries, 1 s apart
    (failure,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert failure.getMessage() == (
        "releasing lock L at the end of run 9 failed: the lock lapses after its TTL"
    )
    assert failure.run_id == 9
