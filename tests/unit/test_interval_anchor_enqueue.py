"""F-12 as the migration manual says it (issue 27, item 5): an interval
anchored on the enqueue (`after_enqueue`) fires next at the moment the
beat enqueues its run + N, so it drifts by how late that was; the grid
(`fixed_rate`, called `from_enqueue` before) keeps start + k x N. A busy job
(overlap skip/buffer) holds the due time back: it stays due, is caught up
once after the run ends, then it is that enqueue + N. Pure core, `now=`."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from jobs.core.constraints import Constraints
from jobs.core.missed import (
    MissedRunPolicy,
    MissedRunRules,
    compute_claim,
    compute_held_until,
    compute_next_without_run,
    compute_stays_due,
)
from jobs.core.rules import Overlap
from jobs.core.triggers import (
    IntervalAnchor,
    IntervalSpec,
    TriggerError,
    compute_fire_times,
    compute_latest_fire,
    describe,
    validate_spec,
)

HOUR, MINUTE, SECOND = timedelta(hours=1), timedelta(minutes=1), timedelta(seconds=1)
T = datetime(2026, 6, 1, 2, 0, tzinfo=UTC)
DAY = timedelta(days=1)
AFTER = IntervalSpec(HOUR, IntervalAnchor.AFTER_ENQUEUE)
GRID = IntervalSpec(HOUR, IntervalAnchor.FIXED_RATE)
RULES = MissedRunRules()  # run_once, latest, grace 60 s


def test_the_old_name_is_the_grid():
    assert IntervalAnchor("from_enqueue") is IntervalAnchor.FIXED_RATE
    valid = validate_spec(IntervalSpec(HOUR, "from_enqueue"), now=T)  # type: ignore[arg-type]
    assert isinstance(valid, IntervalSpec) and valid.anchor is IntervalAnchor.FIXED_RATE
    assert IntervalSpec(HOUR).anchor is IntervalAnchor.FIXED_RATE  # still the default


def test_an_unknown_anchor_is_refused():
    with pytest.raises(TriggerError) as caught:
        validate_spec(IntervalSpec(HOUR, "from_lunch"), now=T)  # type: ignore[arg-type]
    assert caught.value.field == "interval_anchor"


# (label, spec, claimed at, the next fire time): the enqueue 5 s late.
DRIFT = [
    ("after-enqueue-drifts", AFTER, T + 5 * SECOND, T + HOUR + 5 * SECOND),
    ("fixed-rate-keeps-the-grid", GRID, T + 5 * SECOND, T + HOUR),
    ("after-enqueue-on-time", AFTER, T, T + HOUR),
    # A daily run enqueued at 02:00:40 fires next at 02:00:40 the day after.
    (
        "daily",
        IntervalSpec(DAY, IntervalAnchor.AFTER_ENQUEUE),
        T + 40 * SECOND,
        T + DAY + 40 * SECOND,
    ),
]


@pytest.mark.parametrize(("label", "spec", "now", "following"), DRIFT, ids=[d[0] for d in DRIFT])
def test_the_claim_sets_the_next_time(label, spec, now, following):
    claim = compute_claim(spec, next_run_at=T, now=now, rules=RULES)
    assert [r.scheduled_for for r in claim.runs] == [T]
    assert not claim.runs[0].catchup
    assert claim.next_run_at == following


def test_at_the_instant_and_one_second_later():
    assert compute_claim(AFTER, next_run_at=T, now=T - SECOND, rules=RULES).runs == ()
    assert compute_claim(AFTER, next_run_at=T, now=T, rules=RULES).next_run_at == T + HOUR
    later = compute_claim(AFTER, next_run_at=T, now=T + SECOND, rules=RULES)
    assert later.next_run_at == T + HOUR + SECOND


def test_an_outage_is_caught_up_once_then_now_plus_n():
    """The manual: a time missed while the application was down is due at
    the next start and enqueued once; then the normal interval."""
    now = T + 5 * HOUR + 7 * MINUTE
    claim = compute_claim(AFTER, next_run_at=T, now=now, rules=RULES)
    assert [(r.scheduled_for, r.catchup, r.missed) for r in claim.runs] == [(T, True, 0)]
    assert claim.next_run_at == now + HOUR
    skipped = compute_claim(
        AFTER, next_run_at=T, now=now, rules=MissedRunRules(policy=MissedRunPolicy.SKIP)
    )
    assert skipped.runs == () and skipped.skipped_times == 1
    assert skipped.next_run_at == now + HOUR


def test_a_window_moves_the_next_time_to_the_first_allowed_instant():
    # Allowed 08:00-18:00 UTC: enqueued at 17:30, + 1 h is 18:30, closed;
    # the next allowed instant is 08:00 the day after.
    spec = validate_spec(
        IntervalSpec(
            HOUR,
            IntervalAnchor.AFTER_ENQUEUE,
            constraints=Constraints(
                window_start=time(8),
                window_end=time(18),
            ),
        ),
        now=T,
    )
    due = datetime(2026, 6, 1, 17, 30, tzinfo=UTC)
    claim = compute_claim(spec, next_run_at=due, now=due, rules=RULES)
    assert claim.next_run_at == datetime(2026, 6, 2, 8, 0, tzinfo=UTC)


def test_it_has_no_fixed_times_and_the_preview_assumes_enqueues_on_time():
    assert compute_latest_fire(AFTER, at_or_before=T) is None
    start = IntervalSpec(HOUR, IntervalAnchor.AFTER_ENQUEUE, start_at=T)
    assert compute_latest_fire(start, at_or_before=T + 3 * HOUR) is None
    assert compute_fire_times(AFTER, after=T, count=3) == [T + HOUR, T + 2 * HOUR, T + 3 * HOUR]
    assert compute_next_without_run(AFTER, now=T) is None  # the claim set it


def test_words_say_which_is_which():
    assert describe(GRID) == "every 1 hour"
    assert describe(AFTER) == "every 1 hour after the previous run was enqueued"


# --- the busy job ----------------------------------------------------------

# (overlap policy, active runs, stays due)
BUSY = [
    (Overlap.SKIP, 1, True),
    (Overlap.BUFFER_ONE, 1, True),
    (Overlap.BUFFER_ALL, 2, True),
    (Overlap.SKIP, 0, False),
    (Overlap.BUFFER_ONE, 0, False),
    (Overlap.ALLOW, 1, False),  # admitted (or skipped) by the overlap policy
    (Overlap.CANCEL_OTHER, 1, False),
]


@pytest.mark.parametrize(("overlap", "active", "stays"), BUSY)
def test_a_busy_job_holds_the_due_time_back(overlap, active, stays):
    assert compute_stays_due(AFTER, overlap=overlap, active=active) is stays
    # Every other trigger is claimed; the overlap policy admits its run.
    assert compute_stays_due(GRID, overlap=overlap, active=active) is False
    assert (
        compute_stays_due(
            IntervalSpec(HOUR, IntervalAnchor.FROM_START), overlap=overlap, active=active
        )
        is False
    )


def test_held_until_the_end_of_the_run_that_held_it():
    assert compute_held_until(AFTER, next_run_at=T, busy_until=T + 20 * MINUTE) == T + 20 * MINUTE
    assert compute_held_until(AFTER, next_run_at=T, busy_until=T) == T  # at the instant
    assert compute_held_until(AFTER, next_run_at=T, busy_until=T - SECOND) is None
    assert compute_held_until(AFTER, next_run_at=T, busy_until=None) is None
    assert compute_held_until(GRID, next_run_at=T, busy_until=T + MINUTE) is None


@pytest.mark.parametrize("policy", list(MissedRunPolicy))
def test_a_held_due_time_is_caught_up_once_after_the_run_then_now_plus_n(policy):
    """The manual's busy job: due at 02:00 while a run goes on until
    02:20:00; the beat's next poll (02:20:02) makes ONE run for 02:00 and
    the next time is 03:20:02, whatever the missed-run policy (the time
    was held, not missed)."""
    ended, now = T + 20 * MINUTE, T + 20 * MINUTE + 2 * SECOND
    until = compute_held_until(AFTER, next_run_at=T, busy_until=ended)
    rules = MissedRunRules(policy=policy, window=timedelta(0), coalesce_until=until)
    claim = compute_claim(AFTER, next_run_at=T, now=now, rules=rules)
    assert [r.scheduled_for for r in claim.runs] == [T]
    assert claim.skipped_times == 0
    assert claim.next_run_at == now + HOUR


def test_the_load_forecast_counts_it_as_a_chain_and_says_approximate():
    from jobs.core.forecast import LoadTrigger, compute_forecast

    now = datetime(2026, 12, 1, 0, 30, tzinfo=UTC)
    due = datetime(2026, 12, 1, 0, 45, tzinfo=UTC)
    result = compute_forecast([LoadTrigger(7, AFTER, due)], zone="UTC", now=now)
    assert result.approximate == [7]
    assert result.counts[0][:3] == [1, 1, 1]  # 00:45, 01:45, 02:45: enqueues on time
    grid = compute_forecast([LoadTrigger(8, GRID, due)], zone="UTC", now=now)
    assert grid.approximate == []
