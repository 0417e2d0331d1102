"""`make run`'s private Redis stops last (deploy/dev/redis-last.sh): on
Ctrl-C honcho sends every process SIGTERM at once, and a Redis that quit at
once left the worker's warm shutdown talking to no Redis (a traceback in the
terminal, a running run's end without its lock release). It waits for the
other connections to close, at most TAKT_REDIS_STOP_WAIT seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from tests.live_fixtures import wait_until
from tests.processes import ROOT, free_port

PASSWORD = "pw-" + "x7" * 12


@pytest.fixture(params=["open", "password"])
def dev_redis(request, tmp_path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:  # type: ignore[no-untyped-def]
    """redis-last.sh as Procfile.dev starts it; "password": as make run
    does now, a config file with requirepass and the password in REDIS_URL."""
    port = free_port()
    env = {**os.environ, "TAKT_REDIS_PORT": str(port), "TAKT_REDIS_STOP_WAIT": "3"}
    config: list[str] = []
    password = None
    if request.param == "password":
        password = PASSWORD
        (tmp_path / "redis.conf").write_text(f"requirepass {password}\n")
        config = [str(tmp_path / "redis.conf")]
        env["REDIS_URL"] = f"redis://:{password}@127.0.0.1:{port}/0"
    proc = subprocess.Popen(
        ["bash", str(ROOT / "deploy/dev/redis-last.sh"), *config, "--port", str(port), "--bind",
         "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # as honcho starts it
    )  # fmt: skip
    client = redis.Redis(port=port, password=password)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    wait_until(answers, 10, "redis-last.sh's Redis to answer")
    client.close()
    yield proc, port
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """What honcho does at Ctrl-C: SIGTERM to the process's whole group."""
    os.killpg(proc.pid, signal.SIGTERM)


def gone(port: int) -> bool:
    try:
        redis.Redis(port=port, password=PASSWORD, socket_connect_timeout=0.5).ping()
    except redis.AuthenticationError:  # the open Redis: a password it was not asked for
        return False
    except redis.ConnectionError:
        return True
    return False


def connect(port: int) -> redis.Redis:
    """A client as make run's processes make one: from REDIS_URL."""
    client = redis.Redis(port=port, password=PASSWORD)
    try:
        client.ping()
    except redis.AuthenticationError:
        client = redis.Redis(port=port)
    return client


def test_redis_outlives_a_connection_still_open_at_sigterm(dev_redis):
    proc, port = dev_redis
    worker = connect(port)
    worker.set("k", "v")  # a connection the worker still holds

    stop(proc)
    time.sleep(1.0)
    assert proc.poll() is None
    assert worker.get("k") == b"v"  # the warm shutdown's last writes still land
    worker.close()

    started = time.monotonic()
    assert proc.wait(timeout=5) is not None
    assert time.monotonic() - started < 2
    assert gone(port)


def test_redis_stops_at_once_when_no_connection_is_left(dev_redis):
    proc, port = dev_redis
    started = time.monotonic()
    stop(proc)
    proc.wait(timeout=5)
    assert time.monotonic() - started < 1.5


def test_a_connection_that_never_closes_delays_the_stop_by_the_wait_only(dev_redis):
    proc, port = dev_redis
    stuck = connect(port)
    stuck.ping()
    started = time.monotonic()
    stop(proc)
    proc.wait(timeout=10)
    assert 1.5 < time.monotonic() - started < 6  # TAKT_REDIS_STOP_WAIT=3 (whole seconds)


def test_redis_dies_with_the_script_killed_by_sigkill(dev_redis):
    """honcho's SIGKILL after its 5 s, or a closed terminal: no Redis is
    left holding the port for the next `make run`."""
    proc, port = dev_redis
    proc.kill()  # the script only: Redis is in a session of its own
    proc.wait(timeout=5)
    wait_until(lambda: gone(port), 5, "Redis to stop with its script")


@pytest.mark.parametrize("dev_redis", ["password"], indirect=True)
def test_make_runs_redis_refuses_a_client_without_its_password(dev_redis):
    """Any local user can reach 127.0.0.1: without the password nothing is read or written."""
    _, port = dev_redis
    stranger = redis.Redis(port=port)
    with pytest.raises(redis.AuthenticationError):
        stranger.ping()
    with pytest.raises(redis.AuthenticationError):
        stranger.keys("*")
    stranger.close()
