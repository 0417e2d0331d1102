"""Triggers: when a job fires (F-10..F-13, F-19). Part of the pure core.

Plain dataclasses and functions over aware datetimes: no Django, no Celery,
no clock reads (callers pass ``now``). Fire times come back as aware UTC
datetimes, except from `compute_fire_times`, which is for display. Cron
parsing and the DST rule (F-11) live in `jobs.cron`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import assert_never

from .cron import (
    TriggerError,
    canonical_timezone,
    compile_cron,
    cron_fire_times,
    cron_words,
    normalize_cron,
    zone_of,
)

__all__ = [
    "CronSpec",
    "IntervalAnchor",
    "IntervalSpec",
    "OnceSpec",
    "TriggerError",
    "TriggerSpec",
    "canonical_timezone",
    "compute_fire_times",
    "compute_first_fire",
    "compute_latest_fire",
    "compute_next_fire",
    "describe",
    "iter_fire_times",
    "normalize_cron",
    "validate_spec",
]

MIN_INTERVAL = timedelta(seconds=1)
MAX_INTERVAL = timedelta(days=30)
MAX_PREVIEW = 1000
_SECOND = timedelta(seconds=1)
_TINY = timedelta(microseconds=1)
_ZERO = timedelta(0)


class IntervalAnchor(StrEnum):
    # Fixed rate: next = previous fire time + N (a grid from start_at if set).
    FROM_ENQUEUE = "from_enqueue"
    # next = the run's start + N; the worker sets it when the run starts.
    FROM_START = "from_start"
    # Fixed delay: next = the previous run's end + N; the worker sets it.
    FROM_FINISH = "from_finish"


@dataclass(frozen=True)
class CronSpec:
    expression: str
    timezone: str = "UTC"


@dataclass(frozen=True)
class IntervalSpec:
    every: timedelta
    anchor: IntervalAnchor = IntervalAnchor.FROM_ENQUEUE
    start_at: datetime | None = None


@dataclass(frozen=True)
class OnceSpec:
    at: datetime  # aware


TriggerSpec = CronSpec | IntervalSpec | OnceSpec

# --- validation -------------------------------------------------------------


def _require_aware(value: datetime, field: str) -> None:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise TriggerError(field, "must be a timezone-aware date and time")


def _check_interval(every: timedelta) -> None:
    if not isinstance(every, timedelta) or every % _SECOND:
        raise TriggerError("interval_seconds", "must be a whole number of seconds")
    if not MIN_INTERVAL <= every <= MAX_INTERVAL:
        raise TriggerError(
            "interval_seconds", f"must be between 1 second and 30 days, got {every // _SECOND} s"
        )


def validate_spec(spec: TriggerSpec, *, now: datetime) -> TriggerSpec:
    """Check a trigger and return a normalized copy: canonical time zone,
    normalized cron, interval start_at in UTC. `now` is aware.

    Raises TriggerError naming the field: "cron_expression", "timezone",
    "interval_seconds" (outside 1 s..30 days, or not whole seconds),
    "interval_anchor", "start_at" (naive) or "run_at" (naive, or not after now).
    """
    if isinstance(spec, CronSpec):
        return CronSpec(normalize_cron(spec.expression), canonical_timezone(spec.timezone))
    if isinstance(spec, IntervalSpec):
        _check_interval(spec.every)
        if spec.anchor not in IntervalAnchor.__members__.values():
            raise TriggerError("interval_anchor", f"unknown anchor {spec.anchor!r}")
        start_at = spec.start_at
        if start_at is not None:
            _require_aware(start_at, "start_at")
            start_at = start_at.astimezone(UTC)
        return IntervalSpec(spec.every, IntervalAnchor(spec.anchor), start_at)
    if isinstance(spec, OnceSpec):
        _require_aware(spec.at, "run_at")
        if spec.at <= now:
            raise TriggerError("run_at", f"{_format(spec.at)} is in the past")
        return spec
    assert_never(spec)


# --- fire times -------------------------------------------------------------


def _interval_next(spec: IntervalSpec, after: datetime) -> datetime:
    _check_interval(spec.every)
    every, start = spec.every, spec.start_at
    if start is None:
        return (after + every).astimezone(UTC)
    if spec.anchor is not IntervalAnchor.FROM_ENQUEUE:
        return max(after + every, start).astimezone(UTC)  # never before start_at
    if after < start:
        return start.astimezone(UTC)
    return (start + ((after - start) // every + 1) * every).astimezone(UTC)


def iter_fire_times(spec: TriggerSpec, *, after: datetime) -> Iterator[datetime]:
    """Fire times strictly after aware `after`, ascending, as aware UTC
    datetimes; ends when the trigger never fires again. Interval triggers
    anchored on a run's start or finish assume runs that take no time."""
    _require_aware(after, "after")
    if isinstance(spec, CronSpec):
        yield from cron_fire_times(spec.expression, spec.timezone, after, reverse=False)
    elif isinstance(spec, IntervalSpec):
        while True:
            after = _interval_next(spec, after)
            yield after
    elif isinstance(spec, OnceSpec):
        if spec.at > after:
            yield spec.at.astimezone(UTC)
    else:
        assert_never(spec)


