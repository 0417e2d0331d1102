"""jobs.core.backfill: the fire times a backfill lists are the ones the beat
fires on (F-101, F-100). No database."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from jobs.core.backfill import (
    NoBackfillTimes,
    compute_backfill_spec,
    compute_grid_start,
    iter_backfill_times,
)
from jobs.core.triggers import (
    AfterSpec,
    Constraints,
    CronSpec,
    IntervalAnchor,
    IntervalSpec,
    OnceSpec,
)

pytestmark = pytest.mark.usefixtures("berlin_local_time")

SECOND = timedelta(seconds=1)
EVERY = 1500 * SECOND
T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
# Where the beat's grid runs: the trigger was saved at T0 + 0.123456 s.
NEXT_RUN_AT = T0 + timedelta(microseconds=123_456) + 5 * EVERY


def listed(spec, start, end, through=NEXT_RUN_AT):
    return list(iter_backfill_times(spec, start=start, end=end, through=through))


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (NEXT_RUN_AT, NEXT_RUN_AT - EVERY),  # strictly before
        (NEXT_RUN_AT + SECOND, NEXT_RUN_AT),
        (NEXT_RUN_AT - 2.5 * EVERY, NEXT_RUN_AT - 3 * EVERY),  # back past the anchor
        (NEXT_RUN_AT + 2.5 * EVERY, NEXT_RUN_AT + 2 * EVERY),  # on past it
    ],
)
def test_the_grid_start_is_the_last_grid_point_before_the_moment(before, expected):
    assert compute_grid_start(through=NEXT_RUN_AT, every=EVERY, before=before) == expected


def test_a_fixed_rate_interval_without_start_at_lists_the_beats_grid_not_the_ranges():
    spec = IntervalSpec(EVERY)
    times = listed(spec, T0, NEXT_RUN_AT)
    assert times == [NEXT_RUN_AT - k * EVERY for k in range(5, -1, -1)]
    assert all(t.tzinfo is UTC for t in times)
    # Before the fix: the range's start + k x N, 0.123456 s off each of them.
    assert T0 + EVERY not in times


def test_the_grid_goes_on_past_its_anchor_and_steps_back_before_it():
    spec = IntervalSpec(EVERY)
    later = listed(spec, NEXT_RUN_AT + SECOND, NEXT_RUN_AT + 3 * EVERY)
    assert later == [NEXT_RUN_AT + EVERY, NEXT_RUN_AT + 2 * EVERY, NEXT_RUN_AT + 3 * EVERY]
    assert listed(spec, NEXT_RUN_AT - EVERY, NEXT_RUN_AT - EVERY) == [NEXT_RUN_AT - EVERY]
    assert listed(spec, NEXT_RUN_AT - EVERY + SECOND, NEXT_RUN_AT - SECOND) == []


def test_a_fixed_rate_interval_with_constraints_lists_the_allowed_points_of_its_grid():
    # Only 09:00-10:00 Europe/Berlin (07:00-08:00 UTC) on the day before T0.
    window = Constraints(frozenset(range(7)), time(9, 0), time(10, 0))
    spec = IntervalSpec(EVERY, timezone="Europe/Berlin", constraints=window)
    times = listed(spec, T0 - timedelta(days=1), T0)
    assert times and all(
        (t - NEXT_RUN_AT) % EVERY == timedelta(0) and 7 <= t.hour < 8 for t in times
    )


def test_a_fixed_rate_interval_with_start_at_keeps_its_own_grid():
    spec = IntervalSpec(EVERY, start_at=T0)
    assert compute_backfill_spec(spec, start=T0, through=NEXT_RUN_AT) is spec
    assert listed(spec, T0, T0 + 2 * EVERY) == [T0, T0 + EVERY, T0 + 2 * EVERY]


def test_without_next_run_at_the_grid_runs_through_the_last_fire_time():
    last_fired = NEXT_RUN_AT - EVERY
    spec = IntervalSpec(EVERY)
    assert listed(spec, T0, NEXT_RUN_AT, through=last_fired) == listed(spec, T0, NEXT_RUN_AT)


def test_a_grid_with_no_point_to_pass_through_is_refused_naming_next_run_at():
    with pytest.raises(NoBackfillTimes) as caught:
        listed(IntervalSpec(EVERY), T0, NEXT_RUN_AT, through=None)
    assert caught.value.field == "next_run_at"


@pytest.mark.parametrize("anchor", ["after_enqueue", "from_start", "from_finish"])
def test_an_interval_anchored_on_the_enqueue_or_a_run_has_no_times_to_backfill(anchor):
    spec = IntervalSpec(EVERY, IntervalAnchor(anchor))
    with pytest.raises(NoBackfillTimes) as caught:
        listed(spec, T0, NEXT_RUN_AT)
    assert caught.value.field == "interval_anchor"
    assert f"anchored '{anchor}' has no fire times of its own" in caught.value.message


def test_cron_and_once_list_their_own_times_and_event_triggers_none():
    cron = CronSpec("0 * * * *", "Europe/Berlin")
    assert listed(cron, T0, T0 + 2 * 3600 * SECOND, through=None) == [
        T0,
        T0 + 3600 * SECOND,
        T0 + 7200 * SECOND,
    ]
    assert listed(OnceSpec(T0 + SECOND), T0, T0 + SECOND, through=None) == [T0 + SECOND]
    assert listed(AfterSpec("'Import' (#3)"), T0, T0 + 3600 * SECOND, through=None) == []
