"""Switching from django-celery-beat (F-76): one PeriodicTask, read into
plain values, becomes one Takt job definition in the export format
(jobs.exchange), with a note for everything that changes meaning on the
way and for everything that cannot come along, and why. Part of the pure
core: no Django, no Celery, no clock reads (callers pass `now`, and the
Celery-parsed weekday set of a crontab).

The rules (docs/migrating-from-django-celery-beat.md has them as a table):

- crontab → a cron trigger in the crontab's own zone. Celery's crontab
  fires only on days that match *both* day_of_month and day_of_week; cron
  fires on days matching *either* when both are restricted. Such a crontab
  keeps its day of month in the expression and its weekdays as the
  trigger's weekday set (F-15), which Takt ANDs with the expression.
- interval → a fixed-rate interval trigger whose first fire time is the
  one django-celery-beat would have used next (last_run_at + every), so the
  switch-over neither doubles nor drops a run; overdue: 10 s after import
  (said only of a job that is enabled: a disabled one has no first run).
- clocked → a once trigger; a clocked time that has passed (run or not) is
  imported disabled without a trigger, and said so.
- solar → not imported: sunrise and sunset move every day, Takt has no
  sun-event trigger, and a fixed time would be wrong by up to hours.
- one_off → max_runs 1; a one-off that already ran is imported disabled.
- start_time in the future → the job is paused until then.
- expires in the past → imported disabled; in the future → said (Takt has
  no end date for a job: disable it by then).
- args → the job's positional args, kwargs → its params (JSON objects
  only), queue and priority (0..9; Redis reads 0 as first, as Takt does)
  as they are; exchange, routing key, headers and expire_seconds are said.

A task that cannot come along at all (no schedule, solar, args or kwargs
not JSON of the right kind, an interval out of range, a row that could not
be read, a Celery task of Celery's own) gets an `error` instead of a
definition. `celery.backend_cleanup`, which django-celery-beat adds by
itself, is `skipped` with its reason: Takt cleans up after its own runs.
Takt's side (registered here? changed in Takt since the last import?) is
jobs.core.beat_reimport.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobs.core.constraints import ALL_WEEKDAYS

KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
KEY_MAX = 100
NAME_MAX = 200
INTERVAL_MIN = timedelta(seconds=1)
INTERVAL_MAX = timedelta(days=30)
OVERDUE_GRACE = timedelta(seconds=10)
OVERDUE_NOTE = "overdue in django-celery-beat: its first Takt run 10 s after the import"
# Celery's result cleanup, which django-celery-beat's scheduler adds to its
# table by itself whenever result_expires is set (Celery's default: 1 day).
BACKEND_CLEANUP = "celery.backend_cleanup"
PRIORITY_MAX = 9
ALL_DAYS_OF_MONTH = frozenset(range(1, 32))


@dataclass(frozen=True)
class Crontab:
    minute: str
    hour: str
    day_of_month: str
    month_of_year: str
    day_of_week: str
    timezone: str
    # Celery's parse of day_of_week (0 = Sunday .. 6 = Saturday) and of
    # day_of_month (1..31).
    weekdays: frozenset[int]
    days_of_month: frozenset[int]


@dataclass(frozen=True)
class Interval:
    every: timedelta


@dataclass(frozen=True)
class Clocked:
    at: datetime


@dataclass(frozen=True)
class Solar:
    event: str
    latitude: float
    longitude: float


Schedule = Crontab | Interval | Clocked | Solar


@dataclass(frozen=True)
class BeatTask:
    """A PeriodicTask as plain values (datetimes aware)."""

    id: int
    name: str
    task: str
    schedule: Schedule | None
    enabled: bool = True
    description: str = ""
    args: str = "[]"
    kwargs: str = "{}"
    queue: str | None = None
    exchange: str | None = None
    routing_key: str | None = None
    headers: str | None = None
    priority: int | None = None
    expires: datetime | None = None
    expire_seconds: int | None = None
    one_off: bool = False
    start_time: datetime | None = None
    last_run_at: datetime | None = None
    total_run_count: int = 0
    date_changed: datetime | None = None
    # Disabled in django-celery-beat by an earlier import's --disable-source
    # (jobs.celery_beat keeps the record): it counts as enabled, as Takt
    # runs it now.
    switched: bool = False
    # What could not be read from the row (a time zone, a day field that
    # Celery cannot parse): the task fails with it.
    problem: str | None = None


@dataclass
class Translation:
    """What one PeriodicTask becomes: `definition`, or `error` (why it
    cannot be imported; `definition` is None then), and the notes that say
    what changed meaning or could not come along; or `skipped` (why it is
    deliberately not imported; no definition, no error either).

    Takt's side (jobs.core.beat_reimport.settle) fills in the rest:
    `enabled_set`, the `enabled` this import sets (None: it sets none, to
    record), and `hold`, why the job will not run (None: it will, and the
    PeriodicTask may be switched off). `off_reason` is why the translation
    turned `enabled` off; `overdue`, that an interval's first fire time is
    the import's time + 10 s."""

    task: BeatTask
    key: str
    definition: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None
    off_reason: str | None = None
    overdue: bool = False
    enabled_set: bool | None = None
    hold: str | None = None

    def fail(self, reason: str) -> None:
        """The task cannot be imported, for `reason`."""
        self.error = reason
        self.definition = None

    def skip(self, reason: str) -> None:
        """The task is left out on purpose, for `reason`."""
        self.skipped = reason
        self.definition = None