def compute_next_fire(spec: TriggerSpec, *, after: datetime, now: datetime) -> datetime | None:
    """The first fire time strictly after `after`, in UTC; None if the trigger
    never fires again. Cron is evaluated in the spec's zone (F-11 DST rule);
    an interval gives after + every, or with start_at the next point of the
    grid start_at + k * every (from_enqueue; the other anchors never fire
    before start_at). `now` is taken for symmetry and not read yet."""
    _require_aware(now, "now")
    return next(iter_fire_times(spec, after=after), None)


def compute_first_fire(spec: TriggerSpec, *, now: datetime) -> datetime | None:
    """next_run_at for a freshly saved trigger, in UTC: the first fire time
    after `now`, except that an interval's start_at counts when it is >= now."""
    if isinstance(spec, IntervalSpec) and spec.start_at is not None and spec.start_at >= now:
        return spec.start_at.astimezone(UTC)
    return compute_next_fire(spec, after=now, now=now)


def compute_latest_fire(spec: TriggerSpec, *, at_or_before: datetime) -> datetime | None:
    """The last fire time <= `at_or_before`, in UTC; None if there is none or
    the trigger has no fixed times (an interval without start_at, or anchored
    on a run's start or finish)."""
    _require_aware(at_or_before, "at_or_before")
    if isinstance(spec, CronSpec):
        return next(
            cron_fire_times(spec.expression, spec.timezone, at_or_before, reverse=True), None
        )
    if isinstance(spec, IntervalSpec):
        start = spec.start_at
        if start is None or spec.anchor is not IntervalAnchor.FROM_ENQUEUE or at_or_before < start:
            return None
        _check_interval(spec.every)
        return (start + (at_or_before - start) // spec.every * spec.every).astimezone(UTC)
    if isinstance(spec, OnceSpec):
        return spec.at.astimezone(UTC) if spec.at <= at_or_before else None
    assert_never(spec)


def compute_fire_times(spec: TriggerSpec, *, after: datetime, count: int) -> list[datetime]:
    """The next `count` (1..1000) fire times after `after`, each in the
    trigger's own zone for display (F-19): cron in its time zone, once in its
    time's zone, interval in UTC. Raises TriggerError("count")."""
    if not 1 <= count <= MAX_PREVIEW:
        raise TriggerError("count", f"must be between 1 and {MAX_PREVIEW}, got {count}")
    zone: tzinfo = UTC
    if isinstance(spec, CronSpec):
        zone = zone_of(spec.timezone)
    elif isinstance(spec, OnceSpec):
        zone = spec.at.tzinfo or UTC
    return [t.astimezone(zone) for t in itertools.islice(iter_fire_times(spec, after=after), count)]


# --- words ------------------------------------------------------------------

_ANCHOR_WORDS = {
    IntervalAnchor.FROM_ENQUEUE: "",
    IntervalAnchor.FROM_START: " after the previous run starts",
    IntervalAnchor.FROM_FINISH: " after the previous run ends",
}
_UNITS = (("hour", 3600), ("minute", 60), ("second", 1))


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _duration_words(every: timedelta) -> str:
    """Whole days, then the rest in the largest unit that divides it, else in
    hours, minutes and seconds: "2 seconds", "90 minutes", "1 day, 2 hours"."""
    days, rest = divmod(every // _SECOND, 86400)
    parts = [_plural(days, "day")] if days else []
    for unit, size in _UNITS[:2]:
        if rest and rest % size == 0:
            return ", ".join([*parts, _plural(rest // size, unit)])
    for unit, size in _UNITS:
        amount, rest = divmod(rest, size)
        if amount:
            parts.append(_plural(amount, unit))
    return ", ".join(parts) or "0 seconds"


def _format(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z" if moment.second else "%Y-%m-%d %H:%M %Z")


def describe(spec: TriggerSpec) -> str:
    """The trigger in words for the admin and API: "At 08:00, Monday through
    Friday (Europe/Berlin)", "every 90 minutes after the previous run ends",
    "once at 2026-12-01 08:00 CET". Raises TriggerError for an invalid cron."""
    if isinstance(spec, CronSpec):
        expression = compile_cron(spec.expression, spec.timezone)[0]
        return f"{cron_words(expression)} ({canonical_timezone(spec.timezone)})"
    if isinstance(spec, IntervalSpec):
        start = f", starting {_format(spec.start_at)}" if spec.start_at else ""
        return f"every {_duration_words(spec.every)}{_ANCHOR_WORDS.get(spec.anchor, '')}{start}"
    if isinstance(spec, OnceSpec):
        return f"once at {_format(spec.at)}"
    assert_never(spec)
