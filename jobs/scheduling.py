"""The claim decision: what the beat does with a due trigger (F-20, F-21, F-24,
F-102). Part of the pure core: no Django, no Celery, no clock reads.

A claim happens in two steps, kept apart so that the missed-run policies a
later change adds (skip, run_all with a bound, a catch-up window, coalescing
`earliest`/`all`) only add a decision function and a `policy` argument:

1. `compute_due_window` gathers the facts: which fire times fell into
   [next_run_at, now] (counted, with the scan bounded), and the first fire
   time after now.
2. A decision function turns the window into a `Claim`. Today there is one:
   `run_once` with coalescing `latest`, the default (`_run_once_latest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from .triggers import (
    IntervalAnchor,
    IntervalSpec,
    TriggerSpec,
    compute_latest_fire,
    compute_next_fire,
    iter_fire_times,
    validate_spec,
)

DEFAULT_MAX_SCAN = 10_000


@dataclass(frozen=True)
class Claim:
    """What to do with a due trigger. Datetimes are aware UTC."""

    # The fire time to create a run for; None: nothing to run.
    scheduled_for: datetime | None
    # The trigger's new next_run_at; None: the trigger is finished, or it waits
    # for the worker (interval from_start/from_finish).
    next_run_at: datetime | None
    # Fire times passed over without a run (counted, at most max_scan).
    missed: int
    # True when the run stands for fire times the scheduler missed (more than
    # one fire time <= now).
    catchup: bool


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


def _interval_window(
    spec: IntervalSpec, next_run_at: datetime, now: datetime, max_scan: int
) -> DueWindow:
    """Fixed-rate intervals by arithmetic, so a long outage costs nothing.

    The grid is start_at + k * every; without start_at it is anchored at the
    stored next_run_at, so a late beat keeps the rate's phase.
    """
    # A bad stored interval raises TriggerError here, not ZeroDivisionError.
    valid = validate_spec(spec, now=now)
    assert isinstance(valid, IntervalSpec)
    every, start_at = valid.every, valid.start_at
    if valid.anchor is not IntervalAnchor.FROM_ENQUEUE:
        # The next fire time depends on a run that has not happened yet: the
        # worker sets it (F-12). Only the stored time is due.
        return DueWindow(next_run_at, next_run_at, 0, False, None)
    anchor = start_at if start_at is not None else next_run_at

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


def _run_once_latest(window: DueWindow) -> Claim:
    """Missed-run policy `run_once`, coalescing `latest` (F-24, F-102): one run
    for the latest due fire time; the others are counted as missed."""
    return Claim(
        scheduled_for=window.latest,
        next_run_at=window.following,
        missed=window.later,
        catchup=window.later > 0,
    )


def compute_claim(
    spec: TriggerSpec, *, next_run_at: datetime, now: datetime, max_scan: int = DEFAULT_MAX_SCAN
) -> Claim:
    """Decide what a beat does with a trigger whose next_run_at has come.

    Precondition: next_run_at <= now (both aware). If it does not hold (say
    another beat moved the trigger first), the claim runs nothing and keeps
    next_run_at. Otherwise one run for the latest fire time in
    [next_run_at, now]: on time it is next_run_at itself (catchup False,
    missed 0); after an outage it is the latest one, with `missed` counting
    the others (at most max_scan) and catchup True. The new next_run_at is the
    first fire time after now (None for a spent once trigger, and for
    intervals anchored on a run's start or finish, which the worker sets).
    """
    if next_run_at > now:
        return Claim(scheduled_for=None, next_run_at=next_run_at, missed=0, catchup=False)
    window = compute_due_window(spec, next_run_at=next_run_at, now=now, max_scan=max_scan)
    return _run_once_latest(window)