def job_key(name: str) -> str:
    """The Takt key a PeriodicTask's name maps to, the same on every run:
    the name itself when it is a valid key, else the name with every other
    character as '-', shortened, and a hash of the whole name."""
    if len(name) <= KEY_MAX and KEY_PATTERN.match(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9_.:-]+", "-", name).strip("-.:_") or "task"
    return f"{slug[: KEY_MAX - 11]}-{digest}"


def translate(
    task: BeatTask, *, now: datetime, interval_start: datetime | None = None
) -> Translation:
    """Translate one PeriodicTask (see the module docstring).
    `interval_start`: the start_at of the interval trigger an earlier import
    made, kept when the interval is unchanged (a re-import must not move
    the grid, nor run an overdue task again)."""
    key = job_key(task.name)
    out = Translation(task, key, None)
    notes = out.notes
    if key != task.name:
        notes.append(f"key {key!r}: the name is not a valid Takt key")
    if task.problem is not None:
        out.fail(task.problem)
        return out
    if task.task == BACKEND_CLEANUP:
        out.skip(
            "Celery's own result cleanup, which django-celery-beat's scheduler adds by itself"
            " (result_expires): Takt records its runs itself and deletes old ones"
            " (TAKT_RETENTION_DAYS), no job may name Celery's tasks, and a result backend that"
            " expires results itself (Redis) needs nothing. A database result backend of your"
            " own tasks: schedule a @takt_job that calls app.backend.cleanup()"
        )
        return out
    if task.task.startswith("celery."):
        out.fail(
            f"{task.task!r} is Celery's own task: no Takt job may name it (docs/security.md,"
            " internal targets)"
        )
        return out
    if task.schedule is None:
        out.fail("it has no schedule (interval, crontab, clocked or solar)")
        return out
    if isinstance(task.schedule, Solar):
        s = task.schedule
        out.fail(
            f"solar schedule ({s.event} at {s.latitude}, {s.longitude}):"
            " Takt has no sun-event trigger, and one fixed time would be off by up to hours"
            " over a year; give it cron triggers of your own"
        )
        return out
    try:
        args = _json(task.args, list, "args", "a JSON list")
        kwargs = _json(task.kwargs, dict, "kwargs", "a JSON object")
    except ValueError as exc:
        out.fail(str(exc))
        return out
    if isinstance(task.schedule, Interval) and not (
        INTERVAL_MIN <= task.schedule.every <= INTERVAL_MAX
        and task.schedule.every % timedelta(seconds=1) == timedelta(0)
    ):
        out.fail(
            f"every {_seconds(task.schedule.every)} s: Takt's interval is whole"
            " seconds from 1 s to 30 days; use a cron trigger"
        )
        return out
    enabled = task.enabled or task.switched
    definition: dict[str, Any] = {
        "key": key,
        "name": task.name[:NAME_MAX],
        "description": task.description,
        "kind": "callable",
        "target": task.task,
        "params": kwargs,
        "notes": _provenance(task),
    }
    if args:
        definition["args"] = args
    if task.queue:
        definition["queue"] = task.queue
        notes.append(f"queue {task.queue!r}: a Takt worker must consume it (-Q takt,{task.queue})")
    if task.priority is not None:
        definition["priority"] = min(task.priority, PRIORITY_MAX)
        if task.priority > PRIORITY_MAX:
            notes.append(f"priority {task.priority} → {PRIORITY_MAX}: Takt's priorities are 0..9")
    for label, value in (
        ("exchange", task.exchange),
        ("routing_key", task.routing_key),
        ("headers", _empty_headers(task.headers)),
    ):
        if value:
            notes.append(f"{label} {value!r} not carried over: Takt routes a run by its queue")
    if task.expire_seconds:
        notes.append(
            f"expire_seconds {task.expire_seconds} not carried over: a Takt run waits in its"
            " queue until a worker takes it (its overlap policy bounds how many wait)"
        )
    if task.expires is not None:
        if task.expires <= now:
            enabled = False
            out.off_reason = (
                f"it expired at {_iso(task.expires)} (django-celery-beat sends it no more)"
            )
            notes.append(f"disabled: it expired at {_iso(task.expires)}")
        else:
            notes.append(
                f"expires {_iso(task.expires)} not carried over: Takt has no end date for a"
                " job; disable it by then"
            )
    if task.one_off:
        definition["max_runs"] = 1
        if task.total_run_count > 0 and not isinstance(task.schedule, Clocked):
            enabled = False
            out.off_reason = out.off_reason or "a one-off task that has run"
            notes.append("disabled: a one-off task that has run")
    trigger = _trigger(task, now=now, interval_start=interval_start, notes=notes)
    if trigger is None:
        enabled = False
        if isinstance(task.schedule, Clocked):
            out.off_reason = out.off_reason or (
                f"its clocked time {_iso(task.schedule.at)} has passed (use Run now in Takt)"
            )
    elif trigger["kind"] == "interval" and interval_start is None:
        out.overdue = trigger["start_at"] == _overdue(now)
    definition["triggers"] = [trigger] if trigger is not None else []
    if task.start_time is not None and task.start_time > now and enabled:
        definition["paused"] = True
        definition["paused_until"] = task.start_time
        definition["pause_note"] = (
            f"django-celery-beat start_time: not before {_iso(task.start_time)}"
        )
        notes.append(f"paused until its start_time {_iso(task.start_time)}")
    if task.switched and not task.enabled:
        notes.append(
            "disabled in django-celery-beat by an earlier import's --disable-source: read as"
            " enabled (Takt runs it now)"
        )
    elif not task.enabled:
        out.off_reason = out.off_reason or "disabled in django-celery-beat"
        notes.append("disabled, as in django-celery-beat")
    definition["enabled"] = enabled
    out.definition = definition
    return out


