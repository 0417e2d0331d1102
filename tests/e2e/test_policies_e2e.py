"""Scheduling policies with real beat and worker processes (F-22, F-23,
F-24, F-25, F-26, F-28): what an operator sees in the run history."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.models import Run, RunStatus, RunTrigger
from runs.queue import pause_queue, resume_queue
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until
from tests.live_fixtures import holds_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ENDED = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT]


def make_job(target: str, *, params: dict | None = None, **fields) -> Job:
    return Job.objects.create(name=f"e2e {target}", target=target, params=params or {}, **fields)


def every_second(job: Job) -> Trigger:
    return Trigger.objects.create(job=job, kind="interval", interval_seconds=1)


def never_overlap(runs: list[Run]) -> None:
    ordered = sorted(runs, key=lambda r: r.started_at)
    for before, after in zip(ordered, ordered[1:], strict=False):
        assert after.started_at >= before.finished_at, (before.pk, after.pk)


def test_buffer_one_runs_back_to_back_never_in_parallel_and_no_pile_up(worker, beat, redis_url):
    key = "e2e:buffer-one"
    job = make_job("tests.count", params={"key": key, "seconds": 3}, overlap_policy="buffer_one")
    every_second(job)
    beat()

    waiting_seen = []

    def three_done() -> bool:
        waiting_seen.append(job.runs.filter(status=RunStatus.QUEUED).count())
        return job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 3

    wait_until(three_done, 25, "three buffered runs to succeed")
    Job.objects.filter(pk=job.pk).update(enabled=False)
    Trigger.objects.filter(job=job).update(active=False)

    done = list(job.runs.filter(status=RunStatus.SUCCEEDED))
    never_overlap(done)
    ordered = sorted(done, key=lambda r: r.started_at)
    for before, after in zip(ordered, ordered[1:], strict=False):
        # the waiting run starts as soon as the one before it ends
        assert after.started_at - before.finished_at < timedelta(seconds=1.5)
    assert max(waiting_seen) <= 1  # one waiting run at most: no pile-up
    assert job.runs.filter(status=RunStatus.SKIPPED).count() >= 3
    executions = int(redis.Redis.from_url(redis_url).get(key) or 0)
    assert executions >= len(done)


def test_skip_records_skipped_runs_and_never_runs_two_at_once(worker, beat):
    job = make_job("tests.sleep", params={"seconds": 2.5})  # overlap policy skip (default)
    every_second(job)
    beat()

    wait_until(
        lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, 20, "two runs to succeed"
    )
    Trigger.objects.filter(job=job).update(active=False)

    skipped = job.runs.filter(status=RunStatus.SKIPPED)
    assert skipped.count() >= 2
    # skipped by the beat ("the job already has an active run") or, when the
    # run before it ended only as the worker took this one, by the worker
    # ("job #n is locked by another run"): both are the overlap policy
    reasons = [r.message for r in skipped]
    assert all(m.endswith("(overlap policy 'skip')") for m in reasons), reasons
    never_overlap(list(job.runs.filter(status=RunStatus.SUCCEEDED)))


def test_a_failing_job_retries_with_growing_delays_then_stops(worker, beat):
    job = make_job(
        "tests.fail", max_retries=3, retry_backoff_s=1, retry_backoff_factor=2, retry_jitter=0
    )
    beat()  # its outbox sweep sends each retry when its delay is over
    first = enqueue_job(job, trigger="manual")

    wait_until(lambda: job.runs.filter(status=RunStatus.FAILED).count() == 4, 30, "4 attempts")
    runs = list(job.runs.order_by("attempt"))
    assert [r.attempt for r in runs] == [1, 2, 3, 4]
    assert runs[0].pk == first.pk
    assert [r.trigger for r in runs[1:]] == [RunTrigger.RETRY] * 3
    waits = [
        (b.started_at - a.finished_at).total_seconds() for a, b in zip(runs, runs[1:], strict=False)
    ]
    for wait, delay in zip(waits, (1, 2, 4), strict=True):
        assert delay - 0.1 <= wait < delay + 2.5, waits
    assert runs[-1].message == "failed on purpose; no retries left (3 of 3 used)"
    time.sleep(1)
    assert job.runs.count() == 4  # and no fifth


def test_a_timed_out_run_is_stopped_and_retried_where_the_policy_says(worker, beat):
    job = make_job(
        "tests.sleep",
        params={"seconds": 30},
        timeout_s=1,
        max_retries=1,
        retry_on_timeout=True,
        retry_backoff_s=1,
        retry_jitter=0,
    )
    beat()
    enqueue_job(job, trigger="manual")

    wait_until(lambda: job.runs.filter(status=RunStatus.TIMED_OUT).count() == 2, 30, "2 timeouts")
    first, retry = job.runs.order_by("attempt")
    assert first.message == "timed out after 1 s and was stopped; retry 1 of 1 in 1 s"
    assert retry.trigger == RunTrigger.RETRY and retry.result_code == -1002
    assert first.duration_s < 5 and retry.duration_s < 5  # stopped, not slept for 30 s


def test_pause_enqueues_nothing_and_resume_catches_up_exactly_once(worker, beat):
    job = make_job("tests.echo")
    every_second(job)
    beat()
    wait_until(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).exists(), 15, "a first run")

    pause_queue(note="e2e", by="test", now=timezone.now())
    # The pause is committed: a tick reads its clock first, then the pause,
    # so a tick that claims after this moment sees it. A tick that began
    # before may still record runs, stamped with its earlier clock.
    paused = timezone.now()
    holds_for(
        lambda: not job.runs.filter(enqueued_at__gt=paused).exists(),
        4,
        "nothing enqueued while paused",
    )

    resumed = timezone.now()
    resume_queue(now=resumed)
    wait_until(lambda: job.runs.filter(enqueued_at__gte=resumed).count() >= 3, 15, "runs after")
    Trigger.objects.filter(job=job).update(active=False)
    after = list(job.runs.filter(enqueued_at__gte=resumed).order_by("scheduled_for"))
    catch_up = [r for r in after if r.trigger == RunTrigger.CATCHUP]
    assert len(catch_up) == 1  # the fire times of the pause, caught up once
    assert catch_up[0].missed_count >= 2
    assert all(r.trigger == RunTrigger.SCHEDULE for r in after if r is not catch_up[0])


@pytest.mark.parametrize(
    ("policy", "catch_up_runs"), [("run_once", 1), ("skip", 0), ("run_all", 3)]
)
def test_beat_down_for_several_fire_times_then_the_missed_run_policy_holds(
    worker, beat, policy, catch_up_runs
):
    # Overlap `allow`: a run the stopped beat recorded but had no time to send
    # (the outbox sends it later) must not make the restart's claim a skip.
    job = make_job(
        "tests.echo",
        missed_run_policy=policy,
        catchup_max_runs=3,
        overlap_policy="allow",
        max_instances=10,
    )
    Trigger.objects.create(job=job, kind="interval", interval_seconds=2)
    first = beat()
    wait_until(lambda: job.runs.exists(), 10, "a first run")
    first.stop()
    stopped = timezone.now()
    time.sleep(9)  # four or five fire times pass with no beat

    beat()
    wait_until(lambda: job.runs.filter(enqueued_at__gt=stopped).exists(), 10, "the restart claim")
    time.sleep(0.5)
    Trigger.objects.filter(job=job).update(active=False)
    claim = job.runs.filter(enqueued_at__gt=stopped)
    first_claim_at = min(r.enqueued_at for r in claim)
    batch = [r for r in claim if r.enqueued_at == first_claim_at]
    ran = [r for r in batch if r.status != RunStatus.SKIPPED]
    seen = [(r.trigger, r.status, r.scheduled_for, r.missed_count, r.enqueued_at) for r in claim]
    assert len([r for r in ran if r.trigger == RunTrigger.CATCHUP]) == catch_up_runs, (
        stopped,
        seen,
    )
    recorded = sum(r.missed_count for r in batch) + len(ran)
    assert recorded >= 4  # every missed fire time is run or counted
    if policy == "run_once":  # issue 27: ONE run, not a catch-up beside an on-time run
        assert [r.trigger for r in ran] == [RunTrigger.CATCHUP], seen
    if policy == "skip":
        assert any(r.status == RunStatus.SKIPPED and "missed fire time" in r.message for r in batch)


def test_timeout_action_continue_warns_and_keeps_the_job_locked(worker):
    job = make_job("tests.sleep", params={"seconds": 3}, timeout_s=1, timeout_action="continue")
    run = enqueue_job(job, trigger="manual")
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.RUNNING, 10, "the start")
    time.sleep(1.8)  # past the timeout: still running, the job still locked
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    second = enqueue_job(job, trigger="manual")
    assert second.status == RunStatus.SKIPPED

    ended = wait_until(lambda: finished_run(run), 15, "the run to end")
    assert ended.status == RunStatus.SUCCEEDED  # not stopped
    assert ended.duration_s >= 3
    assert "ran past its timeout of 1 s" in ended.message
    assert "warning: ran past its timeout of 1 s" in ended.output


def finished_run(run: Run) -> Run | None:
    run.refresh_from_db()
    return run if run.status in ENDED else None
