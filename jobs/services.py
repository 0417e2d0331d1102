"""Writes and validation for jobs and triggers.

One validation path serves the admin, model validation, commands and the
Python API: `validate_trigger` turns the pure core's TriggerError into a
ValidationError keyed by the model field it names.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext

from jobs import audit, registry
from jobs.core import triggers as core
from jobs.errors import InvalidInput
from jobs.models import HolidayCalendar, Job, Trigger, sync_trigger_activity
from jobs.policies import JobKind, TriggerKind
from jobs.specs import stage_exclude_calendars, trigger_spec
from jobs.validation import first_fire, validate_trigger

log = logging.getLogger("takt.jobs")


# --- excluded days (F-105) ----------------------------------------------------


def resolve_calendars(names: list[str]) -> list[HolidayCalendar]:
    """Holiday calendars by name, in the order given (for the API and
    imports). Raises ValidationError on "exclude_calendars" naming the first
    unknown name."""
    found = {c.name: c for c in HolidayCalendar.objects.filter(name__in=names)}
    for name in names:
        if name not in found:
            raise ValidationError(
                {"exclude_calendars": gettext("unknown calendar %(name)r") % {"name": name}}
            )
    return [found[name] for name in names]


def set_exclude_calendars(
    trigger: Trigger, calendars: Iterable[HolidayCalendar], *, now: datetime
) -> None:
    """Replace a saved trigger's excluded calendars and recompute its
    next_run_at from `now` (a once trigger keeps its own), in one
    transaction. Raises ValidationError, and changes nothing, if the trigger
    would then never fire ("exclude_calendars") or is invalid otherwise."""
    if trigger.pk is None:
        raise ValueError("save the trigger before setting its calendars")
    calendars = list(calendars)
    stage_exclude_calendars(trigger, calendars)
    validate_trigger(trigger, now=now)
    if trigger.kind != TriggerKind.ONCE:
        trigger.next_run_at = first_fire(trigger_spec(trigger, now=now), now=now)
    trigger.has_exclusions = bool(calendars)
    with transaction.atomic():
        trigger.exclude_calendars.set(calendars)
        Trigger.objects.filter(pk=trigger.pk).update(
            next_run_at=trigger.next_run_at, has_exclusions=trigger.has_exclusions
        )


def refresh_next_run(trigger: Trigger, *, now: datetime) -> datetime | None:
    """Bring a saved trigger in step with its stored calendars after they
    (or their days) changed without `set_exclude_calendars`: set
    `has_exclusions` and, unless the trigger is due (next_run_at <= now:
    the beat claims that time and computes the next one with the new
    days), recompute next_run_at from `now`. A trigger that would never
    fire again gets no next run (logged). Returns the stored next_run_at."""
    calendars = list(trigger.exclude_calendars.all())
    stage_exclude_calendars(trigger, calendars)
    changes: dict[str, Any] = {"has_exclusions": bool(calendars)}
    old = trigger.next_run_at
    due = old is not None and old <= now
    if trigger.kind != TriggerKind.ONCE and not due:
        extra = {"job_id": trigger.job_id, "trigger_id": trigger.pk}
        try:
            spec = trigger_spec(trigger, now=now)
            changes["next_run_at"] = core.compute_first_fire(spec, now=now)
        except (ValueError, core.TriggerError, ValidationError):
            log.exception("trigger %s cannot be evaluated; it is parked", trigger.pk, extra=extra)
            changes["next_run_at"] = None
        else:
            if changes["next_run_at"] is None:
                log.warning("trigger %s never fires again", trigger.pk, extra=extra)
    # Compare-and-set: if the beat advanced next_run_at meanwhile, it did so
    # with the new calendars already (the flag is written in the same update).
    if not Trigger.objects.filter(pk=trigger.pk, next_run_at=old).update(**changes):
        Trigger.objects.filter(pk=trigger.pk).update(has_exclusions=changes["has_exclusions"])
    trigger.refresh_from_db(fields=["next_run_at", "has_exclusions"])
    return trigger.next_run_at


def refresh_calendar_triggers(trigger_ids: Iterable[int], *, now: datetime) -> int:
    """`refresh_next_run` for each of these triggers: call after a holiday
    calendar's days changed or it was deleted. Returns how many."""
    triggers = list(Trigger.objects.filter(pk__in=list(trigger_ids)))
    for trigger in triggers:
        refresh_next_run(trigger, now=now)
    return len(triggers)


