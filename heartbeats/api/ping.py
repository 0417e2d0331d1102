"""Pings from outside processes (F-61), like a healthcheck service:

    POST /api/v1/heartbeats/<name>            success
    POST /api/v1/heartbeats/<name>/start      a run started
    POST /api/v1/heartbeats/<name>/fail       failure
    POST /api/v1/heartbeats/<name>/<status>   exit status: 0 success, 1-255 failure

The heartbeat must exist (an outside heartbeat, made in the admin with its
name and deadline); an unknown name, a bad exit status or a wrong token is
answered with a JSON error naming the field, and nothing changes. With
TAKT_PING_TOKEN set, a ping must send `Authorization: Bearer <token>`.
A failure raises the heartbeat's "Run 'X' failed" alert; a success resolves
it and a pending overdue alert.
"""

from __future__ import annotations

import logging
from datetime import datetime

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
from heartbeats.core.status import HeartbeatState
from heartbeats.models import AlertSeverity, Heartbeat
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


def record_ping(name: str, signal: str, *, now: datetime) -> Heartbeat:
    """Apply one ping to the outside heartbeat `name`. Raises PingError."""
    kind, code = parse_signal(signal)
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
                )
        elif kind == "success":
            notice = alert_texts.ping_succeeded_again(beat.name)
            resolve_alert(failed_key(beat.pk), message=notice, now=now)
            resolve_alert(overdue_alert_key(beat.pk), message=notice, now=now)
    return beat


@csrf_exempt
@require_POST
def ping_view(request: HttpRequest, name: str, signal: str = "") -> JsonResponse:
    token = getattr(settings, "TAKT_PING_TOKEN", "")
    if token and request.headers.get("Authorization", "") != f"Bearer {token}":
        required = gettext("a valid bearer token is required")
        return JsonResponse({"authorization": required}, status=401)
    try:
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
