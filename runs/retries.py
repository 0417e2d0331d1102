"""Retries (F-25, F-103): after a run fails, times out or is lost, the pure
`compute_retry` decides; this module gathers its facts (the job's retry
policy, its next scheduled fire time) and builds the retry run, which
`finish_run` inserts in the same transaction as the failed run's end, so
no crash can record the failure without its retry.

A retry is a new run (trigger `retry`, attempt + 1, `retry_of` the failed
run) queued for a later time: the outbox sweep sends it when that time
comes, and a busy job holds it until the job is free (a retry is never
skipped for overlap).
"""

from __future__ import annotations

import random
from datetime import datetime

from django.db.models import Min

from jobs.models import Job, Trigger
from jobs.specs import retry_rules
from runs.core.transitions import Outcome, RetryPlan, compute_retry
from runs.models import Run, RunStatus, RunTrigger

RETRYABLE = {
    RunStatus.FAILED: Outcome.FAILED,
    RunStatus.TIMED_OUT: Outcome.TIMED_OUT,
    RunStatus.LOST: Outcome.LOST,
}


def next_fire_at(job_id: int) -> datetime | None:
    """The job's next scheduled fire time (its active triggers), if any."""
    value = Trigger.objects.filter(job_id=job_id, active=True).aggregate(m=Min("next_run_at"))
    return value["m"]  # type: ignore[no-any-return]


def plan_retry(
    run: Run, *, status: str, now: datetime, error_types: tuple[str, ...] = ()
) -> RetryPlan | None:
    """The retry decision for `run` ending in `status` at `now`; None when
    the status is not retryable or the job has no retries (no query then)."""
    outcome = RETRYABLE.get(RunStatus(status))
    if outcome is None or not getattr(run.job, "max_retries", 0):
        return None
    job = Job.objects.get(pk=run.job_id)
    return compute_retry(
        retry_rules(job),
        attempt=run.attempt or 1,
        outcome=outcome,
        error_types=error_types,
        now=now,
        next_fire_at=next_fire_at(run.job_id),
        rand=random.random(),
    )


def retry_run(run: Run, plan: RetryPlan, *, now: datetime) -> Run:
    """The (unsaved) retry run for a plan with a retry_at."""
    assert plan.retry_at is not None
    return Run(
        job_id=run.job_id,
        trigger=RunTrigger.RETRY,
        status=RunStatus.QUEUED,
        priority=run.priority,
        params=run.params,
        scheduled_for=plan.retry_at,
        enqueued_at=now,
        attempt=(run.attempt or 1) + 1,
        retry_of_id=run.pk,
        # A retry of a child or of a dependency run belongs to the same cause.
        cause_id=run.cause_id,
    )
