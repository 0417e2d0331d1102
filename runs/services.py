"""Every write to a run. State changes are compare-and-set: an UPDATE
filtered on the expected old status, whose row count says who won."""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from jobs.core.rules import JobLimits
from jobs.errors import InvalidInput, JobNotFound, MaintenanceMode, QueuePaused
from jobs.models import Job
from jobs.services import on_run_finished, on_run_started, pause_job, set_jobs_enabled
from runs.core.admission import Admission, Decision
from runs.core.transitions import JobAfterRun, RetryPlan, compute_job_after_run
from runs.models import Run, RunStatus, RunTrigger
from runs.overlap import admit, cancel_active_runs, revoke_after_commit
from runs.publish import publish_after_commit
from runs.queue import lock_file_present
from runs.retries import retry_run
from runs.signals import run_finished
from runs.statements import cas_update, insert_run, job_activity

log = logging.getLogger("takt.runs")


def default_priority(job: Job, trigger: str) -> int:
    """F-22: manual and API runs go one step ahead of the job's scheduled
    runs (0 runs first; a job at 0 keeps 0)."""
    if trigger in (RunTrigger.MANUAL, RunTrigger.API):
        return max(job.priority - 1, 0)
    return job.priority


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
    """Insert one run as the job's overlap policy admits it (F-23): queued,
    queued and held (waiting for the running run), or `skipped` with the
    reason; a `cancel_other` run cancels the job's other active runs. The
    caller publishes a queued, unheld, due run after commit. A run for a
    later time is admitted when it starts (the worker's lock check)."""
    scheduled_for = scheduled_for or now
    decision = Decision(Admission.QUEUE)
    if scheduled_for <= now:
        running, waiting, paused, maintenance = job_activity(job.pk, now=now)
        if (maintenance or lock_file_present()) and not job.allowed_during_maintenance:
            raise MaintenanceMode(
                f"maintenance mode is on: job #{job.pk} is not allowed to start during"
                " maintenance (manage.py maintenance_mode off ends it)"
            )
        if paused:
            raise QueuePaused(
                "the queue is paused: no run is enqueued until it resumes"
                " (manage.py resume_queue resumes it)"
            )
        decision = admit(job, running=running, waiting=waiting)
    skipped = decision.admission is Admission.SKIP
    run = Run(
        job=job,
        trigger=trigger,
        status=RunStatus.SKIPPED if skipped else RunStatus.QUEUED,
        held=decision.admission is Admission.HOLD,
        priority=default_priority(job, trigger) if priority is None else priority,
        params=job.params if params is None else params,
        scheduled_for=scheduled_for,
        enqueued_at=now,
        finished_at=now if skipped else None,
        message=f"skipped: {decision.reason}" if skipped else "",
        dedupe_key=dedupe_key,
    )
    with transaction.atomic() if decision.admission is Admission.REPLACE else nullcontext():
        insert_run(run)
        if decision.admission is Admission.REPLACE:
            revoke_after_commit(
                cancel_active_runs(
                    job.pk, keep=run.pk, now=now, reason=f"cancelled: replaced by run #{run.pk}"
                )
            )
    if skipped:
        log.info(
            "run %s of job %s skipped: %s",
            run.pk,
            job.pk,
            decision.reason,
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
    (like "Run now", F-27). With `dedupe_key` (F-43), the job's run
    enqueued with the same key within TAKT_DEDUPE_WINDOW_SECONDS is
    returned instead of a new one, whatever its status; such a run has
    `run.deduplicated` set to True.

    Raises JobNotFound for an unknown id and InvalidInput (naming the field)
    for bad params, priority, run_at, trigger or dedupe_key."""
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
    scheduled_for = max(run_at, now) if run_at else now
    if dedupe_key:
        return _enqueue_once(
            job,
            dedupe_key,
            now=now,
            scheduled_for=scheduled_for,
            trigger=trigger,
            params=params,
            priority=priority,
        )
    # Without a dedupe key, each statement commits by itself (no BEGIN and
    # COMMIT round trips); the overlap check is advisory either way; the
    # job lock at start is what holds (runs/execution.py).
    run = create_run(
        job,
        trigger=trigger,
        now=now,
        scheduled_for=scheduled_for,
        params=params,
        priority=priority,
    )
    _publish_if_due(run, now=now)
    return run


def _publish_if_due(run: Run, *, now: datetime) -> None:
    if run.status == RunStatus.QUEUED and not run.held and run.scheduled_for <= now:
        publish_after_commit([run])


def run_with_key(job_id: int, key: str) -> Run | None:
    """The job's run holding dedupe `key`, if any (at most one: unique index)."""
    return Run.objects.filter(job_id=job_id, dedupe_key=key).first()


def _enqueue_once(
    job: Job, key: str, *, now: datetime, scheduled_for: datetime, **run_fields: Any
) -> Run:
    """F-43: the run enqueued for `job` with `key` within
    TAKT_DEDUPE_WINDOW_SECONDS (whatever its status; marked
    `run.deduplicated = True`), else a new run with the key.

    1. Look for the job's run with the key. Inside the window: return it.
    2. Else, in one transaction: take the key off an older run (its window
       is over) and insert the new run with it.
    3. The partial unique index on (job, dedupe_key) refuses a second run
       with the key: a concurrent caller that loses the insert goes back
       to 1 and returns the winner's run."""
    if len(key) > 200:
        raise InvalidInput("dedupe_key", "at most 200 characters")
    window = timedelta(seconds=settings.TAKT_DEDUPE_WINDOW_SECONDS)
    for _attempt in range(3):
        existing = run_with_key(job.pk, key)
        if existing is not None and existing.enqueued_at > now - window:
            existing.deduplicated = True  # type: ignore[attr-defined]
            return existing
        try:
            with transaction.atomic():
                if existing is not None:
                    Run.objects.filter(pk=existing.pk, dedupe_key=key).update(dedupe_key="")
                run = create_run(
                    job, now=now, scheduled_for=scheduled_for, dedupe_key=key, **run_fields
                )
                _publish_if_due(run, now=now)
            return run
        except IntegrityError:
            continue
    raise RuntimeError(f"enqueue_job: dedupe key {key!r} of job #{job.pk} kept changing hands")


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
    retry: RetryPlan | None = None,
) -> bool:
    """from_status → a final status, with times and output, in one
    transaction with what must go with it: the interval triggers anchored on
    the run's end, the retry run (`retry`, from runs.retries.plan_retry),
    and the job's failure streak and run count with the automatic pause and
    run limit (F-104). Then `run_finished` receivers (the heartbeat) run
    after the commit: their failure never undoes the run's end. False (and
    nothing written) when the run was not in `from_status`."""
    started = run.started_at
    if retry is not None:
        message = f"{message}; {retry.reason}" if message else retry.reason
    fields: dict[str, Any] = {
        "status": status,
        "finished_at": now,
        # A lost run's worker died somewhere between its last renewal and
        # now: its duration is unknown, not the detection delay.
        "duration_s": (now - started).total_seconds()
        if started and status != RunStatus.LOST
        else None,
        "message": message[:10000],
        "result": result,
        "result_code": result_code,
    }
    if output is not None:
        fields["output"] = output
    extra = {"job_id": run.job_id, "run_id": run.pk}
    after = _job_after_run(run, status)
    with _atomic_if(_waits_for_runs(run) or retry is not None or after is not None):
        if not cas_update(run.pk, expected_status=from_status, changes=fields):
            return False
        if _waits_for_runs(run):
            on_run_finished(run.job_id, started_at=started, finished_at=now)
        if retry is not None and retry.retry_at is not None:
            insert_run(retry_run(run, retry, now=now))
        elif retry is not None and retry.dropped:
            Job.objects.filter(pk=run.job_id).update(dropped_retries=F("dropped_retries") + 1)
        if after is not None:
            _apply_job_after_run(run.job_id, after, now=now)
    for name, value in fields.items():
        setattr(run, name, value)
    log.info("run %s of job %s ended %s", run.pk, run.job_id, status, extra=extra)
    try:
        run_finished.send(sender=Run, run=run)
    except Exception:
        log.exception("a run_finished receiver failed for run %s", run.pk, extra=extra)
    return True


COUNTED = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST}


def _job_after_run(run: Run, status: str) -> JobAfterRun | None:
    """The job's counters after this run (F-104), or None when nothing about
    the job changes (no limits set, and no failure streak to start or end):
    the common case costs no statement."""
    job = run.job
    limits = JobLimits(getattr(job, "pause_after_failures", None), getattr(job, "max_runs", None))
    failed = status != RunStatus.SUCCEEDED
    streak = getattr(job, "consecutive_failures", 0) or 0
    if status not in COUNTED or (limits == JobLimits() and not failed and streak == 0):
        return None
    done = getattr(job, "runs_done", 0) or 0
    after = compute_job_after_run(
        limits, consecutive_failures=streak, runs_done=done, failed=failed
    )
    # Runs are counted only while a run limit is set.
    return after if limits.max_runs else replace(after, runs_done=done)


def _apply_job_after_run(job_id: int, after: JobAfterRun, *, now: datetime) -> None:
    Job.objects.filter(pk=job_id).update(
        consecutive_failures=after.consecutive_failures, runs_done=after.runs_done
    )
    if after.pause:
        pause_job(job_id, note=after.pause, by="takt", now=now)
    if after.disable:
        set_jobs_enabled([job_id], False, note=after.disable)


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
