"""The load forecast (F-95): how many fire times the active triggers have
in each hour of the next days, as a day x hour matrix in a display zone
(the browser's). Part of the pure core: stdlib, zoneinfo and the cron code;
no Django, no clock reads (callers pass ``now``).

Fire times are counted, never listed, so a trigger costs the same whether
it fires once a week or every second:

* cron and calendar presets: within a local hour of the trigger's zone
  that matches the hour and day fields, the fire times are the (minute,
  second) pairs of the expression: |seconds| x |minutes| for a whole hour,
  fewer for the part of an hour a cell or the time window covers;
* intervals: arithmetic on the grid (fixed rate) or on the chain of
  "previous + N" (from a run's start or finish, or its enqueue, assuming runs that take no
  time: such triggers are reported as `approximate`);
* once: its one time.

Constraints (weekdays, window, excluded days) are read as the beat reads
them: a fire time counts if its own local date and time in the trigger's
zone are allowed.

Jitter (F-18) is left out: a run counts at its fire time.

DST, in the trigger's zone (F-11, the rule of `jobs.core.cron`): a fixed-time
cron fires once in a repeated hour (its first copy) and fires wall times
that a spring-forward gap skips once, at the first instant after the gap;
a wildcard cron and an interval follow real time (both copies count, the
gap has no instants). In the display zone, a cell is a local date and
hour: a 23-hour day has an empty cell (`hour_seconds` 0: 02:00 in
Europe/Berlin on the last Sunday of March), a 25-hour day a cell that
holds both copies of the repeated hour (`hour_seconds` 7200, and the
fire times of both). See `jobs.core.local_hours`.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from cronsim import CronSim

from jobs.core.constraints import Constraints, allows
from jobs.core.cron import TriggerError, canonical_timezone, compile_cron, gettext_noop, zone_of
from jobs.core.local_hours import (
    DAY_US,
    HOUR_US,
    SECOND_US,
    US,
    Piece,
    clip,
    display_cells,
    from_us,
    intersect,
    to_us,
    walk,
)
from jobs.core.presets import CalendarSpec, calendar_cron
from jobs.core.triggers import (
    AfterSpec,
    CronSpec,
    FileSpec,
    IntervalAnchor,
    IntervalSpec,
    OnceSpec,
    TriggerSpec,
)

__all__ = ["Busy", "Forecast", "LoadTrigger", "compute_forecast"]

MAX_DAYS = 14


@dataclass(frozen=True)
class LoadTrigger:
    """An active trigger as the forecast reads it. `next_at` is its stored
    next fire time (aware): an interval without a fixed grid continues from
    it; None means it never fires again, or, for an interval anchored on a
    run's start or finish, that it waits for a run (then it is assumed to
    end at `now`). `label` names it among the busiest (e.g. its job)."""

    trigger_id: int
    spec: TriggerSpec
    next_at: datetime | None
    label: str = ""


@dataclass(frozen=True)
class Busy:
    count: int
    trigger_id: int
    label: str


@dataclass
class Forecast:
    """Counts per cell: `counts[d][h]` is the number of fire times at or
    after `now` whose local date in `zone` is `days[d]` and local hour `h`.
    `busiest[d][h]` lists the triggers with most of them, most first."""

    zone: str
    now: datetime
    days: list[date]
    starts_at: datetime  # the first instant of days[0], UTC
    ends_at: datetime  # the first instant after days[-1], UTC
    counts: list[list[int]]
    hour_seconds: list[list[int]]
    busiest: list[list[list[Busy]]]
    now_cell: tuple[int, int]  # (day, hour) of the cell that holds `now`; those before are past
    total: int = 0
    triggers: int = 0
    approximate: list[int] = field(default_factory=list)
    invalid: list[tuple[int, str]] = field(default_factory=list)


# --- counting per trigger -----------------------------------------------------


def _of_day_us(moment: time) -> int:
    return (
        (moment.hour * 60 + moment.minute) * 60 + moment.second
    ) * SECOND_US + moment.microsecond


def _window_us(constraints: Constraints | None, hour: int) -> list[tuple[int, int]]:
    """The microseconds into local `hour` that the window allows."""
    if constraints is None or constraints.window_start is None:
        return [(0, HOUR_US)]
    assert constraints.window_end is not None
    start, end = _of_day_us(constraints.window_start), _of_day_us(constraints.window_end)
    spans = [(start, end)] if start < end else [(0, end), (start, DAY_US)]
    base = hour * HOUR_US
    return [
        (max(low, base) - base, min(high, base + HOUR_US) - base)
        for low, high in spans
        if max(low, base) < min(high, base + HOUR_US)
    ]


def _day_allowed(constraints: Constraints | None, day: date) -> bool:
    return constraints is None or (
        day.weekday() in constraints.weekdays and day not in constraints.excluded_dates
    )


class _Cron:
    """An expression's fields, for counting fire times within an hour."""

    def __init__(self, expression: str) -> None:
        sim = CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))  # for its fields
        self.seconds, self.second_set = sorted(sim.seconds), frozenset(sim.seconds)
        self.minutes, self.minute_set = sorted(sim.minutes), frozenset(sim.minutes)
        self.hours, self.hour_set = sorted(sim.hours), frozenset(sim.hours)
        self.match_day = sim.match_day

    def below(self, wall_s: int) -> int:
        """How many (minute, second) pairs lie before `wall_s` seconds into the hour."""
        minute, second = divmod(wall_s, 60)
        inside = bisect_left(self.seconds, second) if minute in self.minute_set else 0
        return bisect_left(self.minutes, minute) * len(self.seconds) + inside

    def matches(self, wall: datetime) -> bool:
        return (
            wall.second in self.second_set
            and wall.minute in self.minute_set
            and wall.hour in self.hour_set
            and self.match_day(wall.date())
        )


