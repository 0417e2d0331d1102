"""jobs.core.missed.compute_claim: what the beat does with a due trigger
(F-20, F-21, F-24 run_once, F-102 coalescing latest), without missed-run
rules (today's behaviour); the rules are in test_missed_runs.py. No database."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobs.core.due import compute_due_window
from jobs.core.missed import Claim, MissedRunRules, PlannedRun, compute_claim
from jobs.core.triggers import (
    CronSpec,
    IntervalAnchor,
    IntervalSpec,
    OnceSpec,
    TriggerError,
    TriggerSpec,
)

pytestmark = pytest.mark.usefixtures("berlin_local_time")

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
QUARTER = timedelta(minutes=15)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def single(
    scheduled_for: datetime | None,
    next_run_at: datetime | None,
    missed: int,
    catchup: bool,
    *,
    truncated: bool = False,
) -> Claim:
    """The claim of today's behaviour (no rules): at most one run, nothing
    skipped; `missed` counts the fire times coalesced into the run."""
    runs = () if scheduled_for is None else (PlannedRun(scheduled_for, catchup, missed),)
    return Claim(runs, next_run_at, truncated=truncated)


T = utc(2026, 1, 5, 10, 15)  # a fire time of "*/15 * * * *"
EVERY_QUARTER = CronSpec("*/15 * * * *")
AT = utc(2026, 6, 1, 8)
START = utc(2026, 1, 5, 10)

CASES = [
    # id, spec, next_run_at, now, expected claim
    ("cron-on-time", EVERY_QUARTER, T, T, single(T, T + QUARTER, 0, False)),
    ("cron-1s-late", EVERY_QUARTER, T, T + SECOND, single(T, T + QUARTER, 0, False)),
    ("cron-1s-before-next", EVERY_QUARTER, T, T + QUARTER - SECOND, single(T, T + QUARTER, 0, False)),
    ("cron-at-next", EVERY_QUARTER, T, T + QUARTER, single(T + QUARTER, T + 2 * QUARTER, 1, True)),
    ("cron-several-missed", EVERY_QUARTER, T, utc(2026, 1, 5, 11, 7),
     single(utc(2026, 1, 5, 11), utc(2026, 1, 5, 11, 15), 3, True)),
    ("cron-not-due-yet", EVERY_QUARTER, T, T - SECOND, single(None, T, 0, False)),
    # An edited next_run_at off the schedule still counts as a fire time.
    ("cron-edited-next-run-at", EVERY_QUARTER, T + 5 * MINUTE, T + 5 * MINUTE,
     single(T + 5 * MINUTE, T + QUARTER, 0, False)),
    ("cron-edited-next-run-at-missed", EVERY_QUARTER, T + 5 * MINUTE, T + QUARTER + MINUTE,
     single(T + QUARTER, T + 2 * QUARTER, 1, True)),
    ("cron-6-fields", CronSpec("*/10 * * * * *"), T, T + 25 * SECOND,
     single(T + 20 * SECOND, T + 30 * SECOND, 2, True)),
    # DST: the hourly job runs in both copies of Berlin's 02:00; the daily
    # 02:30 job fired once, at the first copy.
    ("cron-hourly-fall-back", CronSpec("0 * * * *", "Europe/Berlin"), utc(2026, 10, 25, 0), utc(2026, 10, 25, 2),
     single(utc(2026, 10, 25, 2), utc(2026, 10, 25, 3), 2, True)),
    ("cron-daily-fall-back", CronSpec("30 2 * * *", "Europe/Berlin"), utc(2026, 10, 25, 0, 30),
     utc(2026, 10, 25, 1, 30), single(utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30), 0, False)),
    ("cron-daily-spring-forward", CronSpec("30 2 * * *", "Europe/Berlin"), utc(2026, 3, 28, 1, 30),
     utc(2026, 3, 29, 1), single(utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30), 1, True)),
    # once: runs, then the trigger is finished
    ("once-on-time", OnceSpec(AT), AT, AT, single(AT, None, 0, False)),
    ("once-late", OnceSpec(AT), AT, AT + timedelta(days=3), single(AT, None, 0, False)),
    ("once-berlin", OnceSpec(datetime(2026, 6, 1, 10, tzinfo=ZoneInfo("Europe/Berlin"))), AT, AT,
     single(AT, None, 0, False)),
    # fixed-rate interval without start_at: the grid is anchored at next_run_at
    ("interval-on-time", IntervalSpec(MINUTE), T, T, single(T, T + MINUTE, 0, False)),
    ("interval-1s-before-next", IntervalSpec(MINUTE), T, T + MINUTE - SECOND, single(T, T + MINUTE, 0, False)),
    ("interval-at-next", IntervalSpec(MINUTE), T, T + MINUTE, single(T + MINUTE, T + 2 * MINUTE, 1, True)),
    ("interval-several-missed", IntervalSpec(MINUTE), T, T + 5 * MINUTE + 30 * SECOND,
     single(T + 5 * MINUTE, T + 6 * MINUTE, 5, True)),
    # fixed-rate interval with start_at: the grid is start_at + k * every
    ("interval-grid-missed", IntervalSpec(QUARTER, start_at=START), START + QUARTER, START + 50 * MINUTE,
     single(START + 45 * MINUTE, START + 60 * MINUTE, 2, True)),
    ("interval-grid-edited-off-grid", IntervalSpec(QUARTER, start_at=START), START + 20 * MINUTE,
     START + 25 * MINUTE, single(START + 20 * MINUTE, START + 30 * MINUTE, 0, False)),
    ("interval-grid-before-start", IntervalSpec(QUARTER, start_at=START), START - MINUTE, START - SECOND,
     single(START - MINUTE, START, 0, False)),
    ("interval-grid-at-start", IntervalSpec(QUARTER, start_at=START), START - MINUTE, START,
     single(START, START + QUARTER, 1, True)),
    # anchored on a run's start or finish: one run, the worker sets next_run_at
    ("interval-from-finish", IntervalSpec(MINUTE, IntervalAnchor.FROM_FINISH), T, T + timedelta(hours=2),
     single(T, None, 0, False)),
    ("interval-from-start", IntervalSpec(MINUTE, IntervalAnchor.FROM_START), T, T, single(T, None, 0, False)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "next_run_at", "now", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_compute_claim(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, expected: Claim
) -> None:
    claim = compute_claim(spec, next_run_at=next_run_at, now=now)
    assert claim == expected
    for moment in (claim.scheduled_for, claim.next_run_at):
        assert moment is None or moment.tzinfo is UTC


@pytest.mark.parametrize(
    ("spec", "next_run_at", "now", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_no_rules_means_everything_due_coalesced(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, expected: Claim
) -> None:
    # Today's behaviour, spelled as missed-run rules: no grace limit, and
    # every due fire time coalesced into one run for the latest.
    rules = MissedRunRules(grace=timedelta.max, coalesce_until=now)
    assert compute_claim(spec, next_run_at=next_run_at, now=now, rules=rules) == expected


@pytest.mark.parametrize(
    "spec",
    [CronSpec("* * * * * *"), CronSpec("* * * * * *", "Europe/Berlin"), IntervalSpec(SECOND)],
    ids=["cron-utc", "cron-berlin", "interval"],
)
def test_huge_gap_is_bounded(spec: TriggerSpec) -> None:
    # A 1-second trigger missed for a month (2.6 million fire times): the
    # count stops at max_scan (no timing assert: speed is for benchmarks/).
    now = utc(2026, 4, 1, 0, 0, 0, 500_000)
    claim = compute_claim(spec, next_run_at=utc(2026, 3, 1), now=now)
    assert claim == single(utc(2026, 4, 1), utc(2026, 4, 1, 0, 0, 1), 10_000, True, truncated=True)


@pytest.mark.parametrize(
    ("spec", "next_run_at", "now", "max_scan", "expected"),
    [
        # Counting stops at max_scan (truncated); the latest fire time is still exact.
        (
            EVERY_QUARTER,
            T,
            T + 10 * QUARTER,
            5,
            single(T + 10 * QUARTER, T + 11 * QUARTER, 5, True, truncated=True),
        ),
        (EVERY_QUARTER, T, T + 5 * QUARTER, 5, single(T + 5 * QUARTER, T + 6 * QUARTER, 5, True)),
        (
            EVERY_QUARTER,
            T,
            T + 5 * QUARTER,
            4,
            single(T + 5 * QUARTER, T + 6 * QUARTER, 4, True, truncated=True),
        ),
        (
            IntervalSpec(MINUTE),
            T,
            T + 10 * MINUTE,
            5,
            single(T + 10 * MINUTE, T + 11 * MINUTE, 5, True, truncated=True),
        ),
        # The reverse search for the latest time starts in the second copy of
        # Berlin's repeated hour (02:15 CET) and must find the first 02:30.
        (
            CronSpec("30 2 * * *", "Europe/Berlin"),
            utc(2026, 10, 23, 0, 30),
            utc(2026, 10, 25, 1, 15),
            1,
            single(utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30), 1, True, truncated=True),
        ),
    ],
)
def test_max_scan_bounds_the_count(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, max_scan: int, expected: Claim
) -> None:
    assert compute_claim(spec, next_run_at=next_run_at, now=now, max_scan=max_scan) == expected


def test_daily_job_down_for_months_across_both_transitions() -> None:
    spec = CronSpec("30 2 * * *", "Europe/Berlin")
    first, now = utc(2026, 3, 1, 1, 30), utc(2026, 11, 1)
    claim = compute_claim(spec, next_run_at=first, now=now)
    days = (date(2026, 10, 31) - date(2026, 3, 1)).days  # fire times after the stored one
    assert claim == single(utc(2026, 10, 31, 1, 30), utc(2026, 11, 1, 1, 30), days, True)
    assert compute_claim(spec, next_run_at=first, now=now, max_scan=10) == single(
        utc(2026, 10, 31, 1, 30), utc(2026, 11, 1, 1, 30), 10, True, truncated=True
    )


def test_due_window_reports_truncation() -> None:
    window = compute_due_window(EVERY_QUARTER, next_run_at=T, now=T + 10 * QUARTER, max_scan=3)
    assert (window.earliest, window.latest, window.later, window.truncated) == (
        T,
        T + 10 * QUARTER,
        3,
        True,
    )
    window = compute_due_window(EVERY_QUARTER, next_run_at=T, now=T + 3 * QUARTER, max_scan=3)
    assert (window.later, window.truncated) == (3, False)


def test_max_scan_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_scan"):
        compute_claim(EVERY_QUARTER, next_run_at=T, now=T, max_scan=0)


@pytest.mark.parametrize(
    ("spec", "field"),
    [(IntervalSpec(timedelta(0)), "interval_seconds"), (CronSpec("0 25 * * *"), "cron_expression")],
)
def test_invalid_stored_spec_raises_trigger_error(spec: TriggerSpec, field: str) -> None:
    with pytest.raises(TriggerError) as caught:
        compute_claim(spec, next_run_at=T, now=T + QUARTER)
    assert caught.value.field == field