def _trigger(
    task: BeatTask, *, now: datetime, interval_start: datetime | None, notes: list[str]
) -> dict[str, Any] | None:
    schedule = task.schedule
    if isinstance(schedule, Crontab):
        return crontab_trigger(schedule, notes)
    if isinstance(schedule, Interval):
        start = interval_start or first_interval_time(task, now=now)
        return {
            "kind": "interval",
            "interval_seconds": int(schedule.every.total_seconds()),
            "interval_anchor": "fixed_rate",
            "start_at": start,
        }
    if isinstance(schedule, Clocked):
        if schedule.at <= now:
            ran = "it ran" if task.total_run_count > 0 else "it has not run"
            notes.append(
                f"disabled without a trigger: its clocked time {_iso(schedule.at)} has passed"
                f" ({ran}); use Run now to run it"
            )
            return None
        return {"kind": "once", "run_at": schedule.at}
    raise AssertionError(f"unexpected schedule {schedule!r}")


def crontab_trigger(crontab: Crontab, notes: list[str]) -> dict[str, Any]:
    """A crontab's cron trigger: the five fields in cron's order, in the
    crontab's zone. A day field that allows every day becomes `*`; both
    still restricted → the weekdays become the trigger's weekday set
    (Celery ANDs the two fields, cron ORs them)."""
    dom, dow = crontab.day_of_month.strip(), crontab.day_of_week.strip()
    if crontab.days_of_month == ALL_DAYS_OF_MONTH:
        dom = "*"
    if crontab.weekdays == ALL_WEEKDAYS:
        dow = "*"
    trigger: dict[str, Any] = {"kind": "cron", "timezone": crontab.timezone}
    if dom != "*" and dow != "*":
        # Celery: 0 = Sunday; Takt's weekday set: 0 = Monday.
        days = sorted((d - 1) % 7 for d in crontab.weekdays)
        trigger["weekdays"] = "".join(str(d) for d in days)
        notes.append(
            f"day_of_month {dom!r} and day_of_week {dow!r}: Celery fires on days matching both,"
            " cron on days matching either; the weekdays became the trigger's weekday set"
        )
        dow = "*"
    fields = (crontab.minute, crontab.hour, dom, crontab.month_of_year, dow)
    trigger["cron_expression"] = " ".join(f.strip().replace(" ", "") for f in fields)
    return trigger


def first_interval_time(task: BeatTask, *, now: datetime) -> datetime:
    """When django-celery-beat would send an interval task next: its last
    run + every (no earlier than start_time); never run: start_time, else
    the last change + every. Passed already: 10 s after `now`."""
    assert isinstance(task.schedule, Interval)
    every = task.schedule.every
    if task.last_run_at is not None:
        first = task.last_run_at + every
        if task.start_time is not None:
            first = max(first, task.start_time)
    elif task.start_time is not None:
        first = task.start_time
    else:
        first = (task.date_changed or now) + every
    first = first.replace(microsecond=0)
    return first if first > now else _overdue(now)


def _overdue(now: datetime) -> datetime:
    return now.replace(microsecond=0) + OVERDUE_GRACE


def _json(text: str | None, kind: type, label: str, expected: str) -> Any:
    if text is None or not text.strip():
        return kind()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{label} is not JSON ({exc})") from None
    if not isinstance(value, kind):
        raise ValueError(f"{label} must be {expected}, got {text.strip()[:60]!r}")
    return value


def _empty_headers(text: str | None) -> str | None:
    if text is None or text.strip() in ("", "{}", "null"):
        return None
    return text.strip()


def _provenance(task: BeatTask) -> str:
    last = _iso(task.last_run_at) if task.last_run_at else "never"
    return (
        f"Imported from django-celery-beat PeriodicTask #{task.id} {task.name!r}:"
        f" {task.total_run_count} runs there, the last {last}."
    )


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():g}"
