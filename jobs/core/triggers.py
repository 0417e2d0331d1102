"""Triggers: when a job fires (F-10..F-15, F-18, F-19, F-105). Part of the
pure core.

Plain dataclasses and functions over aware datetimes: no Django, no Celery,
no clock reads (callers pass ``now``). Fire times come back as aware UTC
datetimes, except from `compute_fire_times`, which is for display. Cron
parsing and the DST rule (F-11) live in `jobs.core.cron`, calendar presets in
`jobs.core.presets`, weekday/window/excluded-day constraints in
`jobs.core.constraints`, jitter in `jobs.core.jitter`; this module dispatches on the
trigger kind.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import assert_never

from jobs.core.constraints import (
    MAX_GAP,
    Constraints,
    allowed_cron_times,
    allowed_grid_times,
    check_fixed_times,
    exclusion_words,
    last_allowed_cron_time,
    last_allowed_grid_time,
    next_allowed,
    restriction_words,
    validate_constraints,
    weekday_words,
    window_words,
)
from jobs.core.cron import (
    TriggerError,
    canonical_timezone,
    compile_cron,
    cron_fire_times,
    cron_fixed_times,
    cron_words,
    gettext_noop,
    normalize_cron,
    same,
    zone_of,
)
from jobs.core.jitter import compute_jitter, validate_jitter
from jobs.core.presets import (
    CalendarRule,
    CalendarSpec,
    calendar_cron,
    calendar_words,
    check_calendar,
)
from jobs.core.watch import FileSpec, describe_file, validate_file_spec

__all__ = [
    "DEPENDENCY_STATUSES",
    "MAX_GAP",
    "UNCLOCKED",
    "AfterSpec",
    "FileSpec",
    "CalendarRule",
    "CalendarSpec",
    "Constraints",
    "CronSpec",
    "ANCHOR_ALIASES",
    "RUN_ANCHORS",
    "IntervalAnchor",
    "IntervalSpec",
    "OnceSpec",
    "TriggerError",
    "TriggerSpec",
    "canonical_timezone",
    "compute_fire_times",
    "compute_first_fire",
    "compute_jitter",
    "compute_latest_fire",
    "compute_next_fire",
    "describe",
    "iter_fire_times",
    "normalize_cron",
    "validate_jitter",
    "validate_spec",
]

MIN_INTERVAL = timedelta(seconds=1)
MAX_INTERVAL = timedelta(days=30)
MAX_PREVIEW = 1000
_SECOND = timedelta(seconds=1)


class IntervalAnchor(StrEnum):
    """Where an interval trigger counts its N from (F-12)."""

    # Fixed rate, on a grid: next = previous fire time + N (start_at + k * N
    # if start_at is set); a late enqueue does not move the grid. Stored as
    # `from_enqueue` before issue 27, which is still read as this (ALIASES).
    FIXED_RATE = "fixed_rate"
    # The migration manual's interval: next = the moment the beat enqueues
    # the run + N, set by the claim; drifts by how late each enqueue was.
    AFTER_ENQUEUE = "after_enqueue"
    # next = the run's start + N; the worker sets it when the run starts.
    FROM_START = "from_start"
    # Fixed delay: next = the previous run's end + N; the worker sets it.
    FROM_FINISH = "from_finish"

    @classmethod
    def _missing_(cls, value: object) -> IntervalAnchor | None:
        alias = ANCHOR_ALIASES.get(value) if isinstance(value, str) else None
        return None if alias is None else cls(alias)


# Old anchor names still accepted (API, admin, config-as-code, imports) and
# what they mean now: `from_enqueue` always kept the fixed grid.
ANCHOR_ALIASES = {"from_enqueue": "fixed_rate"}
# Anchors whose next fire time a run sets (the trigger waits for it).
RUN_ANCHORS = ("from_start", "from_finish")


@dataclass(frozen=True)
class CronSpec:
    expression: str
    timezone: str = "UTC"
    constraints: Constraints | None = None


@dataclass(frozen=True)
class IntervalSpec:
    every: timedelta
    anchor: IntervalAnchor = IntervalAnchor.FIXED_RATE
    start_at: datetime | None = None
    # The zone the constraints' weekdays, window and dates are read in.
    timezone: str = "UTC"
    constraints: Constraints | None = None


@dataclass(frozen=True)
class OnceSpec:
    at: datetime  # aware


# The ends of a run a dependency may wait for (F-33): every end of a run
# that ran (a skipped one did not).
DEPENDENCY_STATUSES = ("succeeded", "failed", "timed_out", "lost", "cancelled")


@dataclass(frozen=True)
class AfterSpec:
    """A dependency (F-33): fires when a run of another job ends with one of
    `statuses`, never by the clock (it has no fire times)."""

    upstream: str  # that job in words, e.g. "'Import' (#3)"
    statuses: tuple[str, ...] = ("succeeded",)


TriggerSpec = CronSpec | IntervalSpec | OnceSpec | CalendarSpec | AfterSpec | FileSpec
# Kinds that fire on an event, never by the clock: they have no fire times.
UNCLOCKED = (AfterSpec, FileSpec)

# --- validation -------------------------------------------------------------


def _require_aware(value: datetime, field: str) -> None:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise TriggerError(field, gettext_noop("must be a timezone-aware date and time"))


def _check_interval(every: timedelta) -> None:
    if not isinstance(every, timedelta) or every % _SECOND:
        raise TriggerError("interval_seconds", gettext_noop("must be a whole number of seconds"))
    if not MIN_INTERVAL <= every <= MAX_INTERVAL:
        raise TriggerError(
            "interval_seconds",
            gettext_noop("must be between 1 second and 30 days, got %(value)s s"),
            value=every // _SECOND,
        )


def _check_fires(spec: CronSpec | IntervalSpec | CalendarSpec, now: datetime) -> None:
    """Reject a constrained trigger with no fire time within MAX_GAP after
    `now`, naming the constraint at fault: the weekdays alone, else the
    window (for a cron: its expression), else the excluded dates.

    A fixed-rate interval without start_at has no phase of its own (its grid
    runs through whichever fire time came before), so it is checked as if
    anchored on a run's start: the answer must not depend on `now`, which
    callers such as the beat pass long after the trigger was saved."""
    constraints = spec.constraints
    if constraints is None:
        return
    if isinstance(spec, IntervalSpec) and spec.start_at is None:
        spec = replace(spec, anchor=IntervalAnchor.FROM_START)
    if compute_first_fire(spec, now=now) is not None:
        return
    days = constraints.weekdays
    if (
        len(days) < 7
        and compute_first_fire(replace(spec, constraints=Constraints(days)), now=now) is None
    ):
        raise TriggerError(
            "weekdays",
            gettext_noop("never fires: no fire time falls on %(weekday_words)s"),
            weekday_words=weekday_words(days),
        )
    without_dates = replace(constraints, excluded_dates=frozenset())
    if (
        constraints.window_start is not None
        and compute_first_fire(replace(spec, constraints=without_dates), now=now) is None
    ):
        field = "cron_expression" if isinstance(spec, CronSpec) else "window_start"
        on_days = f" on {weekday_words(days)}" if len(days) < 7 else ""
        raise TriggerError(
            field,
            gettext_noop(
                "never fires: no fire time falls inside the window %(window_words)s%(on_days)s"
            ),
            window_words=window_words(constraints),
            on_days=on_days,
        )
    raise TriggerError(
        "excluded_dates",
        gettext_noop("never fires: every fire time in the next 5 years falls on an excluded day"),
    )


def validate_spec(spec: TriggerSpec, *, now: datetime) -> TriggerSpec:
    """Check a trigger and return a normalized copy: canonical time zone,
    normalized cron, interval start_at in UTC, constraints normalized (None
    when they restrict nothing). `now` is aware.

    Raises TriggerError naming the field: "cron_expression", "timezone",
    "interval_seconds" (outside 1 s..30 days, or not whole seconds),
    "interval_anchor", "start_at" (naive) or "run_at" (naive, or not after now);
    for presets "rule", "at", "day", "month" (see `check_calendar`); for
    constraints "weekdays", "window_start", "window_end", "excluded_dates"
    (see `validate_constraints`), "window_start" for a fixed time outside the
    window, and for a constrained trigger that never fires within MAX_GAP of
    `now` "weekdays", "cron_expression"/"window_start" or "excluded_dates".
    """
    valid: TriggerSpec
    if isinstance(spec, CronSpec):
        expression = normalize_cron(spec.expression)
        constraints = validate_constraints(spec.constraints)
        check_fixed_times(constraints, cron_fixed_times(expression) or ())
        valid = CronSpec(expression, canonical_timezone(spec.timezone), constraints)
    elif isinstance(spec, CalendarSpec):
        checked = check_calendar(spec)
        constraints = validate_constraints(spec.constraints)
        check_fixed_times(constraints, (checked.at,))
        timezone = canonical_timezone(spec.timezone)
        valid = replace(checked, timezone=timezone, constraints=constraints)
    elif isinstance(spec, IntervalSpec):
        _check_interval(spec.every)
        try:
            anchor = IntervalAnchor(spec.anchor)  # an old name (ANCHOR_ALIASES) too
        except ValueError:
            raise TriggerError(
                "interval_anchor", gettext_noop("unknown anchor %(anchor)r"), anchor=spec.anchor
            ) from None
        start_at = spec.start_at
        if start_at is not None:
            _require_aware(start_at, "start_at")
            start_at = start_at.astimezone(UTC)
        timezone = canonical_timezone(spec.timezone)
        constraints = validate_constraints(spec.constraints)
        valid = IntervalSpec(spec.every, anchor, start_at, timezone, constraints)
    elif isinstance(spec, OnceSpec):
        _require_aware(spec.at, "run_at")
        if spec.at <= now:
            raise TriggerError("run_at", gettext_noop("%(at)s is in the past"), at=_format(spec.at))
        return spec
    elif isinstance(spec, AfterSpec):
        return AfterSpec(spec.upstream, check_dependency_statuses(spec.statuses))
    elif isinstance(spec, FileSpec):
        return validate_file_spec(spec)
    else:
        assert_never(spec)
    _check_fires(valid, now)
    return valid


def check_dependency_statuses(statuses: object) -> tuple[str, ...]:
    """The statuses of a dependency in their canonical order, each once.
    Raises TriggerError("upstream_statuses") for none, or one that is not
    an end of a run that ran (DEPENDENCY_STATUSES)."""
    if not isinstance(statuses, list | tuple) or not statuses:
        raise TriggerError(
            "upstream_statuses",
            gettext_noop("choose at least one of %(statuses)s"),
            statuses=", ".join(DEPENDENCY_STATUSES),
        )
    for status in statuses:
        if status not in DEPENDENCY_STATUSES:
            raise TriggerError(
                "upstream_statuses",
                gettext_noop("%(status)r is not how a run ends: use %(statuses)s"),
                status=status,
                statuses=", ".join(DEPENDENCY_STATUSES),
            )
    return tuple(s for s in DEPENDENCY_STATUSES if s in statuses)


# --- fire times -------------------------------------------------------------


def _interval_next(spec: IntervalSpec, after: datetime) -> datetime:
    _check_interval(spec.every)
    every, start = spec.every, spec.start_at
    if start is None:
        return (after + every).astimezone(UTC)
    if spec.anchor is not IntervalAnchor.FIXED_RATE:
        return max(after + every, start).astimezone(UTC)  # never before start_at
    if after < start:
        return start.astimezone(UTC)
    return (start + ((after - start) // every + 1) * every).astimezone(UTC)


def _allowed_interval_times(
    spec: IntervalSpec, constraints: Constraints, first: datetime, anchor: datetime
) -> Iterator[datetime]:
    """A constrained interval's fire times from candidate `first` on. Fixed
    rate: the allowed points of the grid through `anchor` (phase kept).
    From a run's start or finish: each candidate, or if it is not allowed the
    next allowed instant (a window's opening, the start of an allowed day)."""
    zone = zone_of(spec.timezone)
    if spec.anchor is IntervalAnchor.FIXED_RATE:
        yield from allowed_grid_times(
            constraints, zone, anchor=anchor, every=spec.every, first=first
        )
        return
    while (fire := next_allowed(constraints, zone, first, limit=first + MAX_GAP)) is not None:
        yield fire
        first = _interval_next(spec, fire)


def _cron_of(spec: CronSpec | CalendarSpec) -> str:
    return spec.expression if isinstance(spec, CronSpec) else calendar_cron(spec)


def iter_fire_times(spec: TriggerSpec, *, after: datetime) -> Iterator[datetime]:
    """Fire times strictly after aware `after`, ascending, as aware UTC
    datetimes; ends when the trigger never fires again (for a constrained
    trigger: no allowed fire time within MAX_GAP of the previous one).
    Interval triggers anchored on a run's start or finish assume runs that
    take no time; those anchored on the enqueue (after_enqueue), enqueues on
    time (the claim sets the real next time: its moment + N)."""
    _require_aware(after, "after")
    if isinstance(spec, CronSpec | CalendarSpec):
        expression = _cron_of(spec)
        if spec.constraints is None:
            yield from cron_fire_times(expression, spec.timezone, after, reverse=False)
        else:
            yield from allowed_cron_times(spec.constraints, expression, spec.timezone, after)
    elif isinstance(spec, IntervalSpec):
        if spec.constraints is not None:
            after = after.astimezone(UTC)
            first = _interval_next(spec, after)
            anchor = spec.start_at or after
            yield from _allowed_interval_times(spec, spec.constraints, first, anchor)
            return
        while True:
            after = _interval_next(spec, after)
            yield after
    elif isinstance(spec, OnceSpec):
        if spec.at > after:
            yield spec.at.astimezone(UTC)
    elif isinstance(spec, UNCLOCKED):
        return  # fires on another job's end or a file, never by the clock
    else:
        assert_never(spec)


def compute_next_fire(spec: TriggerSpec, *, after: datetime, now: datetime) -> datetime | None:
    """The first fire time strictly after `after`, in UTC; None if the trigger
    never fires again. Cron and presets are evaluated in the spec's zone (F-11
    DST rule); an interval gives after + every, or with start_at the next
    point of the grid start_at + k * every (fixed_rate; the other anchors
    never fire before start_at). Constraints drop fire times they do not
    allow: a fixed-rate interval takes the next allowed grid point, the other
    anchors the first allowed instant at or after after + every. `now` is
    taken for symmetry and not read yet."""
    _require_aware(now, "now")
    return next(iter_fire_times(spec, after=after), None)


def compute_first_fire(spec: TriggerSpec, *, now: datetime) -> datetime | None:
    """next_run_at for a freshly saved trigger, in UTC: the first fire time
    after `now`, except that an interval's start_at counts when it is >= now
    (with constraints: the first allowed fire time at or after start_at)."""
    if isinstance(spec, IntervalSpec) and spec.start_at is not None and spec.start_at >= now:
        if spec.constraints is None:
            return spec.start_at.astimezone(UTC)
        start_at = spec.start_at.astimezone(UTC)
        _check_interval(spec.every)
        return next(_allowed_interval_times(spec, spec.constraints, start_at, start_at), None)
    return compute_next_fire(spec, after=now, now=now)


def compute_latest_fire(spec: TriggerSpec, *, at_or_before: datetime) -> datetime | None:
    """The last fire time <= `at_or_before` that the constraints allow, in
    UTC; None if there is none (within MAX_GAP before it, when constrained) or
    the trigger has no fixed times (an interval without start_at, or anchored
    on a run's start or finish)."""
    _require_aware(at_or_before, "at_or_before")
    if isinstance(spec, CronSpec | CalendarSpec):
        expression = _cron_of(spec)
        if spec.constraints is not None:
            return last_allowed_cron_time(spec.constraints, expression, spec.timezone, at_or_before)
        return next(cron_fire_times(expression, spec.timezone, at_or_before, reverse=True), None)
    if isinstance(spec, IntervalSpec):
        start = spec.start_at
        if start is None or spec.anchor is not IntervalAnchor.FIXED_RATE or at_or_before < start:
            return None
        _check_interval(spec.every)
        if spec.constraints is not None:
            zone = zone_of(spec.timezone)
            return last_allowed_grid_time(
                spec.constraints, zone, anchor=start, every=spec.every, at_or_before=at_or_before
            )
        return (start + (at_or_before - start) // spec.every * spec.every).astimezone(UTC)
    if isinstance(spec, OnceSpec):
        return spec.at.astimezone(UTC) if spec.at <= at_or_before else None
    if isinstance(spec, UNCLOCKED):
        return None
    assert_never(spec)


def compute_fire_times(spec: TriggerSpec, *, after: datetime, count: int) -> list[datetime]:
    """The next `count` (1..1000) fire times after `after`, each in the
    trigger's own zone for display (F-19): cron, preset and interval in their
    time zone (an interval's defaults to UTC), once in its time's zone.
    Raises TriggerError("count")."""
    if not 1 <= count <= MAX_PREVIEW:
        raise TriggerError(
            "count",
            gettext_noop("must be between 1 and %(max_preview)s, got %(count)s"),
            max_preview=MAX_PREVIEW,
            count=count,
        )
    zone: tzinfo
    if isinstance(spec, UNCLOCKED):
        return []
    if isinstance(spec, OnceSpec):
        zone = spec.at.tzinfo or UTC
    else:
        zone = zone_of(spec.timezone)
    return [t.astimezone(zone) for t in itertools.islice(iter_fire_times(spec, after=after), count)]


# --- words ------------------------------------------------------------------

_ANCHOR_WORDS = {
    IntervalAnchor.FIXED_RATE: gettext_noop("every %(duration)s"),
    IntervalAnchor.AFTER_ENQUEUE: gettext_noop(
        "every %(duration)s after the previous run was enqueued"
    ),
    IntervalAnchor.FROM_START: gettext_noop("every %(duration)s after the previous run starts"),
    IntervalAnchor.FROM_FINISH: gettext_noop("every %(duration)s after the previous run ends"),
}
# (singular, plural) per unit; German counts as English does (1 or more).
_UNIT_WORDS = {
    "day": (gettext_noop("%(n)d day"), gettext_noop("%(n)d days")),
    "hour": (gettext_noop("%(n)d hour"), gettext_noop("%(n)d hours")),
    "minute": (gettext_noop("%(n)d minute"), gettext_noop("%(n)d minutes")),
    "second": (gettext_noop("%(n)d second"), gettext_noop("%(n)d seconds")),
}
_UNITS = (("hour", 3600), ("minute", 60), ("second", 1))
# A run's end by status, in words.
_STATUS_WORDS = {
    "succeeded": gettext_noop("succeeded"),
    "failed": gettext_noop("failed"),
    "timed_out": gettext_noop("timed out"),
    "lost": gettext_noop("lost"),
    "cancelled": gettext_noop("cancelled"),
}


def _plural(n: int, unit: str, translate: Callable[[str], str]) -> str:
    one, many = _UNIT_WORDS[unit]
    return translate(one if n == 1 else many) % {"n": n}


def _duration_words(every: timedelta, translate: Callable[[str], str] = same) -> str:
    """Whole days, then the rest in the largest unit that divides it, else in
    hours, minutes and seconds: "2 seconds", "90 minutes", "1 day, 2 hours"."""
    days, rest = divmod(every // _SECOND, 86400)
    parts = [_plural(days, "day", translate)] if days else []
    for unit, size in _UNITS[:2]:
        if rest and rest % size == 0:
            return ", ".join([*parts, _plural(rest // size, unit, translate)])
    for unit, size in _UNITS:
        amount, rest = divmod(rest, size)
        if amount:
            parts.append(_plural(amount, unit, translate))
    return ", ".join(parts) or _plural(0, "second", translate)


def _format(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z" if moment.second else "%Y-%m-%d %H:%M %Z")


def _zone_and_constraints(
    timezone: str, constraints: Constraints | None, translate: Callable[[str], str]
) -> str:
    restrictions = restriction_words(constraints, translate)
    exclusions = exclusion_words(constraints, translate)
    return f"{restrictions} ({canonical_timezone(timezone)}){exclusions}"


def describe(
    spec: TriggerSpec, translate: Callable[[str], str] = same, *, cron_locale: str = "en_US"
) -> str:
    """The trigger in words for the admin and API: "At 08:00, Monday through
    Friday (Europe/Berlin)", "every 90 minutes after the previous run ends",
    "once at 2026-12-01 08:00 CET", "on the last day of each quarter at 23:00
    (UTC)", "every 15 minutes, Monday through Friday, between 05:30 and 06:00
    (Europe/Berlin), except 12 excluded days". Raises TriggerError for an
    invalid cron, preset or time zone. `translate` turns each marked English
    template into the reader's language (the edge passes gettext); a cron
    expression's words are cron-descriptor's in `cron_locale` ("de_DE")."""
    if isinstance(spec, CronSpec):
        expression = compile_cron(spec.expression, spec.timezone)[0]
        zone = _zone_and_constraints(spec.timezone, spec.constraints, translate)
        return f"{cron_words(expression, cron_locale, translate)}{zone}"
    if isinstance(spec, CalendarSpec):
        zone = _zone_and_constraints(spec.timezone, spec.constraints, translate)
        return f"{calendar_words(spec, translate)}{zone}"
    if isinstance(spec, IntervalSpec):
        words = translate(_ANCHOR_WORDS.get(spec.anchor, _ANCHOR_WORDS[IntervalAnchor.FIXED_RATE]))
        words %= {"duration": _duration_words(spec.every, translate)}
        if spec.start_at:
            start = translate(gettext_noop(", starting %(at)s")) % {"at": _format(spec.start_at)}
            words += start
        if spec.constraints is None:
            return words  # the zone matters only for constraints
        return f"{words}{_zone_and_constraints(spec.timezone, spec.constraints, translate)}"
    if isinstance(spec, OnceSpec):
        return translate(gettext_noop("once at %(at)s")) % {"at": _format(spec.at)}
    if isinstance(spec, AfterSpec):
        return translate(gettext_noop("after job %(job)s ends %(statuses)s")) % {
            "job": spec.upstream,
            "statuses": _or_words(spec.statuses, translate),
        }
    if isinstance(spec, FileSpec):
        return describe_file(spec, translate)
    assert_never(spec)


def _or_words(statuses: tuple[str, ...], translate: Callable[[str], str] = same) -> str:
    words = [
        translate(_STATUS_WORDS[s]) if s in _STATUS_WORDS else s.replace("_", " ") for s in statuses
    ] or [translate(_STATUS_WORDS["succeeded"])]
    if len(words) == 1:
        return words[0]
    return translate(gettext_noop("%(statuses)s or %(last)s")) % {
        "statuses": ", ".join(words[:-1]),
        "last": words[-1],
    }
