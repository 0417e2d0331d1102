"""Executing one run on a worker (F-03, F-23 at start, F-26, F-82).

`execute`:

1. Claims the run: queued → running by compare-and-set (on PostgreSQL in
   one statement that also loads the run, where the job has no triggers
   anchored on its runs). A second delivery of the same message loses here
   and does nothing at all.
2. Takes the job's Redis lock. If another run holds it, the run ends
   `skipped` (overlap policy `skip`).
3. Starts a keeper thread that renews the lock, and the autosave of the
   output and progress so far (runs.autosave).
4. Calls the job's target with its context. `job.fail()` and exceptions end
   it `failed`; Celery's soft time limit (the job's timeout) ends it
   `timed_out`.
5. Records the end by compare-and-set, then releases the lock by token, so
   the next run cannot start before this one is recorded as finished.

While the database is down, steps 1 and 5 wait for it (runs/outage.py):
the claim up to TAKT_DB_OUTAGE_MAX_SECONDS, the end until it is back, with
the lock renewed meanwhile.

A run cancelled meanwhile (runs/cancel.py) is told to stop and killed
after a grace period (runs/stopping.py); its end then loses the
compare-and-set in step 5: it stays `cancelled`, with the output it had,
counted as such, and its (already freed) lock slot is left to its new
owner.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.core.rules import Overlap
from jobs.policies import TimeoutAction
from jobs.registry import UnknownTarget, resolve
from jobs.specs import notify_events, overlap_rules
from runs.autosave import Autosave
from runs.context import JobContext, JobFailed
from runs.core.admission import StartAction, compute_start_action
from runs.core.messages import MAINTENANCE_REFUSAL
from runs.decisions import Decision, record
from runs.locks import CANCELLED_RUN, MAINTENANCE, PAUSED, JobLock, LockKeeper, acquire_slot
from runs.metrics import count_lock_wait, release_and_count
from runs.models import Run, RunStatus, RunTrigger
from runs.outage import retry_through_outage
from runs.overlap import cancel_active_runs, hold_run, release_next_held, revoke_after_commit
from runs.redis_client import write_through_failover
from runs.retries import plan_retry
from runs.services import finish_run, start_run
from runs.signals import run_started
from runs.statements import load_run, start_plain_run
from runs.stopping import GATE, CancelWatch, save_cancelled_output
from runs.watches import LongRunWatch, TimeoutWatch, send_signal

log = logging.getLogger("takt.execution")

RESULT_OK = 0
RESULT_FAILED = 1
RESULT_TIMED_OUT = -1002  # F-32: "timed out, killed"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def execute(
    run_id: int,
    *,
    worker: str,
    clock: Callable[[], datetime] = timezone.now,
    claim_wait_s: float | None = None,
) -> str | None:
    """Run `run_id` if it is still queued (see the module docstring).
    Returns the final status, or None when this delivery did nothing.

    While the database is down (runs.outage) the claim is retried with
    backoff for up to `claim_wait_s` (default TAKT_DB_OUTAGE_MAX_SECONDS),
    then OutageTooLong is raised with nothing done (the task sends the run
    again); the end of a run is retried until the database is back, with
    the job's lock renewed meanwhile."""
    started_at = clock()
    wait_s = settings.TAKT_DB_OUTAGE_MAX_SECONDS if claim_wait_s is None else claim_wait_s
    run = retry_through_outage(
        lambda: _claim(run_id, worker=worker, now=started_at),
        what=f"claiming run {run_id}",
        deadline_s=wait_s,
    )
    if run is None:
        return None
    rules = overlap_rules(run.job)
    lock, acquired = acquire_slot(
        run.job_id,
        slots=rules.max_instances,
        allowed_in_maintenance=bool(getattr(run.job, "allowed_during_maintenance", False)),
        run_id=run.pk,
    )
    if acquired is not True:
        stopped = _not_locked(run, rules, lock, acquired, clock=clock, started_at=started_at)
        if stopped is not None:
            return stopped
    counted = RunStatus.FAILED  # what the metrics count if the bookkeeping itself breaks
    if "start" in notify_events(run.job):
        send_signal(run_started, run)
    # The keeper renews the lock from the start until the end is recorded,
    # however long the database takes to come back for that.
    keeper = LockKeeper(lock)
    try:
        outcome = _call_target(run, lock, keeper)
        counted = outcome.status
        ended_at = clock()
        recorded = retry_through_outage(
            lambda: _record_end(run, outcome, ended_at),
            what=f"recording the end of run {run.pk}",
        )
        if not recorded:
            counted = _ended_elsewhere(run, outcome, ended_at)
    finally:
        keeper.stop()
        _count_end(run, lock, counted)
    if rules.policy in BUFFERING:
        retry_through_outage(
            lambda: release_next_held(run.job_id), what="sending a held run", deadline_s=wait_s
        )
    return counted


