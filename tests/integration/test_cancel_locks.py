"""The worker's side of a cancel (runs/slots.py, runs/locks.py, runs/stopping.py) against
the private Redis: the cancel marker that a run's keeper and its lock
attempt find, and the gate that lets a stop signal raise only inside a
job's callable. (The kill after the grace period needs a pool child:
tests/e2e/test_cancel_e2e.py.)"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
from billiard.pool import soft_timeout_sighandler
from celery.exceptions import SoftTimeLimitExceeded

from runs.cancel import cancel_run
from runs.locks import LockKeeper, job_lock
from runs.models import Run, RunTrigger
from runs.services import create_run, start_run
from runs.slots import CANCELLED_RUN, acquire_start
from runs.stopping import CancelWatch, StopGate
from tests.integration.conftest import make_job, utc

T0 = utc(2026, 6, 1, 8, 0)


def wait_for(predicate, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def started_run(db, redis_client) -> Run:
    run = create_run(make_job("long"), trigger=RunTrigger.MANUAL, now=T0)
    assert start_run(run, worker="w", now=T0)
    return run


def test_a_run_cancelled_before_it_takes_its_lock_does_not_take_it(started_run, redis_client):
    """The cancel came between the worker's start and its lock attempt."""
    cancel_run(started_run.pk, by="alice", now=T0)

    lock, acquired = acquire_start(started_run.job_id, run_id=started_run.pk)

    assert acquired == CANCELLED_RUN
    assert lock.holder() is None
    other = create_run(started_run.job, trigger=RunTrigger.MANUAL, now=T0)
    assert acquire_start(started_run.job_id, run_id=other.pk)[1] is True  # others may


def test_the_keeper_of_a_cancelled_run_stops_renewing_and_calls_on_cancel(
    started_run, redis_client
):
    lock = job_lock(started_run.job_id, ttl_s=0.3, run_id=started_run.pk)
    assert lock.acquire()
    ticks: list[float] = []
    calls: list[float] = []
    keeper = LockKeeper(
        lock, on_tick=lambda: ticks.append(1), on_cancel=lambda: calls.append(1) or 0.05
    )
    keeper.start()
    try:
        wait_for(lambda: len(ticks) >= 2)  # renewed every 0.1 s
        cancel_run(started_run.pk, by="alice", now=T0)
        wait_for(lambda: len(calls) >= 3)  # as often as on_cancel asks
    finally:
        keeper.stop()
    ticks_then = len(ticks)
    time.sleep(0.3)
    assert len(ticks) == ticks_then and keeper.cancelled and not keeper.lost
    assert lock.holder() is None  # no renewal brought the slot back


def test_outside_a_pool_child_the_watch_keeps_the_output_and_kills_nothing(
    started_run, redis_client, settings
):
    settings.TAKT_CANCEL_GRACE_SECONDS = 1
    cancel_run(started_run.pk, by="alice", now=T0)
    gate = StopGate()  # not installed: this is no billiard pool child
    killed: list[int] = []
    watch = CancelWatch(
        started_run.pk,
        started_run.job_id,
        output=lambda: "line 1\nline 2",
        on_kill=lambda: killed.append(1),
        gate=gate,
    )

    delay = watch()

    assert delay is not None and 0.9 < delay <= 1.0  # the grace period, then the kill
    assert Run.objects.get(pk=started_run.pk).output == "line 1\nline 2"
    watch.told_at -= 2  # the grace period is over
    assert watch() is None
    assert killed == []  # nothing to kill here


@pytest.fixture
def pool_child_gate() -> Iterator[StopGate]:
    """A gate in a process whose SIGUSR1 is billiard's soft time limit, as in
    a prefork child (restored afterwards)."""
    previous = signal.signal(signal.SIGUSR1, soft_timeout_sighandler)
    try:
        yield StopGate()
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_the_stop_raises_only_inside_the_callable_and_once(pool_child_gate):
    gate = pool_child_gate
    seen: list[str] = []
    with pytest.raises(SoftTimeLimitExceeded), gate.job_callable():
        assert gate.active
        gate.tell()
        time.sleep(5)  # interrupted by the signal
    with gate.job_callable():
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(5)
        except SoftTimeLimitExceeded:
            seen.append("stopped")
        os.kill(os.getpid(), signal.SIGUSR1)  # a second stop: already raised, ignored
        time.sleep(0.05)
        assert gate.tell() is False
    os.kill(os.getpid(), signal.SIGUSR1)  # between runs (the end being recorded): ignored
    time.sleep(0.05)
    assert seen == ["stopped"]
    assert gate.tell() is False
