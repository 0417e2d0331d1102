"""Writes to heartbeats, and the alerts they raise (F-60, F-62, F-106).

A heartbeat that cannot be written, or an alert that cannot be raised, never
fails the run it reports (F-60): every step after the run's end is caught and
logged.
"""

from __future__ import annotations

import copy
import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import OuterRef, Q, Subquery
from django.utils import timezone

from heartbeats import alert_texts
from heartbeats.alerts import raise_alert, resolve_alert
from heartbeats.core.status import HeartbeatState, compute_deadline_at, compute_state
from heartbeats.job_events import on_run_ended
from heartbeats.models import AlertSeverity, Heartbeat, grace_of
from heartbeats.statements import (
    Reported,
    reported_from,
    update_or_create_heartbeat,
    upsert_after_end,
    upsert_heartbeat,
)
from runs.models import Run, RunStatus
from runs.signals import EndCompanion

log = logging.getLogger("takt.heartbeats")

REPORTED_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)

# Databases that take the one-statement upsert (heartbeats.statements).
UPSERT_VENDORS = ("postgresql", "sqlite")


def failed_alert_key(job_id: int) -> str:
    return f"run-failed:job:{job_id}"


def overdue_alert_key(heartbeat_id: int) -> str:
    return f"overdue:{heartbeat_id}"


def record_run_heartbeat(run: Run) -> bool:
    """Fold a finished run into its job's heartbeat (created by the first
    report). Skipped and cancelled runs are not reports. Returns whether a
    heartbeat was written; never raises."""
    return _write_run_heartbeat(run) is not None


def _heartbeat_values(run: Run) -> dict[str, Any]:
    """What a finished run writes into its job's heartbeat (UPSERT_FIELDS)."""
    failed = run.status != RunStatus.SUCCEEDED
    return {
        "job_id": run.job_id,
        "name": run.job.name,
        "last_run_at": run.finished_at,
        "last_started_at": run.started_at,
        "last_status": run.status,
        "last_result": (run.message or str(run.result or ""))[:2000],
        "last_run_id": run.pk,
        "deadline_s": run.job.heartbeat_deadline_s,
        "last_success_at": None if failed else run.finished_at,
        "failure_count": int(failed),
        "consecutive_failures": int(failed),
        "state": _state_after(run, paused=False, grace_s=None),  # a first report's
        "paused": False,
        "updated_at": timezone.now(),
    }


def heartbeat_with_end(run: Run, fields: dict[str, Any]) -> EndCompanion | None:
    """runs.signals.end_companion: the heartbeat's upsert in the statement
    that records the run's end (PostgreSQL), for a run that reports; the
    `run_finished` receiver then finds it written (`run.ended_with`)."""
    ended = copy.copy(run)
    for name, value in fields.items():
        setattr(ended, name, value)
    if ended.status not in REPORTED_STATUSES:
        return None
    sql, params = upsert_after_end(_heartbeat_values(ended))
    return EndCompanion(sql, params, reported_from)


def _write_run_heartbeat(run: Run) -> Reported | None:
    if run.status not in REPORTED_STATUSES:
        return None
    written = getattr(run, "ended_with", None)
    if isinstance(written, Reported):  # with the end, in its statement
        return written
    try:
        values = _heartbeat_values(run)
        if connection.vendor in UPSERT_VENDORS:
            return upsert_heartbeat(values)
        return update_or_create_heartbeat(values)
    except Exception:
        log.exception(
            "writing the heartbeat of run %s failed",
            run.pk,
            extra={"job_id": run.job_id, "run_id": run.pk},
        )
    return None


def _state_after(run: Run, *, paused: bool, grace_s: int | None) -> HeartbeatState:
    """The heartbeat's state just after `run` reported."""
    assert run.finished_at is not None  # a reported run has ended
    return compute_state(
        last_run_at=run.finished_at,
        last_started_at=run.started_at,
        last_status=run.status,
        deadline_s=run.job.heartbeat_deadline_s,
        grace_s=grace_of(grace_s),
        paused=paused,
        running=False,
        now=run.finished_at,
    )


def on_run_finished(sender: Any, run: Run, **kwargs: Any) -> None:
    """Receiver of runs.signals.run_finished: the job's own notifications
    (F-63), the heartbeat, then its alerts."""
    try:
        on_run_ended(run)
    except Exception:
        log.exception("job notifications of run %s failed", run.pk)
    reported = _write_run_heartbeat(run)
    if reported is None:
        return
    try:
        alert_on_report(run, reported)
    except Exception:
        log.exception(
            "alerting on run %s failed",
            run.pk,
            extra={"job_id": run.job_id, "run_id": run.pk},
        )


def alert_on_report(run: Run, reported: Reported) -> None:
    """After a run's heartbeat was written (F-62, F-106):

    1. Store the heartbeat's new state when it changed (compare-and-set on
       the old one: a concurrent overdue check wins, and checks again).
    2. A failure raises "Run 'X' failed" — at once as a warning, or, with
       `alert_after_failures` = N, from the N-th failure in a row as
       critical. A repeat raises the count of the same alert. A paused
       heartbeat raises nothing.
    3. A success after any state but `up` resolves the failure alert and
       the overdue alert (recovery notices); a success after a success
       costs nothing more."""
    now = run.finished_at
    assert now is not None
    state = _state_after(run, paused=reported.paused, grace_s=reported.grace_s)
    recovered = run.status == RunStatus.SUCCEEDED and reported.state != HeartbeatState.UP
    if state != reported.state:
        changes: dict[str, Any] = {"state": state}
        if recovered:
            changes["last_alerted_at"] = None  # no overdue alert stays open
        Heartbeat.objects.filter(pk=reported.id, state=reported.state).update(**changes)
    name = run.job.name
    if run.status != RunStatus.SUCCEEDED:
        if reported.paused:
            return
        streak, threshold = reported.consecutive_failures, reported.alert_after_failures
        if threshold is not None and streak < threshold:
            return
        title, message = alert_texts.failed_alert(
            name, run_id=run.pk, status=run.status, streak=streak, message=run.message
        )
        raise_alert(
            failed_alert_key(run.job_id),
            severity=AlertSeverity.WARNING if threshold is None else AlertSeverity.CRITICAL,
            title=title,
            message=message,
            now=now,
        )
    elif recovered:
        notice = alert_texts.succeeded_again(name, run_id=run.pk)
        resolve_alert(failed_alert_key(run.job_id), message=notice, now=now)
        resolve_alert(overdue_alert_key(reported.id), message=notice, now=now)


