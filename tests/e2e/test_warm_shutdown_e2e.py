"""SIGTERM to a worker (Celery's warm shutdown): its running run finishes
and is recorded, and a run it had received but not started goes back to
the queue at once and runs on another worker (runs/shutdown.py) — not
after the broker's 12 h visibility timeout, and not only once the running
run has ended. No beat runs here: nothing is re-sent."""

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

LONG_S = 8


def executions(path) -> Counter[int]:
    if not path.exists():
        return Counter()
    return Counter(int(line.split()[0]) for line in path.read_text().splitlines())


def appender(path, name: str, seconds: float) -> Job:
    return Job.objects.create(
        name=name, target="tests.append", params={"path": str(path), "seconds": seconds}
    )


def test_sigterm_finishes_the_running_run_and_gives_back_the_one_not_started(
    start_process, redis_url, tmp_path
):
    client = redis.Redis.from_url(redis_url)
    path = tmp_path / "executions.log"
    leaving = start_process("worker", concurrency=1, TAKT_WORKER_PREFETCH_MULTIPLIER="2")
    running = enqueue_job(appender(path, "long", LONG_S), trigger=RunTrigger.MANUAL)
    wait_until(lambda: executions(path)[running.pk] == 1, 15, "the long run to start")
    received = enqueue_job(appender(path, "short", 0), trigger=RunTrigger.MANUAL)
    wait_until(
        lambda: (client.get(mark_key(received.pk)) or b"").startswith(b"w:"),
        10,
        "the worker to receive the second run",
    )
    other = start_process("worker", concurrency=1)
    try:
        assert Run.objects.get(pk=received.pk).status == RunStatus.QUEUED
        assert Run.objects.get(pk=running.pk).status == RunStatus.RUNNING

        os.kill(leaving.pid, signal.SIGTERM)  # the main process only, as `kill <pid>`
        sent_at = time.monotonic()

        def started_elsewhere() -> bool:
            run = Run.objects.get(pk=received.pk)
            return run.status == RunStatus.SUCCEEDED

        wait_until(started_elsewhere, LONG_S, "the received run to run on the other worker")
        waited = time.monotonic() - sent_at
        print(f"the given-back run succeeded {waited:.2f} s after SIGTERM")
        long_run = Run.objects.get(pk=running.pk)
        assert long_run.status == RunStatus.RUNNING, "the given-back run waited for the long one"
        assert waited < LONG_S, waited  # before the long run could have ended
        assert Run.objects.get(pk=received.pk).worker != long_run.worker

        assert leaving.popen.wait(timeout=LONG_S + 10) == 0
        long_run.refresh_from_db()
        assert long_run.status == RunStatus.SUCCEEDED
        assert "gave back 1 received runs that had not started" in leaving.log()

        def held(run: Run) -> bool:
            """Its message is among kombu's unacknowledged ones."""
            return f"takt-run-{run.pk}".encode() in b"".join(client.hvals("unacked"))

        # A worker acks a run's message after the task returned, a moment
        # after the run's row says it ended (seen in CI: read too early).
        try:
            wait_until(
                lambda: not held(running) and not held(received),
                10,
                "both runs' messages to be acknowledged (gone from kombu's unacked)",
            )
        except AssertionError:
            print("unacked:", client.hgetall("unacked"), "queue:", client.lrange("takt", 0, -1))
            print("marks:", client.get(mark_key(running.pk)), client.get(mark_key(received.pk)))
            raise
        holds_for(
            lambda: executions(path) == Counter({running.pk: 1, received.pk: 1}),
            0.5,
            "each run executed once",
        )
    finally:
        leaving.stop()
        other.stop()
