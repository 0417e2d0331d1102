"""jobs.core.forecast: the load forecast's counts per local hour (F-95), DST in
the display zone and in the triggers' zones, and a comparison with plain
enumeration of the fire times. No database."""

from __future__ import annotations

import itertools
import time as clock
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobs.core.constraints import Constraints
from jobs.core.forecast import Busy, LoadTrigger, compute_forecast
from jobs.core.triggers import (
    CalendarRule,
    CalendarSpec,
    CronSpec,
    IntervalAnchor,
    IntervalSpec,
    OnceSpec,
    TriggerError,
    TriggerSpec,
    compute_next_fire,
    iter_fire_times,
)

pytestmark = pytest.mark.usefixtures("berlin_local_time")

US = timedelta(microseconds=1)
WEEKDAYS = frozenset(range(5))


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def first_fire(spec: TriggerSpec, now: datetime) -> datetime | None:
    return compute_next_fire(spec, after=now - US, now=now)


def load(spec: TriggerSpec, now: datetime, trigger_id: int = 1, **kw: object) -> LoadTrigger:
    next_at = kw.pop("next_at", first_fire(spec, now))
    return LoadTrigger(trigger_id, spec, next_at, **kw)  # type: ignore[arg-type]


def forecast(spec: TriggerSpec, *, zone: str, now: datetime, days: int = 7, **kw: object):
    return compute_forecast([load(spec, now, **kw)], zone=zone, now=now, days=days)


def enumerated(trigger: LoadTrigger, *, zone: str, now: datetime, days: int) -> list[list[int]]:
    """The reference: walk the fire times one by one (next_at, then
    iter_fire_times after it) and bin them by local date and hour."""
    result = compute_forecast([], zone=zone, now=now, days=days)
    counts = [[0] * 24 for _ in range(days)]
    if trigger.next_at is None:
        return counts
    display = ZoneInfo(zone)
    for fire in itertools.chain(
        [trigger.next_at], iter_fire_times(trigger.spec, after=trigger.next_at)
    ):
        if fire >= result.ends_at:
            break
        if fire >= now:
            local = fire.astimezone(display)
            counts[(local.date() - result.days[0]).days][local.hour] += 1
    return counts


def row(result, day: date) -> list[int]:
    return result.counts[result.days.index(day)]


# --- counting ------------------------------------------------------------------------

NOW = utc(2026, 12, 1, 0, 0)  # a Tuesday; no DST change in the week after


@pytest.mark.parametrize(
    ("spec", "per_hour"),
    [
        (CronSpec("* * * * * *", "UTC"), 3600),
        (CronSpec("*/10 * * * * *", "UTC"), 360),
        (CronSpec("*/15 * * * *", "UTC"), 4),
        (CronSpec("0,30 15-45/10 * * * *", "UTC"), 8),
        (IntervalSpec(timedelta(seconds=1)), 3600),
        (IntervalSpec(timedelta(seconds=7), start_at=utc(2026, 11, 30, 23, 59, 59)), None),
        (IntervalSpec(timedelta(minutes=20), IntervalAnchor.FROM_FINISH), 3),
    ],
)
def test_dense_triggers_are_counted_without_listing_their_fire_times(spec, per_hour) -> None:
    trigger = load(spec, NOW)
    started = clock.perf_counter()
    result = compute_forecast([trigger], zone="UTC", now=NOW)
    assert clock.perf_counter() - started < 0.5  # 604,800 fire times, not walked one by one
    if per_hour is None:  # every 7 s from 23:59:59: 00:00:06, 00:00:13, ...
        assert result.total == (7 * 86400 - 6 + 6) // 7
    else:
        assert result.counts == [[per_hour] * 24] * 7
        assert result.total == per_hour * 24 * 7


def test_the_current_hour_counts_from_now_on_at_the_second() -> None:
    spec = CronSpec("*/30 * * * * *", "UTC")
    at = compute_forecast(
        [load(spec, utc(2026, 12, 1, 9, 0, 30))], zone="UTC", now=utc(2026, 12, 1, 9, 0, 30)
    )
    after = compute_forecast(
        [load(spec, utc(2026, 12, 1, 9, 0, 31))], zone="UTC", now=utc(2026, 12, 1, 9, 0, 31)
    )
    assert at.counts[0][9] == 119  # 09:00:30 (now itself) .. 09:59:30
    assert after.counts[0][9] == 118
    assert at.counts[0][:9] == [0] * 9  # past hours of today
    assert at.counts[0][10] == 120


