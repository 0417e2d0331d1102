"""Every write to a run. State changes are compare-and-set: an UPDATE
filtered on the expected old status, whose row count says who won."""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs.errors import InvalidInput, JobNotFound
from jobs.models import Job
from jobs.services import on_run_finished, on_run_started

from .models import ACTIVE_STATUSES, Run, RunStatus, RunTrigger
from .signals import run_finished
from .statements import cas_update, insert_run, job_activity

log = logging.getLogger("takt.runs")


def _active(now: datetime) -> Q:
    """Runs that make a job busy: running, or queued and already due. A run
    queued for a later `run_at` does not block the schedule before it."""
    return Q(status=RunStatus.RUNNING) | Q(status=RunStatus.QUEUED, scheduled_for__lte=now)


def job_is_busy(job_id: int, *, now: datetime) -> bool:
    running, queued_due = job_activity(job_id, now=now)
    return running + queued_due > 0


def busy_job_ids(job_ids: list[int], *, now: datetime) -> set[int]:
    """The jobs among `job_ids` with a running or due queued run (one query)."""
    return set(
        Run.objects.filter(_active(now), job_id__in=job_ids)
        .values_list("job_id", flat=True)
        .distinct()
    )


def default_priority(job: Job, trigger: str) -> int:
    """F-22: manual and API runs go one step ahead of the job's scheduled
    runs (0 runs first; a job at 0 keeps 0)."""
    if trigger in (RunTrigger.MANUAL, RunTrigger.API):
        return max(job.priority - 1, 0)
    return job.priority


def skipped_message(job_id: int) -> str:
    return f"skipped: job #{job_id} already has an active run (overlap policy 'skip')"


def create_run(
    job: Job,
    *,
    trigger: str,
    now: datetime,
    scheduled_for: datetime | None = None,
    params: dict[str, Any] | None = None,
    priority: int | None = None,
    dedupe_key: str = "",
) -> Run:
    """Insert one queued run (or a `skipped` one when the job is busy and its
    overlap policy is `skip`). The caller publishes it after commit. A run
    for a later time is not checked now: the worker checks it when it starts."""
    scheduled_for = scheduled_for or now
    busy = scheduled_for <= now and job_is_busy(job.pk, now=now)
    run = Run(
        job=job,
        trigger=trigger,
        status=RunStatus.SKIPPED if busy else RunStatus.QUEUED,
        priority=default_priority(job, trigger) if priority is None else priority,
        params=job.params if params is None else params,
        scheduled_for=scheduled_for,
        enqueued_at=now,
        finished_at=now if busy else None,
        message=skipped_message(job.pk) if busy else "",
        dedupe_key=dedupe_key,
    )
    insert_run(run)
    if busy:
        log.info(
            "run %s of job %s skipped: job busy",
            run.pk,
            job.pk,
            extra={"job_id": job.pk, "run_id": run.pk},
        )
    return run


