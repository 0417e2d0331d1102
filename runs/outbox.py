"""The outbox sweep (F-83): every beat tick sends the queued runs that no
one else will send: runs deferred to a `run_at` that has come, retries
once due, and runs whose publisher died after recording them. Before that
it sends the next held run of any job left with held runs and nothing
running (runs/overlap.py), so a held run never waits for ever."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q
from redis import RedisError

from runs.models import Run, RunStatus, RunTrigger
from runs.overlap import release_stranded
from runs.publish import publish_runs
from runs.waiting import release_waiting

log = logging.getLogger("takt.publish")


def sweep_unpublished(*, now: datetime, limit: int = 1000, known: bool = False) -> int:
    """Publish queued runs that were never marked as sent: runs deferred to
    a `run_at` that has come, and runs whose publisher died after recording
    them (older than TAKT_REPUBLISH_AFTER_SECONDS), and retries once due
    (no delay included). Held runs are not sent
    here: first, any job left with held runs and nothing running gets its
    next one sent (runs.overlap.release_stranded), and the runs waiting for
    a slot whose slot is free are (runs.waiting.release_waiting; a Redis
    error there is logged and the sweep goes on). Uses the partial indexes
    `run_unpublished_idx` and `run_held_idx`, so it costs nothing when the
    outbox is empty. `known`: the caller has just seen such a run (the
    beat's probe, runs/tick.py), so the sweep does not ask again."""
    waiting = Run.objects.filter(
        status=RunStatus.QUEUED, published_at__isnull=True, scheduled_for__lte=now
    )
    if not known and not waiting.exists():  # one index probe: held runs are unpublished too
        return 0
    release_stranded(now=now)
    try:
        release_waiting(now=now)
    except RedisError:
        log.exception("could not look for free slots")
    stale_before = now - timedelta(seconds=settings.TAKT_REPUBLISH_AFTER_SECONDS)
    # A retry is published by nobody else: it goes out once due, even with
    # no delay (a retry at "now" of a lost run, say).
    deferred_due = Q(scheduled_for__gt=F("enqueued_at")) | Q(trigger=RunTrigger.RETRY)
    ids = list(
        Run.objects.filter(
            status=RunStatus.QUEUED, published_at__isnull=True, scheduled_for__lte=now, held=False
        )
        .filter(deferred_due | Q(enqueued_at__lt=stale_before))
        .order_by("priority", "enqueued_at")
        .values_list("pk", flat=True)[:limit]
    )
    if ids:
        log.info("publishing %d runs from the outbox", len(ids))
    return publish_runs(ids, now=now)