@pytest.mark.parametrize(
    ("zone", "hour"),
    [("UTC", 3), ("Europe/Berlin", 4), ("America/New_York", 22), ("Asia/Kolkata", 8)],
)
def test_cells_are_the_hours_of_the_display_zone(zone: str, hour: int) -> None:
    result = forecast(CronSpec("15 3 * * *", "UTC"), zone=zone, now=NOW)
    hours = {h for day in result.counts for h, n in enumerate(day) if n}
    assert hours == {hour}
    assert result.total == 7


def test_a_half_hour_offset_splits_a_dense_hour_between_two_cells() -> None:
    result = forecast(CronSpec("* 5 * * *", "UTC"), zone="Asia/Kolkata", now=NOW)  # UTC+05:30
    assert result.counts[1][10] == 30 and result.counts[1][11] == 30


# --- DST in the display zone ---------------------------------------------------------------

DISPLAY_DST = [
    # zone, a day, the hour that is missing (23-hour day) or doubled (25-hour day), seconds
    ("Europe/Berlin", date(2026, 3, 29), 2, 0),
    ("Europe/Berlin", date(2026, 10, 25), 2, 7200),
    ("America/New_York", date(2026, 3, 8), 2, 0),
    ("America/New_York", date(2026, 11, 1), 1, 7200),
]


@pytest.mark.parametrize(("zone", "day", "hour", "seconds"), DISPLAY_DST)
def test_a_23_or_25_hour_day_has_an_empty_or_a_double_cell(zone, day, hour, seconds) -> None:
    now = datetime.combine(day - timedelta(days=1), time(12), tzinfo=ZoneInfo(zone))
    result = forecast(CronSpec("0 * * * *", "UTC"), zone=zone, now=now)
    index = result.days.index(day)
    assert result.hour_seconds[index][hour] == seconds
    assert sum(result.hour_seconds[index]) == 86400 + seconds - 3600
    assert result.counts[index][hour] == seconds // 3600  # an hourly UTC job: 0 or 2 runs
    assert sum(result.counts[index]) == (86400 + seconds - 3600) // 3600
    other = result.days.index(day - timedelta(days=1))
    assert result.hour_seconds[other] == [3600] * 24


def test_the_range_ends_at_local_midnight_after_the_last_day() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    result = forecast(CronSpec("0 * * * *", "UTC"), zone="Europe/Berlin", now=utc(2026, 3, 28, 9))
    assert result.days == [date(2026, 3, 28) + timedelta(days=d) for d in range(7)]
    assert result.starts_at == datetime(2026, 3, 28, tzinfo=berlin).astimezone(UTC)
    assert result.ends_at == datetime(2026, 4, 4, tzinfo=berlin).astimezone(UTC)
    assert result.total == (result.ends_at - utc(2026, 3, 28, 9)) // timedelta(hours=1)


# --- DST in the trigger's zone (F-11) -----------------------------------------------------

