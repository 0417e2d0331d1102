"""Triggers: when a job fires (F-10..F-13, F-19). Part of the pure core.

Plain dataclasses and functions over aware datetimes: no Django, no Celery,
no clock reads (callers pass ``now``). Fire times come back as aware UTC
datetimes, except from `compute_fire_times`, which is for display.

cronsim parses and walks cron expressions; this module adds validation with
messages that name the cron field, and one DST rule for 5- and 6-field
expressions alike (F-11, as Debian's cron does it):

* A *fixed-time* trigger (neither the minute nor the hour field starts with
  ``*``) matches local wall-clock time. A wall time inside a spring-forward
  gap fires at the first instant after the gap; a wall time that occurs twice
  (fall back) fires once, at its first occurrence.
* A *wildcard* trigger (minute or hour starts with ``*``: a wildcard or a
  step) follows real elapsed time: an hourly job fires in both copies of a
  repeated hour, and a gap removes only instants that never exist.

cronsim's own Debian fix-up covers 5-field expressions only, lands a 6-field
02:30:30 on 03:00:30, and can return a time *before* its start when started
in the second copy of a repeated hour. So fixed-time triggers walk naive wall
times in cronsim and `_wall_to_utc` maps each one to an instant.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import assert_never
from zoneinfo import ZoneInfo, available_timezones

from cron_descriptor import ExpressionDescriptor, Options
from cronsim import CronSim, CronSimError

MIN_INTERVAL = timedelta(seconds=1)
MAX_INTERVAL = timedelta(days=30)
MAX_PREVIEW = 1000
_SECOND = timedelta(seconds=1)
_TINY = timedelta(microseconds=1)
_ZERO = timedelta(0)


class TriggerError(ValueError):
    """Invalid trigger input; ``field`` names the model field, ``message`` says what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


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

# (name, lowest, highest) per cron field; 5-field expressions drop "second".
_FIELDS = (
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),  # 0 and 7 are Sunday
)
_MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
_NAMES = {
    "month": {name: i + 1 for i, name in enumerate(_MONTHS)},
    "day-of-week": {name: i for i, name in enumerate("SUN MON TUE WED THU FRI SAT".split())},
}
_DAY_FIELDS = ("day-of-month", "day-of-week")


def _cron_error(field: str, message: str) -> TriggerError:
    return TriggerError("cron_expression", f"{field}: {message}")


@functools.cache
def _zone_names() -> dict[str, str]:
    names = {name.casefold(): name for name in available_timezones()}
    names.setdefault("utc", "UTC")  # even where no tz database is installed
    return names


def canonical_timezone(name: str) -> str:
    """The IANA name `name` in canonical spelling, matched case-insensitively
    ("europe/vienna" -> "Europe/Vienna"). Raises TriggerError("timezone")."""
    canonical = _zone_names().get(name.strip().casefold()) if isinstance(name, str) else None
    if canonical is None:
        raise TriggerError("timezone", f"unknown time zone {name!r}")
    return canonical


def _value(field: tuple[str, int, int], text: str) -> int:
    name, lowest, highest = field
    names = _NAMES.get(name, {})
    if text in names:
        return names[text]
    if not (text.isascii() and text.isdigit()):
        what = "a number or a name" if names else "a number"
        raise _cron_error(name, f"{text!r} is not {what}" if text else "empty value")
    if not lowest <= int(text) <= highest:
        raise _cron_error(name, f"{int(text)} is out of range {lowest}-{highest}")
    return int(text)


def _normalize_term(field: tuple[str, int, int], term: str) -> str:
    name, lowest, highest = field
    if term.startswith("/"):
        term = "*" + term  # Quartz-style "/15" means "*/15"
    if name == "day-of-month" and term in ("L", "LW"):
        return term
    if name == "day-of-week" and "#" in term:
        day, _, nth = term.partition("#")
        _value(field, day)
        if nth not in ("1", "2", "3", "4", "5"):
            raise _cron_error(name, f"'#{nth}' must be #1 to #5")
        return term
    if name == "day-of-week" and term.endswith("L"):
        if term == "L":
            raise _cron_error(name, "'L' needs a day before it, e.g. 5L for the last Friday")
        return f"{_value(field, term[:-1])}L"  # cronsim reads only a number before L
    base, slash, step = term.partition("/")
    if slash and not (step.isascii() and step.isdigit() and 0 < int(step) <= highest - lowest):
        raise _cron_error(name, f"step {step!r} must be a number from 1 to {highest - lowest}")
    if "-" in base:
        start, _, end = base.partition("-")
        if _value(field, start) > _value(field, end):
            raise _cron_error(name, f"range {base} runs backwards")
    elif base != "*":
        _value(field, base)
    return term


