"""SIGTERM to a beat in the middle of a tick (a deploy, `systemctl stop`,
Ctrl-C): the beat stops once the tick has published the runs it recorded,
so no run waits for another beat's outbox pass, or for this one's restart.
No worker runs here: the messages stay in the queue to be counted."""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

JOBS = 1500


def queue_lists(client: redis.Redis) -> list[bytes]:
    """The takt queue's lists in Redis: one per priority step (kombu; the
    separator is the project's, scheduler_project/settings.py)."""
    return [b"takt", *(b"takt:%d" % step for step in range(1, 10))]


def queued_messages(client: redis.Redis) -> int:
    return sum(client.llen(key) for key in queue_lists(client))


def test_a_beat_stopped_in_the_middle_of_a_tick_publishes_what_it_recorded(beat, redis_url):
    client = redis.Redis.from_url(redis_url)
    before = queued_messages(client)
    due = timezone.now() - timedelta(seconds=1)
    jobs = Job.objects.bulk_create(
        Job(name=f"stop mid-tick {i}", target="tests.count", params={"key": "e2e:stop"})
        for i in range(JOBS)
    )
    Trigger.objects.bulk_create(
        Trigger(job=job, kind="interval", interval_seconds=3600, next_run_at=due, active=True)
        for job in jobs
    )
    # Small batches: the tick claims and publishes 60 of them in turn.
    proc = beat(TAKT_CLAIM_BATCH="25")
    try:
        deadline = time.monotonic() + 20
        while not Run.objects.exists():  # the first batch is recorded
            assert time.monotonic() < deadline, proc.log()[-3000:]
            time.sleep(0.005)
        proc.popen.send_signal(signal.SIGTERM)  # to the beat alone
        proc.popen.wait(timeout=30)

        runs = Run.objects.filter(job__in=jobs)
        assert runs.exists()
        assert not runs.filter(published_at__isnull=True).exists(), proc.log()[-3000:]
        assert queued_messages(client) - before == runs.count()
        assert "stopping once this tick has published its runs" in proc.log()
        assert "Traceback" not in proc.log(), proc.log()[-3000:]
    finally:
        client.delete(*queue_lists(client))  # no later worker runs them
