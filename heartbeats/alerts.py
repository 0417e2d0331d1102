"""Alerts (F-62): one row per key. A repeat raises the count and marks the
alert unseen again; a recovery resolves it. Notifications (F-63) go out after
commit, through heartbeats.notify, when an alert is raised anew, reminded, or
resolved — never on a mere repeat."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from django.db import IntegrityError, transaction

from heartbeats.models import SEVERITY_RANK, Alert, AlertSeverity
from heartbeats.notify import NotifyEvent, notify_after_commit

log = logging.getLogger("takt.heartbeats")

# Sends (or hands on) one notification: notify_after_commit by default; a
# ping collects them instead (heartbeats.api.ping), to send after its answer.
Notifier = Callable[..., None]

KEY_MAX_LENGTH = Alert._meta.get_field("key").max_length or 200
TITLE_MAX_LENGTH = Alert._meta.get_field("title").max_length or 200


def raise_alert(
    key: str,
    *,
    severity: str,
    title: str,
    message: str,
    now: datetime,
    reminder: bool = False,
    notify: Notifier = notify_after_commit,
) -> Alert:
    """Raise the alert `key`, or repeat it. Returns the row as written.

    1. In one transaction, lock the key's row (select_for_update; SQLite's
       IMMEDIATE transactions serialise writers anyway).
    2. No row: insert one (count 1). Two first raises racing on PostgreSQL
       meet at the unique key: the loser's insert fails after the winner
       commits, and it goes on to 3 with the winner's row.
    3. A row: count + 1, last_seen_at = now, the new severity, title and
       message; unseen again; a resolved alert is open again.
    4. After commit, notify when it was raised anew: a new row, a resolved
       one reopened, a higher severity than before, or `reminder=True`
       (through `notify(alert, event=…, now=…)`).

    Raises ValueError for an unknown severity, an empty or too long key."""
    if severity not in SEVERITY_RANK:
        raise ValueError(
            f"severity must be one of {', '.join(AlertSeverity.values)}, got {severity!r}"
        )
    if not key or len(key) > KEY_MAX_LENGTH:
        raise ValueError(f"key must be 1 to {KEY_MAX_LENGTH} characters, got {key!r}")
    title = title[:TITLE_MAX_LENGTH]
    with transaction.atomic():
        alert = Alert.objects.select_for_update().filter(key=key).first()
        if alert is None:
            try:
                with transaction.atomic():  # a savepoint: the race's loser goes on
                    alert = Alert.objects.create(
                        key=key,
                        severity=severity,
                        title=title,
                        message=message,
                        first_seen_at=now,
                        last_seen_at=now,
                    )
                event: NotifyEvent | None = NotifyEvent.RAISED
            except IntegrityError:
                alert = Alert.objects.select_for_update().get(key=key)
                event = _repeat(alert, severity=severity, title=title, message=message, now=now)
        else:
            event = _repeat(alert, severity=severity, title=title, message=message, now=now)
    if reminder and event is None:
        event = NotifyEvent.REMINDER
    log.warning(
        "alert %s (%s, ×%s): %s", key, severity, alert.count, title, extra={"alert_key": key}
    )
    if event is not None:
        notify(alert, event=event, now=now)
    return alert


def _repeat(
    alert: Alert, *, severity: str, title: str, message: str, now: datetime
) -> NotifyEvent | None:
    """Fold a repeat into the locked row; the notification it calls for."""
    reopened = alert.resolved_at is not None
    escalated = SEVERITY_RANK[severity] > SEVERITY_RANK[alert.severity]
    alert.count += 1
    alert.last_seen_at = now
    alert.severity, alert.title, alert.message = severity, title, message
    alert.seen = False
    alert.resolved_at = None
    alert.save(
        update_fields=[
            "count",
            "last_seen_at",
            "severity",
            "title",
            "message",
            "seen",
            "resolved_at",
        ]
    )
    return NotifyEvent.RAISED if reopened or escalated else None


def resolve_alert(
    key: str, *, message: str, now: datetime, notify: Notifier = notify_after_commit
) -> Alert | None:
    """Resolve the open alert `key` with a recovery notice (`message`), sent
    after commit (through `notify`). Returns the resolved alert, or None when no alert under
    that key was open (then nothing is written or sent). Compare-and-set:
    of two concurrent recoveries only one notifies."""
    resolved = Alert.objects.filter(key=key, resolved_at__isnull=True).update(
        resolved_at=now, message=message
    )
    if not resolved:
        return None
    alert = Alert.objects.get(key=key)
    log.info("alert %s resolved: %s", key, message, extra={"alert_key": key})
    notify(alert, event=NotifyEvent.RESOLVED, now=now)
    return alert


def mark_seen(ids: Iterable[int]) -> int:
    """Mark the alerts `ids` seen (an operator looked at them); a repeat
    marks an alert unseen again. Returns how many changed."""
    return Alert.objects.filter(pk__in=list(ids), seen=False).update(seen=True)


def resolve_all_but(prefix: str, keep: Iterable[str], *, message: str, now: datetime) -> None:
    """Resolve every open alert whose key is `prefix` + a name not in
    `keep` (the checks that raise one alert per queue, per process …)."""
    kept = set(keep)
    keys = Alert.objects.filter(key__startswith=prefix, resolved_at__isnull=True).values_list(
        "key", flat=True
    )
    for key in keys:
        if key.removeprefix(prefix) not in kept:
            resolve_alert(key, message=message, now=now)
