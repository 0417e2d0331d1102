"""jobs.core.missed: the missed-run rules (F-24, F-28, F-102): grace, window,
policy (skip, run_once latest/earliest, run_all bounded) and coalesce_until,
each with a table of cases. No database; `now` is passed."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from datetime import time as dt_time
from zoneinfo import ZoneInfo

import pytest

from jobs.core.constraints import Constraints
from jobs.core.missed import (
    CatchupPick,
    Claim,
    MissedRunPolicy,
    MissedRunRules,
    PlannedRun,
    compute_claim,
    compute_next_without_run,
    validate_missed_run_rules,
)
from jobs.core.triggers import (
    CronSpec,
    IntervalAnchor,
    IntervalSpec,
    OnceSpec,
    TriggerError,
    TriggerSpec,
    iter_fire_times,
)

pytestmark = pytest.mark.usefixtures("berlin_local_time")

BERLIN = ZoneInfo("Europe/Berlin")
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)

SKIP, RUN_ONCE, RUN_ALL = MissedRunPolicy.SKIP, MissedRunPolicy.RUN_ONCE, MissedRunPolicy.RUN_ALL
EARLIEST = CatchupPick.EARLIEST


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def S(at: datetime) -> PlannedRun:
    """An on-time run (trigger `schedule`)."""
    return PlannedRun(at, catchup=False)


def C(at: datetime, missed: int = 0) -> PlannedRun:
    """A catch-up run standing for `missed` other, coalesced fire times."""
    return PlannedRun(at, catchup=True, missed=missed)


def rules(**changes: object) -> MissedRunRules:
    return MissedRunRules(**changes)  # type: ignore[arg-type]


def check(table: Sequence[tuple[object, ...]]) -> pytest.MarkDecorator:
    """Parametrize over (id, spec, next_run_at, now, rules, expected claim)."""
    return pytest.mark.parametrize(
        ("spec", "next_run_at", "now", "rules", "expected"),
        [case[1:] for case in table],
        ids=[str(case[0]) for case in table],
    )


def assert_claim(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules, expected: Claim
) -> None:
    claim = compute_claim(spec, next_run_at=next_run_at, now=now, rules=rules)
    assert claim == expected
    moments: list[datetime | None] = [run.scheduled_for for run in claim.runs]
    moments += [claim.next_run_at, claim.skipped_first, claim.skipped_last]
    assert all(moment is None or moment.tzinfo is UTC for moment in moments)


HOURLY = CronSpec("0 * * * *")
T = utc(2026, 1, 5, 10)  # a fire time of HOURLY

# --- the defaults: run_once latest, 60 s grace, no window --------------------

DEFAULTS = [
    ("on-time", HOURLY, T, T, rules(), Claim((S(T),), T + HOUR)),
    ("late-within-grace", HOURLY, T, T + 59 * SECOND, rules(), Claim((S(T),), T + HOUR)),
    ("late-past-grace", HOURLY, T, T + 61 * SECOND, rules(), Claim((C(T),), T + HOUR)),
    # The beat was down over 11:00, and 12:00 is on time: run_once is ONE
    # run for both, 12:00's, standing for 11:00 (issue 27: not a catch-up
    # run and an on-time run side by side).
    ("outage-then-on-time", HOURLY, T + HOUR, T + 2 * HOUR + 5 * SECOND, rules(),
     Claim((C(T + 2 * HOUR, 1),), T + 3 * HOUR)),
    ("outage-others-skipped", HOURLY, T, T + 3 * HOUR + 30 * MINUTE, rules(),
     Claim((C(T + 3 * HOUR),), T + 4 * HOUR, 3, T, T + 2 * HOUR)),
    ("not-due", HOURLY, T, T - SECOND, rules(), Claim((), T)),
]  # fmt: skip


@check(DEFAULTS)
def test_default_rules(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules, expected: Claim
) -> None:
    assert_claim(spec, next_run_at, now, rules, expected)


def test_default_rules_values() -> None:
    assert MissedRunRules() == MissedRunRules(
        RUN_ONCE, CatchupPick.LATEST, max_runs=10, window=None, grace=60 * SECOND
    )
    assert MissedRunRules().coalesce_until is None


# --- grace: on time or missed, at the exact boundary --------------------------

GRACE = [
    ("exactly-grace-old-is-on-time", HOURLY, T, T + MINUTE, rules(), Claim((S(T),), T + HOUR)),
    ("one-second-more-is-missed", HOURLY, T, T + MINUTE + SECOND, rules(), Claim((C(T),), T + HOUR)),
    ("skip-on-time-runs", HOURLY, T, T + MINUTE, rules(policy=SKIP), Claim((S(T),), T + HOUR)),
    ("skip-missed-is-skipped", HOURLY, T, T + MINUTE + SECOND, rules(policy=SKIP),
     Claim((), T + HOUR, 1, T, T)),
    ("run-all-missed", HOURLY, T, T + MINUTE + SECOND, rules(policy=RUN_ALL), Claim((C(T),), T + HOUR)),
    ("zero-grace-at-the-instant", HOURLY, T, T, rules(grace=timedelta(0)), Claim((S(T),), T + HOUR)),
    ("zero-grace-one-second-late", HOURLY, T, T + SECOND, rules(grace=timedelta(0)),
     Claim((C(T),), T + HOUR)),
    # Only the latest due fire time can be on time, even with a grace longer
    # than the period: the earlier one was overtaken before any beat ran.
    ("grace-spans-two-fire-times", HOURLY, T, T + HOUR + MINUTE, rules(grace=2 * HOUR, policy=SKIP),
     Claim((S(T + HOUR),), T + 2 * HOUR, 1, T, T)),
    ("earlier-times-are-missed-however-recent", HOURLY, T, T + 3 * HOUR, rules(grace=DAY),
     Claim((C(T + 3 * HOUR, 1),), T + 4 * HOUR, 2, T, T + HOUR)),
    ("run-all-keeps-the-on-time-run-beside", HOURLY, T, T + 3 * HOUR, rules(grace=DAY, policy=RUN_ALL),
     Claim((C(T), C(T + HOUR), C(T + 2 * HOUR), S(T + 3 * HOUR)), T + 4 * HOUR)),
]  # fmt: skip


@check(GRACE)
def test_grace(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules, expected: Claim
) -> None:
    assert_claim(spec, next_run_at, now, rules, expected)


# --- window: a fire time missed longer ago than it is skipped -----------------

NOON = T + 2 * HOUR  # due: 10:00 (exactly 2 h old at NOON), 11:00, 12:00 (on time)
TWO_H = 2 * HOUR

WINDOW = [
    # run_once earliest: one run, the earliest kept; the on-time one is skipped too
    ("exactly-window-old-is-kept", HOURLY, T, NOON, rules(window=TWO_H, pick=EARLIEST),
     Claim((C(T),), NOON + HOUR, 2, T + HOUR, NOON)),
    ("one-second-more-is-skipped", HOURLY, T, NOON + SECOND, rules(window=TWO_H, pick=EARLIEST),
     Claim((C(T + HOUR),), NOON + HOUR, 2, T, NOON)),
    ("run-all-kept", HOURLY, T, NOON, rules(window=TWO_H, policy=RUN_ALL),
     Claim((C(T), C(T + HOUR), S(NOON)), NOON + HOUR)),
    ("run-all-one-second-more", HOURLY, T, NOON + SECOND, rules(window=TWO_H, policy=RUN_ALL),
     Claim((C(T + HOUR), S(NOON)), NOON + HOUR, 1, T, T)),
    ("zero-window-skips-every-missed", HOURLY, T, NOON + 30 * SECOND,
     rules(window=timedelta(0), policy=RUN_ALL), Claim((S(NOON),), NOON + HOUR, 2, T, T + HOUR)),
    # On-time fire times are not missed: a window shorter than the grace does not drop them.
    ("window-shorter-than-grace", HOURLY, T + TWO_H, NOON + 30 * SECOND, rules(window=10 * SECOND),
     Claim((S(NOON),), NOON + HOUR)),
    ("no-window", HOURLY, T - 100 * DAY, NOON + SECOND, rules(policy=SKIP),
     Claim((S(NOON),), NOON + HOUR, 2402, T - 100 * DAY, T + HOUR)),
]  # fmt: skip


@check(WINDOW)
def test_window(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules, expected: Claim
) -> None:
    assert_claim(spec, next_run_at, now, rules, expected)


# --- the policies across Berlin's spring-forward day --------------------------

BERLIN_0230 = CronSpec("30 2 * * *", "Europe/Berlin")
MAR28 = utc(2026, 3, 28, 1, 30)  # 02:30 CET
MAR29 = utc(2026, 3, 29, 1)  # 02:30 does not exist: 03:00 CEST
MAR30 = utc(2026, 3, 30, 0, 30)  # 02:30 CEST
MAR31 = utc(2026, 3, 31, 0, 30)
LATER = utc(2026, 3, 30, 6)

SPRING_FORWARD = [
    ("skip", BERLIN_0230, MAR28, LATER, rules(policy=SKIP), Claim((), MAR31, 3, MAR28, MAR30)),
    ("run-once-latest", BERLIN_0230, MAR28, LATER, rules(), Claim((C(MAR30),), MAR31, 2, MAR28, MAR29)),
    ("run-once-earliest", BERLIN_0230, MAR28, LATER, rules(pick=EARLIEST),
     Claim((C(MAR28),), MAR31, 2, MAR29, MAR30)),
    ("run-all", BERLIN_0230, MAR28, LATER, rules(policy=RUN_ALL),
     Claim((C(MAR28), C(MAR29), C(MAR30)), MAR31)),
    ("run-all-capped-keeps-the-latest", BERLIN_0230, MAR28, LATER, rules(policy=RUN_ALL, max_runs=2),
     Claim((C(MAR29), C(MAR30)), MAR31, 1, MAR28, MAR28)),
    # now - 30 h is 2026-03-29 00:00 UTC: the 28th is out of the window. The
    # skipped range runs from the 28th to the 30th around the run on the 29th.
    ("window-then-earliest", BERLIN_0230, MAR28, LATER, rules(window=30 * HOUR, pick=EARLIEST),
     Claim((C(MAR29),), MAR31, 2, MAR28, MAR30)),
    # at the gap's 03:00 CEST itself: on time
    ("gap-time-on-time", BERLIN_0230, MAR29, MAR29 + 30 * SECOND, rules(policy=SKIP),
     Claim((S(MAR29),), MAR30)),
]  # fmt: skip


@check(SPRING_FORWARD)
def test_policies_across_spring_forward(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules, expected: Claim
) -> None:
    assert_claim(spec, next_run_at, now, rules, expected)


def test_run_all_across_fall_back_runs_both_copies_of_the_hour() -> None:
    # 02:00 CEST is 00:00 UTC, 02:00 CET is 01:00 UTC: an hourly job runs in both.
    spec, first = CronSpec("0 * * * *", "Europe/Berlin"), utc(2026, 10, 25)
    claim = compute_claim(
        spec, next_run_at=first, now=first + 3 * HOUR + 30 * MINUTE, rules=rules(policy=RUN_ALL)
    )
    assert claim == Claim(tuple(C(first + k * HOUR) for k in range(4)), first + 4 * HOUR)


# --- month ends: the last day of each month, over 29 February 2028 -----------

LAST_DAY = CronSpec("0 0 L * *")
JAN31, FEB29, MAR31_28, APR30 = (
    utc(2028, 1, 31),
    utc(2028, 2, 29),
    utc(2028, 3, 31),
    utc(2028, 4, 30),
)
APR1 = utc(2028, 4, 1, 12)
BERLIN_LAST = CronSpec("0 0 L * *", "Europe/Berlin")

MONTH_ENDS = [
    ("skip", LAST_DAY, JAN31, APR1, rules(policy=SKIP), Claim((), APR30, 3, JAN31, MAR31_28)),
    ("run-once-latest", LAST_DAY, JAN31, APR1, rules(), Claim((C(MAR31_28),), APR30, 2, JAN31, FEB29)),
    ("run-once-earliest", LAST_DAY, JAN31, APR1, rules(pick=EARLIEST),
     Claim((C(JAN31),), APR30, 2, FEB29, MAR31_28)),
    ("run-all", LAST_DAY, JAN31, APR1, rules(policy=RUN_ALL),
     Claim((C(JAN31), C(FEB29), C(MAR31_28)), APR30)),
    ("run-all-capped", LAST_DAY, JAN31, APR1, rules(policy=RUN_ALL, max_runs=1),
     Claim((C(MAR31_28),), APR30, 2, JAN31, FEB29)),
    # now - 40 days is 21 February 12:00: 31 January is out of the window.
    ("window-earliest", LAST_DAY, JAN31, APR1, rules(window=40 * DAY, pick=EARLIEST),
     Claim((C(FEB29),), APR30, 2, JAN31, MAR31_28)),
    # Midnight Berlin time: 23:00 UTC the day before in winter, 22:00 in summer.
    ("berlin-run-all", BERLIN_LAST, utc(2028, 1, 30, 23), APR1, rules(policy=RUN_ALL),
     Claim((C(utc(2028, 1, 30, 23)), C(utc(2028, 2, 28, 23)), C(utc(2028, 3, 30, 22))),
           utc(2028, 4, 29, 22))),
]  # fmt: skip


@check(MONTH_ENDS)
def test_policies_over_month_ends(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules, expected: Claim
) -> None:
    assert_claim(spec, next_run_at, now, rules, expected)


# --- coalesce_until: a queue pause lifted (F-28) ------------------------------

RESUMED = T + 3 * HOUR + 10 * SECOND  # due while paused: 10:00 to 13:00
AFTER_RESUME = T + 3 * HOUR + 30 * SECOND

COALESCE = [
    ("everything-paused-is-one-run", HOURLY, T, AFTER_RESUME, rules(coalesce_until=RESUMED),
     Claim((C(T + 3 * HOUR, 3),), T + 4 * HOUR)),
    ("whatever-the-policy", HOURLY, T, AFTER_RESUME, rules(coalesce_until=RESUMED, policy=SKIP),
     Claim((C(T + 3 * HOUR, 3),), T + 4 * HOUR)),
    # A pause is not an outage: the window does not drop the paused times.
    ("whatever-the-window", HOURLY, T, AFTER_RESUME,
     rules(coalesce_until=RESUMED, window=timedelta(0), policy=RUN_ALL),
     Claim((C(T + 3 * HOUR, 3),), T + 4 * HOUR)),
    # Later fire times follow the rules: 13:00 is on time.
    ("then-on-time", HOURLY, T, AFTER_RESUME, rules(coalesce_until=T + 2 * HOUR + 30 * MINUTE),
     Claim((C(T + 2 * HOUR, 2), S(T + 3 * HOUR)), T + 4 * HOUR)),
    ("then-the-policy", HOURLY, T, AFTER_RESUME, rules(coalesce_until=T + 30 * MINUTE),
     Claim((C(T), C(T + 3 * HOUR, 1)), T + 4 * HOUR, 1, T + HOUR, T + HOUR)),
    ("before-next-run-at-changes-nothing", HOURLY, T, AFTER_RESUME, rules(coalesce_until=T - SECOND),
     Claim((C(T + 3 * HOUR, 1),), T + 4 * HOUR, 2, T, T + HOUR)),
    ("one-on-time-time-is-a-schedule-run", HOURLY, T, T + 30 * SECOND,
     rules(coalesce_until=T + 20 * SECOND), Claim((S(T),), T + HOUR)),
    ("one-missed-time-is-a-catchup", HOURLY, T, T + 30 * MINUTE,
     rules(coalesce_until=T + 20 * MINUTE, policy=SKIP), Claim((C(T),), T + HOUR)),
    ("until-in-the-future", HOURLY, T, T + HOUR + 30 * SECOND, rules(coalesce_until=T + DAY),
     Claim((C(T + HOUR, 1),), T + 2 * HOUR)),
    ("until-in-another-zone", HOURLY, T, AFTER_RESUME,
     rules(coalesce_until=RESUMED.astimezone(BERLIN)),
     Claim((C(T + 3 * HOUR, 3),), T + 4 * HOUR)),
]  # fmt: skip


@check(COALESCE)
def test_coalesce_until(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules, expected: Claim
) -> None:
    assert_claim(spec, next_run_at, now, rules, expected)


# --- one due time only: intervals anchored on a run, once triggers -----------

FROM_FINISH = IntervalSpec(MINUTE, IntervalAnchor.FROM_FINISH)
AT = utc(2026, 6, 1, 8)
OUTAGE = T + 2 * HOUR

SINGLE = [
    ("from-finish-on-time", FROM_FINISH, T, T + 30 * SECOND, rules(), Claim((S(T),), None)),
    ("from-finish-missed", FROM_FINISH, T, OUTAGE, rules(), Claim((C(T),), None)),
    # No run will set next_run_at: it moves to now + every.
    ("from-finish-skipped", FROM_FINISH, T, OUTAGE, rules(policy=SKIP),
     Claim((), OUTAGE + MINUTE, 1, T, T)),
    ("from-start-out-of-window", IntervalSpec(MINUTE, IntervalAnchor.FROM_START), T, OUTAGE,
     rules(policy=RUN_ALL, window=HOUR), Claim((), OUTAGE + MINUTE, 1, T, T)),
    ("once-on-time", OnceSpec(AT), AT, AT, rules(policy=SKIP), Claim((S(AT),), None)),
    ("once-missed-catchup", OnceSpec(AT), AT, AT + DAY, rules(), Claim((C(AT),), None)),
    ("once-missed-skipped", OnceSpec(AT), AT, AT + DAY, rules(policy=SKIP), Claim((), None, 1, AT, AT)),
    # A fixed-rate interval keeps its grid (anchored at next_run_at).
    ("interval-run-all", IntervalSpec(10 * MINUTE), T, T + 35 * MINUTE, rules(policy=RUN_ALL),
     Claim((C(T), C(T + 10 * MINUTE), C(T + 20 * MINUTE), C(T + 30 * MINUTE)), T + 40 * MINUTE)),
    ("interval-earliest-in-window", IntervalSpec(10 * MINUTE), T, T + 35 * MINUTE,
     rules(pick=EARLIEST, window=20 * MINUTE),
     Claim((C(T + 20 * MINUTE),), T + 40 * MINUTE, 3, T, T + 30 * MINUTE)),
    ("interval-start-at-grid", IntervalSpec(10 * MINUTE, start_at=T + 5 * MINUTE), T + 5 * MINUTE,
     T + 36 * MINUTE, rules(policy=SKIP), Claim((S(T + 35 * MINUTE),), T + 45 * MINUTE, 3,
                                                T + 5 * MINUTE, T + 25 * MINUTE)),
]  # fmt: skip


@check(SINGLE)
def test_anchored_once_and_interval_triggers(
    spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules, expected: Claim
) -> None:
    assert_claim(spec, next_run_at, now, rules, expected)


WITHOUT_RUN = [
    # A fire time with no run to start counts as a run that started and ended now.
    ("from-finish", FROM_FINISH, T + MINUTE),
    ("from-start", IntervalSpec(MINUTE, IntervalAnchor.FROM_START), T + MINUTE),
    # Its constraints still hold: at 10:00 its 09:00-10:00 window is over for the day.
    ("from-finish-in-a-window",
     IntervalSpec(MINUTE, IntervalAnchor.FROM_FINISH,
                  constraints=Constraints(window_start=dt_time(9), window_end=dt_time(10))),
     utc(2026, 1, 6, 9)),
    # The others never wait for a run: their claim has set next_run_at.
    ("fixed-rate", IntervalSpec(MINUTE), None),
    ("cron", CronSpec("0 * * * *", BERLIN), None),
    ("once", OnceSpec(AT), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "expected"), [case[1:] for case in WITHOUT_RUN], ids=[case[0] for case in WITHOUT_RUN]
)
def test_the_next_time_of_a_fire_time_without_a_run(
    spec: TriggerSpec, expected: datetime | None
) -> None:
    assert compute_next_without_run(spec, now=T) == expected


# --- a 1-second trigger missed for a month: bounded and fast ------------------

MONTH_START, MONTH_END = utc(2026, 3, 1), utc(2026, 4, 1)
LAST = MONTH_END - SECOND  # 2026-03-31 23:59:59
NO_GRACE = timedelta(0)

LONG_OUTAGE = [
    # id, rules, runs, skipped first, skipped last; 10_000 skipped, truncated
    ("skip", rules(policy=SKIP, grace=NO_GRACE), (S(MONTH_END),), MONTH_START, LAST),
    ("run-once-latest", rules(grace=NO_GRACE), (C(MONTH_END, 1),), MONTH_START, LAST - SECOND),
    ("run-once-earliest", rules(grace=NO_GRACE, pick=EARLIEST), (C(MONTH_START),),
     MONTH_START + SECOND, MONTH_END),
    ("run-once-window", rules(grace=NO_GRACE, window=HOUR, pick=EARLIEST),
     (C(MONTH_END - HOUR),), MONTH_START, MONTH_END),
    ("run-all-1000", rules(grace=NO_GRACE, policy=RUN_ALL, max_runs=1000),
     (*(C(MONTH_END - k * SECOND) for k in range(1000, 0, -1)), S(MONTH_END)),
     MONTH_START, MONTH_END - 1001 * SECOND),
    # 60 s grace: only the latest fire time is on time; the latest 10 missed ones run.
    ("run-all-default-grace", rules(policy=RUN_ALL),
     (*(C(MONTH_END - k * SECOND) for k in range(10, 0, -1)), S(MONTH_END)),
     MONTH_START, MONTH_END - 11 * SECOND),
]  # fmt: skip


@pytest.mark.parametrize(
    "spec",
    [CronSpec("* * * * * *"), CronSpec("* * * * * *", "Europe/Berlin"), IntervalSpec(SECOND)],
    ids=["cron-utc", "cron-berlin", "interval"],
)
@pytest.mark.parametrize(
    ("rules", "runs", "first", "last"),
    [case[1:] for case in LONG_OUTAGE],
    ids=[str(case[0]) for case in LONG_OUTAGE],
)
def test_month_long_outage_of_a_1_second_trigger(
    spec: TriggerSpec,
    rules: MissedRunRules,
    runs: tuple[PlannedRun, ...],
    first: datetime,
    last: datetime,
) -> None:
    # Bounded work (max_scan and reverse searches): benchmarks measure speed, tests don't.
    claim = compute_claim(spec, next_run_at=MONTH_START, now=MONTH_END, rules=rules)
    assert claim == Claim(runs, MONTH_END + SECOND, 10_000, first, last, truncated=True)


def test_month_long_outage_coalesced_is_todays_claim() -> None:
    spec = CronSpec("* * * * * *")
    coalesced = compute_claim(
        spec,
        next_run_at=MONTH_START,
        now=MONTH_END,
        rules=rules(coalesce_until=MONTH_END, grace=timedelta.max),
    )
    assert coalesced == compute_claim(spec, next_run_at=MONTH_START, now=MONTH_END)
    assert coalesced == Claim((C(MONTH_END, 10_000),), MONTH_END + SECOND, truncated=True)


# --- every due fire time is accounted for exactly once ------------------------


def oracle(spec: TriggerSpec, next_run_at: datetime, now: datetime, rules: MissedRunRules) -> Claim:
    """The rules applied to the full list of due fire times: a slow reference."""
    due = [next_run_at]
    if not isinstance(spec, IntervalSpec) or spec.anchor is IntervalAnchor.FIXED_RATE:
        due += itertools.takewhile(
            lambda fire: fire <= now, iter_fire_times(spec, after=next_run_at)
        )
    until, grace = rules.coalesce_until, rules.grace
    held = [fire for fire in due if until is not None and fire <= until]
    rest = [fire for fire in due if fire not in held]
    # only the latest due fire time can be on time
    on_time = [fire for fire in rest[-1:] if now - fire <= grace]
    missed = [fire for fire in rest if fire not in on_time]
    kept = [fire for fire in missed if rules.window is None or now - fire <= rules.window]
    chosen = {
        SKIP: [],
        RUN_ONCE: kept[-1:] if rules.pick is CatchupPick.LATEST else kept[:1],
        RUN_ALL: kept[-rules.max_runs :],
    }[rules.policy]
    runs: list[PlannedRun] = []
    if held:  # one run for the latest: a catch-up unless it is one on-time fire time
        runs.append(PlannedRun(held[-1], len(held) > 1 or now - held[-1] > grace, len(held) - 1))
    ran = on_time[-rules.max_runs :]
    if rules.policy is RUN_ONCE and chosen and ran:
        # run_once is ONE run for all that was due, the on-time one included
        if rules.pick is CatchupPick.LATEST:
            runs.append(PlannedRun(ran[0], True, 1))
            chosen, ran, missed = [], [], [fire for fire in missed if fire != kept[-1]]
        else:
            missed, ran = missed + ran, []
    runs += [C(fire) for fire in chosen] + [S(fire) for fire in ran]
    skipped = [fire for fire in missed if fire not in chosen] + on_time[: -rules.max_runs]
    skipped.sort()
    return Claim(
        tuple(runs),
        None,
        len(skipped),
        skipped[0] if skipped else None,
        skipped[-1] if skipped else None,
    )


SWEEP_SPECS = [
    ("hourly-berlin-fall-back", CronSpec("0 * * * *", "Europe/Berlin"), utc(2026, 10, 24, 20)),
    ("quarter-hourly", CronSpec("*/15 * * * *"), T),
    ("daily-berlin-spring", BERLIN_0230, utc(2026, 3, 26, 1, 30)),
    ("interval-10-min", IntervalSpec(10 * MINUTE), T + 3 * MINUTE),
    ("interval-grid-off-grid-next", IntervalSpec(HOUR, start_at=T), T + 20 * MINUTE),
    ("from-finish", FROM_FINISH, T),
]


def sweep_rules(first: datetime) -> Iterator[MissedRunRules]:
    """Every combination of the rules, coalescing up to two hours after `first` or not."""
    for policy, pick, max_runs, window, grace, until in itertools.product(
        MissedRunPolicy,
        CatchupPick,
        (1, 2, 10),
        (None, timedelta(0), 50 * MINUTE, 7 * HOUR),
        (timedelta(0), 60 * SECOND, 2 * HOUR),
        (None, first + 2 * HOUR),
    ):
        yield MissedRunRules(policy, pick, max_runs, window, grace, until)


@pytest.mark.parametrize(
    ("spec", "first"), [c[1:] for c in SWEEP_SPECS], ids=[c[0] for c in SWEEP_SPECS]
)
@pytest.mark.parametrize(
    "gap", [timedelta(0), 30 * MINUTE, 3 * HOUR + SECOND, 2 * DAY + 7 * MINUTE]
)
def test_claims_match_the_reference(spec: TriggerSpec, first: datetime, gap: timedelta) -> None:
    now = first + gap
    for each in sweep_rules(first):
        claim = compute_claim(spec, next_run_at=first, now=now, rules=each)
        expected = oracle(spec, first, now, each)
        assert (claim.runs, claim.skipped_times, claim.skipped_first, claim.skipped_last) == (
            expected.runs,
            expected.skipped_times,
            expected.skipped_first,
            expected.skipped_last,
        ), each
        assert not claim.truncated
        # Accounted for once: a run, coalesced into one, or skipped.
        due = sum(1 + run.missed for run in claim.runs) + claim.skipped_times
        assert due == sum(1 + run.missed for run in expected.runs) + expected.skipped_times


# --- the compatibility properties ---------------------------------------------


def test_claim_properties_sum_up_the_runs() -> None:
    claim = Claim((C(T, 2), C(T + 3 * HOUR), S(T + 4 * HOUR)), T + 5 * HOUR, 5, T - DAY, T + HOUR)
    assert (claim.scheduled_for, claim.missed, claim.catchup) == (T + 4 * HOUR, 7, True)
    assert (Claim((S(T),), None).catchup, Claim((), T).scheduled_for, Claim((), T).missed) == (
        False,
        None,
        0,
    )


# --- validation ---------------------------------------------------------------

INVALID = [
    (rules(max_runs=0), "catchup_max_runs"),
    (rules(max_runs=1001), "catchup_max_runs"),
    (rules(max_runs=True), "catchup_max_runs"),
    (rules(max_runs=2.5), "catchup_max_runs"),
    (rules(window=-SECOND), "catchup_window_s"),
    (rules(window=60), "catchup_window_s"),
    (rules(grace=-SECOND), "misfire_grace_s"),
    (rules(grace=None), "misfire_grace_s"),
    (rules(policy="run_twice"), "missed_run_policy"),
    (rules(pick="middle"), "catchup_pick"),
    (rules(coalesce_until=datetime(2026, 1, 5, 10)), "coalesce_until"),  # noqa: DTZ001 (naive on purpose)
]


@pytest.mark.parametrize(
    ("bad", "field"), INVALID, ids=[f"{c[1]}-{i}" for i, c in enumerate(INVALID)]
)
def test_invalid_rules_name_the_field(bad: MissedRunRules, field: str) -> None:
    with pytest.raises(TriggerError) as caught:
        validate_missed_run_rules(bad)
    assert caught.value.field == field
    with pytest.raises(TriggerError):  # compute_claim validates too, even when not due
        compute_claim(HOURLY, next_run_at=T, now=T - SECOND, rules=bad)


def test_valid_rules_are_normalized() -> None:
    berlin = datetime(2026, 1, 5, 11, tzinfo=BERLIN)
    valid = validate_missed_run_rules(
        rules(
            policy="run_all",
            pick="earliest",
            max_runs=1000,
            window=timedelta(0),
            coalesce_until=berlin,
        )
    )
    assert valid == MissedRunRules(RUN_ALL, EARLIEST, 1000, timedelta(0), 60 * SECOND, T)
    assert valid.policy is RUN_ALL and valid.pick is EARLIEST
    assert valid.coalesce_until is not None and valid.coalesce_until.tzinfo is UTC
    assert validate_missed_run_rules(rules(max_runs=1)).max_runs == 1


def test_a_constrained_interval_counts_only_the_allowed_grid_points() -> None:
    # Every 10 minutes between 09:00 and 10:00 UTC, missed for a day: the due
    # times are 09:00..09:50 on the 5th and 09:00..09:20 on the 6th, not the
    # 147 points of the bare grid.
    from jobs.core.constraints import Constraints  # the F-15 constraints (jobs.core.triggers)

    window = Constraints(window_start=dt_time(9), window_end=dt_time(10))
    spec = IntervalSpec(10 * MINUTE, constraints=window)
    first, now = utc(2026, 1, 5, 9), utc(2026, 1, 6, 9, 25)
    fifth = [first + k * 10 * MINUTE for k in range(6)]
    sixth = [utc(2026, 1, 6, 9) + k * 10 * MINUTE for k in range(3)]
    claim = compute_claim(spec, next_run_at=first, now=now, rules=rules(policy=RUN_ALL, max_runs=3))
    assert claim == Claim(tuple(map(C, sixth)), utc(2026, 1, 6, 9, 30), 6, fifth[0], fifth[-1])
    assert compute_claim(spec, next_run_at=first, now=now) == Claim(
        (C(sixth[-1], 8),), claim.next_run_at
    )
