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
from jobs.scheduling import compute_claim
from jobs.services import trigger_spec

from .models import Run, RunStatus, RunTrigger
from .services import busy_job_ids, skipped_message

log = logging.getLogger("takt.dispatch")


@dataclass
class ClaimResult:
    queued: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    lost_races: int = 0

    @property
    def claimed(self) -> int:
        return len(self.queued) + len(self.skipped)


def claim_due_runs(*, now: datetime, limit: int) -> ClaimResult:
    """Claim up to `limit` due triggers and create their runs (see the
    module docstring). Returns the ids to publish after commit."""
    result = ClaimResult()
    with transaction.atomic():
        due = (
            Trigger.objects.filter(active=True, next_run_at__lte=now)
            .select_related("job")
            .order_by("next_run_at")
        )
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True, of=("self",))
        triggers = list(due[:limit])
        if not triggers:
            return result
        busy = busy_job_ids([t.job_id for t in triggers], now=now)
        for trigger in triggers:
            _claim_one(trigger, now=now, busy=busy, result=result)
    return result


def _claim_one(trigger: Trigger, *, now: datetime, busy: set[int], result: ClaimResult) -> None:
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
    job = trigger.job
    is_busy = job.pk in busy
    try:
        with transaction.atomic():  # a savepoint: a duplicate key spoils only this insert
            run = Run.objects.create(
                job=job,
                source_trigger=trigger,
                trigger=RunTrigger.CATCHUP if claim.catchup else RunTrigger.SCHEDULE,
                status=RunStatus.SKIPPED if is_busy else RunStatus.QUEUED,
                priority=job.priority,
                params=job.params,
                scheduled_for=claim.scheduled_for,
                enqueued_at=now,
                finished_at=now if is_busy else None,
                message=skipped_message(job.pk) if is_busy else "",
                missed_count=claim.missed,
            )
    except IntegrityError:
        result.lost_races += 1
        log.info(
            "fire time %s of job %s already has a run", claim.scheduled_for, job.pk, extra=extra
        )
        return
    (result.skipped if is_busy else result.queued).append(run.pk)
    busy.add(job.pk)  # a second trigger of the same job in this batch now sees it busy
