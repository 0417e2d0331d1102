"""The Takt landing page (the admin index): the operations summary (the
heartbeat states counted, the open alerts), the queue's state, the next
runs and the jobs whose last run failed — each a small, indexed query, and
one click from the page behind it."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from heartbeats.core.status import HeartbeatState
from heartbeats.models import Alert, Heartbeat
from heartbeats.queue_status import queue_status
from jobs.models import Trigger

NEXT_RUNS = 8
FAILED_JOBS = 6
OPEN_ALERTS = 5
FAILED = ("failed", "timed_out", "lost")


def landing_summary(*, now: datetime) -> dict[str, Any]:
    # Each state now, as the other pages say it (the stored one lags by a tick).
    states = Counter(beat.state_at(now=now).value for beat in Heartbeat.objects.all())
    open_alerts = Alert.objects.filter(resolved_at__isnull=True)
    return {
        "states": [(state.value, states.get(state.value, 0)) for state in HeartbeatState],
        "heartbeats": sum(states.values()),
        "alerts_open": open_alerts.count(),
        "alerts_unseen": open_alerts.filter(seen=False).count(),
        "alerts": list(open_alerts.order_by("-last_seen_at")[:OPEN_ALERTS]),
        "queue": queue_status(now=now),
        "next_runs": list(
            Trigger.objects.filter(active=True, next_run_at__isnull=False)
            .select_related("job")
            .order_by("next_run_at")[:NEXT_RUNS]
        ),
        "failed_jobs": list(
            Heartbeat.objects.filter(job__isnull=False, last_status__in=FAILED)
            .select_related("job")
            .order_by("-last_run_at")[:FAILED_JOBS]
        ),
    }
