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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from heartbeats.core.status import HeartbeatState
from heartbeats.models import Heartbeat
from heartbeats.services import check_overdue
from runs.clock import now as shared_now
from runs.clock import skew_s
from runs.outage import OUTAGE, drop_connection, is_db_outage

log = logging.getLogger("takt.heartbeats")

REPORT_EVERY_S = 30.0
PROCESS_DEADLINE_S = 120


def report_process(name: str, *, now: datetime, detail: str = "") -> None:
    """Record that process `name` is alive (made on its first report);
    `detail` is kept as its last result (a worker's pool size)."""
    changes = {
        "last_result": detail,
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
    """Called from each beat tick: reports the beat (with its scheduler
    switch, TAKT_SCHEDULER_ENABLED) and runs its `checks` (overdue
    heartbeats; queues no worker reads) every REPORT_EVERY_S. Never raises."""

    def __init__(
        self,
        name: str,
        *,
        scheduler_enabled: bool = True,
        checks: Sequence[Callable[..., object]] = (check_overdue,),
    ) -> None:
        self.name = name
        self.detail = beat_detail(scheduler_enabled)
        self.checks = checks
        self._last = float("-inf")

    def maybe_report(self, *, now: datetime) -> None:
        if time.monotonic() - self._last < REPORT_EVERY_S:
            return
        self._last = time.monotonic()
        try:
            report_process(self.name, now=now, detail=self.detail + clock_detail())
            for check in self.checks:
                check(now=now)
        except Exception as exc:
            _report_failed(exc, "the beat's heartbeat or overdue check failed")


def _report_failed(exc: Exception, message: str) -> None:
    """A database outage is logged once per process (runs.outage), and the
    broken connection dropped; anything else with its traceback."""
    if is_db_outage(exc):
        OUTAGE.failed(exc, what="heartbeat")
        drop_connection()
    else:
        log.exception(message)


BEAT_PREFIX = "beat@"
WORKER_PREFIX = "worker:"


def beat_name(configured: str, host: str) -> str:
    """A beat's heartbeat name: TAKT_BEAT_NAME, else beat@<host>. Two beats
    on one host need names of their own to be told apart."""
    name = configured.strip() or host
    return name if name.startswith(BEAT_PREFIX) else f"{BEAT_PREFIX}{name}"


def beat_detail(scheduler_enabled: bool) -> str:
    return f"scheduler={'on' if scheduler_enabled else 'off'}"


@dataclass(frozen=True)
class LiveProcess:
    name: str
    last_seen_at: datetime
    detail: str

    @property
    def scheduler_enabled(self) -> bool:
        """A beat's switch as it reported it (older beats reported none: on)."""
        return "scheduler=off" not in self.detail

    @property
    def concurrency(self) -> int:
        value = self.detail.partition("concurrency=")[2].split()[:1]
        return int(value[0]) if value and value[0].isdigit() else 0

    @property
    def clock_skew_s(self) -> float | None:
        """How far its own clock was ahead of the database's (negative:
        behind), as it reported it (None: it did not measure, runs.clock)."""
        value = self.detail.partition(" clock=")[2].split()[:1]
        try:
            return float(value[0]) if value else None
        except ValueError:
            return None

    @property
    def queues(self) -> frozenset[str] | None:
        """The queues a worker consumes, as it reported them (None: a worker
        of an older Takt, which did not say)."""
        if "queues=" not in self.detail:
            return None
        value = self.detail.partition("queues=")[2].split()[:1]
        return frozenset(q for q in (value[0] if value else "").split(",") if q)


def live_processes(prefix: str, *, now: datetime) -> list[LiveProcess]:
    """The beats (BEAT_PREFIX) or workers (WORKER_PREFIX) that reported
    within their deadline, by name."""
    rows = Heartbeat.objects.filter(
        job__isnull=True,
        name__startswith=prefix,
        last_run_at__gte=now - timedelta(seconds=PROCESS_DEADLINE_S),
    ).order_by("name")
    return [LiveProcess(r.name, r.last_run_at, r.last_result) for r in rows if r.last_run_at]


def clock_detail() -> str:
    """` clock=+90.0`: this process's clock less the database's, as last
    measured (runs.clock), when it measures it."""
    if settings.TAKT_CLOCK != "database":
        return ""
    return f" clock={skew_s():+.1f}"


def worker_detail(concurrency: int, queues: Iterable[str] | None = None) -> str:
    """What a worker reports beside its heartbeat: its pool size and the
    queues it consumes (-Q), when known."""
    said = "" if queues is None else f" queues={','.join(sorted(queues))}"
    return f"concurrency={concurrency}{said}"


def read_queues(*, now: datetime) -> frozenset[str] | None:
    """The queues the live workers consume, together; None when a live
    worker did not say which (an older Takt): then no queue can be called
    unread."""
    read: set[str] = set()
    for worker in live_processes(WORKER_PREFIX, now=now):
        if worker.queues is None:
            return None
        read |= worker.queues
    return frozenset(read)


def live_concurrency(*, now: datetime) -> int:
    """The pool sizes of the workers that reported within their deadline,
    added up: how many runs can execute at once (GET /api/v1/queue)."""
    return sum(worker.concurrency for worker in live_processes(WORKER_PREFIX, now=now))


def start_worker_reporter(
    name: str, concurrency: int = 0, queues: Iterable[str] | None = None
) -> threading.Thread:
    """A daemon thread reporting `name` (with its pool size and the queues
    it consumes) every REPORT_EVERY_S."""
    detail = worker_detail(concurrency, queues)

    def loop() -> None:
        from django.db import close_old_connections

        while True:
            try:
                close_old_connections()
                report_process(name, now=shared_now(), detail=detail + clock_detail())
                OUTAGE.recovered()
            except Exception as exc:
                _report_failed(exc, "the worker's heartbeat could not be written")
            time.sleep(REPORT_EVERY_S)

    thread = threading.Thread(target=loop, name="takt-worker-heartbeat", daemon=True)
    thread.start()
    return thread