TRIGGER_DST = [
    # case, spec, the day, {local hour in the trigger's own zone: runs that day}
    ("fixed time in the gap fires at 03:00", CronSpec("30 2 * * *", "Europe/Berlin"),
     date(2026, 3, 29), {3: 1}),
    ("fixed times in the gap fire once", CronSpec("0,10,20 2 * * *", "Europe/Berlin"),
     date(2026, 3, 29), {3: 1}),
    ("a minute step is a wildcard", CronSpec("*/10 2 * * *", "Europe/Berlin"),
     date(2026, 3, 29), {}),
    ("a gap time merges with 03:00", CronSpec("0 2,3 * * *", "Europe/Berlin"),
     date(2026, 3, 29), {3: 1}),
    ("seconds in the gap fire once", CronSpec("* 30 2 * * *", "Europe/Berlin"),
     date(2026, 3, 29), {3: 1}),
    ("wildcard skips the gap", CronSpec("30 * * * *", "Europe/Berlin"),
     date(2026, 3, 29), {h: 1 for h in range(24) if h != 2}),
    ("fixed time repeated fires once", CronSpec("30 2 * * *", "Europe/Berlin"),
     date(2026, 10, 25), {2: 1}),
    ("wildcard fires in both copies", CronSpec("30 * * * *", "Europe/Berlin"),
     date(2026, 10, 25), {**{h: 1 for h in range(24)}, 2: 2}),
    ("dense wildcard, both copies", CronSpec("*/10 * * * * *", "Europe/Berlin"),
     date(2026, 10, 25), {**{h: 360 for h in range(24)}, 2: 720}),
    ("New York gap", CronSpec("30 2 * * *", "America/New_York"), date(2026, 3, 8), {3: 1}),
    ("New York repeated 01:30", CronSpec("30 1 * * *", "America/New_York"),
     date(2026, 11, 1), {1: 1}),
    ("New York wildcard repeated", CronSpec("0,30 * * * *", "America/New_York"),
     date(2026, 11, 1), {**{h: 2 for h in range(24)}, 1: 4}),
    ("calendar preset in the gap", CalendarSpec(CalendarRule.DAILY, time(2, 15), "Europe/Berlin"),
     date(2026, 3, 29), {3: 1}),
    ("interval follows real time", IntervalSpec(timedelta(minutes=30), timezone="Europe/Berlin",
     start_at=utc(2026, 1, 1)), date(2026, 10, 25), {**{h: 2 for h in range(24)}, 2: 4}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "day", "expected"), [c[1:] for c in TRIGGER_DST], ids=[c[0] for c in TRIGGER_DST]
)
def test_dst_days_in_the_triggers_own_zone(spec, day, expected) -> None:
    zone = spec.timezone
    now = datetime.combine(day - timedelta(days=1), time(12), tzinfo=ZoneInfo(zone))
    result = forecast(spec, zone=zone, now=now)
    counts = row(result, day)
    assert {h: n for h, n in enumerate(counts) if n} == expected
    assert counts == enumerated(load(spec, now), zone=zone, now=now, days=7)[result.days.index(day)]


def test_a_gap_time_is_judged_by_the_window_at_the_instant_it_fires() -> None:
    # 02:30 in the gap fires at 03:00, outside a window that ends at 03:00.
    # (Six days from Sunday 29 March on: Saturday's 02:30 is past.)
    window = Constraints(window_start=time(2), window_end=time(3))
    now = utc(2026, 3, 28, 12)
    assert forecast(CronSpec("30 2 * * *", "Europe/Berlin", window), zone="UTC", now=now).total == 5
    later = Constraints(window_start=time(2), window_end=time(3, 1))
    assert forecast(CronSpec("30 2 * * *", "Europe/Berlin", later), zone="UTC", now=now).total == 6


# --- constraints ---------------------------------------------------------------------------


def test_weekdays_window_and_excluded_days() -> None:
    rules = Constraints(WEEKDAYS, time(9), time(12, 30), frozenset({date(2026, 12, 3)}))
    result = forecast(
        CronSpec("*/15 * * * *", "Europe/Berlin", rules), zone="Europe/Berlin", now=NOW
    )
    # Tue 1, Wed 2, (Thu 3 excluded), Fri 4, (weekend), Mon 7: 09:00..12:15 = 14 runs a day
    assert [sum(day) for day in result.counts] == [14, 14, 0, 14, 0, 0, 14]
    assert result.counts[0][9:13] == [4, 4, 4, 2]


def test_a_window_across_midnight_belongs_to_each_fire_times_own_date() -> None:
    rules = Constraints(frozenset({4}), time(22), time(2))  # Friday nights only
    result = forecast(IntervalSpec(timedelta(hours=1), start_at=utc(2026, 1, 1), timezone="UTC",
                                   constraints=rules), zone="UTC", now=NOW)  # fmt: skip
    friday = result.days.index(date(2026, 12, 4))
    assert result.counts[friday][22:] == [1, 1] and result.counts[friday][:2] == [1, 1]
    assert result.total == 4  # Saturday 00:00 and 01:00 are Saturday's, not allowed


# --- against plain enumeration ----------------------------------------------------------------

