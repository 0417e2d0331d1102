"""The queue at a glance (F-41 `GET /api/v1/queue`, F-74 `takt_status`,
F-92 the queue page): here because it reads all three apps (heartbeats →
runs → jobs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Min

from heartbeats.processes import BEAT_PREFIX, WORKER_PREFIX, live_processes
from jobs.models import QueueState, Trigger
from runs import lock_files
from runs.models import Run, RunStatus
from runs.slots import global_limit


def is_off(skew_s: float | None) -> bool:
    return skew_s is not None and abs(skew_s) > float(settings.TAKT_CLOCK_SKEW_WARN_SECONDS)


def queue_status(*, now: datetime) -> dict[str, Any]:
    """next_scheduled (aware datetime or None); scheduler_enabled (at least
    one live beat dispatches by schedule, as the beats report their own
    TAKT_SCHEDULER_ENABLED); paused with its note, who, when and until;
    maintenance (the switch or a lock file) and its note, and each lock file
    with the host that sees it; max_concurrency
    (TAKT_MAX_CONCURRENCY, the global limit; None: no limit) and pool_size
    (the live workers' pool sizes added up); active_count (running runs),
    queued_count (runs waiting to start, held ones included); the live beats
    and workers, each with its clock's skew from the database's as it
    reported it (None: not measured) and whether that is over
    TAKT_CLOCK_SKEW_WARN_SECONDS."""
    state = QueueState.objects.filter(pk=1).first()
    paused = bool(state and state.paused)
    counts = dict(
        Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
        .values_list("status")
        .annotate(n=Count("id"))
    )
    beats = live_processes(BEAT_PREFIX, now=now)
    workers = live_processes(WORKER_PREFIX, now=now)
    seen = lock_files.seen_in_cluster()
    return {
        "next_scheduled": Trigger.objects.filter(active=True).aggregate(m=Min("next_run_at"))["m"],
        "scheduler_enabled": any(beat.scheduler_enabled for beat in beats),
        "paused": paused,
        "pause_note": state.pause_note if state and paused else "",
        "paused_by": state.paused_by if state and paused else "",
        "paused_at": state.paused_at if state and paused else None,
        "paused_until": state.paused_until if state and paused else None,
        "maintenance": bool(state and state.maintenance) or bool(seen),
        "maintenance_note": state.maintenance_note if state and state.maintenance else "",
        "maintenance_lock_file": bool(seen),
        "maintenance_lock_files": [{"path": s.path, "host": s.host} for s in seen],
        "max_concurrency": global_limit(),
        "pool_size": sum(worker.concurrency for worker in workers),
        "active_count": counts.get(RunStatus.RUNNING, 0),
        "queued_count": counts.get(RunStatus.QUEUED, 0),
        "beats": [
            {
                "name": b.name,
                "scheduler_enabled": b.scheduler_enabled,
                "clock_skew_s": b.clock_skew_s,
                "clock_off": is_off(b.clock_skew_s),
                "last_seen_at": b.last_seen_at,
            }
            for b in beats
        ],
        "workers": [
            {
                "name": w.name,
                "concurrency": w.concurrency,
                "queues": None if w.queues is None else sorted(w.queues),
                "clock_skew_s": w.clock_skew_s,
                "clock_off": is_off(w.clock_skew_s),
                "last_seen_at": w.last_seen_at,
            }
            for w in workers
        ],
    }
