"""The words of alerts and job notifications (F-62, F-63), in the
installation's language (settings.LANGUAGE_CODE; heartbeats.notify's
`installation_language`): they are written by workers and beats, with no
request to take a language from, and stored as they are written (an
alert's title and message). Whole sentences with named placeholders, so a
language may order them; UTC times stay in the form the admin shows in the
reader's zone (jobs.admin.display.times_in_text)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils.translation import gettext, ngettext

from heartbeats.core.check import STATUS_WORDS
from heartbeats.labels import state_word
from heartbeats.notify import installation_language


def utc_text(value: datetime) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def status_text(status: str) -> str:
    """A run status inside a sentence: its word in the active language
    (heartbeats.core.check.STATUS_WORDS), the code itself in English."""
    word = STATUS_WORDS.get(status)
    if word is None:
        return status
    translated = gettext(word)
    return status if translated == word else translated


def failed_alert(
    name: str, *, run_id: int, status: str, streak: int, message: str
) -> tuple[str, str]:
    """The "Run 'X' failed" alert: (title, message)."""
    with installation_language():
        title = gettext("Run '%(name)s' failed") % {"name": name}
        values = {"run": run_id, "status": status_text(status), "message": message or "-"}
        if streak > 1:
            values["count"] = streak
            text = ngettext(
                "Run #%(run)s ended %(status)s (%(count)d failure in a row): %(message)s",
                "Run #%(run)s ended %(status)s (%(count)d failures in a row): %(message)s",
                streak,
            )
        else:
            text = gettext("Run #%(run)s ended %(status)s: %(message)s")
        return title, text % values


def succeeded_again(name: str, *, run_id: int) -> str:
    """The recovery notice of the failure and overdue alerts."""
    with installation_language():
        return gettext("Run '%(name)s' succeeded again (run #%(run)s).") % {
            "name": name,
            "run": run_id,
        }


def overdue_resolved(name: str, *, paused: bool) -> str:
    with installation_language():
        if paused:
            return gettext("Run '%(name)s' is paused.") % {"name": name}
        return gettext("Run '%(name)s' reported again.") % {"name": name}


def overdue_alert(
    name: str,
    *,
    state: str,
    last_run_at: datetime | None,
    deadline_s: int,
    deadline_at: datetime,
    grace_s: int,
) -> tuple[str, str]:
    """The "Run 'X' overdue" alert: (title, message)."""
    with installation_language():
        title = gettext("Run '%(name)s' overdue") % {"name": name}
        values = {
            "name": name,
            "state": state_word(state),
            "deadline_s": deadline_s,
            "deadline_at": utc_text(deadline_at),
            "grace_s": grace_s,
        }
        if last_run_at is not None:
            values["last_run_at"] = utc_text(last_run_at)
            text = gettext(
                "Run '%(name)s' is %(state)s: last run %(last_run_at)s; deadline %(deadline_s)s s"
                " (passed %(deadline_at)s), grace %(grace_s)s s."
            )
        else:
            text = gettext(
                "Run '%(name)s' is %(state)s: no run yet; deadline %(deadline_s)s s"
                " (passed %(deadline_at)s), grace %(grace_s)s s."
            )
        return title, text % values


def long_run_alert(name: str, *, run_id: int, seconds: float) -> tuple[str, str]:
    """The "Run 'X' running long" alert: (title, message)."""
    with installation_language():
        title = gettext("Run '%(name)s' running long") % {"name": name}
        text = gettext("Run #%(run)s has been running for %(seconds)s s") % {
            "run": run_id,
            "seconds": f"{seconds:.0f}",
        }
        return title, text


def run_ended(run_id: int, *, status: str) -> str:
    """The long-run alert's end."""
    with installation_language():
        return gettext("Run #%(run)s ended %(status)s.") % {
            "run": run_id,
            "status": status_text(status),
        }


def job_event_message(event: str, *, job: str, run_id: int, status: str, message: str) -> str:
    """A job notification's message (Job.notify): event "start", "long_run"
    is written by long_run_alert, "end" or "failure"."""
    values = {"job": job, "run": run_id, "status": status_text(status), "message": message}
    with installation_language():
        if event == "start":
            return gettext("Run #%(run)s of '%(job)s' started.") % values
        if event == "end":
            return gettext("Run #%(run)s of '%(job)s' ended %(status)s.") % values
        return gettext("Run #%(run)s of '%(job)s' ended %(status)s: %(message)s") % values


def job_event_subject(event: str, *, job: str) -> str:
    """A job notification e-mail's subject; `event` is "start", "end",
    "failure" or "long_run"."""
    with installation_language():
        subjects = {
            "start": gettext("[Takt] %(job)s: run start"),
            "end": gettext("[Takt] %(job)s: run end"),
            "failure": gettext("[Takt] %(job)s: run failure"),
            "long_run": gettext("[Takt] %(job)s: run long_run"),
        }
        return subjects.get(event, f"[Takt] %(job)s: run {event}") % {"job": job}


def job_event_body(message: str, *, job_id: int, run_id: int) -> str:
    with installation_language():
        footer = gettext("job #%(job)s, run #%(run)s") % {"job": job_id, "run": run_id}
    return f"{message}\n\n{footer}"


def ping_failed_alert(name: str, *, result: str) -> tuple[str, str]:
    """An outside process's failure ping: the "Run 'X' failed" alert."""
    with installation_language():
        title = gettext("Run '%(name)s' failed") % {"name": name}
        text = gettext("%(name)s reported a failure (%(result)s)") % {
            "name": name,
            "result": result or "fail",
        }
        return title, text


def ping_succeeded_again(name: str) -> str:
    with installation_language():
        return gettext("%(name)s reported success again.") % {"name": name}
