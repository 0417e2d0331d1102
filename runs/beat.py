"""Takt's Celery beat scheduler: ``celery beat -S runs.beat:TaktScheduler``.

Each tick claims due triggers in batches (runs.dispatch), publishes the runs
after their transaction commits, and sends whatever the outbox still holds.
Then it sleeps until the next fire time, at most TAKT_POLL_SECONDS. Any
number of beats may run at once; the database decides which one dispatches
each fire time. Celery's own ``beat_schedule`` entries become jobs declared
in code when the beat starts (TAKT_CELERY_BEAT_SCHEDULE=sync, the default),
or stop it, named (refuse).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Any

from celery.beat import Scheduler
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jobs import registry
from jobs.models import Job
from runs.beat_session import limit_beat_sessions, limit_hit
from runs.clock import now as shared_now
from runs.decisions import Decision, drain_quietly, record
from runs.outage import (
    MAX_BACKOFF_S,
    OUTAGE,
    compute_backoff_s,
    drop_connection,
    is_db_outage,
    retry_through_outage,
)
from runs.signals import beat_ticked
from runs.tick import run_tick
from scheduler_project.connections import ConnectionReuse

log = logging.getLogger("takt.beat")

MIN_SLEEP_S = 0.02


def note_beat(*, started: bool) -> None:
    """F-65 `beat`: this beat's scheduler switched on (or off, with
    TAKT_SCHEDULER_ENABLED=false) at start, and its stop; job 0."""
    where = f"on {socket.gethostname()} (pid {os.getpid()})"
    if not started:
        detail = f"beat stopped {where}"
    elif settings.TAKT_SCHEDULER_ENABLED:
        detail = f"beat started {where}: scheduling on"
    else:
        detail = f"beat started {where}: scheduling OFF (TAKT_SCHEDULER_ENABLED=false)"
    record([Decision("beat", 0, detail=detail, at=shared_now())])


class TaktScheduler(Scheduler):
    _connection: Any = None

    _watcher: Any = None

    _in_tick = False

    _stop: tuple[Any, int, Any] | None = None

    def setup_schedule(self) -> None:
        self.data: dict[str, Any] = {}
        limit_beat_sessions()  # a paused beat holds no row lock for long
        self._finish_tick_on_stop()
        # A beat (re)started while the database is down waits for it.
        retry_through_outage(self.sync_declared_jobs, what="beat start")
        note_beat(started=True)
        if settings.TAKT_WATCH_FILES:
            # F-16, F-17: the watched folders, one watcher per folder in the
            # cluster (runs/watching.py).
            from runs.watching import Watcher

            self._watcher = Watcher(name="beat")
            self._watcher.start()

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()  # hands its folders over at once
            self._watcher = None
        note_beat(started=False)
        drain_quietly()  # its last entries into the database, if it can
        super().close()

    def sync_declared_jobs(self) -> None:
        """F-75: sync the jobs declared in code once, at start. A bad
        declaration raises ImproperlyConfigured naming the key and field,
        which stops the beat before it schedules anything."""
        from django.conf import settings

        beat_schedule = dict(self.app.conf.beat_schedule or {})
        if beat_schedule and settings.TAKT_CELERY_BEAT_SCHEDULE == "refuse":
            raise ImproperlyConfigured(
                f"Celery's beat_schedule has {len(beat_schedule)} entries"
                f" ({', '.join(map(repr, sorted(beat_schedule)))}), which Takt's beat does not"
                " run while TAKT_CELERY_BEAT_SCHEDULE=refuse: move them to TAKT_JOBS, or set it"
                " to sync to make them jobs declared in code"
            )
        declared = (
            settings.TAKT_JOBS
            or settings.TAKT_JOBS_FILE
            or registry.declared_by_decorator()
            or beat_schedule
        )
        if (
            not declared
            and not Job.objects.filter(code_managed=True, key__isnull=False)
            .exclude(key__startswith=registry.BUILTIN_KEY_PREFIX)
            .exists()
        ):
            # Nothing to sync: spare the beat the serializers' imports (~10 MB).
            return
        from jobs.declared import sync_declared_jobs

        report = sync_declared_jobs(now=shared_now())
        log.info("jobs declared in code: %s", report.summary())

    def _finish_tick_on_stop(self) -> None:
        """SIGTERM or Ctrl-C during a tick stops the beat once the tick has
        published what it committed, so a stopped beat leaves no run to the
        next beat's outbox pass; between ticks, and at a second signal, it
        stops at once. Wraps the handlers `celery beat` installed (which
        save the schedule and raise SystemExit): not in a thread, nor where
        SIGTERM has no handler (a scheduler built in a test or a shell)."""
        if threading.current_thread() is not threading.main_thread():
            return
        if not callable(signal.getsignal(signal.SIGTERM)):
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            stop_now = signal.getsignal(signum)
            if not callable(stop_now):
                continue

            def deferred(signum: int, frame: Any, stop_now: Any = stop_now) -> None:
                if self._in_tick and self._stop is None:
                    self._stop = (stop_now, signum, frame)
                    log.info("stopping once this tick has published its runs")
                    return
                stop_now(signum, frame)

            signal.signal(signum, deferred)

    def install_default_entries(self, data: Any) -> None:
        return None

    @property
    def schedule(self) -> dict[str, Any]:
        return self.data

    @property
    def info(self) -> str:
        state = "on" if settings.TAKT_SCHEDULER_ENABLED else "OFF (TAKT_SCHEDULER_ENABLED=false)"
        return f"    . takt: poll {settings.TAKT_POLL_SECONDS:g} s, scheduling {state}"

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One pass; returns the seconds to sleep before the next one."""

        poll = float(settings.TAKT_POLL_SECONDS)
        if self._connection is None:
            # A connection used a poll ago is used as it is: an idle tick
            # saves the health check's round trip.
            self._connection = ConnectionReuse(fresh_s=poll + 1)
        self._in_tick = True
        try:
            with self._connection.use():
                now = shared_now()
                wait = run_tick(now=now)
                # The beat's own heartbeat and the overdue check (F-61, F-62):
                # heartbeats listens, every REPORT_EVERY_S.
                beat_ticked.send(sender=type(self), now=now)
        except Exception as exc:
            return self._failed(exc, poll=poll)
        finally:
            self._in_tick = False
            if self._stop is not None:
                stop_now, signum, frame = self._stop
                stop_now(signum, frame)
        self._outage_attempts = 0
        OUTAGE.recovered()
        return max(MIN_SLEEP_S, min(poll, wait))

    _outage_attempts = 0

    def _failed(self, exc: Exception, *, poll: float) -> float:
        """A database or broker outage must not kill the beat. A database
        outage logs once (runs.outage) and is retried with backoff (poll,
        2× poll, … at most MAX_BACKOFF_S); the broken connection is dropped
        so the next try connects again. The fire times that pass meanwhile
        stay due: the first tick after the outage claims them by their
        missed-run policy. Any other error logs its traceback and is
        retried after one poll."""
        drop_connection()
        limit = limit_hit(exc)
        if limit is not None:  # runs.beat_session: paused, or a statement too slow
            log.warning(
                "beat tick: PostgreSQL ended the beat's transaction at %s (%s; was this"
                " process paused?); nothing of it was kept, the next tick claims again",
                limit,
                exc,
            )
            return poll
        if not is_db_outage(exc):
            log.exception("beat tick failed; retrying in %.1f s", poll)
            return poll
        OUTAGE.failed(exc, what="beat")
        wait = compute_backoff_s(self._outage_attempts, first_s=poll, cap_s=MAX_BACKOFF_S)
        self._outage_attempts += 1
        return wait
