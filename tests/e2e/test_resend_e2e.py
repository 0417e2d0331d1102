"""Lost messages with real workers and a real beat (runs/delivery.py): runs
whose messages a Redis flush wiped, and runs a killed worker had received
but not started, are sent again by the beat and execute exactly once each.
Executions are counted in an O_APPEND file (tests.append), outside Takt's
tables and outside the Redis that is flushed."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest
import redis

from jobs.models import Job
from runs.marks import mark_key
from runs.models import Run, RunStatus, RunTrigger
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until
from tests.live_fixtures import holds_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RESEND_AFTER_S = 2
ALIVE_TTL_S = 3
# The sweep waits ALIVE_TTL_S + 2 s after a loss of Redis's data.
FAST = {
    "TAKT_RESEND_AFTER_SECONDS": str(RESEND_AFTER_S),
    "TAKT_RESEND_CHECK_SECONDS": "0.5",
    "TAKT_WORKER_ALIVE_TTL_SECONDS": str(ALIVE_TTL_S),
}


def executions(path) -> Counter[int]:
    if not path.exists():
        return Counter()
    return Counter(int(line.split()[0]) for line in path.read_text().splitlines())


def appenders(path, count: int, *, prefix: str, seconds: float = 0) -> list[Job]:
    return [
        Job.objects.create(
            name=f"{prefix} {i}",
            target="tests.append",
            params={"path": str(path), "seconds": seconds},
        )
        for i in range(count)
    ]


def done(run_ids: list[int]) -> bool:
    return Run.objects.filter(pk__in=run_ids, status=RunStatus.SUCCEEDED).count() == len(run_ids)


def test_runs_whose_messages_a_redis_flush_wiped_each_execute_once(
    start_process, beat, redis_url, tmp_path
):
    client = redis.Redis.from_url(redis_url)
    path = tmp_path / "executions.log"
    runs = [enqueue_job(job, trigger=RunTrigger.MANUAL) for job in appenders(path, 10, prefix="f")]
    ids = [run.pk for run in runs]
    assert Run.objects.filter(pk__in=ids, published_at__isnull=False).count() == 10
    time.sleep(RESEND_AFTER_S)  # published a while before the loss
    client.flushall()  # a Redis restart without persistence: the messages are gone

    worker = start_process("worker", concurrency=2, **FAST)
    try:
        started = time.monotonic()
        beat(**FAST)
        wait_until(lambda: done(ids), 30, "the 10 runs to be re-sent and succeed")
        elapsed = time.monotonic() - started
        print(f"flushed runs all succeeded {elapsed:.1f} s after the beat started")
        holds_for(  # a late second delivery would show in this window
            lambda: executions(path) == Counter({run_id: 1 for run_id in ids}),
            1.0,
            "each flushed run executed once",
        )
        # The beat's first look starts the clock of Redis's data; the grace
        # (alive TTL + 2 s) and a sweep later they are sent.
        assert elapsed < ALIVE_TTL_S + 2 + 8, elapsed
    finally:
        worker.stop()


@pytest.mark.parametrize("successor", ["another worker", "the same worker restarted at once"])
def test_runs_a_killed_worker_had_prefetched_run_once(
    start_process, beat, redis_url, tmp_path, successor
):
    """Whether another worker takes over or a supervisor restarts the
    killed one under its own name before its liveness key could expire
    (a new start of it, runs.marks.worker_start), the prefetched runs are
    sent again and run once each."""
    client = redis.Redis.from_url(redis_url)
    path = tmp_path / "executions.log"
    name = f"e2e-doomed-{os.getpid()}@%h"
    # One pool process busy with a long run, two more messages prefetched.
    doomed = start_process(
        "worker", concurrency=1, name=name, TAKT_WORKER_PREFETCH_MULTIPLIER="3", **FAST
    )
    (long_job,) = appenders(path, 1, prefix="long", seconds=60)
    long_run = enqueue_job(long_job, trigger=RunTrigger.MANUAL)
    wait_until(lambda: executions(path)[long_run.pk] == 1, 15, "the long run to start")
    waiting = [enqueue_job(j, trigger=RunTrigger.MANUAL) for j in appenders(path, 2, prefix="w")]
    ids = [run.pk for run in waiting]

    def prefetched() -> bool:
        marks = client.mget([mark_key(i) for i in ids])
        return all(m is not None and m.startswith(b"w:") for m in marks)

    wait_until(prefetched, 10, "the worker to receive both waiting runs")
    assert Run.objects.filter(pk__in=ids, status=RunStatus.QUEUED).count() == 2
    assert client.hlen("unacked") == 3  # held by the worker: kombu would wait 12 h

    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.popen.wait(timeout=10)
    killed = time.monotonic()
    same = successor.startswith("the same")
    other = start_process("worker", concurrency=2, name=name if same else None, **FAST)
    try:
        beat(**FAST)
        wait_until(lambda: done(ids), 30, "the prefetched runs to run again")
        elapsed = time.monotonic() - killed
        print(f"prefetched runs succeeded {elapsed:.1f} s after the kill")
        holds_for(
            lambda: [executions(path)[i] for i in [*ids, long_run.pk]] == [1, 1, 1],
            1.0,
            "each prefetched run, and the killed long one, executed once",
        )
        # Its liveness key expires (ALIVE_TTL_S), then the next sweep sends
        # them; the other worker's start-up (~3 s here) is included.
        assert elapsed < ALIVE_TTL_S + 12, elapsed
    finally:
        other.stop()
        client.delete("unacked", "unacked_index")  # the dead worker's, for 12 h
