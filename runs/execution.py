"""Executing one run on a worker (F-03, F-23 at start, F-26, F-82).

`execute`:

1. Claims the run: queued → running by compare-and-set (on PostgreSQL in
   one statement that also loads the run, where the job has no triggers
   anchored on its runs). A second delivery of the same message loses here
   and does nothing at all.
2. Takes what it needs to start (runs/starting.py): the queue switches,
   the job's Redis lock and the slots of its group, the exclusive slot and
   the global limit in one round trip, then its condition on a result
   variable. What is missing puts it back to wait (held), or ends it
   `skipped` (the overlap policy, maintenance, an unmet condition). A
   parent job's run starts its first child here instead (runs/children.py).
3. Starts a keeper thread that renews the lock and the slots, and the
   autosave of the output and progress so far (runs.autosave).
4. Calls the job's target with its context. `job.fail()` and exceptions end
   it `failed`; Celery's soft time limit (the job's timeout) ends it
   `timed_out`. Its result code (F-32) comes with it.
5. Records the end by compare-and-set (runs/ending.py: with its retry, its
   variable, the runs its end starts), then releases the lock and slots by
   token, so the next run cannot start before this one is recorded as
   finished; the runs that waited for a slot it held are sent.

While the database is down, steps 1 and 5 wait for it (runs/outage.py):
the claim up to TAKT_DB_OUTAGE_MAX_SECONDS, the end until it is back, with
the lock renewed meanwhile.

A run cancelled meanwhile (runs/cancel.py) is told to stop and killed
after a grace period (runs/stopping.py); its end then loses the
compare-and-set in step 5: it stays `cancelled`, with the output it had,
counted as such, and its (already freed) lock slot is left to its new
owner.

A run whose lock is lost while its job runs (F-113: the worker was paused
longer than the lock's TTL, or another owner holds the lock; runs/locks.py)
is stopped the same way (runs.stopping.LostWatch) and ends `lost` with
LOST_STOPPED's message, whatever its job returned: never `succeeded`. When
the beat's lost-run check marked it `lost` first, that record stays (the
end loses the compare-and-set).
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from redis import RedisError

from jobs.core.rules import Overlap
from jobs.policies import JobKind, TimeoutAction
from jobs.registry import UnknownTarget, resolve
from jobs.specs import notify_events, overlap_rules
from jobs.variables import ResultCode
from runs.autosave import Autosave
from runs.children import has_children
from runs.clock import now as shared_now
from runs.commands import CommandNotStarted, run_command, spec_at_start
from runs.context import JobFailed, context_for
from runs.decisions import Decision, record
from runs.detached import start_detached
from runs.locks import LockKeeper
from runs.models import Run, RunStatus
from runs.outage import retry_through_outage
from runs.outcome import Outcome, count_end, ended_elsewhere, record_end
from runs.overlap import release_next_held
from runs.scripts import script_target
from runs.services import start_run
from runs.signals import run_started
from runs.starting import admit_start, start_parent
from runs.statements import load_run, start_plain_run
from runs.stopping import GATE, CancelWatch, LostWatch
from runs.waiting import release_waiting
from runs.watches import LongRunWatch, TimeoutWatch, send_signal
from scheduler_project.logconfig import add_log_context

log = logging.getLogger("takt.execution")


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
    clock: Callable[[], datetime] = shared_now,
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
    add_log_context(job_id=run.job_id, trigger=run.trigger)  # on every line of the run (F-107)
    rules = overlap_rules(run.job)
    lock, status = admit_start(run, rules=rules, now=started_at, clock=clock)
    if lock is None:
        return status
    if has_children(run.job):
        return start_parent(run, lock, now=started_at)
    if run.job.kind == JobKind.COMMAND and run.job.detached:
        return start_detached(run, lock, now=started_at)
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
            lambda: record_end(run, outcome, ended_at),
            what=f"recording the end of run {run.pk}",
        )
        if not recorded:
            counted = ended_elsewhere(run, outcome, ended_at)
    finally:
        keeper.stop()
        count_end(run, lock, counted)
    if rules.policy in BUFFERING:
        retry_through_outage(
            lambda: release_next_held(run.job_id), what="sending a held run", deadline_s=wait_s
        )
    if lock.members:  # it freed slots: the runs waiting for one go first (F-31, F-34)
        _release_waiting(run)
    return counted


def _release_waiting(run: Run) -> None:
    try:
        retry_through_outage(
            lambda: release_waiting(now=shared_now()), what="sending the runs waiting for a slot"
        )
    except RedisError:  # the next beat tick sends them
        log.exception("could not send the runs waiting for a slot", extra=_extra_of(run))


def _extra_of(run: Run) -> dict[str, Any]:
    return {"job_id": run.job_id, "run_id": run.pk}


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


BUFFERING = (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL)


def _double_start(run: Run, why: str) -> None:
    record([Decision("double_start_prevented", run.job_id, run.pk, detail=why)])


LOST_STOPPED = "lost: its job lock was lost while it ran ({reason}); stopped on its worker"


def _lost_outcome(keeper: LockKeeper, note: str = "") -> Outcome:
    message = LOST_STOPPED.format(reason=keeper.lost_reason) + note
    return Outcome(RunStatus.LOST, message)  # its result code: lost's (runs/variables.py)


def _call_target(run: Run, lock: Any, keeper: LockKeeper) -> Outcome:
    """Steps 3 and 4: the target's call, with `keeper` renewing the lock and
    driving the watches and the autosave meanwhile. When it returns the
    keeper only renews the lock (the caller stops it once the end is
    recorded)."""
    job = run.job
    ctx = context_for(run)
    ctx.fencing_token = getattr(lock, "fence", None)  # to pass to what the job writes to (F-113)
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
        count_end(run, lock, RunStatus.CANCELLED, "; killed: it ignored the stop")

    def killed_lost() -> None:  # the job ignored the stop for its lost lock: its end first
        outcome = _lost_outcome(keeper, "; killed: it ignored the stop")
        outcome.output = ctx.output()
        ended_at = shared_now()
        counted = RunStatus.LOST
        if not record_end(run, outcome, ended_at):
            counted = ended_elsewhere(run, outcome, ended_at)
        count_end(run, lock, counted, "; killed: it ignored the stop")

    on_cancel = CancelWatch(run.pk, job.pk, output=ctx.output, on_kill=killed)
    on_lost = LostWatch(run.pk, job.pk, output=ctx.output, on_kill=killed_lost)
    keeper.on_tick, keeper.on_cancel, keeper.on_lost = tick, on_cancel, on_lost
    keeper.start()
    outcome = Outcome(RunStatus.SUCCEEDED)
    try:
        func, takes_context = _target(job)
        with GATE.job_callable():  # a stop signal raises only in here
            # A Celery task: the job's positional args (only such a target has them).
            value = func(ctx) if takes_context else func(*job.args, **ctx.params)
        outcome.result = _jsonable(value)
    except SoftTimeLimitExceeded:
        outcome = Outcome(RunStatus.TIMED_OUT, f"timed out after {job.timeout_s} s and was stopped")
    except JobFailed as exc:
        outcome = Outcome(RunStatus.FAILED, str(exc))
    except (UnknownTarget, CommandNotStarted) as exc:
        outcome = Outcome(RunStatus.FAILED, str(exc), code=ResultCode.COULD_NOT_START)
    except Exception as exc:
        outcome = Outcome(
            RunStatus.FAILED,
            f"{type(exc).__name__}: {exc}",
            error_types=_type_names(exc),
            code=ResultCode.ERROR,
        )
        ctx.log(traceback.format_exc().rstrip())
    finally:
        # never None: no race with a tick
        keeper.on_tick, keeper.on_cancel, keeper.on_lost = _nothing, _nothing, _nothing
        autosave.close()  # the final progress; the output goes with finish_run
    if not keeper.check():  # lost while the job ran, even if it returned before its stop
        outcome = _lost_outcome(keeper)
    if watch is not None and watch.warned:
        outcome.message = "; ".join(m for m in (watch.warning, outcome.message) if m)
    outcome.output = ctx.output()
    if ctx.result_code is not None and outcome.status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
        outcome.code = ctx.result_code
    return outcome


def _target(job: Any) -> tuple[Callable[..., Any], bool]:
    """What a run calls, and whether it takes the context: a callable's
    registered function, or for a command job its process (runs/commands.py;
    a spec that no longer holds on this worker, such as a working directory
    gone, could not start), or for a script job its source's process
    (runs/scripts.py; not while scripts are off)."""
    if job.kind == JobKind.SCRIPT:  # its source in a process of its own (runs/scripts.py)
        return script_target(job), True
    if job.kind != JobKind.COMMAND:
        return resolve(job.target)
    spec = spec_at_start(job)
    return (lambda ctx: run_command(ctx, spec)), True


def _nothing() -> None:
    return None


def _type_names(exc: BaseException) -> tuple[str, ...]:
    """The dotted names of the exception's class and its bases."""
    return tuple(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in type(exc).__mro__
        if cls not in (BaseException, object)
    )