# --- The overdue check --------------------------------------------------------

_CHECKED_FIELDS = (
    "id",
    "name",
    "job_id",
    "last_run_at",
    "last_started_at",
    "last_status",
    "deadline_s",
    "grace_s",
    "paused",
    "reminder_s",
    "state",
    "last_alerted_at",
)


def check_overdue(*, now: datetime) -> int:
    """Find overdue heartbeats and alert on them (F-61, F-106). Returns how
    many heartbeats are overdue (late or down) at `now`.

    One query reads every heartbeat with a deadline (or an open overdue
    alert), with the start of its job's running run if any; the state is
    computed from those fields and `now` (heartbeats.core.status). Then, per
    heartbeat whose state or alert changes:

    1. Compare-and-set the new state and last_alerted_at on the row, filtered
       on the state, last report and last alert just read: of two checks
       (or a check and a report) only one acts.
    2. Overdue with no alert open, or late turned down: raise "Run 'X'
       overdue" (warning when late, critical when down).
    3. Still down with an alert open for `reminder_s`: raise it again as a
       reminder (the count goes up and a notification goes out).
    4. Up (or paused) again with an alert open: resolve it."""
    running_since = Subquery(
        Run.objects.filter(job_id=OuterRef("job_id"), status=RunStatus.RUNNING)
        .order_by("-started_at")
        .values("started_at")[:1]
    )
    rows = list(
        Heartbeat.objects.filter(Q(deadline_s__isnull=False) | Q(last_alerted_at__isnull=False))
        .annotate(running_since=running_since)
        .order_by()
        .values(*_CHECKED_FIELDS, "running_since")
    )
    overdue = 0
    for row in rows:
        try:
            overdue += _check_one(row, now=now)
        except Exception:
            log.exception(
                "the overdue check of heartbeat %s failed",
                row["id"],
                extra={"heartbeat_id": row["id"], "job_id": row["job_id"]},
            )
    return overdue


def _check_one(row: dict[str, Any], *, now: datetime) -> bool:
    """Steps 1 to 4 of check_overdue for one heartbeat; whether it is overdue."""
    last_run_at, started_at = row["last_run_at"], row["last_started_at"]
    # A run is under way: the job's running run, or an outside process's
    # start ping after its last report.
    running = row["running_since"] is not None or (
        started_at is not None and (last_run_at is None or started_at > last_run_at)
    )
    if row["running_since"] is not None:
        started_at = max(filter(None, (started_at, row["running_since"])))
    grace_s = grace_of(row["grace_s"])
    facts = {"last_run_at": last_run_at, "last_started_at": started_at, "running": running}
    state = compute_state(
        **facts,
        last_status=row["last_status"],
        deadline_s=row["deadline_s"],
        grace_s=grace_s,
        paused=row["paused"],
        now=now,
    )
    deadline_at = compute_deadline_at(**facts, deadline_s=row["deadline_s"])
    is_overdue = not row["paused"] and deadline_at is not None and now > deadline_at
    alerted_at = row["last_alerted_at"]
    action = None
    if is_overdue:
        if alerted_at is None or (state != row["state"] and state == HeartbeatState.DOWN):
            action, alerted_at = "raise", now
        elif (
            state == HeartbeatState.DOWN
            and row["reminder_s"]
            and now >= alerted_at + timedelta(seconds=row["reminder_s"])
        ):
            action, alerted_at = "remind", now
    elif alerted_at is not None and state in (HeartbeatState.UP, HeartbeatState.PAUSED):
        action, alerted_at = "resolve", None
    if state == row["state"] and alerted_at == row["last_alerted_at"]:
        return is_overdue
    with transaction.atomic():
        won = Heartbeat.objects.filter(
            pk=row["id"],
            state=row["state"],
            last_run_at=last_run_at,
            last_alerted_at=row["last_alerted_at"],
        ).update(state=state, last_alerted_at=alerted_at)
        if won and action is not None:
            _act(action, row, state=state, deadline_at=deadline_at, grace_s=grace_s, now=now)
    return is_overdue


def _act(
    action: str,
    row: dict[str, Any],
    *,
    state: HeartbeatState,
    deadline_at: datetime | None,
    grace_s: int,
    now: datetime,
) -> None:
    key, name = overdue_alert_key(row["id"]), row["name"]
    if action == "resolve":
        notice = alert_texts.overdue_resolved(name, paused=state == HeartbeatState.PAUSED)
        resolve_alert(key, message=notice, now=now)
        return
    assert deadline_at is not None
    title, message = alert_texts.overdue_alert(
        name,
        state=state,
        last_run_at=row["last_run_at"],
        deadline_s=row["deadline_s"],
        deadline_at=deadline_at,
        grace_s=grace_s,
    )
    raise_alert(
        key,
        severity=AlertSeverity.CRITICAL if state == HeartbeatState.DOWN else AlertSeverity.WARNING,
        title=title,
        message=message,
        now=now,
        reminder=action == "remind",
    )
