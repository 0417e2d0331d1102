"""The beat's claim of due triggers (F-20, F-21, F-81, F-83, F-100).

`claim_due_runs` is the only place that turns fire times into runs:

1. In one transaction, read up to `limit` active triggers whose
   next_run_at <= now, oldest first, through the partial index
   `trigger_due_idx` (cost grows with the due triggers only). On
   PostgreSQL the rows are locked with SKIP LOCKED, so a second beat takes
   other rows instead of waiting.
2. For each, the pure core decides the fire time to run and the new
   next_run_at (`compute_claim`).
3. next_run_at is advanced by compare-and-set (UPDATE ... WHERE
   next_run_at = <value read>): if another beat or an edit moved it first,
   the row count is 0 and this beat leaves the trigger alone.
4. The run is inserted in the same transaction; the unique key
   (job, scheduled_for) is the last line of defence, so a race that got past
   step 3 still cannot create a second run for one fire time.
The common case goes in bulk: one batched UPDATE statement advances every
trigger of the batch (each row still guarded by its old next_run_at) and
one INSERT writes the runs. Should either find a row that moved or a fire time that
already has a run, the batch's transaction is rolled back and redone row by
row, each insert in its own savepoint.

5. After commit the caller publishes the returned run ids. A crash before
   publishing leaves queued, unpublished runs that `publish.sweep_unpublished`
   sends later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from jobs.models import Trigger
from jobs.scheduling import Claim, compute_claim
from jobs.services import trigger_spec

from .models import Run, RunStatus, RunTrigger
from .overlap import activity, admit, cancel_active_runs, revoke_after_commit
from .statements import advance_triggers
from .transitions import Admission

log = logging.getLogger("takt.dispatch")


@dataclass
class ClaimResult:
    queued: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    lost_races: int = 0
    to_publish: list[Run] = field(default_factory=list)  # the queued runs, job loaded

    @property
    def claimed(self) -> int:
        return len(self.queued) + len(self.skipped)


class _RowByRow(Exception):
    """The bulk path met a race or a bad trigger: redo the batch row by row."""


def claim_due_runs(*, now: datetime, limit: int) -> ClaimResult:
    """Claim up to `limit` due triggers and create their runs (see the
    module docstring). Returns the ids to publish after commit."""
    if connection.features.can_return_rows_from_bulk_insert:
        try:
            return _claim_in_bulk(now=now, limit=limit)
        except _RowByRow:
            pass
    result = ClaimResult()
    with transaction.atomic():
        triggers = _lock_due(now=now, limit=limit)
        load = _Load(activity([t.job_id for t in triggers], now=now) if triggers else {})
        for trigger in triggers:
            _claim_one(trigger, now=now, load=load, result=result)
    return result


class _Load:
    """The jobs' active runs during one claim: (running, waiting) per job,
    counting the runs this claim adds, so two triggers of one job in a
    batch are admitted one after the other (F-23)."""

    def __init__(self, counts: dict[int, tuple[int, int]]) -> None:
        self.counts = counts

    def admit(self, trigger: Trigger) -> tuple[Admission, str]:
        running, waiting = self.counts.get(trigger.job_id, (0, 0))
        decision = admit(trigger.job, running=running, waiting=waiting)
        if decision.admission is not Admission.SKIP:
            self.counts[trigger.job_id] = (running, waiting + 1)
        return decision.admission, decision.reason


def _lock_due(*, now: datetime, limit: int) -> list[Trigger]:
    due = (
        Trigger.objects.filter(active=True, next_run_at__lte=now)
        .select_related("job")
        .order_by("next_run_at")
    )
    if connection.features.has_select_for_update_skip_locked:
        due = due.select_for_update(skip_locked=True, of=("self",))
    return list(due[:limit])


def _new_run(
    trigger: Trigger, claim: Claim, *, now: datetime, admitted: tuple[Admission, str]
) -> Run:
    """The run for a claimed fire time (unsaved), as the overlap policy
    admitted it: queued, held, or `skipped` with the reason."""
    job = trigger.job
    admission, reason = admitted
    skipped = admission is Admission.SKIP
    run = Run(
        job=job,
        source_trigger=trigger,
        trigger=RunTrigger.CATCHUP if claim.catchup else RunTrigger.SCHEDULE,
        status=RunStatus.SKIPPED if skipped else RunStatus.QUEUED,
        held=admission is Admission.HOLD,
        priority=job.priority,
        params=job.params,
        scheduled_for=claim.scheduled_for,
        enqueued_at=now,
        finished_at=now if skipped else None,
        message=f"skipped: {reason}" if skipped else "",
        missed_count=claim.missed,
    )
    run.replaces_others = admission is Admission.REPLACE  # type: ignore[attr-defined]
    return run


def _collect(run: Run, result: ClaimResult, *, now: datetime) -> None:
    if run.status == RunStatus.SKIPPED:
        result.skipped.append(run.pk)
        return
    result.queued.append(run.pk)
    if getattr(run, "replaces_others", False):
        revoke_after_commit(
            cancel_active_runs(
                run.job_id, keep=run.pk, now=now, reason=f"cancelled: replaced by run #{run.pk}"
            )
        )
    if not run.held:
        result.to_publish.append(run)


def _claim_in_bulk(*, now: datetime, limit: int) -> ClaimResult:
    result = ClaimResult()
    with transaction.atomic():
        triggers = _lock_due(now=now, limit=limit)
        if not triggers:
            return result
        try:
            claims = [
                compute_claim(trigger_spec(t), next_run_at=t.next_run_at, now=now) for t in triggers
            ]
        except Exception:
            raise _RowByRow from None  # the row-by-row path parks the bad trigger
        won = advance_triggers(
            [
                (
                    t.pk,
                    t.next_run_at,
                    c.next_run_at,
                    t.missed_count + c.missed,
                    c.scheduled_for or t.last_fired_at,
                )
                for t, c in zip(triggers, claims, strict=True)
            ]
        )
        if won != len(triggers):
            raise _RowByRow
        load = _Load(activity([t.job_id for t in triggers], now=now))
        runs = []
        for trigger, claim in zip(triggers, claims, strict=True):
            if claim.scheduled_for is not None:
                runs.append(_new_run(trigger, claim, now=now, admitted=load.admit(trigger)))
        try:
            with transaction.atomic():
                Run.objects.bulk_create(runs)
        except IntegrityError:
            raise _RowByRow from None
        for run in runs:
            _collect(run, result, now=now)
    return result


def _claim_one(trigger: Trigger, *, now: datetime, load: _Load, result: ClaimResult) -> None:
    old_next = trigger.next_run_at
    assert old_next is not None
    extra = {"job_id": trigger.job_id, "trigger_id": trigger.pk}
    try:
        claim = compute_claim(trigger_spec(trigger), next_run_at=old_next, now=now)
    except Exception:
        # A trigger the core cannot evaluate must not stall every other job:
        # park it (no next run) and say so.
        log.exception("trigger %s cannot be evaluated; it is parked", trigger.pk, extra=extra)
        Trigger.objects.filter(pk=trigger.pk, next_run_at=old_next).update(next_run_at=None)
        return
    changes = {
        "next_run_at": claim.next_run_at,
        "missed_count": trigger.missed_count + claim.missed,
    }
    if claim.scheduled_for is not None:
        changes["last_fired_at"] = claim.scheduled_for
    won = Trigger.objects.filter(pk=trigger.pk, next_run_at=old_next).update(**changes)
    if won != 1:
        result.lost_races += 1
        return
    if claim.scheduled_for is None:
        return
    run = _new_run(trigger, claim, now=now, admitted=load.admit(trigger))
    try:
        with transaction.atomic():  # a savepoint: a duplicate key spoils only this insert
            run.save(force_insert=True)
    except IntegrityError:
        result.lost_races += 1
        log.info(
            "fire time %s of job %s already has a run",
            claim.scheduled_for,
            trigger.job_id,
            extra=extra,
        )
        return
    _collect(run, result, now=now)
