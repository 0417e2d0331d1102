"""A run's end (F-50) and everything that goes with it, in the transaction
that records it: the interval triggers anchored on its end (F-12), its
retry (F-25), its job's failure streak, automatic pause and run limit
(F-104), the result variable its job writes (F-32), the runs of the jobs
whose dependency trigger waits for this end (F-33), and, for a child's run,
its parent run's next step (F-04) — which may start the next child, or end
the parent run in turn (through finish_run again). The `run_finished`
receivers (the heartbeat, F-60) run after the commit: their failure never
undoes the end. Runs started here are published after the commit."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import DataError, IntegrityError, ProgrammingError, connection, transaction
from django.db.models import F

from jobs.core.rules import JobLimits
from jobs.core.triggers import DEPENDENCY_STATUSES
from jobs.models import Job
from jobs.services import pause_job, set_jobs_enabled
from runs.anchored import release_on_end
from runs.children import advance_parent, is_child_run
from runs.core.transitions import JobAfterRun, RetryPlan, compute_job_after_run
from runs.dependencies import has_dependents, start_dependents
from runs.models import Run, RunStatus
from runs.publish import publish_after_commit
from runs.retries import retry_run
from runs.services import waits_for_runs
from runs.signals import end_companion, run_finished
from runs.statements import cas_update, cas_update_with, insert_run
from runs.variables import END_CODES, write_result

log = logging.getLogger("takt.runs")


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
    if result_code is None and started is not None:
        result_code = END_CODES.get(RunStatus(status))
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
    retried = retry is not None and retry.retry_at is not None
    # A run that never started leaves its job's variable as it was (F-32).
    writes = run.job.result_variable_id is not None and started is not None
    writes = writes and result_code is not None
    # Only a run that started ends in the sense of F-33 (one cancelled or
    # expired while queued never ran).
    dependents = (
        started is not None
        and status in DEPENDENCY_STATUSES
        and not retried
        and has_dependents(run.job)
    )
    child = not retried and is_child_run(run)
    together = waits_for_runs(run) or retry is not None or after is not None
    if not (together or writes or dependents or child):  # the common case
        if not _end_alone(run, from_status=from_status, fields=fields):
            return False
    else:  # the end with what goes with it, in one transaction
        with transaction.atomic():
            if not cas_update(run.pk, expected_status=from_status, changes=fields):
                return False
            if waits_for_runs(run):
                release_on_end(run, finished_at=now)
            if retried:
                insert_run(retry_run(run, retry, now=now))  # type: ignore[arg-type]
            elif retry is not None and retry.dropped:
                Job.objects.filter(pk=run.job_id).update(dropped_retries=F("dropped_retries") + 1)
            if after is not None:
                _apply_job_after_run(run.job_id, after, now=now)
            if writes:
                write_result(run, result_code, now=now)  # type: ignore[arg-type]
            started_runs = start_dependents(run, status, now=now) if dependents else []
            parent_end = advance_parent(run, now=now, started=started_runs) if child else None
            to_send = [r for r in started_runs if r.status == RunStatus.QUEUED and not r.held]
            if to_send:
                publish_after_commit(to_send)
            if parent_end is not None:
                parent, parent_status, parent_message = parent_end
                finish_run(parent, status=parent_status, now=now, message=parent_message)
    for name, value in fields.items():
        setattr(run, name, value)
    log.info("run %s of job %s ended %s", run.pk, run.job_id, status, extra=extra)
    try:
        run_finished.send(sender=Run, run=run)
    except Exception:
        log.exception("a run_finished receiver failed for run %s", run.pk, extra=extra)
    return True


def _end_alone(run: Run, *, from_status: str, fields: dict[str, Any]) -> bool:
    """The end by compare-and-set, with the statement that goes with it
    (runs.signals.end_companion: the heartbeat) in the same statement on
    PostgreSQL outside a transaction: one round trip and one commit. If that
    statement fails for a reason other than the connection, the end is
    recorded alone (the receivers then write what they write)."""
    provider = end_companion[0] if end_companion else None
    companion = None
    if (
        provider is not None
        and connection.vendor == "postgresql"
        and not connection.in_atomic_block
    ):
        companion = provider(run, fields)
    if companion is None:
        return cas_update(run.pk, expected_status=from_status, changes=fields)
    try:
        row = cas_update_with(
            run.pk, expected_status=from_status, changes=fields,
            then=companion.sql, then_params=companion.params,
        )  # fmt: skip
    except (DataError, IntegrityError, ProgrammingError):
        log.exception(
            "run %s: the statement going with its end failed; recording the end alone", run.pk,
            extra={"job_id": run.job_id, "run_id": run.pk},
        )  # fmt: skip
        return cas_update(run.pk, expected_status=from_status, changes=fields)
    if row is None:
        return False
    run.ended_with = companion.parse(row)  # type: ignore[attr-defined]
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
