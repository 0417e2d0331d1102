"""A hung Redis (issue 28, item 5): its process stopped with SIGSTOP for
longer than the job locks' TTL while a beat and a worker run a job every
second, then woken. Its connections stay open and answer nothing, unlike a
killed Redis. Nothing may run twice, the processes go on without a
restart, and the runs go on after the wake. Executions are counted in an
O_APPEND file (tests.append), outside Takt's tables and Redis."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest
import redis

from jobs.models import Job, Trigger
from jobs.testing import private_redis
from runs.models import Run
from tests.live_fixtures import wait_until
from tests.processes import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAUSE_S = 8  # the fault: longer than the live processes' lock TTL (3 s)


def executions(path) -> Counter[int]:
    if not path.exists():
        return Counter()
    return Counter(int(line.split()[0]) for line in path.read_text().splitlines())


def test_a_hung_redis_doubles_nothing_and_the_runs_go_on(start_process, beat, tmp_path):
    (tmp_path / "redis").mkdir()
    with private_redis(tmp_path / "redis", port=free_port) as url:
        pid = int(redis.Redis.from_url(url).info()["process_id"])
        path = tmp_path / "executions.log"
        job = Job.objects.create(
            name="every second", target="tests.append", params={"path": str(path), "seconds": 0}
        )
        Trigger.objects.create(job=job, kind="interval", interval_seconds=1)
        worker = start_process("worker", concurrency=2, REDIS_URL=url)
        ticking = beat(REDIS_URL=url)
        wait_until(lambda: len(executions(path)) >= 3, 30, "three runs before the hang")

        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_S)  # the fault's length, not a wait for a state
            before_wake = set(executions(path))
        finally:
            os.kill(pid, signal.SIGCONT)
        woke = time.monotonic()

        wait_until(
            lambda: len(set(executions(path)) - before_wake) >= 3,
            45,
            "three runs executed after Redis woke",
        )
        print(f"three runs after the wake within {time.monotonic() - woke:.1f} s")
        counts = executions(path)
        assert [run for run, n in counts.items() if n > 1] == [], counts
        fire_times = list(
            Run.objects.filter(job=job, trigger="schedule").values_list("scheduled_for", flat=True)
        )
        assert len(fire_times) == len(set(fire_times))
        assert worker.popen.poll() is None and ticking.popen.poll() is None
