"""What heartbeats listens to (runs never imports heartbeats: runs sends
signals, these receivers turn them into heartbeats, alerts and
notifications). `connect_all` is called once from the app's ready();
receivers are connected strongly, so none is ever collected."""

from __future__ import annotations

import logging
import socket
from typing import Any

from django.conf import settings

from heartbeats.alerts import raise_alert, resolve_alert
from heartbeats.clock_skew import check_clock_skew
from heartbeats.job_events import on_run_running_long, on_run_started
from heartbeats.processes import BeatReporter, beat_name, start_worker_reporter
from heartbeats.services import check_overdue, heartbeat_with_end, on_run_finished
from heartbeats.unread_queues import check_unread_queues
from runs import signals
from runs.maintenance import maintenance_finished
from scheduler_project.logconfig import set_process_field

log = logging.getLogger("takt.heartbeats")


def worker_ready(sender: object = None, **kwargs: object) -> None:
    """A worker reports its own heartbeat (F-61) as `worker:<its name>`."""
    hostname = getattr(sender, "hostname", None) or "unknown"
    controller = getattr(sender, "controller", None)
    concurrency = getattr(controller, "concurrency", None) or getattr(sender, "concurrency", 0)
    start_worker_reporter(f"worker:{hostname}", int(concurrency or 0), consumed_queues(sender))


def consumed_queues(consumer: object) -> list[str] | None:
    """The queues a worker consumes (its -Q, else every queue the app
    declares); None when `consumer` is not a worker's consumer."""
    try:
        return sorted(consumer.app.amqp.queues.consume_from)  # type: ignore[attr-defined]
    except Exception:
        return None


_beat_reporter: list[Any] = []


def beat_started(sender: object = None, **kwargs: object) -> None:
    """A beat's log lines name it, as its heartbeat does (F-107)."""
    set_process_field("beat", beat_name(settings.TAKT_BEAT_NAME, socket.gethostname()))


def beat_ticked(sender: object = None, now: Any = None, **kwargs: object) -> None:
    """A beat reports its own heartbeat and runs the overdue check (F-61,
    F-62), every REPORT_EVERY_S of its ticks; never raises."""
    if not _beat_reporter:
        _beat_reporter.append(
            BeatReporter(
                beat_name(settings.TAKT_BEAT_NAME, socket.gethostname()),
                scheduler_enabled=bool(settings.TAKT_SCHEDULER_ENABLED),
                checks=(check_overdue, check_unread_queues, check_clock_skew),
            )
        )
    _beat_reporter[0].maybe_report(now=now)


def maintenance_findings(
    sender: object = None, report: object = None, now: Any = None, **kwargs: object
) -> None:
    """Maintenance findings become alerts (F-62, F-71..F-73): expired runs, a
    failed cleanup section, schema problems, too-short retry delays."""
    for finding in getattr(report, "findings", []):
        raise_alert(
            finding.key,
            severity=str(finding.severity),
            title=finding.title,
            message=finding.detail,
            now=now,
        )


MAINTENANCE_ALERT = "maintenance"


def maintenance_changed(
    sender: object = None,
    on: bool = False,
    note: str = "",
    lock_file: str = "",
    now: Any = None,
    **kwargs: object,
) -> None:
    """F-29: maintenance mode going on raises a warning (the manual's
    "NoLock detected", notified like any alert at that severity); going
    off resolves it."""
    try:
        if not on:
            resolve_alert(MAINTENANCE_ALERT, message="maintenance mode is off", now=now)
            return
        # lock_file: the files and the hosts that see them (runs.lock_files)
        source = f"the lock file {lock_file} exists" if lock_file else "switched on"
        raise_alert(
            MAINTENANCE_ALERT,
            severity="warning",
            title="Maintenance mode on",
            message=f"maintenance mode is on ({source}{': ' + note if note else ''}): only jobs"
            " on the maintenance allow-list start; every other start is refused",
            now=now,
        )
    except Exception:
        log.exception("the maintenance alert failed")


def catchup_capped(
    sender: object = None,
    job_id: int = 0,
    job_name: str = "",
    skipped: int = 0,
    now: Any = None,
    **kwargs: object,
) -> None:
    """F-62: a run_all catch-up that had to leave missed fire times out."""
    try:
        raise_alert(
            f"catchup-capped:job:{job_id}",
            severity="warning",
            title=f"Catch-up of '{job_name}' capped",
            message=f"{skipped} missed fire time(s) were not caught up (catch-up limit or window)",
            now=now,
        )
    except Exception:
        log.exception("the capped catch-up alert failed")


def trigger_stalled(
    sender: object = None, stalled: Any = None, now: Any = None, **kwargs: object
) -> None:
    """F-111: a trigger that would never have fired again (critical), one
    alert per trigger."""
    try:
        raise_alert(
            f"trigger-stalled:{stalled.trigger_id}",
            severity="critical",
            title=stalled.title,
            message=stalled.detail,
            now=now,
        )
    except Exception:
        log.exception("the stalled-trigger alert failed")


def connect_all() -> None:
    from celery import signals as celery_signals

    for signal, receiver, uid in (
        (signals.run_finished, on_run_finished, "record_run"),
        (signals.run_started, on_run_started, "started"),
        (signals.run_running_long, on_run_running_long, "long"),
        (signals.catchup_capped, catchup_capped, "capped"),
        (signals.trigger_stalled, trigger_stalled, "stalled"),
        (signals.beat_ticked, beat_ticked, "beat"),
        (signals.maintenance_changed, maintenance_changed, "maintenance_mode"),
        (maintenance_finished, maintenance_findings, "maintenance"),
        (celery_signals.worker_ready, worker_ready, "worker"),
        (celery_signals.beat_init, beat_started, "beat_log"),
    ):
        signal.connect(receiver, weak=False, dispatch_uid=f"takt.heartbeats.{uid}")
    # The heartbeat's upsert goes in the statement that records a run's end.
    signals.end_companion[:] = [heartbeat_with_end]
