"""The queue at a glance (F-41 `GET /api/v1/queue`, F-74 `takt_status`,
F-92): here because it reads all three apps (heartbeats → runs → jobs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Min

from jobs.models import QueueState, Trigger
from jobs.queue import lock_file_present
from runs.models import Run, RunStatus

from .processes import live_concurrency


def queue_status(*, now: datetime) -> dict[str, Any]:
    """next_scheduled (aware datetime or None), scheduler_enabled, paused
    and its note, maintenance (the switch or the lock file), max_concurrency
    (the live workers' pool sizes added up), active_count (running runs),
    queued_count (runs waiting to start, held ones included)."""
    state = QueueState.objects.filter(pk=1).first()
    counts = dict(
        Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
        .values_list("status")
        .annotate(n=Count("id"))
    )
    return {
        "next_scheduled": Trigger.objects.filter(active=True).aggregate(m=Min("next_run_at"))["m"],
        "scheduler_enabled": bool(settings.TAKT_SCHEDULER_ENABLED),
        "paused": bool(state and state.paused),
        "pause_note": state.pause_note if state and state.paused else "",
        "maintenance": bool(state and state.maintenance) or lock_file_present(),
        "max_concurrency": live_concurrency(now=now),
        "active_count": counts.get(RunStatus.RUNNING, 0),
        "queued_count": counts.get(RunStatus.QUEUED, 0),
    }
