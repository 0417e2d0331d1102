"""How a run's end is recorded once its job has returned (runs/execution.py
for a run on a worker's pool process, runs/detached.py for a detached
command): the outcome, its compare-and-set end with its retry, and the
release of the lock with the run's count and its `end` decision."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runs.decisions import Decision
from runs.ending import finish_run
from runs.locks import JobLock
from runs.metrics import release_and_count
from runs.models import Run, RunStatus
from runs.redis_client import write_through_failover
from runs.retries import plan_retry
from runs.stopping import save_cancelled_output

log = logging.getLogger("takt.execution")


@dataclass
class Outcome:
    status: str
    message: str = ""
    result: Any = None
    output: str = ""
    error_types: tuple[str, ...] = ()
    # The result code (F-32): the job's own (job.set_result_code), else by
    # how it ended (runs/variables.py END_CODES), -1001 for a target that
    # could not be started, -1005 for an exception.
    code: int | None = None


def record_end(run: Run, outcome: Outcome, ended_at: datetime) -> bool:
    """Step 5's first half: the end by compare-and-set, with its retry."""
    return finish_run(
        run,
        status=outcome.status,
        now=ended_at,
        message=outcome.message,
        output=outcome.output,
        result=outcome.result,
        result_code=outcome.code,
        retry=plan_retry(run, status=outcome.status, now=ended_at, error_types=outcome.error_types),
    )


def count_end(run: Run, lock: JobLock, status: str, note: str = "") -> None:
    """Step 5's second half: release the lock by token, count the run's end
    and log its decision, in one round trip."""
    lag = (run.started_at - run.scheduled_for).total_seconds() if run.started_at else None
    detail = f"started {run.started_at.isoformat() if run.started_at else '?'}, ended {status}"
    end = Decision("end", run.job_id, run.pk, detail=detail + note)
    # The end is in the database already: a Redis failover or restart now
    # is tried through for a few seconds, then logged (the lock lapses).
    write_through_failover(
        lambda: release_and_count(lock, status=status, lag_s=lag, decision=end),
        what=f"releasing lock {lock.key} at the end of run {run.pk}",
        extra={"job_id": run.job_id, "run_id": run.pk},
    )


def ended_elsewhere(run: Run, outcome: Outcome, ended_at: datetime) -> str:
    """The end lost its compare-and-set: the run was cancelled while it ran
    (or maintenance marked it lost or expired), or this very end committed
    just before the connection broke and its retry found it recorded. A
    cancelled run keeps the output its job wrote until it stopped. Returns
    the status it has."""
    extra = {"job_id": run.job_id, "run_id": run.pk}
    if Run.objects.filter(pk=run.pk, status=outcome.status, finished_at=ended_at).exists():
        log.info("run %s: its end was recorded before the connection broke", run.pk, extra=extra)
        return outcome.status
    if save_cancelled_output(run.pk, outcome.output):
        log.info(
            "run %s was cancelled while it ran: its end (%s) is not recorded",
            run.pk,
            outcome.status,
            extra=extra,
        )
        return RunStatus.CANCELLED
    status = Run.objects.filter(pk=run.pk).values_list("status", flat=True).first()
    if outcome.status == status == RunStatus.LOST:  # F-113: the lost-run check came first
        log.info(
            "run %s: its end (lost, stopped on its worker) is not recorded: the lost-run check"
            " marked it lost first",
            run.pk,
            extra=extra,
        )
        return status
    log.warning(
        "run %s ended %s, but it was %s meanwhile", run.pk, outcome.status, status, extra=extra
    )
    return status or outcome.status
