"""Constraints on fire times: weekdays and a time window (F-15), excluded
days (F-105). Part of the pure core: no Django, no clock reads.

A fire time is *allowed* when, read in the trigger's zone, its local weekday
is one of `weekdays`, its local date is not excluded, and its local wall time
lies in the window. The weekday and date that count are those of the fire
time's own local date: with a window from 22:00 to 06:00 on Monday through
Friday, Friday 23:00 is allowed and Saturday 02:00 is not (it is Saturday).
A fire time that the DST rule (F-11) moves out of its window (02:30 in a
spring-forward gap fires at 03:00) is judged at the instant it fires.

The walks never step through a closed stretch second by second: between a
window edge, local midnight and a change of UTC offset nothing changes, so
`next_allowed` and `last_allowed` hop from one such moment to the next, and a
closed weekend costs a few steps. A trigger with no allowed fire time within
`MAX_GAP` of the last one never fires again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from jobs.core.cron import TriggerError, cron_fire_times, gettext_noop, same, zone_of

MAX_GAP = timedelta(days=1830)  # about 5 years
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ALL_WEEKDAYS = frozenset(range(7))
_DAY = timedelta(days=1)
_SECOND = timedelta(seconds=1)
_TINY = timedelta(microseconds=1)
_MIDNIGHT = time(0)


@dataclass(frozen=True)
class Constraints:
    """When a trigger may fire. Weekdays count 0 = Monday .. 6 = Sunday (as
    `date.weekday()`, not cron's 0 = Sunday). The window is local wall time
    [window_start, window_end); start > end crosses midnight. Both or neither
    are set."""

    weekdays: frozenset[int] = ALL_WEEKDAYS
    window_start: time | None = None
    window_end: time | None = None
    excluded_dates: frozenset[date] = frozenset()


# --- validation -------------------------------------------------------------


def _check_time(value: object, field: str) -> time:
    if not isinstance(value, time):
        raise TriggerError(field, gettext_noop("must be a time of day"))
    if value.tzinfo is not None:
        raise TriggerError(field, gettext_noop("must be a local time of day without a time zone"))
    return value


def validate_constraints(constraints: Constraints | None) -> Constraints | None:
    """Check constraints and return a normalized copy (frozensets), or None
    when they restrict nothing. Raises TriggerError naming the field:
    "weekdays" (empty, or a day outside 0..6), "window_start"/"window_end"
    (the other one is missing, not a naive time, or both equal) or
    "excluded_dates" (not a date)."""
    if constraints is None:
        return None
    if not isinstance(constraints, Constraints):
        raise TriggerError(
            "constraints",
            gettext_noop("expected Constraints, got %(constraints)r"),
            constraints=constraints,
        )
    weekdays = frozenset(constraints.weekdays)
    if not weekdays:
        raise TriggerError("weekdays", gettext_noop("choose at least one weekday"))
    for day in sorted(weekdays, key=repr):
        if not isinstance(day, int) or isinstance(day, bool) or not 0 <= day <= 6:
            raise TriggerError(
                "weekdays",
                gettext_noop("%(day)r is not a weekday: use 0 (Monday) to 6 (Sunday)"),
                day=day,
            )
    start, end = constraints.window_start, constraints.window_end
    if (start is None) != (end is None):
        missing, given = (
            ("window_end", "window_start") if end is None else ("window_start", "window_end")
        )
        raise TriggerError(missing, gettext_noop("is required when %(given)s is set"), given=given)
    if start is not None and end is not None:
        if _check_time(start, "window_start") == _check_time(end, "window_end"):
            raise TriggerError(
                "window_end",
                gettext_noop("must differ from window_start: leave both empty for the whole day"),
            )
    excluded = frozenset(constraints.excluded_dates)
    for excluded_day in excluded:
        if not isinstance(excluded_day, date) or isinstance(excluded_day, datetime):
            raise TriggerError(
                "excluded_dates",
                gettext_noop("%(excluded_day)r is not a date"),
                excluded_day=excluded_day,
            )
    if weekdays == ALL_WEEKDAYS and start is None and not excluded:
        return None
    return Constraints(weekdays, start, end, excluded)


def check_fixed_times(constraints: Constraints | None, times: tuple[time, ...]) -> None:
    """Reject fixed local fire times outside the window (F-15). Raises
    TriggerError("window_start") naming the first such time and the window."""
    if constraints is None or constraints.window_start is None:
        return
    for moment in times:
        if not _in_window(constraints, moment):
            raise TriggerError(
                "window_start",
                gettext_noop("the fixed time %(clock)s is outside the window %(window_words)s"),
                clock=_clock(moment),
                window_words=window_words(constraints),
            )


# --- allowed instants ---------------------------------------------------------


def _in_window(constraints: Constraints, wall: time) -> bool:
    start, end = constraints.window_start, constraints.window_end
    if start is None or end is None:
        return True
    if start < end:
        return start <= wall < end
    return wall >= start or wall < end  # crosses midnight


def _day_allowed(constraints: Constraints, day: date) -> bool:
    return day.weekday() in constraints.weekdays and day not in constraints.excluded_dates


def allows(constraints: Constraints, moment: datetime, zone: tzinfo) -> bool:
    """Whether aware `moment` is an allowed fire time, read in `zone`."""
    local = moment.astimezone(zone)
    return _day_allowed(constraints, local.date()) and _in_window(constraints, local.time())


def _edges(constraints: Constraints) -> list[time]:
    """Local wall times of day at which `allows` may change."""
    edges = {_MIDNIGHT, constraints.window_start, constraints.window_end}
    return sorted(edge for edge in edges if edge is not None)


def _offset(moment: datetime, zone: tzinfo) -> timedelta | None:
    return moment.astimezone(zone).utcoffset()


def _shift(moment: datetime, step: timedelta, zone: tzinfo) -> datetime:
    """moment + step, or, if the zone's UTC offset changes on the way, the
    instant it changes (for a negative step: the last change before moment)."""
    target = moment + step
    if _offset(target, zone) == _offset(moment, zone):
        return target
    # Bisect in whole seconds (zone transitions fall on whole seconds).
    low_at = min(moment, target).replace(microsecond=0)
    before = _offset(low_at, zone)
    low, high = 0, -((low_at - max(moment, target)) // _SECOND)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(low_at + middle * _SECOND, zone) == before:
            low = middle
        else:
            high = middle
    return low_at + high * _SECOND


def next_allowed(
    constraints: Constraints, zone: tzinfo, moment: datetime, *, limit: datetime
) -> datetime | None:
    """The first allowed instant at or after aware `moment`, in UTC; None if
    there is none up to `limit`."""
    at = moment.astimezone(UTC)
    while at <= limit:
        local = at.astimezone(zone)
        wall = local.replace(tzinfo=None)
        if not _day_allowed(constraints, wall.date()):
            edge = datetime.combine(wall.date() + _DAY, _MIDNIGHT)
        elif _in_window(constraints, wall.time()):
            return at
        else:
            later = [e for e in _edges(constraints) if e > wall.time()]
            day = wall.date() if later else wall.date() + _DAY
            edge = datetime.combine(day, later[0] if later else _MIDNIGHT)
        at = _shift(at, edge - wall, zone)
    return None


def last_allowed(
    constraints: Constraints, zone: tzinfo, moment: datetime, *, limit: datetime
) -> datetime | None:
    """The last allowed instant at or before aware `moment` (to the
    microsecond), in UTC; None if there is none down to `limit`."""
    at = moment.astimezone(UTC)
    while at >= limit:
        wall = at.astimezone(zone).replace(tzinfo=None)
        if not _day_allowed(constraints, wall.date()):
            edge = datetime.combine(wall.date(), _MIDNIGHT)
        elif _in_window(constraints, wall.time()):
            return at
        else:
            edge_time = max(e for e in _edges(constraints) if e <= wall.time())
            edge = datetime.combine(wall.date(), edge_time)
        # Nothing in [edge, at] is allowed: continue just before it.
        at = _shift(at, edge - wall, zone) - _TINY
    return None


# --- constrained walks ------------------------------------------------------


def allowed_cron_times(
    constraints: Constraints, expression: str, timezone_name: str, after: datetime
) -> Iterator[datetime]:
    """The allowed fire times of a cron strictly after `after`, ascending, in
    UTC. A fire time outside the constraints restarts the cron walk just
    before the next allowed instant, so a closed night costs one hop."""
    zone = zone_of(timezone_name)
    start = after
    limit = after + MAX_GAP
    while True:
        for fire in cron_fire_times(expression, timezone_name, start, reverse=False):
            if fire > limit:
                return
            if allows(constraints, fire, zone):
                yield fire
                limit = fire + MAX_GAP
                continue
            opening = next_allowed(constraints, zone, fire, limit=limit)
            if opening is None:
                return
            start = opening - _TINY
            break
        else:
            return


def last_allowed_cron_time(
    constraints: Constraints, expression: str, timezone_name: str, at_or_before: datetime
) -> datetime | None:
    """The last allowed fire time of a cron <= `at_or_before`, in UTC; None
    if there is none within MAX_GAP before it."""
    zone = zone_of(timezone_name)
    start, limit = at_or_before, at_or_before - MAX_GAP
    while True:
        for fire in cron_fire_times(expression, timezone_name, start, reverse=True):
            if fire < limit:
                return None
            if allows(constraints, fire, zone):
                return fire
            closing = last_allowed(constraints, zone, fire, limit=limit)
            if closing is None:
                return None
            start = closing
            break
        else:
            return None


def _grid_at_or_after(anchor: datetime, every: timedelta, moment: datetime) -> datetime:
    return anchor - ((anchor - moment) // every) * every  # ceiling division


def allowed_grid_times(
    constraints: Constraints, zone: tzinfo, *, anchor: datetime, every: timedelta, first: datetime
) -> Iterator[datetime]:
    """The allowed points of the grid anchor + k * every from grid point
    `first` on, ascending, in UTC. A closed stretch is crossed in one hop: the
    first grid point at or after the next opening (the grid keeps its phase)."""
    anchor, point = anchor.astimezone(UTC), first.astimezone(UTC)
    limit = point + MAX_GAP
    while point <= limit:
        if allows(constraints, point, zone):
            yield point
            limit = point + MAX_GAP
            point += every
            continue
        opening = next_allowed(constraints, zone, point, limit=limit)
        if opening is None:
            return
        point = _grid_at_or_after(anchor, every, opening)


def last_allowed_grid_time(
    constraints: Constraints,
    zone: tzinfo,
    *,
    anchor: datetime,
    every: timedelta,
    at_or_before: datetime,
) -> datetime | None:
    """The last allowed point of the grid anchor + k * every (k >= 0) <=
    `at_or_before`, in UTC; None if there is none within MAX_GAP before it."""
    anchor = anchor.astimezone(UTC)
    limit = max(anchor, at_or_before - MAX_GAP)
    moment: datetime | None = at_or_before.astimezone(UTC)
    while moment is not None and moment >= anchor:
        point = anchor + (moment - anchor) // every * every
        if point < limit:
            return None
        if allows(constraints, point, zone):
            return point
        moment = last_allowed(constraints, zone, point, limit=limit)
    return None


# --- words ------------------------------------------------------------------


def _clock(moment: time) -> str:
    return moment.strftime("%H:%M:%S" if moment.second else "%H:%M")


def window_words(constraints: Constraints) -> str:
    """The window as "08:00-17:00"; the constraints must have one."""
    assert constraints.window_start is not None and constraints.window_end is not None
    return f"{_clock(constraints.window_start)}-{_clock(constraints.window_end)}"


# The weekdays' names, marked for translation (WEEKDAY_NAMES stays English).
_DAY_NAMES = (
    gettext_noop("Monday"),
    gettext_noop("Tuesday"),
    gettext_noop("Wednesday"),
    gettext_noop("Thursday"),
    gettext_noop("Friday"),
    gettext_noop("Saturday"),
    gettext_noop("Sunday"),
)


def weekday_words(weekdays: frozenset[int], translate: Callable[[str], str] = same) -> str:
    """Weekdays (0 = Monday) in words: "Monday through Friday", "Monday,
    Wednesday and Friday", "Saturday and Sunday", "Friday through Monday"
    (runs may wrap around the week), "every day", "no day". `translate`
    turns each marked English template into the reader's language."""
    days = sorted(weekdays)
    if len(days) in (0, 7):
        return translate(gettext_noop("every day") if days else gettext_noop("no day"))
    first = next(d for d in range(7) if (d - 1) % 7 not in weekdays and d in weekdays)
    runs: list[list[int]] = []
    for offset in range(7):
        day = (first + offset) % 7
        if day in weekdays:
            if runs and (runs[-1][-1] + 1) % 7 == day:
                runs[-1].append(day)
            else:
                runs.append([day])
    parts: list[str] = []
    for run in runs:
        names = [translate(_DAY_NAMES[d]) for d in run]
        if len(run) > 2:
            through = translate(gettext_noop("%(first)s through %(last)s"))
            parts.append(through % {"first": names[0], "last": names[-1]})
        else:
            parts.extend(names)
    if len(parts) == 1:
        return parts[0]
    return translate(gettext_noop("%(days)s and %(last)s")) % {
        "days": ", ".join(parts[:-1]),
        "last": parts[-1],
    }


def restriction_words(
    constraints: Constraints | None, translate: Callable[[str], str] = same
) -> str:
    """The weekdays and window to append to a trigger's words, as in
    ", Monday through Friday, between 05:30 and 06:00"; "" when unrestricted."""
    if constraints is None:
        return ""
    words = ""
    if constraints.weekdays != ALL_WEEKDAYS:
        words += f", {weekday_words(constraints.weekdays, translate)}"
    if constraints.window_start is not None and constraints.window_end is not None:
        words += translate(gettext_noop(", between %(start)s and %(end)s")) % {
            "start": _clock(constraints.window_start),
            "end": _clock(constraints.window_end),
        }
    return words


def exclusion_words(constraints: Constraints | None, translate: Callable[[str], str] = same) -> str:
    """The excluded dates to append to a trigger's words, as in ", except 12
    excluded days"; "" without excluded dates."""
    count = len(constraints.excluded_dates) if constraints else 0
    if not count:
        return ""
    if count == 1:
        return translate(gettext_noop(", except %(count)d excluded day")) % {"count": count}
    return translate(gettext_noop(", except %(count)d excluded days")) % {"count": count}
