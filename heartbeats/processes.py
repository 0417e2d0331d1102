"""Heartbeats of Takt's own processes (F-61): every beat reports under
`beat@<host>` and every worker under `worker:<worker name>` (e.g.
`worker:celery@host`), as outside heartbeats with a deadline of
PROCESS_DEADLINE_S, so the operations page and the overdue
check show a process that stopped like any job that went missing.

The beat reports from its tick and runs the overdue check there too (both
every REPORT_EVERY_S); a worker reports from a daemon thread started when
it is ready (celery's worker_ready signal), not per run.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from django.db import IntegrityError, transaction

from .models import Heartbeat
from .status import HeartbeatState

log = logging.getLogger("takt.heartbeats")

REPORT_EVERY_S = 30.0
PROCESS_DEADLINE_S = 120


def report_process(name: str, *, now: datetime) -> None:
    """Record that process `name` is alive (made on its first report)."""
    changes = {
        "last_run_at": now,
        "last_success_at": now,
        "last_status": "succeeded",
        "state": HeartbeatState.UP,
        "updated_at": now,
    }
    if Heartbeat.objects.filter(name=name, job__isnull=True).update(**changes):
        return
    try:
        with transaction.atomic():
            Heartbeat.objects.create(name=name, deadline_s=PROCESS_DEADLINE_S, **changes)
    except IntegrityError:  # another process of that name was quicker
        Heartbeat.objects.filter(name=name, job__isnull=True).update(**changes)


class BeatReporter:
    """Called from each beat tick: reports the beat and checks overdue
    heartbeats every REPORT_EVERY_S. Never raises."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._last = float("-inf")

    def maybe_report(self, *, now: datetime) -> None:
        if time.monotonic() - self._last < REPORT_EVERY_S:
            return
        self._last = time.monotonic()
        try:
            from .services import check_overdue

            report_process(self.name, now=now)
            check_overdue(now=now)
        except Exception:
            log.exception("the beat's heartbeat or overdue check failed")


def start_worker_reporter(name: str) -> threading.Thread:
    """A daemon thread reporting `name` every REPORT_EVERY_S."""

    def loop() -> None:
        from django.db import close_old_connections
        from django.utils import timezone

        while True:
            try:
                close_old_connections()
                report_process(name, now=timezone.now())
            except Exception:
                log.exception("the worker's heartbeat could not be written")
            time.sleep(REPORT_EVERY_S)

    thread = threading.Thread(target=loop, name="takt-worker-heartbeat", daemon=True)
    thread.start()
    return thread
