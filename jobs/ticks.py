"""One beat tick as a plain function of `now` (the beat process's clock is
read once per tick in jobs.beat)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db.models import Min
from django.utils import timezone

from .models import Trigger

log = logging.getLogger("takt.beat")


def run_tick(*, now: datetime) -> float:
    """Dispatch everything due at `now`, publish it, sweep the outbox.
    Returns the seconds until the next known fire time (for the sleep)."""
    from runs.dispatch import claim_due_runs
    from runs.publish import publish_runs, sweep_unpublished

    # One index probe first: an idle tick takes no lock and opens no
    # transaction (on SQLite, no write lock every poll).
    wait = seconds_until_next_fire(now=now)
    if settings.TAKT_SCHEDULER_ENABLED and wait <= 0:
        batch = settings.TAKT_CLAIM_BATCH
        while True:
            claimed = claim_due_runs(now=now, limit=batch)
            publish_runs(claimed.to_publish, now=timezone.now())
            if claimed.claimed or claimed.lost_races:
                log.info(
                    "dispatched %d runs (%d skipped, %d taken by another beat)",
                    len(claimed.queued),
                    len(claimed.skipped),
                    claimed.lost_races,
                )
            if claimed.claimed + claimed.lost_races < batch:
                break
        wait = seconds_until_next_fire(now=timezone.now())
    elif not settings.TAKT_SCHEDULER_ENABLED:
        wait = float(settings.TAKT_POLL_SECONDS)  # due times stay due; nothing to wake for
    sweep_unpublished(now=now)
    return wait


def seconds_until_next_fire(*, now: datetime) -> float:
    """From the partial index: one index probe, whatever the job count."""
    nxt = Trigger.objects.filter(active=True).aggregate(m=Min("next_run_at"))["m"]
    if nxt is None:
        return float(settings.TAKT_POLL_SECONDS)
    return max(0.0, (nxt - now).total_seconds())