def normalize_cron(expression: str) -> str:
    """Validate a cron expression and return it normalized: single spaces,
    upper-case names, ``?`` -> ``*``, a bare ``/n`` -> ``*/n``, ``FRIL`` -> ``5L``.

    5 fields, or 6 with seconds first (Spring style). Raises
    TriggerError("cron_expression") naming the cron field at fault, or
    starting "never fires:" for an expression no date matches ("0 0 31 4 *").
    """
    parts = expression.upper().split() if isinstance(expression, str) else []
    if len(parts) not in (5, 6):
        raise TriggerError("cron_expression", f"expected 5 or 6 fields, got {len(parts)}")
    fields = _FIELDS[6 - len(parts) :]
    normalized = []
    for field, text in zip(fields, parts, strict=True):
        if text == "?" and field[0] not in _DAY_FIELDS:
            raise _cron_error(field[0], "'?' is allowed only in day-of-month and day-of-week")
        terms = ["*"] if text == "?" else [_normalize_term(field, t) for t in text.split(",")]
        normalized.append(",".join(terms))
    result = " ".join(normalized)
    try:
        # A fixed start keeps this pure; cronsim gives up after 50 years.
        next(CronSim(result, datetime(2000, 1, 1, tzinfo=UTC)))
    except CronSimError:
        # Every field passed our checks, so cronsim objects to a day that no
        # selected month has (31 in April, 30 in February).
        dom, month = normalized[-3], normalized[-2]
        raise TriggerError(
            "cron_expression", f"never fires: day-of-month {dom} does not occur in month {month}"
        ) from None
    except StopIteration:
        raise TriggerError("cron_expression", "never fires: no date matches") from None
    return result


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


@functools.cache
def _zone(name: str) -> tzinfo:
    canonical = canonical_timezone(name)
    return UTC if canonical == "UTC" else ZoneInfo(canonical)


@functools.lru_cache(maxsize=1024)
def _compile(expression: str, timezone_name: str) -> tuple[str, tzinfo, bool]:
    """(normalized expression, zone, follows wall-clock time?)."""
    expr = normalize_cron(expression)
    minute, hour = expr.split()[-5:-3]
    return expr, _zone(timezone_name), not (minute.startswith("*") or hour.startswith("*"))


def _wall_to_utc(wall: datetime, zone: tzinfo) -> datetime:
    """The instant a fixed-time trigger fires for naive local time `wall`."""
    # fold=0 picks the first occurrence of a repeated wall time.
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == wall:
        return instant
    # `wall` lies in a spring-forward gap. Read with the offset after the
    # change it is an instant before the gap, with the one before the change
    # an instant after it: bisect between them for the end of the gap.
    before = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = 0, int((instant - before) / _SECOND)
    while high - low > 1:
        middle = (low + high) // 2
        if (before + middle * _SECOND).astimezone(zone).replace(tzinfo=None) > wall:
            high = middle
        else:
            low = middle
    return before + high * _SECOND


def _cron_fires(spec: CronSpec, start: datetime, *, reverse: bool) -> Iterator[datetime]:
    """UTC fire times strictly after `start`, or with `reverse` at or before it, in order."""
    expr, zone, wall_clock = _compile(spec.expression, spec.timezone)
    if reverse:
        # cronsim's reverse walk begins one second before the time it is given.
        begin = (start.astimezone(UTC).replace(microsecond=0) + _SECOND).astimezone(zone)
    else:
        begin = start.astimezone(zone)
    instants: Iterator[datetime]
    if wall_clock:
        wall = begin.replace(tzinfo=None)
        if reverse and begin.fold:
            # In the second copy of a repeated hour, the wall times still ahead
            # in that hour map to its first copy, already past: walk them too.
            wall += (begin.replace(fold=0).utcoffset() or _ZERO) - (begin.utcoffset() or _ZERO)
        instants = (_wall_to_utc(w, zone) for w in CronSim(expr, wall, reverse=reverse))
    else:
        instants = (fire.astimezone(UTC) for fire in CronSim(expr, begin, reverse=reverse))
    # Wall times map to instants in order, but gap times share one instant and
    # a walk begun in a repeated hour meets wall times of its first copy.
    bound = start
    for instant in instants:
        if instant <= bound if reverse else instant > bound:
            yield instant
            bound = instant - _TINY if reverse else instant


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
        yield from _cron_fires(spec, after, reverse=False)
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
        return next(_cron_fires(spec, at_or_before, reverse=True), None)
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
        zone = _zone(spec.timezone)
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


def _cron_words(expression: str) -> str:
    options = Options()
    options.locale_code = "en_US"  # not the process locale: the admin is in English
    options.use_24hour_time_format = True
    try:
        return str(ExpressionDescriptor(expression, options).get_description())
    except Exception:  # cron-descriptor rejects a few forms cronsim takes (e.g. 7L)
        return f"cron {expression}"


def describe(spec: TriggerSpec) -> str:
    """The trigger in words for the admin and API: "At 08:00, Monday through
    Friday (Europe/Berlin)", "every 90 minutes after the previous run ends",
    "once at 2026-12-01 08:00 CET". Raises TriggerError for an invalid cron."""
    if isinstance(spec, CronSpec):
        expr, zone, _ = _compile(spec.expression, spec.timezone)
        return f"{_cron_words(expr)} ({canonical_timezone(spec.timezone)})"
    if isinstance(spec, IntervalSpec):
        start = f", starting {_format(spec.start_at)}" if spec.start_at else ""
        return f"every {_duration_words(spec.every)}{_ANCHOR_WORDS[spec.anchor]}{start}"
    if isinstance(spec, OnceSpec):
        return f"once at {_format(spec.at)}"
    assert_never(spec)
