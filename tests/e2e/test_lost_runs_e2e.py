"""Lost runs (F-70) with a real worker: a worker killed with SIGKILL in the
middle of its runs stops renewing their job locks; once the locks' TTL has
run out, maintenance, or any beat's continuous check, marks the runs `lost`
and retries them where the job's retry policy says so."""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis
from django.test import override_settings
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.locks import job_lock_key
from runs.maintenance import run_maintenance
from runs.models import Run, RunStatus, RunTrigger
from runs.recovery import LOST_MESSAGE
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LOCK_TTL_S = 3  # the workers' TAKT_LOCK_TTL_SECONDS (the least the setting allows)


def sleeper(name: str, *, max_retries: int) -> Job:
    return Job.objects.create(
        name=name,
        target="tests.sleep",
        params={"seconds": 30},
        max_retries=max_retries,
        retry_backoff_s=60,
        retry_jitter=0,
    )


def test_runs_of_a_worker_killed_mid_run_are_marked_lost_and_retried_per_policy(
    start_process, redis_url, redis_client
):
    client = redis.Redis.from_url(redis_url)
    worker = start_process("worker", concurrency=2, TAKT_LOCK_TTL_SECONDS=str(LOCK_TTL_S))
    retried = sleeper("retries once", max_retries=1)
    not_retried = sleeper("no retries", max_retries=0)
    runs = [enqueue_job(job, trigger=RunTrigger.MANUAL) for job in (retried, not_retried)]

    def both_running_and_renewed() -> bool:
        # The keeper saves the output when it renews the lock: once it has,
        # the worker is well into the runs.
        running = Run.objects.filter(pk__in=[r.pk for r in runs], status=RunStatus.RUNNING).exclude(
            output=""
        )
        locks = client.exists(*(job_lock_key(job.pk) for job in (retried, not_retried)))
        return running.count() == 2 and locks == 2

    wait_until(both_running_and_renewed, 20, "both runs to run and renew their job locks")
    time.sleep(LOCK_TTL_S)  # older than the TTL, but alive: their locks are renewed
    with override_settings(TAKT_LOCK_TTL_SECONDS=LOCK_TTL_S):
        alive = run_maintenance(now=timezone.now(), only=["lost"])
    assert alive.counts() == {"lost": {"locked": 2}}

    os.killpg(worker.pid, signal.SIGKILL)  # the worker and its pool children, no clean-up
    worker.popen.wait(timeout=10)
    wait_until(
        lambda: not client.exists(job_lock_key(retried.pk), job_lock_key(not_retried.pk)),
        LOCK_TTL_S + 5,
        "the job locks to expire",
    )
    assert Run.objects.filter(status=RunStatus.RUNNING).count() == 2  # nobody noticed yet

    with override_settings(TAKT_LOCK_TTL_SECONDS=LOCK_TTL_S):
        report = run_maintenance(now=timezone.now(), only=["lost"])

    assert report.lines() == ["Recover lost runs: marked 2 runs lost (1 retried)"]
    first, other = (Run.objects.get(pk=r.pk) for r in runs)
    assert (first.status, other.status) == (RunStatus.LOST, RunStatus.LOST)
    assert first.message == f"{LOST_MESSAGE}; retry 1 of 1 in 60 s"
    assert other.message == LOST_MESSAGE
    assert first.output.startswith("sleeping 30.0 s")  # saved by the keeper before the kill
    retry = Run.objects.get(retry_of=first)
    assert (retry.status, retry.trigger, retry.attempt) == (RunStatus.QUEUED, RunTrigger.RETRY, 2)
    assert not Run.objects.filter(retry_of=other).exists()
    assert retried.runs.count() == 2 and not_retried.runs.count() == 1


LOST_CHECK_S = 1  # the beat's TAKT_LOST_CHECK_SECONDS
POLL_S = 0.2  # TAKT_POLL_SECONDS of the live processes


def test_the_beat_marks_a_killed_workers_runs_lost_within_the_ttl_and_the_job_runs_again(
    start_process, beat, redis_client
):
    skipper = Job.objects.create(
        name="every second, skip", target="tests.sleep", params={"seconds": 20}
    )
    retried = sleeper("retries once", max_retries=1)
    doomed = start_process("worker", concurrency=2)
    retried_run = enqueue_job(retried, trigger=RunTrigger.MANUAL)
    checker = beat(TAKT_LOST_CHECK_SECONDS=str(LOST_CHECK_S))
    Trigger.objects.create(job=skipper, kind="interval", interval_seconds=1)

    def both_renewed() -> Run | None:
        running = Run.objects.filter(status=RunStatus.RUNNING).exclude(output="")
        locks = redis_client.exists(job_lock_key(skipper.pk), job_lock_key(retried.pk))
        return running.filter(job=skipper).first() if running.count() == 2 and locks == 2 else None

    first = wait_until(both_renewed, 30, "both runs to start and renew their locks")
    start_process("worker", concurrency=1)  # the survivor
    time.sleep(LOCK_TTL_S)  # older than the TTL, their locks renewed: not lost
    assert Run.objects.filter(status=RunStatus.RUNNING).count() == 2
    assert skipper.runs.filter(status=RunStatus.SKIPPED).exists()  # fire times skipped meanwhile

    os.killpg(doomed.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    doomed.popen.wait(timeout=10)
    wait_until(
        lambda: Run.objects.filter(status=RunStatus.LOST).count() == 2,
        LOCK_TTL_S + LOST_CHECK_S + POLL_S + 5,
        "the beat to mark both runs lost",
    )
    noticed_s = time.monotonic() - killed_at

    assert noticed_s <= LOCK_TTL_S + LOST_CHECK_S + POLL_S + 2, noticed_s
    first.refresh_from_db()
    retried_run.refresh_from_db()
    assert (first.duration_s, retried_run.duration_s) == (None, None)
    assert first.message == LOST_MESSAGE
    assert retried_run.message == f"{LOST_MESSAGE}; retry 1 of 1 in 60 s"
    retry = Run.objects.get(retry_of=retried_run)
    assert (retry.status, retry.trigger, retry.attempt) == (RunStatus.QUEUED, RunTrigger.RETRY, 2)
    lines = [f"run {r.pk} of job {r.job_id} lost" for r in (first, retried_run)]

    # the beat logs each after the commit that marked them: wait for both lines
    def both_logged() -> str | None:
        text = checker.log()
        return text if all(line in text for line in lines) else None

    log = wait_until(both_logged, 10, "the beat's lines for both lost runs")
    assert [log.count(line) for line in lines] == [1, 1]  # each marked once

    # The job is free at once: the first fire time recorded after the
    # marking (the same tick may record one, just after its check) is not
    # skipped but runs, on the survivor.
    def next_fire_time() -> Run | None:
        later = skipper.runs.filter(enqueued_at__gte=first.finished_at)
        return later.order_by("scheduled_for").first()

    nxt = wait_until(next_fire_time, 5, "the next fire time after the marking")
    wait_until(
        lambda: Run.objects.get(pk=nxt.pk).status != RunStatus.QUEUED, 15, "the next run to start"
    )
    nxt.refresh_from_db()
    assert nxt.status == RunStatus.RUNNING, (nxt.status, nxt.message)
    assert nxt.worker and nxt.worker != first.worker  # the survivor
