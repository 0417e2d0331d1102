"""Pings from outside processes (F-61), like a healthcheck service:

    POST /api/v1/heartbeats/<name>            success
    POST /api/v1/heartbeats/<name>/start      a run started
    POST /api/v1/heartbeats/<name>/fail       failure
    POST /api/v1/heartbeats/<name>/<status>   exit status: 0 success, 1-255 failure

The heartbeat must exist (an outside heartbeat, made in the admin with its
name and deadline); an unknown name, a bad exit status or a wrong token is
answered with a JSON error naming the field, and nothing changes.

Who may ping (issue 25, heartbeats.core.pings): Takt's own worker and beat
heartbeats accept no pings (403); a ping sends `Authorization: Bearer
<token>` with TAKT_PING_TOKEN or the heartbeat's own ping token (the
admin's "New ping token" action); with neither configured, a ping passes
only with DEBUG on (401 otherwise, the same answer for any name).

A failure raises the heartbeat's "Run 'X' failed" alert; a success resolves
it and a pending overdue alert. The notifications that causes are sent by a
background thread after the ping's transaction commits (heartbeats.sender),
never in the request, and at most once per heartbeat per
TAKT_PING_NOTIFY_INTERVAL_SECONDS; one that comes sooner is logged and not
sent (the alert itself is recorded).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from heartbeats import alert_texts
from heartbeats.alerts import raise_alert, resolve_alert
from heartbeats.core.pings import (
    bearer_token,
    compute_notification_due,
    compute_ping_allowed,
    is_process_name,
)
from heartbeats.core.status import HeartbeatState
from heartbeats.models import Alert, AlertSeverity, Heartbeat
from heartbeats.notify import NotifyEvent, notification_payload
from heartbeats.sender import SENDER
from heartbeats.services import overdue_alert_key

log = logging.getLogger("takt.heartbeats")


class PingError(Exception):
    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def failed_key(heartbeat_id: int) -> str:
    return f"ping-failed:{heartbeat_id}"


def parse_signal(signal: str) -> tuple[str, int | None]:
    """ "" / "start" / "fail" / an exit status → (kind, exit status)."""
    if signal in ("", "success"):
        return "success", 0
    if signal in ("start", "fail"):
        return signal, None
    if signal.isdigit() and 0 <= int(signal) <= 255:
        code = int(signal)
        return ("success" if code == 0 else "fail"), code
    message = gettext("expected start, fail or an exit status from 0 to 255, got %(signal)s")
    raise PingError("exit_status", message % {"signal": repr(signal)})


def refuse_process(name: str) -> None:
    """Raise PingError (403) when `name` is a Takt worker's or beat's own
    heartbeat: a ping would make a dead one look alive, or a live one failed."""
    if is_process_name(name):
        message = gettext(
            "%(name)s is the heartbeat of a Takt worker or beat: it reports itself"
            " and accepts no pings"
        )
        raise PingError("name", message % {"name": repr(name)}, status=403)


def record_ping(name: str, signal: str, *, now: datetime) -> Heartbeat:
    """Apply one ping to the outside heartbeat `name` (not a process's:
    refuse_process). Its notifications go out after commit by the
    background sender, rate-limited (`_notify_later`). Raises PingError."""
    refuse_process(name)
    kind, code = parse_signal(signal)
    pending: list[tuple[Alert, NotifyEvent]] = []

    def collect(alert: Alert, *, event: NotifyEvent, now: datetime) -> None:
        pending.append((alert, event))

    with transaction.atomic():
        beat = Heartbeat.objects.select_for_update().filter(name=name, job__isnull=True).first()
        if beat is None:
            message = gettext("no outside heartbeat is named %(name)s") % {"name": repr(name)}
            raise PingError("name", message, status=404)
        if kind == "start":
            Heartbeat.objects.filter(pk=beat.pk).update(last_started_at=now, updated_at=now)
        else:
            failed = kind == "fail"
            status = "failed" if failed else "succeeded"
            changes = {
                "last_run_at": now,
                "last_status": status,
                "last_result": "" if code is None else f"exit status {code}",
                "run_count": F("run_count") + 1,
                "failure_count": F("failure_count") + (1 if failed else 0),
                "consecutive_failures": F("consecutive_failures") + 1 if failed else 0,
                "state": HeartbeatState.DOWN if failed else HeartbeatState.UP,
                "updated_at": now,
            }
            if not failed:
                changes["last_success_at"] = now
                changes["last_alerted_at"] = None
            Heartbeat.objects.filter(pk=beat.pk).update(**changes)
        beat.refresh_from_db()
        if kind == "fail" and not beat.paused:
            streak, threshold = beat.consecutive_failures, beat.alert_after_failures
            if threshold is None or streak >= threshold:
                title, message = alert_texts.ping_failed_alert(beat.name, result=beat.last_result)
                raise_alert(
                    failed_key(beat.pk),
                    severity=AlertSeverity.WARNING if threshold is None else AlertSeverity.CRITICAL,
                    title=title,
                    message=message,
                    now=now,
                    notify=collect,
                )
        elif kind == "success":
            notice = alert_texts.ping_succeeded_again(beat.name)
            resolve_alert(failed_key(beat.pk), message=notice, now=now, notify=collect)
            resolve_alert(overdue_alert_key(beat.pk), message=notice, now=now, notify=collect)
        _notify_later(beat, pending, now=now)
    return beat


def _notify_later(
    beat: Heartbeat, pending: list[tuple[Alert, NotifyEvent]], *, now: datetime
) -> None:
    """Hand the ping's notifications to the background sender once the
    transaction commits, when the heartbeat's last ping notification is at
    least TAKT_PING_NOTIFY_INTERVAL_SECONDS old; else log and drop them.
    One ping's notifications (a failure and an overdue alert resolved) count
    as one. Called with the heartbeat's row locked: two pings cannot both
    pass the limit."""
    payloads: list[tuple[Mapping[str, Any], int]] = []
    for alert, event in pending:
        payload = notification_payload(alert, event=event)
        if payload is not None:
            payloads.append((payload, alert.pk))
    if not payloads:
        return
    interval = timedelta(seconds=settings.TAKT_PING_NOTIFY_INTERVAL_SECONDS)
    if not compute_notification_due(beat.ping_notified_at, now=now, interval=interval):
        log.warning(
            "ping %s: %d notification(s) not sent, one went out at %s (at most one per %d s)",
            beat.name,
            len(payloads),
            beat.ping_notified_at.isoformat() if beat.ping_notified_at else None,
            settings.TAKT_PING_NOTIFY_INTERVAL_SECONDS,
            extra={"alert_key": payloads[0][0].get("key")},
        )
        return
    Heartbeat.objects.filter(pk=beat.pk).update(ping_notified_at=now)
    for payload, alert_id in payloads:
        transaction.on_commit(
            partial(SENDER.send, payload, alert_id=alert_id, now=now), robust=True
        )


def ping_allowed(request: HttpRequest, name: str) -> bool:
    """Whether the request's bearer token lets it ping `name` (heartbeats.core.pings)."""
    own = (
        Heartbeat.objects.filter(name=name, job__isnull=True)
        .values_list("ping_token_hash", flat=True)
        .first()
    )
    return compute_ping_allowed(
        bearer_token(request.headers.get("Authorization", "")),
        global_token=settings.TAKT_PING_TOKEN,
        own_digest=own or "",
        debug=settings.DEBUG,
    )


@csrf_exempt
@require_POST
def ping_view(request: HttpRequest, name: str, signal: str = "") -> JsonResponse:
    try:
        refuse_process(name)
        if not ping_allowed(request, name):
            required = gettext(
                "a valid bearer token is required (Authorization: Bearer <token>):"
                " TAKT_PING_TOKEN, or the heartbeat's own ping token (admin: Heartbeats,"
                ' action "New ping token"); with DEBUG off and neither configured,'
                " pings are refused"
            )
            return JsonResponse({"authorization": required}, status=401)
        beat = record_ping(name, signal, now=timezone.now())
    except PingError as exc:
        return JsonResponse({exc.field: exc.message}, status=exc.status)
    log.info("ping %s %s", name, signal or "success")
    return JsonResponse(
        {
            "name": beat.name,
            "last_status": beat.last_status,
            "last_run_at": beat.last_run_at.isoformat() if beat.last_run_at else None,
            "last_started_at": beat.last_started_at.isoformat() if beat.last_started_at else None,
            "run_count": beat.run_count,
            "failure_count": beat.failure_count,
        }
    )