def _check_params(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise InvalidInput("params", f"must be a JSON object (a dict), got {type(params).__name__}")
    try:
        json.dumps(params, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("params", f"must be JSON-serialisable: {exc}") from None
    return params


def enqueue_job(
    job: Job | int,
    *,
    params: dict[str, Any] | None = None,
    priority: int | None = None,
    run_at: datetime | None = None,
    trigger: str = RunTrigger.API,
    dedupe_key: str | None = None,
    now: datetime | None = None,
) -> Run:
    """Start a run of `job` now, or at `run_at` (F-40). Works on disabled jobs
    (like "Run now", F-27). With `dedupe_key`, an active run of the job
    enqueued with the same key is returned instead of a new one.

    Raises JobNotFound for an unknown id and InvalidInput (naming the field)
    for bad params, priority, run_at or trigger."""
    from .publish import publish_after_commit

    now = now or timezone.now()
    if not isinstance(job, Job):
        try:
            job = Job.objects.get(pk=job)
        except (Job.DoesNotExist, ValueError, TypeError):
            raise JobNotFound(f"job: no job with id {job!r}") from None
    if params is not None:
        params = {**job.params, **_check_params(params)}
    if priority is not None and (not isinstance(priority, int) or not 0 <= priority <= 9):
        raise InvalidInput("priority", f"must be a whole number from 0 to 9, got {priority!r}")
    if run_at is not None and (run_at.tzinfo is None or run_at.utcoffset() is None):
        raise InvalidInput("run_at", "must be an aware datetime (with a time zone)")
    if trigger not in RunTrigger.values or trigger in (RunTrigger.SCHEDULE, RunTrigger.CATCHUP):
        raise InvalidInput("trigger", f"cannot enqueue with trigger {trigger!r}")
    # Without a dedupe key, each statement commits by itself (no BEGIN and
    # COMMIT round trips); the overlap check is advisory either way; the
    # job lock at start is what holds (runs/execution.py).
    with transaction.atomic() if dedupe_key else nullcontext():
        if dedupe_key:
            existing = Run.objects.filter(
                job=job, dedupe_key=dedupe_key, status__in=ACTIVE_STATUSES
            ).first()
            if existing is not None:
                return existing
        run = create_run(
            job,
            trigger=trigger,
            now=now,
            scheduled_for=max(run_at, now) if run_at else now,
            params=params,
            priority=priority,
            dedupe_key=dedupe_key or "",
        )
        if run.status == RunStatus.QUEUED and run.scheduled_for <= now:
            publish_after_commit([run])
    return run


def start_run(run: Run, *, worker: str, now: datetime) -> bool:
    """queued → running, and interval triggers anchored on the run's start
    move, in one transaction. False when another delivery (or a cancel) got
    there first: the caller must then do nothing at all."""
    with _atomic_if(_waits_for_runs(run)):
        changes = {"status": RunStatus.RUNNING, "started_at": now, "worker": worker[:255]}
        if not cas_update(run.pk, expected_status=RunStatus.QUEUED, changes=changes):
            return False
        if _waits_for_runs(run):
            on_run_started(run.job_id, started_at=now)
    run.status, run.started_at, run.worker = RunStatus.RUNNING, now, worker[:255]
    return True


def finish_run(
    run: Run,
    *,
    status: str,
    now: datetime,
    from_status: str = RunStatus.RUNNING,
    message: str = "",
    output: str | None = None,
    result: Any = None,
    result_code: int | None = None,
) -> bool:
    """from_status → a final status, with times and output, in one
    transaction with the interval triggers anchored on the run's end. Then
    `run_finished` receivers (the heartbeat) run after the commit: their
    failure never undoes the run's end. False (and nothing written) when
    the run was not in `from_status`."""
    started = run.started_at
    fields: dict[str, Any] = {
        "status": status,
        "finished_at": now,
        "duration_s": (now - started).total_seconds() if started else None,
        "message": message[:10000],
        "result": result,
        "result_code": result_code,
    }
    if output is not None:
        fields["output"] = output
    extra = {"job_id": run.job_id, "run_id": run.pk}
    with _atomic_if(_waits_for_runs(run)):
        if not cas_update(run.pk, expected_status=from_status, changes=fields):
            return False
        if _waits_for_runs(run):
            on_run_finished(run.job_id, started_at=started, finished_at=now)
    for name, value in fields.items():
        setattr(run, name, value)
    log.info("run %s of job %s ended %s", run.pk, run.job_id, status, extra=extra)
    try:
        run_finished.send(sender=Run, run=run)
    except Exception:
        log.exception("a run_finished receiver failed for run %s", run.pk, extra=extra)
    return True


def _atomic_if(needed: bool) -> AbstractContextManager[Any]:
    """A transaction where a second write must go with the first; a lone
    UPDATE is atomic by itself and saves the COMMIT round trip."""
    return transaction.atomic() if needed else nullcontext()


def _waits_for_runs(run: Run) -> bool:
    """Whether the run's job has triggers anchored on its runs; unknown
    (not annotated by the caller) counts as yes."""
    return bool(getattr(run, "waits_for_runs", True))


def save_output(run_id: int, output: str) -> None:
    """Store a running run's output so far (the admin shows it live)."""
    Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(output=output)
