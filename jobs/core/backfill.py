"""Which fire times a backfill lists for a trigger (F-101, F-100). Pure core:
no Django, no Celery, no clock reads.

A backfill runs the fire times of a past range that have no run yet, found
by their key (jobs.specs.fire_time_key). It must list the times the beat
fires on: a time a little off one of them is a new key, and a range the
beat has run would get a second run for each of its fire times.

* cron, calendar presets and once triggers: their times are the schedule's.
* a fixed-rate interval with start_at: the grid start_at + k x N.
* a fixed-rate interval without start_at: the grid the beat keeps, which
  passes through the trigger's stored next_run_at (each claim anchors its
  window there, jobs/core/due.py, so a late claim keeps the phase), or when
  it has none through its last fire time. Listed in both directions from
  that point, whatever the range's start. The grid is set with the
  schedule: a saved edit (or the stalled-schedule repair) starts a new one
  at that moment + N, and a range reaching back before it lists the new
  grid there, as a cron lists its current expression.
* an interval anchored on the enqueue, a run's start or its end
  (after_enqueue, from_start, from_finish): no grid. Each fire time is set
  by the claim or the run before it, and every one the beat reached has a
  run or a `skipped` record with its key, so the recorded runs prove none
  missed: backfill lists none (`NoBackfillTimes`, naming interval_anchor).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from jobs.core.cron import TriggerError, gettext_noop
from jobs.core.triggers import (
    UNCLOCKED,
    IntervalAnchor,
    IntervalSpec,
    TriggerSpec,
    iter_fire_times,
    validate_spec,
)

_TINY = timedelta(microseconds=1)


class NoBackfillTimes(TriggerError):
    """The trigger has no fire times a backfill can list; `field` names why
    (interval_anchor: its times are set by its runs; next_run_at: a grid
    with no point to pass through)."""


def compute_grid_start(*, through: datetime, every: timedelta, before: datetime) -> datetime:
    """The last point of the grid `through` + k x `every` (k any whole
    number, negative ones included) strictly before `before`, in UTC."""
    return (through - ((through - before) // every + 1) * every).astimezone(UTC)


def compute_backfill_spec(
    spec: TriggerSpec, *, start: datetime, through: datetime | None
) -> TriggerSpec:
    """The spec whose fire times from `start` on are the ones the beat fires
    on (see the module docstring). `through`: the trigger's stored
    next_run_at, else its last fire time (None when it has neither); read
    only for a fixed-rate interval without start_at. Raises NoBackfillTimes
    naming "interval_anchor" (an interval anchored on the enqueue, a run's
    start or end) or "next_run_at" (no point to anchor the grid on), and
    TriggerError for an invalid interval."""
    if not isinstance(spec, IntervalSpec):
        return spec
    if spec.anchor is not IntervalAnchor.FIXED_RATE:
        raise NoBackfillTimes(
            "interval_anchor",
            gettext_noop(
                "an interval anchored %(anchor)r has no fire times of its own to backfill:"
                " each one is set by the run or claim before it, and every one the beat"
                " reached has its run or skipped record"
            ),
            anchor=str(spec.anchor),
        )
    if spec.start_at is not None:
        return spec
    if through is None:
        raise NoBackfillTimes(
            "next_run_at",
            gettext_noop(
                "the interval has no next fire time and never fired: there is no grid"
                " to backfill on (save the trigger to give it one)"
            ),
        )
    valid = validate_spec(spec, now=through)  # whole seconds, 1 s..30 days
    assert isinstance(valid, IntervalSpec)
    grid_start = compute_grid_start(through=through, every=valid.every, before=start)
    return replace(valid, start_at=grid_start)


def iter_backfill_times(
    spec: TriggerSpec, *, start: datetime, end: datetime, through: datetime | None
) -> Iterator[datetime]:
    """The trigger's fire times in [start, end] (aware), ascending, in UTC, as
    `compute_backfill_spec` lists them; none for a trigger that fires on
    events (a dependency or a file). Raises as compute_backfill_spec."""
    if isinstance(spec, UNCLOCKED):
        return
    listed = compute_backfill_spec(spec, start=start, through=through)
    for fire in iter_fire_times(listed, after=start - _TINY):
        if fire > end:
            return
        yield fire