def delete_calendars(calendars: QuerySet[HolidayCalendar], *, now: datetime) -> int:
    """Delete holiday calendars; the triggers that skipped their days fire
    on them again (their next_run_at is recomputed). Returns how many."""
    with transaction.atomic():
        ids = list(
            Trigger.objects.filter(exclude_calendars__in=calendars).values_list("pk", flat=True)
        )
        n, _ = calendars.delete()
        refresh_calendar_triggers(set(ids), now=now)
    return int(n)


def set_jobs_enabled(job_ids: list[int], enabled: bool, *, note: str = "") -> int:
    """Enable or disable jobs in bulk (admin actions, API, the run limit).
    `note` (why) is kept in the job's pause note. A callable job whose target
    is not registered here (import_celery_beat brings such a task over
    disabled) is not enabled: InvalidInput names it, and nothing changes."""
    if enabled:
        _refuse_unregistered_targets(job_ids)
    with transaction.atomic():
        changes: dict[str, Any] = {"enabled": enabled}
        if note:
            changes["pause_note"] = note
        n = Job.objects.filter(pk__in=job_ids).update(**changes)
        sync_trigger_activity(job_ids)
        audit.record_updated(Job, job_ids, note=note)
    log.info(
        "jobs %s %s%s", job_ids, "enabled" if enabled else "disabled", f": {note}" if note else ""
    )
    return n


def _refuse_unregistered_targets(job_ids: list[int]) -> None:
    callables = Job.objects.filter(pk__in=job_ids, kind=JobKind.CALLABLE)
    unknown = [
        f"{key} ({target})"
        for key, target in callables.values_list("key", "target").order_by("key")
        if not registry.is_known(target)
    ]
    if unknown:
        raise InvalidInput(
            "enabled",
            gettext("not enabled, their target is not a task registered here: %(jobs)s")
            % {"jobs": ", ".join(unknown)},
        )


def pause_job(
    job_id: int, *, note: str, by: str, now: datetime, until: datetime | None = None
) -> bool:
    """Pause a job with a note: who, why, until when (F-104). A paused job is
    not scheduled; "Run now" still works. Returns False if it was paused
    already (the first note stays)."""
    with transaction.atomic():
        n = Job.objects.filter(pk=job_id, paused=False).update(
            paused=True, pause_note=note, paused_by=by[:150], paused_at=now, paused_until=until
        )
        sync_trigger_activity([job_id])
        if n:
            audit.record_updated(Job, [job_id], by=by, note=note)
    if n:
        log.info("job %s paused by %s: %s", job_id, by, note, extra={"job_id": job_id})
    return bool(n)


def resume_job(job_id: int, *, by: str = "") -> bool:
    """Lift a job's pause. Its triggers keep their next_run_at: fire times
    that passed meanwhile are caught up as its missed-run policy says."""
    with transaction.atomic():
        n = Job.objects.filter(pk=job_id, paused=True).update(
            paused=False, paused_until=None, consecutive_failures=0
        )
        sync_trigger_activity([job_id])
        if n:
            audit.record_updated(Job, [job_id], by=by)
    if n:
        log.info("job %s resumed", job_id, extra={"job_id": job_id})
    return bool(n)


def resume_due_jobs(*, now: datetime) -> int:
    """Resume the jobs whose pause ran out (paused_until <= now)."""
    ids = list(Job.objects.filter(paused=True, paused_until__lte=now).values_list("pk", flat=True))
    return sum(resume_job(pk, by="beat (the pause ended)") for pk in ids)