def _between(cron: _Cron, low_us: int, high_us: int) -> int:
    """Fire seconds s of `cron` with low_us <= s (in µs into the hour) < high_us."""
    low_s, high_s = -(-low_us // SECOND_US), -(-high_us // SECOND_US)
    return cron.below(high_s) - cron.below(low_s) if low_s < high_s else 0


class _Plan:
    """One zone's pieces over the forecast range, cut into display cells."""

    def __init__(self, zone: tzinfo, start_us: int, end_us: int, cells: list[Piece]) -> None:
        # Walk from a day earlier, so that "first occurrence" is known at start_us.
        pieces, gaps = walk(zone, start_us - DAY_US, end_us)
        self.atoms = intersect(pieces, cells)
        self.by_label: dict[tuple[date, int], list[Piece]] = {}
        for atom in self.atoms:
            self.by_label.setdefault((atom.day, atom.hour), []).append(atom)
        self.days = sorted({atom.day for atom in self.atoms})
        self.gaps = [g for g in gaps if start_us <= g.at_us < end_us]


def _count_cron(
    plans: _Plans, plan: _Plan, expression: str, timezone_name: str, constraints: Constraints | None
) -> dict[int, int]:
    expression, zone, wall_clock = compile_cron(expression, timezone_name)
    cron = _Cron(expression)
    counts: dict[int, int] = {}
    windows = {hour: _window_us(constraints, hour) for hour in cron.hours}
    whole = [(0, HOUR_US)]
    per_hour = len(cron.seconds) * len(cron.minutes)
    for day in plan.days:
        if not (cron.match_day(day) and _day_allowed(constraints, day)):
            continue
        for hour in cron.hours:
            for atom in plan.by_label.get((day, hour), ()):
                if wall_clock and not atom.first:
                    continue  # a fixed time that occurs twice fires at its first occurrence
                wall_end = atom.wall_us + atom.end_us - atom.start_us
                if atom.wall_us == 0 and wall_end == HOUR_US and windows[hour] == whole:
                    n = per_hour  # the usual case: a whole hour, no window
                else:
                    n = sum(
                        _between(cron, max(low, atom.wall_us), min(high, wall_end))
                        for low, high in windows[hour]
                    )
                if n:
                    counts[atom.cell] = counts.get(atom.cell, 0) + n
    if wall_clock:
        for gap in plan.gaps:
            skipped = any(
                hour in cron.hour_set and cron.match_day(day) and _between(cron, low, high)
                for day, hour, low, high in gap.parts
            )
            moment = from_us(gap.at_us)
            wall = moment.astimezone(zone).replace(tzinfo=None)
            # The skipped wall times fire at the gap's end, once, merged with
            # a fire time of that instant if it has one.
            if skipped and not cron.matches(wall):
                if constraints is None or allows(constraints, moment, zone):
                    cell = plans.cell_at(gap.at_us)
                    if cell is not None:
                        counts[cell] = counts.get(cell, 0) + 1
    return counts


def _allowed_spans(plan: _Plan, constraints: Constraints | None) -> list[tuple[int, int, int]]:
    """(start_us, end_us, cell) of the instants that the constraints allow,
    read in the plan's zone, ascending."""
    windows = [_window_us(constraints, hour) for hour in range(24)]
    spans = []
    for atom in plan.atoms:
        if not _day_allowed(constraints, atom.day):
            continue
        length = atom.end_us - atom.start_us
        for low, high in windows[atom.hour]:
            start = atom.start_us + max(low - atom.wall_us, 0)
            end = atom.start_us + min(high - atom.wall_us, length)
            if start < end:
                spans.append((start, end, atom.cell))
    return spans


def _count_interval(
    spans: list[tuple[int, int, int]], spec: IntervalSpec, next_at: datetime | None, now_us: int
) -> dict[int, int]:
    """Fixed rate: the grid points from next_at (phase start_at, else
    next_at) in the allowed spans. From a run's start or finish, or its
    enqueue: the chain next_at, + N, ..., restarted at the opening of the
    next allowed span when it falls in a closed stretch (runs assumed to
    take no time, enqueues on time)."""
    every = spec.every // US
    fixed_rate = spec.anchor is IntervalAnchor.FIXED_RATE
    if next_at is None:
        if fixed_rate:
            return {}  # never fires again
        at = now_us + every  # waits for a run: assume it ends now
    else:
        at = max(to_us(next_at), now_us)
    anchor = to_us(spec.start_at or next_at) if next_at is not None else at
    counts: dict[int, int] = {}
    for start, end, cell in spans[max(bisect_left(spans, (at, at, 0)) - 1, 0) :]:
        if start < at:
            start = at
        if start >= end:
            continue
        if fixed_rate:  # grid points anchor + k * every in [start, end)
            n = (anchor - start) // every - (anchor - end) // every
        else:
            n = -((start - end) // every)
            at = start + n * every
        counts[cell] = counts.get(cell, 0) + n
    return counts


class _Plans:
    """The plans of the zones met so far, over one forecast's range."""

    def __init__(self, cells: list[Piece], start_us: int, end_us: int) -> None:
        self.cells = clip(cells, start_us, end_us)
        self.start_us, self.end_us = start_us, end_us
        self.starts = [cell.start_us for cell in self.cells]
        self.plans: dict[tzinfo, _Plan] = {}
        self.whole = [(cell.start_us, cell.end_us, cell.cell) for cell in self.cells]
        self.allowed: dict[tuple[tzinfo, Constraints], list[tuple[int, int, int]]] = {}

    def of(self, zone: tzinfo) -> _Plan:
        if zone not in self.plans:
            self.plans[zone] = _Plan(zone, self.start_us, self.end_us, self.cells)
        return self.plans[zone]

    def spans(self, zone: str, constraints: Constraints | None) -> list[tuple[int, int, int]]:
        """`_allowed_spans`, kept per zone and constraints."""
        if constraints is None:
            return self.whole
        key = (zone_of(zone), constraints)
        if key not in self.allowed:
            self.allowed[key] = _allowed_spans(self.of(key[0]), constraints)
        return self.allowed[key]

    def cell_at(self, us: int) -> int | None:
        if not self.start_us <= us < self.end_us:
            return None
        return self.cells[bisect_left(self.starts, us + 1) - 1].cell


def _count(plans: _Plans, load: LoadTrigger) -> dict[int, int]:
    """The trigger's fire times per display cell (only cells it fires in)."""
    spec = load.spec
    if isinstance(spec, AfterSpec | FileSpec):
        return {}  # fires on another job's end or a file: no fire times to count
    if isinstance(spec, OnceSpec):
        cell = plans.cell_at(to_us(spec.at)) if load.next_at is not None else None
        return {} if cell is None else {cell: 1}
    if isinstance(spec, IntervalSpec):
        spans = plans.spans(spec.timezone, spec.constraints)
        return _count_interval(spans, spec, load.next_at, plans.start_us)
    plan = plans.of(zone_of(spec.timezone))
    if load.next_at is None:
        return {}  # never fires again
    expression = spec.expression if isinstance(spec, CronSpec) else calendar_cron(spec)
    return _count_cron(plans, plan, expression, spec.timezone, spec.constraints)


# --- the forecast ---------------------------------------------------------------


def compute_forecast(
    triggers: Iterable[LoadTrigger], *, zone: str, now: datetime, days: int = 7, top: int = 3
) -> Forecast:
    """Count the fire times of `triggers` at or after aware `now`, per local
    date and hour of `zone`, for `days` (1..14) dates from now's date on,
    with the `top` busiest triggers per cell. Reads `triggers` once, so it
    may be a generator over database chunks. A trigger the pure core refuses
    is listed in `invalid` and not counted. Raises TriggerError("timezone")
    for an unknown zone, TriggerError("days") for a count out of range."""
    if not 1 <= days <= MAX_DAYS:
        raise TriggerError(
            "days",
            gettext_noop("must be between 1 and %(max_days)s, got %(days)s"),
            max_days=MAX_DAYS,
            days=days,
        )
    cells, start_us, end_us = display_cells(zone_of(zone), now, days)
    plans = _Plans(cells, max(to_us(now), start_us), end_us)
    result = Forecast(
        zone=canonical_timezone(zone),
        now=now,
        days=[cells[0].day + timedelta(days=d) for d in range(days)],
        starts_at=from_us(start_us),
        ends_at=from_us(end_us),
        counts=[[0] * 24 for _ in range(days)],
        hour_seconds=[[0] * 24 for _ in range(days)],
        busiest=[[[] for _ in range(24)] for _ in range(days)],
        now_cell=divmod(plans.cells[0].cell, 24),
    )
    for piece in cells:
        result.hour_seconds[piece.cell // 24][piece.hour] += (
            piece.end_us - piece.start_us
        ) // SECOND_US
    heaps: list[list[tuple[int, int, str]]] = [[] for _ in range(days * 24)]  # of the busiest
    # Triggers with the same schedule count alike: [counts, how many]. Of
    # each group only the first `top` can be among the busiest of a cell.
    groups: dict[tuple[object, ...], tuple[dict[int, int], list[int]]] = {}
    for load in triggers:
        spec = load.spec
        fixed = isinstance(spec, CronSpec | CalendarSpec)
        key = (spec, load.next_at is not None if fixed else load.next_at)
        try:
            mine, members = groups[key] if key in groups else (_count(plans, load), [0])
        except (TriggerError, ValueError) as exc:
            result.invalid.append((load.trigger_id, str(exc)))
            continue
        groups[key] = mine, members
        members[0] += 1
        result.triggers += 1
        if isinstance(spec, IntervalSpec) and spec.anchor is not IntervalAnchor.FIXED_RATE:
            result.approximate.append(load.trigger_id)
        if members[0] > top:
            continue
        for cell, n in mine.items():
            heap = heaps[cell]
            if len(heap) < top:
                heapq.heappush(heap, (n, -load.trigger_id, load.label))
            elif n > heap[0][0]:
                heapq.heapreplace(heap, (n, -load.trigger_id, load.label))
    counts = [0] * (days * 24)
    for mine, members in groups.values():
        for cell, n in mine.items():
            counts[cell] += n * members[0]
    for cell, n in enumerate(counts):
        result.counts[cell // 24][cell % 24] = n
        busiest = sorted(heaps[cell], reverse=True)  # most first; on a tie the lower id
        result.busiest[cell // 24][cell % 24] = [
            Busy(n, -neg_id, label) for n, neg_id, label in busiest
        ]
    result.total = sum(counts)
    return result