def _record_end(run: Run, outcome: Outcome, ended_at: datetime) -> bool:
    """Step 5's first half: the end by compare-and-set, with its retry."""
    return finish_run(
        run,
        status=outcome.status,
        now=ended_at,
        message=outcome.message,
        output=outcome.output,
        result=outcome.result,
        result_code={RunStatus.SUCCEEDED: RESULT_OK, RunStatus.TIMED_OUT: RESULT_TIMED_OUT}.get(
            outcome.status, RESULT_FAILED
        ),
        retry=plan_retry(run, status=outcome.status, now=ended_at, error_types=outcome.error_types),
    )


def _count_end(run: Run, lock: JobLock, status: str, note: str = "") -> None:
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


def _ended_elsewhere(run: Run, outcome: Outcome, ended_at: datetime) -> str:
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
    log.warning(
        "run %s ended %s, but it was %s meanwhile", run.pk, outcome.status, status, extra=extra
    )
    return status or outcome.status


def _claim(run_id: int, *, worker: str, now: datetime) -> Run | None:
    """queued → running (step 1); None when this delivery must do nothing."""
    run = start_plain_run(run_id, worker=worker, now=now)  # one statement, if it applies
    if run is not None:
        return run
    run = load_run(run_id)
    if run is not None and run.status == RunStatus.RUNNING and run.started_at == now:
        return run  # our own claim, committed just before the connection broke (runs.outage)
    if run is None:
        log.warning(
            "run %s does not exist (deleted before it started)", run_id, extra={"run_id": run_id}
        )
        return None
    extra = {"job_id": run.job_id, "run_id": run.pk}
    if run.status == RunStatus.CANCELLED and run.started_at is None:
        log.info("run %s was cancelled before it started", run.pk, extra=extra)
        return None
    if run.status != RunStatus.QUEUED:
        log.info("run %s is %s: duplicate delivery ignored", run.pk, run.status, extra=extra)
        _double_start(run, f"the run was already {run.status}")
        return None
    if not start_run(run, worker=worker, now=now):
        log.info("run %s was taken by another delivery", run.pk, extra=extra)
        _double_start(run, "another delivery won the compare-and-set")
        return None
    return run


def _not_locked(
    run: Run,
    rules: Any,
    lock: Any,
    acquired: bool | str,
    *,
    clock: Callable[[], datetime],
    started_at: datetime,
) -> str | None:
    """Step 2 when the job's lock was not simply taken: the queue is paused
    (hold), maintenance mode refuses the job (skip), or the lock is held
    (the overlap policy's answer). Returns the run's status when it does not
    go on, or None after taking the lock over (cancel_other)."""
    extra = {"job_id": run.job_id, "run_id": run.pk}
    if acquired == PAUSED:  # F-28: back to waiting; the sweep sends it after the resume
        record([Decision("held", run.job_id, run.pk, detail="the queue is paused")])
        hold_run(run)
        log.info("run %s held: the queue is paused", run.pk, extra=extra)
        return RunStatus.QUEUED
    if acquired == CANCELLED_RUN:  # cancelled between its start and its lock
        log.info("run %s was cancelled before it took the job's lock", run.pk, extra=extra)
        return RunStatus.CANCELLED
    if acquired == MAINTENANCE:  # F-29: refused, whatever triggered it
        record([Decision("refused", run.job_id, run.pk, detail="maintenance mode")])
        message = f"skipped: {MAINTENANCE_REFUSAL}"
        finish_run(run, status=RunStatus.SKIPPED, now=clock(), message=message)
        log.info("run %s refused: maintenance mode", run.pk, extra=extra)
        return RunStatus.SKIPPED
    action = compute_start_action(rules)
    if run.trigger == RunTrigger.RETRY:
        action = StartAction.HOLD  # a retry waits for a busy job, it is never skipped
    count_lock_wait(action.value)
    detail = "the job's lock was taken"
    record([Decision(f"lock_{action.value}", run.job_id, run.pk, detail=detail)])
    if action is StartAction.HOLD:
        hold_run(run)
        # The holder may have ended between our lock attempt and the hold:
        # then nobody else would send this run.
        release_next_held(run.job_id)
        log.info("run %s waits for the job's running run", run.pk, extra=extra)
        return RunStatus.QUEUED
    if action is StartAction.SKIP:
        finish_run(
            run,
            status=RunStatus.SKIPPED,
            now=clock(),
            message=f"skipped: job #{run.job_id} is locked by another run"
            f" (overlap policy '{rules.policy}')",
        )
        return RunStatus.SKIPPED
    with transaction.atomic():
        reason = f"cancelled: replaced by run #{run.pk}"
        stopped = cancel_active_runs(run.job_id, keep=run.pk, now=started_at, reason=reason)
        revoke_after_commit(stopped)
    lock.take_over()
    return None


