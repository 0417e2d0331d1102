"""Celery's own `beat_schedule` (F-75): each entry translated as a
PeriodicTask is (jobs.celery_beat.translate_all) into a job declared in
code, for jobs.declared. An entry Takt cannot take raises
ImproperlyConfigured naming it: an entry is never dropped in silence."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

from celery import current_app, schedules
from django.core.exceptions import ImproperlyConfigured

from jobs.celery_beat import translate_all
from jobs.core.celery_beat import BeatTask, Crontab, Interval, Schedule, Solar

log = logging.getLogger("takt.celery_beat")


def beat_schedule_entries() -> dict[str, Any]:
    """The Celery app's beat_schedule ({} when it has none)."""
    return dict(current_app.conf.beat_schedule or {})


def beat_schedule_definitions(
    entries: dict[str, Any], *, now: datetime
) -> list[tuple[str, str, dict[str, Any]]]:
    """Each beat_schedule entry as a job declared in code: (key, where,
    definition). An entry Takt cannot take (a solar schedule, a task not
    registered here, a malformed one) raises ImproperlyConfigured naming it:
    an entry is never dropped in silence. What changes meaning is logged."""
    tasks = []
    for name, entry in entries.items():
        where = f"beat_schedule[{name!r}]"
        try:
            tasks.append((where, _entry_task(str(name), entry)))
        except (TypeError, ValueError, KeyError) as exc:
            raise ImproperlyConfigured(f"{where}: {exc}") from None
    out = []
    for (where, task), translation in zip(
        tasks, translate_all([t for _, t in tasks], now=now, declared=True), strict=True
    ):
        if translation.skipped is not None:
            log.warning("%s: not made a job: %s", where, translation.skipped)
            continue
        if translation.definition is None:
            raise ImproperlyConfigured(
                f"{where}: Takt cannot take it: {translation.error}"
                " (remove it, or set TAKT_CELERY_BEAT_SCHEDULE=refuse to keep it out)"
            )
        definition = translation.definition
        definition["notes"] = f"Declared in Celery's beat_schedule as {task.name!r}."
        for note in translation.notes:
            log.warning("%s: %s", where, note)
        out.append((translation.key, f"{where}.", definition))
    return out


def _entry_task(name: str, entry: Any) -> BeatTask:
    if not isinstance(entry, dict) or "task" not in entry or "schedule" not in entry:
        raise ValueError("expected a mapping with 'task' and 'schedule'")
    options = dict(entry.get("options") or {})
    expires = options.get("expires")
    return BeatTask(
        id=0,
        name=name,
        task=str(entry["task"]),
        schedule=_entry_schedule(entry["schedule"], str(current_app.timezone)),
        args=json.dumps(list(entry.get("args") or ())),
        kwargs=json.dumps(dict(entry.get("kwargs") or {})),
        queue=options.get("queue"),
        exchange=options.get("exchange"),
        routing_key=options.get("routing_key"),
        headers=json.dumps(options["headers"]) if options.get("headers") else None,
        priority=options.get("priority"),
        expires=expires if isinstance(expires, datetime) else None,
        expire_seconds=int(expires) if isinstance(expires, int | float) else None,
    )


def _entry_schedule(value: Any, zone: str) -> Schedule:
    if isinstance(value, int | float):
        return Interval(timedelta(seconds=value))
    if isinstance(value, timedelta):
        return Interval(value)
    if isinstance(value, schedules.crontab):
        tz = getattr(value, "tz", None)
        return Crontab(
            minute=str(value._orig_minute),
            hour=str(value._orig_hour),
            day_of_month=str(value._orig_day_of_month),
            month_of_year=str(value._orig_month_of_year),
            day_of_week=str(value._orig_day_of_week),
            timezone=str(tz) if tz is not None else zone,
            weekdays=frozenset(value.day_of_week),
            days_of_month=frozenset(value.day_of_month),
        )
    if isinstance(value, schedules.solar):
        return Solar(value.event, float(value.lat), float(value.lon))
    if isinstance(value, schedules.schedule):
        return Interval(value.run_every)
    raise ValueError(f"schedule: {value!r} is not a number, timedelta, crontab or solar")