SPARSE = [
    CronSpec("0 2 * * *", "Europe/Berlin"),
    CronSpec("30 2 * * *", "America/New_York"),
    CronSpec("*/15 * * * *", "Europe/Berlin"),
    CronSpec("0 */2 * * *", "America/New_York"),
    CronSpec("*/7 2 * * *", "Europe/Berlin"),
    CronSpec("0 2,3 * * *", "Europe/Berlin"),
    CronSpec("15 30 2 * * *", "Europe/Berlin"),
    CronSpec("0 9 * * MON-FRI", "America/New_York"),
    CronSpec("0 0 L * *", "Asia/Kolkata"),
    CronSpec("0 12 * * 5#1", "UTC"),
    CronSpec("0 0 1 * 1", "UTC"),  # day of month or Monday
    CronSpec("*/5 * * * *", "Asia/Kathmandu"),
    CronSpec("*/5 8-17 * * *", "Europe/Berlin", Constraints(WEEKDAYS, time(9), time(12, 30))),
    CronSpec("*/5 * * * *", "Europe/Berlin", Constraints(window_start=time(22), window_end=time(2, 30))),
    CronSpec("*/30 * * * *", "America/New_York",
             Constraints(frozenset({6}), time(1), time(4), frozenset({date(2026, 11, 2)}))),
    CalendarSpec(CalendarRule.DAILY, time(2, 30), "Europe/Berlin"),
    CalendarSpec(CalendarRule.MONTH_END, time(23, 0), "America/New_York"),
    IntervalSpec(timedelta(seconds=5 * 3600 + 7), start_at=utc(2026, 1, 1)),
    IntervalSpec(timedelta(minutes=13), timezone="Europe/Berlin",
                 constraints=Constraints(WEEKDAYS, time(9), time(17))),
    IntervalSpec(timedelta(minutes=13), start_at=utc(2026, 1, 1, 0, 0, 7), timezone="Europe/Berlin",
                 constraints=Constraints(WEEKDAYS, time(9), time(17))),
    IntervalSpec(timedelta(minutes=47), IntervalAnchor.FROM_FINISH, timezone="America/New_York",
                 constraints=Constraints(WEEKDAYS, time(9), time(17))),
    IntervalSpec(timedelta(minutes=47), IntervalAnchor.FROM_START, timezone="Europe/Berlin",
                 constraints=Constraints(frozenset({1, 6}), time(22), time(3))),
    IntervalSpec(timedelta(minutes=47)),
    OnceSpec(utc(2026, 3, 29, 1, 30)),
    OnceSpec(utc(2026, 11, 1, 5, 30)),
]  # fmt: skip
# Weeks with a DST change in Europe/Berlin or America/New_York, and one without.
NOWS = [utc(2026, 3, 5, 4), utc(2026, 3, 27, 10, 17, 3, 500), utc(2026, 10, 23, 22, 59, 59),
        utc(2026, 10, 29, 12, 30), utc(2026, 12, 1, 14, 38)]  # fmt: skip


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Asia/Kolkata", "UTC"])
@pytest.mark.parametrize("now", NOWS, ids=[n.strftime("%m-%d") for n in NOWS])
def test_counts_equal_plain_enumeration_for_sparse_triggers(zone: str, now: datetime) -> None:
    for index, spec in enumerate(SPARSE):
        next_at = first_fire(spec, now)
        if isinstance(spec, IntervalSpec) and spec.start_at is None:  # a phase of its own
            next_at = first_fire(spec, now + timedelta(seconds=100 + index))
        trigger = LoadTrigger(index, spec, next_at)
        result = compute_forecast([trigger], zone=zone, now=now)
        assert result.counts == enumerated(trigger, zone=zone, now=now, days=7), spec


def test_a_dense_cron_on_a_dst_day_equals_enumeration() -> None:
    now = utc(2026, 10, 24, 22)  # midnight in Berlin, the 25-hour day
    for spec in (
        CronSpec("*/10 * * * * *", "Europe/Berlin"),
        CronSpec("* 30 2 * * *", "Europe/Berlin"),
    ):
        trigger = load(spec, now)
        result = compute_forecast([trigger], zone="Europe/Berlin", now=now, days=1)
        assert result.counts == enumerated(trigger, zone="Europe/Berlin", now=now, days=1)


# --- many triggers, the busiest, approximations and errors -------------------------------------


