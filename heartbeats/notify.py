"""Notifications (F-63): an alert at or above TAKT_ALERT_MIN_SEVERITY goes by
e-mail (Django's mail settings, to TAKT_ALERT_EMAILS) and/or as a JSON POST
to TAKT_ALERT_WEBHOOK_URL.

E-mails and alert texts are written with no request to take a language
from: they are in the installation's language, settings.LANGUAGE_CODE
(`installation_language`), subject and body alike; the webhook's JSON keys
and codes (event, severity) stay English, its title and message are the
alert's as written.

Delivery happens after the transaction that raised the alert commits (a
rolled-back alert is never announced), with a short timeout
(TAKT_ALERT_TIMEOUT_SECONDS). A failed delivery is logged and never
propagates: it must not fail the run or the check that raised the alert.
"""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.request
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import Any

from django.conf import settings
from django.core.mail import get_connection, send_mail
from django.db import transaction
from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from heartbeats.labels import severity_word
from heartbeats.models import SEVERITY_RANK, Alert

log = logging.getLogger("takt.heartbeats")


class NotifyEvent(StrEnum):
    RAISED = "raised"  # new, reopened after a recovery, or escalated
    REMINDER = "reminder"  # still open after the heartbeat's reminder interval
    RESOLVED = "resolved"  # the recovery notice


def installation_language() -> translation.override:
    """A context in the installation's language (LANGUAGE_CODE), for what a
    background process writes: alert texts and e-mails."""
    return translation.override(settings.LANGUAGE_CODE)


def is_notified(severity: str) -> bool:
    """Whether alerts of `severity` are at or above TAKT_ALERT_MIN_SEVERITY."""
    return SEVERITY_RANK[severity] >= SEVERITY_RANK[settings.TAKT_ALERT_MIN_SEVERITY]


def notify_after_commit(alert: Alert, *, event: NotifyEvent, now: datetime) -> None:
    """Send `event` about `alert` once the current transaction commits (at
    once outside a transaction). A recovery notice goes out under the same
    rule as the alert it ends: its severity must reach the minimum."""
    payload = notification_payload(alert, event=event)
    if payload is not None:
        transaction.on_commit(partial(deliver, payload, alert_id=alert.pk, now=now), robust=True)


def notification_payload(alert: Alert, *, event: NotifyEvent) -> dict[str, Any] | None:
    """What would be sent about `alert` as of now (not as of the commit), or
    None when nothing would: below TAKT_ALERT_MIN_SEVERITY, or no channel."""
    if not is_notified(alert.severity):
        return None
    if not (settings.TAKT_ALERT_EMAILS or settings.TAKT_ALERT_WEBHOOK_URL):
        return None
    return alert_payload(alert, event=event)


def alert_payload(alert: Alert, *, event: NotifyEvent) -> dict[str, Any]:
    """The webhook's JSON body (and the e-mail's facts)."""

    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "event": str(event),
        "key": alert.key,
        "severity": alert.severity,
        "title": alert.title,
        "message": alert.message,
        "count": alert.count,
        "first_seen_at": iso(alert.first_seen_at),
        "last_seen_at": iso(alert.last_seen_at),
        "resolved_at": iso(alert.resolved_at),
    }


def deliver(payload: Mapping[str, Any], *, alert_id: int, now: datetime) -> bool:
    """Send one notification by every configured channel. Returns whether
    any channel took it (then the alert's notified_at is set); never raises."""
    sent = False
    extra = {"alert_key": payload.get("key")}
    if settings.TAKT_ALERT_EMAILS:
        try:
            _send_mail(payload)
            sent = True
        except Exception:
            log.exception("e-mail about alert %s failed", payload.get("key"), extra=extra)
    if settings.TAKT_ALERT_WEBHOOK_URL:
        try:
            _post_webhook(settings.TAKT_ALERT_WEBHOOK_URL, payload)
            sent = True
        except Exception:
            log.exception("webhook about alert %s failed", payload.get("key"), extra=extra)
    if sent:
        try:
            Alert.objects.filter(pk=alert_id).update(notified_at=now)
        except Exception:
            log.exception("recording the notification of alert %s failed", alert_id, extra=extra)
    return sent


# The e-mail's subject per event; whole sentences, so a language may order them.
SUBJECTS = {
    NotifyEvent.RAISED: _("[Takt] %(title)s (%(severity)s)"),
    NotifyEvent.REMINDER: _("[Takt] Reminder: %(title)s (%(severity)s)"),
    NotifyEvent.RESOLVED: _("[Takt] Resolved: %(title)s (%(severity)s)"),
}


def mail_text(payload: Mapping[str, Any]) -> tuple[str, str]:
    """The e-mail's subject and body in the active language: the alert's
    message, then its facts as aligned "label: value" lines."""
    event = NotifyEvent(payload["event"])
    severity = severity_word(payload["severity"])
    subject = SUBJECTS[event] % {"title": payload["title"], "severity": severity}
    facts = [
        (gettext("Alert:"), payload["key"]),
        (gettext("Severity:"), severity),
        (gettext("Count:"), payload["count"]),
        (gettext("First seen:"), payload["first_seen_at"]),
        (gettext("Last seen:"), payload["last_seen_at"]),
    ]
    if payload["resolved_at"]:
        facts.append((gettext("Resolved:"), payload["resolved_at"]))
    width = max(len(label) for label, _value in facts) + 1
    lines = [payload["message"], "", *(f"{label:<{width}}{value}" for label, value in facts)]
    return subject, "\n".join(lines) + "\n"


def _send_mail(payload: Mapping[str, Any]) -> None:
    with installation_language():
        subject, body = mail_text(payload)
    # Django's EMAIL_TIMEOUT when set; else ours, so a dead mail server
    # cannot hold a worker for long.
    timeout = getattr(settings, "EMAIL_TIMEOUT", None) or settings.TAKT_ALERT_TIMEOUT_SECONDS
    connection = get_connection(timeout=timeout)
    try:
        send_mail(
            subject,
            body,
            None,  # DEFAULT_FROM_EMAIL
            list(settings.TAKT_ALERT_EMAILS),
            connection=connection,
        )
    finally:
        # Django's SMTP backend leaves its socket open when the login is
        # refused; a worker would leak one per alert.
        with contextlib.suppress(Exception):
            connection.close()


def _post_webhook(url: str, payload: Mapping[str, Any]) -> None:
    """POST the payload as JSON; a non-2xx answer raises (urllib's HTTPError)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "Takt alerts"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=settings.TAKT_ALERT_TIMEOUT_SECONDS) as response:
        response.read()
