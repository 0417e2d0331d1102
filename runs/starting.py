"""A claimed run's way to its first line of code (runs/core/start.py's
steps, applied on a worker; runs/execution.py calls `admit_start` right
after its claim and runs the target only when it returns the lock):

1-5. One Redis round trip (runs/slots.acquire_start): the queue's pause
     and maintenance mode, the run's cancel marker, a slot of the job's
     lock and the slots of its group, the exclusive slot and the global
     limit. What is missing decides: back to held (the queue, its job, a
     slot: `waiting_for`), refused or skipped (`skipped`), taken over
     (`cancel_other`), or nothing at all (cancelled). A job whose lock is
     held only by runs that have ended (their workers free the slots a
     moment after recording the end) is not busy: its run waits (held)
     for the slot instead of being skipped (`holders_ended`).
6.   The job's condition on a result variable, consumed by compare-and-
     set (runs/variables.py). Not met: the lock and slots are given back
     and the run ends `skipped` with the reason; the variable is left as
     it was.

Then it has started: the variable its job writes becomes -1, and the
decision log gets its `start` entry. A parent job's run starts its first
child instead of a target (`start_parent`, runs/children.py).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from redis import RedisError

from jobs.core.rules import OverlapRules
from jobs.models import ConcurrencyGroup
from jobs.specs import allowed_in_maintenance
from jobs.variables import PENDING
from runs.anchored import release_on_start
from runs.children import start_children
from runs.core.admission import StartAction, compute_start_action
from runs.core.messages import MAINTENANCE_REFUSAL
from runs.core.start import Wait
from runs.decisions import Decision, record
from runs.ending import finish_run
from runs.locks import JobLock, get_redis, slot_keys, token_run_id
from runs.metrics import count_lock_wait
from runs.models import Run, RunStatus, RunTrigger
from runs.outage import retry_through_outage
from runs.overlap import cancel_active_runs, hold_run, release_next_held, revoke_after_commit
from runs.services import waits_for_runs
from runs.slots import (
    BUSY,
    CANCELLED_RUN,
    MAINTENANCE,
    PAUSED,
    Waiting,
    acquire_start,
    global_limit,
)
from runs.variables import take_condition, write_result
from runs.waiting import release_waiting, slot_needs

log = logging.getLogger("takt.execution")


def admit_start(
    run: Run, *, rules: OverlapRules, now: datetime, clock: Any
) -> tuple[JobLock | None, str]:
    """Steps 1-6 for a claimed (`running`) run. Returns the lock it holds
    (with its slots) when it may start; else None and the status it has
    now (queued and held, skipped, cancelled)."""
    job = run.job
    needs = slot_needs(job)
    conditioned = job.condition_variable_id is not None and run.trigger != RunTrigger.RETRY
    entry = Decision("start", run.job_id, run.pk, detail=f"{run.trigger} run", at=now)
    lock, acquired = acquire_start(
        run.job_id,
        run_id=run.pk,
        slots=rules.max_instances,
        allowed=allowed_in_maintenance(job),
        needs=needs,
        start=None if conditioned else entry,  # a condition may still hold it back
    )
    if acquired == BUSY:
        taken = _job_busy(run, rules, lock, clock=clock, now=now)
        if taken is not True:
            return None, str(taken)
        lock, acquired = acquire_start(
            run.job_id, run_id=run.pk, needs=needs, start=None if conditioned else entry, lock=lock
        )
        if acquired is not True:
            lock.release()
    if acquired is not True:
        return None, _not_admitted(run, acquired, clock=clock)
    unmet = retry_through_outage(
        lambda: take_condition(run, now=now), what=f"checking run {run.pk}'s condition"
    )
    if unmet is not None:
        lock.release()  # and its slots
        record([Decision("condition_not_met", run.job_id, run.pk, detail=unmet, at=now)])
        finish_run(run, status=RunStatus.SKIPPED, now=clock(), message=f"skipped: {unmet}")
        if lock.members:
            _release_waiting(now=now)
        log.info("run %s skipped: %s", run.pk, unmet, extra=_extra(run))
        return None, RunStatus.SKIPPED
    if conditioned:
        record([entry])
    if job.result_variable_id is not None:
        write_result(run, PENDING, now=now)
    if waits_for_runs(run):  # it has started: an interval anchored on its start moves
        release_on_start(run, started_at=run.started_at or now)
    return lock, RunStatus.RUNNING


def _not_admitted(run: Run, acquired: bool | str | Waiting, *, clock: Any) -> str:
    """Steps 1-3 and 5 when they stop the run: the status it has now."""
    if acquired == PAUSED:  # F-28: back to waiting; the sweep sends it after the resume
        record([Decision("held", run.job_id, run.pk, detail="the queue is paused")])
        hold_run(run)
        log.info("run %s held: the queue is paused", run.pk, extra=_extra(run))
        return RunStatus.QUEUED
    if acquired == CANCELLED_RUN:  # cancelled between its start and its lock
        log.info("run %s was cancelled before it took the job's lock", run.pk, extra=_extra(run))
        return RunStatus.CANCELLED
    if acquired == MAINTENANCE:  # F-29: refused, whatever triggered it
        record([Decision("refused", run.job_id, run.pk, detail="maintenance mode")])
        message = f"skipped: {MAINTENANCE_REFUSAL}"
        finish_run(run, status=RunStatus.SKIPPED, now=clock(), message=message)
        log.info("run %s refused: maintenance mode", run.pk, extra=_extra(run))
        return RunStatus.SKIPPED
    assert isinstance(acquired, Waiting)
    holder = f"; held by run #{acquired.holder}" if acquired.holder is not None else ""
    kind = "limit_reached" if acquired.wait == "limit" else "waiting_for_slot"
    detail = f"{acquired.reason}{_slot_name(run, acquired)}{holder}"
    record([Decision(kind, run.job_id, run.pk, detail=detail)])
    hold_run(run, waiting_for=acquired.wait)
    # The slot may have freed between the script and the hold: then nobody
    # else would send this run until the next beat tick.
    _release_waiting(now=clock())
    log.info("run %s waits: %s%s", run.pk, acquired.reason, holder, extra=_extra(run))
    return RunStatus.QUEUED


def _slot_name(run: Run, waiting: Waiting) -> str:
    """Which slot, for the decision log: " (group 'Imports', limit 1)"."""
    if waiting.wait == Wait.LIMIT:
        return f" (TAKT_MAX_CONCURRENCY={global_limit()})"
    group_id = run.job.concurrency_group_id
    if waiting.wait != Wait.GROUP or group_id is None:
        return ""
    group = ConcurrencyGroup.objects.filter(pk=group_id).values_list("name", "limit").first()
    return f" (group {group[0]!r}, limit {group[1]})" if group else ""


def _job_busy(
    run: Run, rules: OverlapRules, lock: JobLock, *, clock: Any, now: datetime
) -> bool | str:
    """Step 4, every slot of the job's lock taken: the overlap policy's
    answer. True after taking the lock over (cancel_other), else the status
    the run has now."""
    action = compute_start_action(rules)
    if run.trigger == RunTrigger.RETRY:
        action = StartAction.HOLD  # a retry waits for a busy job, it is never skipped
    ended = action is StartAction.SKIP and holders_ended(run.job_id, rules.max_instances)
    if ended:
        action = compute_start_action(rules, holders_ended=True)
    count_lock_wait(action.value)
    detail = "the job's lock was taken"
    if ended:
        detail = "the job's lock was still held by a run that has ended: waits for the slot"
    record([Decision(f"lock_{action.value}", run.job_id, run.pk, detail=detail)])
    if action is StartAction.HOLD:
        hold_run(run)
        # The holder may have ended between our lock attempt and the hold:
        # then nobody else would send this run.
        release_next_held(run.job_id)
        log.info("run %s waits for the job's running run", run.pk, extra=_extra(run))
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
        stopped = cancel_active_runs(run.job_id, keep=run.pk, now=now, reason=reason)
        revoke_after_commit(stopped)
    lock.take_over()
    return True


def holders_ended(job_id: int, slots: int) -> bool:
    """Whether every run holding one of the job's lock slots 0 … slots-1
    has ended in the database (issue 28): its end is recorded before its
    worker frees the slot. One Redis round trip and one query; False when
    Redis cannot say or a slot's token names no run."""
    try:
        tokens = get_redis().mget(slot_keys(job_id, slots=slots))
    except RedisError:
        return False
    run_ids = [token_run_id(token) for token in tokens if token is not None]
    if None in run_ids:
        return False
    active = (RunStatus.RUNNING, RunStatus.QUEUED)
    return not Run.objects.filter(pk__in=run_ids, status__in=active).exists()


def start_parent(run: Run, lock: JobLock, *, now: datetime) -> str:
    """A parent run (F-04): its first child's run, or its end when it has
    no child to run; then the job's lock goes back (the parent holds none
    while its children run). Returns the parent run's status."""
    with transaction.atomic():
        end = start_children(run, now=now)
        if end is not None:
            parent, status, message = end
            finish_run(parent, status=status, now=now, message=message)
    lock.release()
    log.info("parent run %s started its children", run.pk, extra=_extra(run))
    return end[1] if end is not None else RunStatus.RUNNING


def _release_waiting(*, now: datetime) -> None:
    try:
        release_waiting(now=now)
    except RedisError:  # the next beat tick sends them
        log.exception("could not send the runs waiting for a slot")


def _extra(run: Run) -> dict[str, Any]:
    return {"job_id": run.job_id, "run_id": run.pk}