def test_the_busiest_triggers_per_cell_most_first() -> None:
    triggers = [
        LoadTrigger(1, CronSpec("0 3 * * *", "UTC"), NOW, "nightly"),
        LoadTrigger(2, CronSpec("*/5 3 * * *", "UTC"), NOW, "five"),
        LoadTrigger(3, CronSpec("*/30 * * * *", "UTC"), NOW, "half"),
        LoadTrigger(4, CronSpec("*/30 * * * *", "UTC"), NOW, "half again"),
    ]
    result = compute_forecast(triggers, zone="UTC", now=NOW, top=3)
    assert result.counts[0][3] == 1 + 12 + 2 + 2
    assert result.busiest[0][3] == [
        Busy(12, 2, "five"),
        Busy(2, 3, "half"),
        Busy(2, 4, "half again"),
    ]
    assert result.busiest[0][4] == [Busy(2, 3, "half"), Busy(2, 4, "half again")]
    assert result.triggers == 4


def test_intervals_from_a_runs_start_or_finish_are_approximate() -> None:
    waiting = LoadTrigger(7, IntervalSpec(timedelta(hours=1), IntervalAnchor.FROM_FINISH), None)
    result = compute_forecast([waiting], zone="UTC", now=utc(2026, 12, 1, 0, 30))
    assert result.approximate == [7]
    assert result.counts[0][:3] == [0, 1, 1]  # assumed to end now: 01:30, 02:30, ...


def test_triggers_that_never_fire_again_count_nothing() -> None:
    triggers = [
        LoadTrigger(1, OnceSpec(utc(2026, 12, 2, 8)), None),  # fired already
        LoadTrigger(2, CronSpec("0 * * * *", "UTC"), None),
        LoadTrigger(3, IntervalSpec(timedelta(hours=1)), None),
        LoadTrigger(4, OnceSpec(utc(2026, 12, 2, 8)), utc(2026, 12, 2, 8)),
        LoadTrigger(5, OnceSpec(utc(2026, 12, 9, 8)), utc(2026, 12, 9, 8)),  # after the range
    ]
    result = compute_forecast(triggers, zone="UTC", now=NOW)
    assert result.total == 1 and result.counts[1][8] == 1


def test_a_trigger_the_core_refuses_is_listed_and_the_rest_counted() -> None:
    triggers = [
        LoadTrigger(1, CronSpec("61 * * * *", "UTC"), NOW),
        LoadTrigger(2, CronSpec("0 * * * *", "Mars/Olympus"), NOW),
        LoadTrigger(3, CronSpec("0 * * * *", "UTC"), NOW),
    ]
    result = compute_forecast(triggers, zone="UTC", now=NOW)
    assert [trigger_id for trigger_id, _ in result.invalid] == [1, 2]
    assert "cron_expression" in result.invalid[0][1] and "timezone" in result.invalid[1][1]
    assert result.total == 7 * 24 and result.triggers == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"zone": "Nowhere/City"}, "timezone"),
        ({"days": 0}, "days"),
        ({"days": 15}, "days"),
    ],  # fmt: skip
)
def test_bad_arguments_name_the_field(kwargs, field) -> None:
    with pytest.raises(TriggerError) as error:
        compute_forecast([], **{"zone": "UTC", "now": NOW, **kwargs})
    assert error.value.field == field


def test_the_zone_is_matched_case_insensitively_and_reported_canonically() -> None:
    assert compute_forecast([], zone="america/new_york", now=NOW).zone == "America/New_York"


def test_ten_thousand_triggers_with_dense_ones_stay_fast() -> None:
    specs = [
        CronSpec("* * * * * *", "Europe/Berlin"),
        IntervalSpec(timedelta(seconds=1)),
        CronSpec("{} {} * * *", "America/New_York"),
        CronSpec("*/{} * * * *", "Europe/Berlin", Constraints(WEEKDAYS, time(9), time(17))),
        IntervalSpec(timedelta(seconds=1), timezone="Europe/Berlin",
                     constraints=Constraints(WEEKDAYS, time(8), time(18))),
    ]  # fmt: skip

    def triggers():
        for i in range(10_000):
            spec = specs[i % len(specs)]
            if isinstance(spec, CronSpec) and "{" in spec.expression:
                spec = CronSpec(
                    spec.expression.format(i % 59 + 1, i % 24), spec.timezone, spec.constraints
                )
            yield LoadTrigger(i, spec, utc(2026, 10, 21, 12), f"job {i}")

    started = clock.perf_counter()
    result = compute_forecast(triggers(), zone="America/New_York", now=utc(2026, 10, 21, 12))
    elapsed = clock.perf_counter() - started
    assert result.triggers == 10_000
    assert elapsed < 10, elapsed  # about 0.5 s here; the bound leaves room for a busy machine
