"""Reading django-celery-beat's PeriodicTasks for `manage.py
import_celery_beat` (F-76, jobs.celery_beat): through its own models, from
this database or another one named by alias or URL, each row as plain
values (jobs.core.celery_beat.BeatTask). django-celery-beat is an optional
extra (`pip install takt[celery-beat]`); its app must be installed
(scheduler_project installs it when the package is there; a project of its
own has it already)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from celery import schedules
from celery.schedules import ParseException
from django.apps import apps
from django.conf import settings
from django.db import Error, connections
from django.db.models import CharField
from django.db.models.functions import Cast
from django.utils import timezone as dj_timezone

from jobs.core.celery_beat import BeatTask, Clocked, Crontab, Interval, Schedule, Solar
from jobs.errors import TaktError

SOURCE_ALIAS = "takt_celery_beat_source"


class CeleryBeatUnavailable(TaktError):
    """django-celery-beat is not installed, or its tables cannot be read."""


def source_alias(database: str | None) -> str:
    """The connection alias to read from: a DATABASES alias, or a database
    URL registered under SOURCE_ALIAS. Raises CeleryBeatUnavailable."""
    if not database:
        return "default"
    if database in settings.DATABASES:
        return database
    if "://" not in database:
        known = ", ".join(sorted(settings.DATABASES))
        raise CeleryBeatUnavailable(
            f"--database: {database!r} is neither a database alias ({known}) nor a URL"
        )
    try:
        config = dj_database_url.parse(database)
    except Exception as exc:  # the parser's own errors are plain exceptions
        raise CeleryBeatUnavailable(f"--database: cannot read the URL ({exc})") from None
    name = str(config.get("NAME") or "")
    if str(config.get("ENGINE", "")).endswith("sqlite3") and not Path(name).is_file():
        # SQLite would make an empty file of it, and then find no tables.
        raise CeleryBeatUnavailable(
            f"{source_label(database)}: there is no SQLite database file {name!r}"
        )
    filled = connections.configure_settings(
        {"default": settings.DATABASES["default"], SOURCE_ALIAS: config}
    )
    connections.settings[SOURCE_ALIAS] = filled[SOURCE_ALIAS]
    return SOURCE_ALIAS


def source_label(database: str | None) -> str:
    """How messages name the source: `--database 'value'` (a URL without its
    password), or this project's database."""
    if not database:
        return "this project's database (no --database)"
    if "://" in database and "@" in database:
        scheme, rest = database.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        user = credentials.split(":", 1)[0]
        database = f"{scheme}://{user}{':***' if ':' in credentials else ''}@{host}"
    return f"--database {database!r}"


def beat_models() -> tuple[Any, Any]:
    """django-celery-beat's PeriodicTask and PeriodicTasks models. Raises
    CeleryBeatUnavailable when its app is not installed."""
    if not apps.is_installed("django_celery_beat"):
        raise CeleryBeatUnavailable(
            "django-celery-beat is not installed here: pip install 'takt[celery-beat]'"
            " (and add 'django_celery_beat' to INSTALLED_APPS in a project of your own)"
        )
    from django_celery_beat.models import PeriodicTask, PeriodicTasks

    return PeriodicTask, PeriodicTasks


def read_beat_tasks(using: str = "default") -> list[BeatTask]:
    """Every PeriodicTask of database `using`, as plain values; a row whose
    schedule cannot be read (an unknown time zone, a day field Celery
    cannot parse) has its `problem`. Raises CeleryBeatUnavailable when the
    database cannot be reached or lacks django-celery-beat's tables."""
    PeriodicTask, _ = beat_models()
    _check_tables(using)
    rows = (
        PeriodicTask.objects.using(using)
        .select_related("interval", "crontab", "solar", "clocked")
        # The zone as stored: django-timezone-field raises on a name it
        # does not know, which would stop the whole read at that row.
        .defer("crontab__timezone")
        .annotate(crontab_zone=Cast("crontab__timezone", CharField()))
        .order_by("pk")
    )
    try:
        return [_beat_task(row) for row in rows]
    except Error as exc:
        raise CeleryBeatUnavailable(f"cannot read django-celery-beat's tables: {exc}") from None


def _check_tables(using: str) -> None:
    from django_celery_beat import models

    wanted = [
        model._meta.db_table
        for model in (
            models.PeriodicTask,
            models.PeriodicTasks,
            models.IntervalSchedule,
            models.CrontabSchedule,
            models.ClockedSchedule,
            models.SolarSchedule,
        )
    ]
    connection = connections[using]
    try:
        with connection.cursor() as cursor:
            present = set(connection.introspection.table_names(cursor))
    except Error as exc:
        raise CeleryBeatUnavailable(f"cannot connect to it: {str(exc).strip()}") from None
    missing = [table for table in wanted if table not in present]
    if len(missing) == len(wanted):
        raise CeleryBeatUnavailable(
            "it has no django-celery-beat tables (no django_celery_beat_periodictask):"
            " name the database of the project that ran django-celery-beat"
        )
    if missing:
        raise CeleryBeatUnavailable(
            f"django-celery-beat's tables there are incomplete, missing {', '.join(missing)}:"
            " run that project's migrations (manage.py migrate django_celery_beat)"
        )


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if dj_timezone.is_naive(value):  # USE_TZ off in the source project: its own zone
        return dj_timezone.make_aware(value)
    return value


def _beat_task(row: Any) -> BeatTask:
    problem = None
    try:
        schedule = _schedule(row)
    except (ValueError, TypeError, ParseException) as exc:  # Celery's parser, an odd period
        schedule, problem = None, f"its schedule cannot be read: {exc}"
    return BeatTask(
        id=row.pk,
        name=row.name,
        task=row.task,
        schedule=schedule,
        problem=problem,
        enabled=row.enabled,
        description=row.description or "",
        args=row.args or "[]",
        kwargs=row.kwargs or "{}",
        queue=row.queue or None,
        exchange=row.exchange or None,
        routing_key=row.routing_key or None,
        headers=row.headers or None,
        priority=row.priority,
        expires=_aware(row.expires),
        expire_seconds=row.expire_seconds,
        one_off=row.one_off,
        start_time=_aware(row.start_time),
        last_run_at=_aware(row.last_run_at),
        total_run_count=row.total_run_count or 0,
        date_changed=_aware(row.date_changed),
    )


def _schedule(row: Any) -> Schedule | None:
    if row.crontab is not None:
        c = row.crontab
        return Crontab(
            minute=c.minute,
            hour=c.hour,
            day_of_month=c.day_of_month,
            month_of_year=c.month_of_year,
            day_of_week=c.day_of_week,
            timezone=row.crontab_zone,
            weekdays=frozenset(_parse_weekdays(c.day_of_week)),
            days_of_month=frozenset(schedules.crontab_parser(31, 1).parse(c.day_of_month)),
        )
    if row.interval is not None:
        return Interval(timedelta(**{row.interval.period: row.interval.every}))
    if row.clocked is not None:
        return Clocked(_aware(row.clocked.clocked_time))  # type: ignore[arg-type]
    if row.solar is not None:
        s = row.solar
        return Solar(s.event, float(s.latitude), float(s.longitude))
    return None


def _parse_weekdays(text: str) -> set[int]:
    # Celery's own reading (names, ranges, steps; 0 = Sunday).
    return set(schedules.crontab(day_of_week=text).day_of_week)
