"""Per-job notifications (F-63) and the long-run alert (F-62).

A job asks to be told with Job.notify = {"on": ["start", "end", "failure",
"long_run"], "long_run_s": 600}. Each event goes by the alert channels
(TAKT_ALERT_EMAILS, TAKT_ALERT_WEBHOOK_URL) as a JSON body such as
{"event": "run_failure", "job": "...", "job_id": 7, "run_id": 42, ...},
whatever TAKT_ALERT_MIN_SEVERITY says: the job opted in. A run that passes
long_run_s also raises the alert "Run 'X' running long" (warning), resolved
when the run ends. Delivery never fails a run.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from heartbeats import alert_texts
from heartbeats.alerts import raise_alert, resolve_alert
from heartbeats.models import AlertSeverity
from heartbeats.notify import _post_webhook
from jobs.specs import notify_events
from runs.models import Run, RunStatus

log = logging.getLogger("takt.heartbeats")


def long_run_key(run_id: int) -> str:
    return f"long-run:{run_id}"


def send_job_event(run: Run, event: str, message: str) -> None:
    """Deliver one job event by the configured channels, after commit."""
    if not (settings.TAKT_ALERT_EMAILS or settings.TAKT_ALERT_WEBHOOK_URL):
        return
    payload: dict[str, Any] = {
        "event": f"run_{event}",
        "job": run.job.name,
        "job_id": run.job_id,
        "run_id": run.pk,
        "status": run.status,
        "message": message,
        "at": timezone.now().isoformat(),
    }
    transaction.on_commit(lambda: _deliver(payload), robust=True)


def _deliver(payload: dict[str, Any]) -> None:
    if settings.TAKT_ALERT_EMAILS:
        try:
            subject = alert_texts.job_event_subject(payload["event"][4:], job=payload["job"])
            body = alert_texts.job_event_body(
                payload["message"], job_id=payload["job_id"], run_id=payload["run_id"]
            )
            send_mail(subject, body, None, settings.TAKT_ALERT_EMAILS)
        except Exception:
            log.exception("e-mail about job event %s failed", payload["event"])
    if settings.TAKT_ALERT_WEBHOOK_URL:
        try:
            _post_webhook(settings.TAKT_ALERT_WEBHOOK_URL, payload)
        except Exception:
            log.exception("webhook about job event %s failed", payload["event"])


def on_run_started(sender: Any, run: Run, **kwargs: Any) -> None:
    if "start" in notify_events(run.job):
        send_job_event(run, "start", _event_message("start", run))


def on_run_running_long(sender: Any, run: Run, seconds: float, **kwargs: Any) -> None:
    now = timezone.now()
    title, message = alert_texts.long_run_alert(run.job.name, run_id=run.pk, seconds=seconds)
    raise_alert(
        long_run_key(run.pk), severity=AlertSeverity.WARNING, title=title, message=message, now=now
    )
    send_job_event(run, "long_run", f"{message}.")


def on_run_ended(run: Run) -> None:
    """From the run_finished receiver: end/failure events, and the end of a
    long-run alert."""
    on = notify_events(run.job)
    if "long_run" in on:
        ended = alert_texts.run_ended(run.pk, status=run.status)
        resolve_alert(long_run_key(run.pk), message=ended, now=timezone.now())
    failed = run.status in (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)
    if "end" in on:
        send_job_event(run, "end", _event_message("end", run))
    if failed and "failure" in on:
        send_job_event(run, "failure", _event_message("failure", run))


def _event_message(event: str, run: Run) -> str:
    return alert_texts.job_event_message(
        event, job=run.job.name, run_id=run.pk, status=run.status, message=run.message
    )
