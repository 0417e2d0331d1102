"""Runs that wait for a slot (F-31, F-34): what a job's runs need
(`slot_needs`), and sending the waiting runs again, best priority first,
when slots free (`release_waiting`).

A run that finds its group full, the exclusive slot taken or the global
limit reached is put back `queued` and `held`, `waiting_for` that slot
(runs/execution.py). It is never skipped for that reason. Whoever frees a
slot (a run's end, runs/execution.py) calls `release_waiting`, and so does
every beat tick while held runs exist (runs/outbox.py), which also covers a
slot that lapsed with a dead worker: for the waiting runs in order of
priority, then age, it reserves the slots each one needs
(runs/slots.reserve_for_waiting), then unholds those by compare-and-set
and publishes them. Their workers turn the reservations into their own
slots.
"""

from __future__ import annotations

import logging
from datetime import datetime

from jobs.models import ConcurrencyGroup, Job
from runs.children import has_children
from runs.core.start import SlotNeeds, Wait
from runs.decisions import Decision, record
from runs.models import Run, RunStatus
from runs.publish import publish_runs
from runs.slots import Waiter, global_limit, reserve_for_waiting

log = logging.getLogger("takt.waiting")

SLOT_WAITS = tuple(w.value for w in Wait)
RELEASE_BATCH = 50


def slot_needs(job: Job) -> SlotNeeds:
    """The slots a run of `job` takes besides the job's lock. A parent
    takes none: it runs no code itself, its children take theirs."""
    if has_children(job):
        return SlotNeeds()
    group = None if job.exclusive else job.concurrency_group_id
    limit = getattr(job, "group_limit", None)
    if group is not None and limit is None:
        limit = ConcurrencyGroup.objects.filter(pk=group).values_list("limit", flat=True).first()
    return SlotNeeds(
        group=group,
        group_limit=int(limit or 1),
        exclusive=bool(job.exclusive),
        global_limit=global_limit(),
    )


def _granted(run: Run) -> str:
    if run.waiting_for == Wait.GROUP and run.job.concurrency_group_id is not None:
        return f"a slot of group #{run.job.concurrency_group_id} is free: sent"
    if run.waiting_for == Wait.LIMIT:
        return "a slot under TAKT_MAX_CONCURRENCY is free: sent"
    return "the exclusive slot is free: sent"


def release_waiting(*, now: datetime, batch: int = RELEASE_BATCH) -> list[int]:
    """Send the held runs waiting for a slot whose slots are free now, in
    priority order (see the module docstring). Returns their ids; one query
    when none waits. Raises redis.RedisError."""
    waiters = list(
        Run.objects.filter(
            status=RunStatus.QUEUED,
            held=True,
            waiting_for__in=SLOT_WAITS,
            scheduled_for__lte=now,
        )
        .select_related("job")
        .order_by("priority", "enqueued_at", "pk")[:batch]
    )
    if not waiters:
        return []
    granted = set(reserve_for_waiting([Waiter(run.pk, slot_needs(run.job)) for run in waiters]))
    sent = [
        run
        for run in waiters
        if run.pk in granted
        and Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED, held=True).update(
            held=False, waiting_for=""
        )
    ]
    if not sent:
        return []
    decisions = [
        Decision("slot_granted", run.job_id, run.pk, detail=_granted(run), at=now) for run in sent
    ]
    for run in sent:
        run.held, run.waiting_for = False, ""
    publish_runs(sent, now=now)
    record(decisions)
    log.info("sent %d runs that waited for a slot", len(sent))
    return [run.pk for run in sent]