BUFFERING = (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL)


def _double_start(run: Run, why: str) -> None:
    record([Decision("double_start_prevented", run.job_id, run.pk, detail=why)])


@dataclass
class Outcome:
    status: str
    message: str = ""
    result: Any = None
    output: str = ""
    error_types: tuple[str, ...] = ()


def _call_target(run: Run, lock: Any, keeper: LockKeeper) -> Outcome:
    """Steps 3 and 4: the target's call, with `keeper` renewing the lock and
    driving the watches and the autosave meanwhile. When it returns the
    keeper only renews the lock (the caller stops it once the end is
    recorded)."""
    job = run.job
    ctx = JobContext(
        name=job.name,
        description=job.description,
        trigger=run.trigger,
        params=dict(run.params or {}),
        run_id=run.pk,
        job_id=job.pk,
        output_limit=settings.TAKT_OUTPUT_LIMIT_BYTES,
    )
    watch = TimeoutWatch(run, ctx) if job.timeout_action == TimeoutAction.CONTINUE else None
    long_run = LongRunWatch(run) if "long_run" in notify_events(run.job) else None
    autosave = Autosave(run.pk, ctx)  # output and progress, live and throttled (F-93)
    ctx.on_change = autosave.changed

    def tick() -> None:
        if watch is not None:
            watch.check()
        if long_run is not None:
            long_run.check()
        autosave.changed()  # wakes the saver: this thread never waits on the database

    def killed() -> None:  # the cancelled run ignored its stop (runs/stopping.py)
        _count_end(run, lock, RunStatus.CANCELLED, "; killed: it ignored the stop")

    on_cancel = CancelWatch(run.pk, job.pk, output=ctx.output, on_kill=killed)
    keeper.on_tick, keeper.on_cancel = tick, on_cancel
    keeper.start()
    outcome = Outcome(RunStatus.SUCCEEDED)
    try:
        func, takes_context = resolve(job.target)
        with GATE.job_callable():  # a stop signal raises only in here
            value = func(ctx) if takes_context else func(**ctx.params)
        outcome.result = _jsonable(value)
    except SoftTimeLimitExceeded:
        outcome = Outcome(RunStatus.TIMED_OUT, f"timed out after {job.timeout_s} s and was stopped")
    except JobFailed as exc:
        outcome = Outcome(RunStatus.FAILED, str(exc))
    except UnknownTarget as exc:
        outcome = Outcome(RunStatus.FAILED, str(exc))
    except Exception as exc:
        outcome = Outcome(
            RunStatus.FAILED, f"{type(exc).__name__}: {exc}", error_types=_type_names(exc)
        )
        ctx.log(traceback.format_exc().rstrip())
    finally:
        keeper.on_tick, keeper.on_cancel = _nothing, _nothing  # never None: no race with a tick
        autosave.close()  # the final progress; the output goes with finish_run
    if watch is not None and watch.warned:
        outcome.message = "; ".join(m for m in (watch.warning, outcome.message) if m)
    outcome.output = ctx.output()
    return outcome


def _nothing() -> None:
    return None


def _type_names(exc: BaseException) -> tuple[str, ...]:
    """The dotted names of the exception's class and its bases."""
    return tuple(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in type(exc).__mro__
        if cls not in (BaseException, object)
    )
