"""The whole stack with real processes: beat → Redis → worker → database."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from heartbeats.models import Heartbeat
from jobs.models import Job, Trigger
from runs.locks import job_lock_key
from runs.models import Run, RunStatus, RunTrigger
from runs.publish import publish_runs
from runs.services import create_run, enqueue_job
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def make_job(target: str, *, params: dict | None = None, **fields) -> Job:
    return Job.objects.create(name=f"e2e {target}", target=target, params=params or {}, **fields)


def finished(run: Run) -> Run | None:
    run.refresh_from_db()
    return run if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING) else None


def test_job_every_two_seconds_succeeds_repeatedly_with_output(worker, beat):
    job = make_job("tests.echo", params={"colour": "green"})
    # The beat first: a beat that takes over two seconds to start on a busy
    # machine would find two fire times due at its first tick (a catch-up).
    beat()
    Trigger.objects.create(
        job=job, kind="cron", cron_expression="*/2 * * * * *", timezone="Europe/Berlin"
    )

    wait_until(
        lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 3, 15, "three succeeded runs"
    )

    runs = list(job.runs.filter(status=RunStatus.SUCCEEDED).order_by("scheduled_for")[:3])
    for run in runs:
        assert run.trigger == RunTrigger.SCHEDULE
        assert "hello from e2e tests.echo" in run.output
        assert "params=[('colour', 'green')]" in run.output
        assert run.started_at >= run.scheduled_for
        assert run.finished_at >= run.started_at and run.duration_s is not None
        assert run.worker.startswith("e2e-")
        assert run.scheduled_for.second % 2 == 0
    gaps = {(b.scheduled_for - a.scheduled_for) for a, b in zip(runs, runs[1:], strict=False)}
    assert gaps == {timedelta(seconds=2)}
    # The heartbeat is written right after the run's end (its own statement):
    # a moment later than the third run's status on a busy machine.
    wait_until(
        lambda: Heartbeat.objects.get(job=job).run_count >= 3, 5, "the heartbeat of three runs"
    )
    assert Heartbeat.objects.get(job=job).failure_count == 0


def test_two_beats_at_once_give_exactly_one_run_per_fire_time(worker, beat, redis_url):
    job = make_job("tests.count", params={"key": "e2e:two-beats"})
    trigger = Trigger.objects.create(
        job=job, kind="cron", cron_expression="* * * * * *", timezone="UTC"
    )
    first, second = beat(), beat()

    wait_until(lambda: job.runs.count() >= 6, 20, "six fire times dispatched")
    first.stop()
    second.stop()
    wait_until(
        lambda: not job.runs.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).exists(),
        10,
        "runs to end",
    )

    fire_times = Counter(job.runs.values_list("scheduled_for", flat=True))
    assert max(fire_times.values()) == 1, fire_times
    ordered = sorted(fire_times)
    assert all(b - a == timedelta(seconds=1) for a, b in zip(ordered, ordered[1:], strict=False)), (
        ordered
    )
    executed = int(redis.Redis.from_url(redis_url).get("e2e:two-beats") or 0)
    assert executed == job.runs.filter(status=RunStatus.SUCCEEDED).count()
    trigger.refresh_from_db()
    assert trigger.next_run_at > ordered[-1]
    for proc in (first, second):
        assert "Traceback" not in proc.log(), proc.log()[-3000:]


def test_the_same_run_delivered_three_times_executes_once(worker, redis_url):
    job = make_job("tests.count", params={"key": "e2e:dup", "seconds": 0.5})
    run = create_run(job, trigger=RunTrigger.MANUAL, now=timezone.now())
    for _ in range(3):  # three messages with the same task id, as a republish would send
        Run.objects.filter(pk=run.pk).update(published_at=None)
        publish_runs([run.pk], now=timezone.now())

    wait_until(lambda: finished(run), 15, "the run to end")
    assert run.status == RunStatus.SUCCEEDED
    assert int(redis.Redis.from_url(redis_url).get("e2e:dup")) == 1
    assert run.output.count("execution") == 1


def test_a_run_over_its_timeout_ends_timed_out_and_frees_the_lock(worker, redis_url):
    job = make_job("tests.sleep", params={"seconds": 30}, timeout_s=1)
    run = enqueue_job(job, trigger=RunTrigger.MANUAL)

    wait_until(lambda: finished(run), 15, "the run to time out")
    assert run.status == RunStatus.TIMED_OUT
    assert "timed out after 1 s" in run.message
    assert "sleeping 30.0 s" in run.output
    assert 0.9 <= run.duration_s < 10
    # The worker records the end, then releases the lock (runs.execution, step 5).
    client = redis.Redis.from_url(redis_url)
    wait_until(lambda: client.get(job_lock_key(job.pk)) is None, 5, "the lock to be released")

    Job.objects.filter(pk=job.pk).update(params={"seconds": 0})
    again = enqueue_job(job.pk, trigger=RunTrigger.MANUAL)
    wait_until(lambda: finished(again), 15, "the next run to end")
    assert again.status == RunStatus.SUCCEEDED
