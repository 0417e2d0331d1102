"""The due fire times of a trigger (F-20, F-24, F-102): the first step of a
claim. `compute_due_window` gathers the facts: the due fire times in
[next_run_at, now] (the stored next_run_at, the latest, how many, the count
bounded by max_scan) and the first fire time after now; `DueTimes` searches
them forwards and backwards from any moment, so a 1-second cron missed for
a month costs at most a few max_scan steps. The decision over them is
jobs/core/missed.py. Pure core: no Django, no Celery, no clock reads."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from jobs.core.triggers import (
    IntervalAnchor,
    IntervalSpec,
    TriggerSpec,
    compute_latest_fire,
    compute_next_fire,
    iter_fire_times,
    validate_spec,
)

DEFAULT_MAX_SCAN = 10_000


TINY = timedelta(microseconds=1)


@dataclass(frozen=True)
class DueWindow:
    """The fire times of a due trigger in [earliest, now]. Aware UTC.

    `earliest` is the stored next_run_at: it counts as a fire time even if the
    spec would not produce it (after an edit). `later` counts the fire times in
    (earliest, now], at most `max_scan`; `truncated` says counting stopped
    there. `latest` is the last fire time <= now (exact, even when truncated).
    `following` is the first fire time after now: None when the trigger is
    finished or waits for the worker to set it.
    """

    earliest: datetime
    latest: datetime
    later: int
    truncated: bool
    following: datetime | None


def _walked_window(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, max_scan: int
) -> DueWindow:
    """By walking the fire times after next_run_at, at most max_scan of them;
    past that the latest one comes from a reverse search."""
    latest, later, truncated = next_run_at, 0, False
    for fire in iter_fire_times(spec, after=next_run_at):
        if fire > now:
            break
        if later == max_scan:
            truncated = True
            latest = compute_latest_fire(spec, at_or_before=now) or fire
            break
        latest, later = fire, later + 1
    following = compute_next_fire(spec, after=now, now=now)
    return DueWindow(next_run_at, latest, later, truncated, following)


def _interval_window(
    spec: IntervalSpec, next_run_at: datetime, now: datetime, max_scan: int
) -> DueWindow:
    """Fixed-rate intervals by arithmetic, so a long outage costs nothing.

    The grid is start_at + k * every; without start_at it is anchored at the
    stored next_run_at, so a late beat keeps the rate's phase. A constrained
    grid is walked like a cron.
    """
    # A bad stored interval raises TriggerError here, not ZeroDivisionError.
    valid = validate_spec(spec, now=now)
    assert isinstance(valid, IntervalSpec)
    every, start_at = valid.every, valid.start_at
    if valid.anchor is IntervalAnchor.AFTER_ENQUEUE:
        # The manual's interval (F-12): only the stored time is due, and the
        # next one counts from this claim, the moment of the enqueue: now + N
        # (with constraints, the first instant they allow from then).
        return DueWindow(
            next_run_at, next_run_at, 0, False, compute_next_fire(valid, after=now, now=now)
        )
    if valid.anchor is not IntervalAnchor.FIXED_RATE:
        # The next fire time depends on a run that has not happened yet: the
        # worker sets it (F-12). Only the stored time is due.
        return DueWindow(next_run_at, next_run_at, 0, False, None)
    anchor = start_at if start_at is not None else next_run_at
    if valid.constraints is not None:
        # Weekdays, windows and excluded days drop grid points: walk the rest.
        return _walked_window(replace(valid, start_at=anchor), next_run_at, now, max_scan)

    def points_until(moment: datetime) -> int:  # grid points <= moment
        return 0 if moment < anchor else (moment - anchor) // every + 1

    reached = points_until(now)
    later = reached - points_until(next_run_at)
    latest = anchor + (reached - 1) * every if later > 0 else next_run_at
    following = (anchor + reached * every).astimezone(UTC)
    return DueWindow(
        next_run_at, latest.astimezone(UTC), min(later, max_scan), later > max_scan, following
    )


def compute_due_window(
    spec: TriggerSpec, *, next_run_at: datetime, now: datetime, max_scan: int = DEFAULT_MAX_SCAN
) -> DueWindow:
    """Gather the fire times of a trigger due at `next_run_at` (<= `now`).

    At most `max_scan` (>= 1) fire times are walked; past that the latest one
    comes from a reverse search, so a 1-second cron missed for a month costs
    the same as one missed for a minute. Raises ValueError for max_scan < 1.
    """
    if max_scan < 1:
        raise ValueError(f"max_scan must be at least 1, got {max_scan}")
    next_run_at = next_run_at.astimezone(UTC)
    if isinstance(spec, IntervalSpec):
        return _interval_window(spec, next_run_at, now, max_scan)
    return _walked_window(spec, next_run_at, now, max_scan)


class DueTimes:
    """The due fire times of a window: the stored next_run_at (`earliest`) and
    the spec's fire times in (earliest, now], searched forwards
    (`iter_fire_times`) and backwards (`compute_latest_fire`) from any moment.
    Bounds are inclusive; a `lo` of None means from the first."""

    def __init__(self, spec: TriggerSpec, window: DueWindow, now: datetime) -> None:
        self.window, self.now = window, now
        self.spec: TriggerSpec | None = spec
        if window.later == 0:
            # earliest is the only due time (always so for an interval anchored
            # on a run's start or finish).
            self.spec = None
        elif isinstance(spec, IntervalSpec) and spec.start_at is None:
            # The grid is anchored at the stored next_run_at (_interval_window).
            self.spec = replace(spec, start_at=window.earliest)

    def ascending(self, lo: datetime | None, hi: datetime) -> Iterator[datetime]:
        earliest, hi = self.window.earliest, min(hi, self.now)
        after = earliest
        if lo is None or lo <= earliest:
            if earliest <= hi:
                yield earliest
        else:
            after = lo - TINY
        if self.spec is not None:
            for fire in iter_fire_times(self.spec, after=after):
                if fire > hi:
                    return
                yield fire

    def descending(self, lo: datetime | None, hi: datetime) -> Iterator[datetime]:
        earliest, hi, spec = self.window.earliest, min(hi, self.now), self.spec
        fire = self.window.latest if hi >= self.window.latest else None
        if spec is not None and fire is None:
            fire = compute_latest_fire(spec, at_or_before=hi)
        while spec is not None and fire is not None and fire > earliest:
            if lo is not None and fire < lo:
                return
            yield fire
            fire = compute_latest_fire(spec, at_or_before=fire - TINY)
        if earliest <= hi and (lo is None or earliest >= lo):
            yield earliest

    def count(self, lo: datetime | None, hi: datetime, cap: int) -> tuple[int, bool]:
        """How many due fire times lie in [lo, hi], at most `cap`; and whether
        more do. The window's own count answers for the whole window."""
        window = self.window
        if (lo is None or lo <= window.earliest) and hi >= window.latest:
            if window.truncated and cap <= window.later + 1:
                return cap, True
            if not window.truncated:
                return min(window.later + 1, cap), window.later + 1 > cap
        found = 0
        for _ in self.ascending(lo, hi):
            if found == cap:
                return found, True
            found += 1
        return found, False
