"""Calendar presets (F-14), weekdays and windows (F-15), excluded days (F-105)
and jitter (F-18) in the pure core. No database.

Calendar for 2026: 01-05 is a Monday, 01-09 a Friday, 01-10/11 a weekend.
Europe/Berlin: 03-29 02:00 CET -> 03:00 CEST at 01:00 UTC; 10-25 03:00 CEST
-> 02:00 CET at 01:00 UTC. America/New_York: 03-08 02:00 EST -> 03:00 EDT at
07:00 UTC; 11-01 02:00 EDT -> 01:00 EST at 06:00 UTC.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from jobs.core.constraints import MAX_GAP, allows, weekday_words
from jobs.core.presets import calendar_cron
from jobs.core.triggers import (
    CalendarRule,
    CalendarSpec,
    Constraints,
    CronSpec,
    IntervalAnchor,
    IntervalSpec,
    TriggerError,
    compute_fire_times,
    compute_first_fire,
    compute_jitter,
    compute_latest_fire,
    compute_next_fire,
    describe,
    iter_fire_times,
    validate_jitter,
    validate_spec,
)

pytestmark = pytest.mark.usefixtures("berlin_local_time")

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
SECOND = timedelta(seconds=1)
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
WEEKDAYS = frozenset(range(5))  # Monday through Friday
OFFICE = Constraints(WEEKDAYS, time(8), time(17))  # Mon-Fri 08:00-17:00
NIGHT = Constraints(WEEKDAYS, time(22), time(6))  # crosses midnight


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def berlin(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    """A Berlin wall time (not in a DST transition) as a UTC instant."""
    return datetime(year, month, day, hour, minute, second, tzinfo=BERLIN).astimezone(UTC)


def series(spec: Any, after: datetime, count: int) -> list[datetime]:
    return [t.astimezone(UTC) for t in compute_fire_times(spec, after=after, count=count)]


def next_fire(spec: Any, after: datetime) -> datetime | None:
    return compute_next_fire(spec, after=after, now=after)


def error_of(call: Any) -> TriggerError:
    with pytest.raises(TriggerError) as caught:
        call()
    return caught.value


# --- calendar presets (F-14) ---------------------------------------------------------


def cal(rule: str, at: time, zone: str = "UTC", **fields: Any) -> CalendarSpec:
    return CalendarSpec(CalendarRule(rule), at, zone, **fields)


@pytest.mark.parametrize(
    ("spec", "expression"),
    [
        (cal("daily", time(5, 31)), "31 5 * * *"),
        (cal("daily", time(5, 31, 10)), "10 31 5 * * *"),
        (cal("day_of_month", time(6), day=15), "0 6 15 * *"),
        (cal("date", time(18), day=24, month=12), "0 18 24 12 *"),
        (cal("month_start", time(0)), "0 0 1 * *"),
        (cal("month_end", time(23, 59, 59)), "59 59 23 L * *"),
        (cal("quarter_start", time(6)), "0 6 1 1,4,7,10 *"),
        (cal("quarter_end", time(23)), "0 23 L 3,6,9,12 *"),
        (cal("half_year_start", time(6)), "0 6 1 1,7 *"),
        (cal("half_year_end", time(6)), "0 6 L 6,12 *"),
        (cal("year_start", time(6)), "0 6 1 1 *"),
        (cal("year_end", time(6)), "0 6 31 12 *"),
    ],
)
def test_calendar_compiles_to_cron(spec: CalendarSpec, expression: str) -> None:
    assert calendar_cron(spec) == expression


CALENDAR_CASES = [
    # daily, exact boundaries: strictly after `after`
    ("daily-second-before", cal("daily", time(5, 31), "Europe/Berlin"), berlin(2026, 1, 1, 5, 30, 59),
     [berlin(2026, 1, 1, 5, 31), berlin(2026, 1, 2, 5, 31)]),
    ("daily-at-instant", cal("daily", time(5, 31), "Europe/Berlin"), berlin(2026, 1, 1, 5, 31),
     [berlin(2026, 1, 2, 5, 31)]),
    ("daily-seconds", cal("daily", time(5, 31, 10)), utc(2026, 1, 1, 5, 31, 10),
     [utc(2026, 1, 2, 5, 31, 10)]),
    # a day of the month: the 31st skips short months, the 30th skips February
    ("dom-31", cal("day_of_month", time(6), day=31), utc(2026, 1, 31, 6),
     [utc(2026, 3, 31, 6), utc(2026, 5, 31, 6), utc(2026, 7, 31, 6), utc(2026, 8, 31, 6)]),
    ("dom-30", cal("day_of_month", time(6), day=30), utc(2026, 1, 30, 6),
     [utc(2026, 3, 30, 6), utc(2026, 4, 30, 6)]),
    ("dom-29-non-leap", cal("day_of_month", time(6), day=29), utc(2026, 1, 29, 6),
     [utc(2026, 3, 29, 6)]),
    ("dom-29-leap", cal("day_of_month", time(6), day=29), utc(2028, 1, 29, 6),
     [utc(2028, 2, 29, 6), utc(2028, 3, 29, 6)]),
    ("dom-15", cal("day_of_month", time(6), day=15), utc(2026, 1, 15, 5, 59, 59),
     [utc(2026, 1, 15, 6), utc(2026, 2, 15, 6)]),
    # a date once a year; 29 February in leap years only
    ("date", cal("date", time(18), "Europe/Berlin", day=24, month=12), utc(2026, 1, 1),
     [berlin(2026, 12, 24, 18), berlin(2027, 12, 24, 18)]),
    ("date-29-feb", cal("date", time(8), day=29, month=2), utc(2026, 1, 1),
     [utc(2028, 2, 29, 8), utc(2032, 2, 29, 8)]),
    # first and last days
    ("month-start", cal("month_start", time(0)), utc(2026, 1, 1),
     [utc(2026, 2, 1), utc(2026, 3, 1)]),
    ("month-end", cal("month_end", time(23)), utc(2026, 1, 1),
     [utc(2026, 1, 31, 23), utc(2026, 2, 28, 23), utc(2026, 3, 31, 23), utc(2026, 4, 30, 23)]),
    ("month-end-leap", cal("month_end", time(23)), utc(2028, 2, 1),
     [utc(2028, 2, 29, 23), utc(2028, 3, 31, 23)]),
    ("month-end-berlin", cal("month_end", time(23), "Europe/Berlin"), utc(2026, 1, 1),
     [utc(2026, 1, 31, 22), utc(2026, 2, 28, 22), utc(2026, 3, 31, 21)]),
    ("quarter-start", cal("quarter_start", time(6)), utc(2026, 1, 1, 6),
     [utc(2026, 4, 1, 6), utc(2026, 7, 1, 6), utc(2026, 10, 1, 6), utc(2027, 1, 1, 6)]),
    ("quarter-end", cal("quarter_end", time(23)), utc(2026, 1, 1),
     [utc(2026, 3, 31, 23), utc(2026, 6, 30, 23), utc(2026, 9, 30, 23), utc(2026, 12, 31, 23)]),
    ("half-year-start", cal("half_year_start", time(6)), utc(2026, 1, 1, 6),
     [utc(2026, 7, 1, 6), utc(2027, 1, 1, 6)]),
    ("half-year-end", cal("half_year_end", time(23)), utc(2026, 1, 1),
     [utc(2026, 6, 30, 23), utc(2026, 12, 31, 23)]),
    ("year-start", cal("year_start", time(6)), utc(2026, 1, 1, 6),
     [utc(2027, 1, 1, 6), utc(2028, 1, 1, 6)]),
    ("year-end", cal("year_end", time(23, 59, 59)), utc(2026, 12, 31, 23, 59, 58),
     [utc(2026, 12, 31, 23, 59, 59), utc(2027, 12, 31, 23, 59, 59)]),
    # DST (F-11): 02:30 in the spring gap runs at 03:00; in fall-back once, the first time
    ("berlin-spring", cal("daily", time(2, 30), "Europe/Berlin"), utc(2026, 3, 28, 1, 30),
     [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]),
    ("berlin-spring-seconds", cal("daily", time(2, 30, 30), "Europe/Berlin"),
     utc(2026, 3, 28, 1, 30, 30), [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30, 30)]),
    ("berlin-fall", cal("daily", time(2, 30), "Europe/Berlin"), utc(2026, 10, 24, 0, 30),
     [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]),
    ("new-york-spring", cal("daily", time(2, 30), "America/New_York"), utc(2026, 3, 7, 7, 30),
     [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]),
    ("new-york-fall", cal("daily", time(1, 30), "America/New_York"), utc(2026, 10, 31, 5, 30),
     [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [case[1:] for case in CALENDAR_CASES],
    ids=[case[0] for case in CALENDAR_CASES],
)
def test_calendar_fire_times(spec: CalendarSpec, after: datetime, expected: list[datetime]) -> None:
    assert series(spec, after, len(expected)) == expected
    assert next_fire(spec, after) == expected[0]


def test_calendar_latest_fire_and_display_zone() -> None:
    spec = cal("quarter_end", time(23), "Europe/Berlin")
    assert compute_latest_fire(spec, at_or_before=utc(2026, 6, 30, 21)) == utc(2026, 6, 30, 21)
    assert compute_latest_fire(spec, at_or_before=utc(2026, 6, 30, 20, 59, 59)) == utc(
        2026, 3, 31, 21
    )
    shown = compute_fire_times(spec, after=NOW, count=1)[0]
    assert shown == datetime(2026, 3, 31, 23, tzinfo=BERLIN) and shown.tzinfo == BERLIN
    assert compute_first_fire(spec, now=utc(2026, 3, 31, 21)) == utc(2026, 6, 30, 21)


def test_calendar_validation_normalizes() -> None:
    spec = CalendarSpec("date", time(8), "europe/berlin", 29, 2)  # type: ignore[arg-type]
    valid = validate_spec(spec, now=NOW)
    assert valid == CalendarSpec(CalendarRule.DATE, time(8), "Europe/Berlin", 29, 2)
    assert isinstance(valid, CalendarSpec) and valid.rule is CalendarRule.DATE


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (cal("day_of_month", time(6)), "day", "is required for this calendar rule"),
        (cal("day_of_month", time(6), day=0), "day", "must be a number from 1 to 31, got 0"),
        (cal("day_of_month", time(6), day=32), "day", "must be a number from 1 to 31, got 32"),
        (cal("date", time(6), month=12), "day", "is required for this calendar rule"),
        (cal("date", time(6), day=24), "month", "is required for this calendar rule"),
        (cal("date", time(6), day=1, month=13), "month", "must be a number from 1 to 12, got 13"),
        (cal("date", time(6), day=1, month=0), "month", "must be a number from 1 to 12, got 0"),
        (cal("date", time(6), day=30, month=2), "day", "30 February never occurs"),
        (cal("date", time(6), day=31, month=4), "day", "31 April never occurs"),
        (cal("date", time(6), day=31, month=11), "day", "31 November never occurs"),
        (cal("daily", time(6), day=5), "day", "is used only by the rules day_of_month and date"),
        (cal("day_of_month", time(6), day=5, month=1), "month", "is used only by the rule date"),
        (cal("daily", time(6, 0, 0, 500)), "at", "must be a whole number of seconds"),
        (
            cal("daily", time(6, tzinfo=UTC)),
            "at",
            "must be a local time of day without a time zone",
        ),
        (CalendarSpec("weekly", time(6)), "rule", "unknown calendar rule 'weekly'"),  # type: ignore[arg-type]
        (cal("daily", time(6), "Mars/Olympus"), "timezone", "unknown time zone 'Mars/Olympus'"),
    ],
)
def test_calendar_validation_errors(spec: CalendarSpec, field: str, message: str) -> None:
    error = error_of(lambda: validate_spec(spec, now=NOW))
    assert (error.field, error.message) == (field, message)


# --- allowed instants: window edges, midnight, weekdays ------------------------------

ALLOWS_CASES = [
    # window [08:00, 17:00): the start is in, the end is out
    (OFFICE, datetime(2026, 1, 5, 7, 59, 59, tzinfo=BERLIN), False),
    (OFFICE, datetime(2026, 1, 5, 8, tzinfo=BERLIN), True),
    (OFFICE, datetime(2026, 1, 5, 8, 0, 1, tzinfo=BERLIN), True),
    (OFFICE, datetime(2026, 1, 5, 16, 59, 59, tzinfo=BERLIN), True),
    (OFFICE, datetime(2026, 1, 5, 17, tzinfo=BERLIN), False),
    (OFFICE, datetime(2026, 1, 5, 17, 0, 1, tzinfo=BERLIN), False),
    (OFFICE, datetime(2026, 1, 10, 12, tzinfo=BERLIN), False),  # Saturday
    # read in the trigger's zone: 07:30 UTC is 08:30 in Berlin
    (OFFICE, utc(2026, 1, 5, 7, 30), True),
    (OFFICE, utc(2026, 1, 5, 15, 59, 59), True),
    (OFFICE, utc(2026, 1, 5, 16), False),
    # crossing midnight [22:00, 06:00); the weekday is that of the local date
    (NIGHT, datetime(2026, 1, 5, 21, 59, 59, tzinfo=BERLIN), False),
    (NIGHT, datetime(2026, 1, 5, 22, tzinfo=BERLIN), True),
    (NIGHT, datetime(2026, 1, 5, 23, 59, 59, tzinfo=BERLIN), True),
    (NIGHT, datetime(2026, 1, 6, 0, tzinfo=BERLIN), True),
    (NIGHT, datetime(2026, 1, 6, 5, 59, 59, tzinfo=BERLIN), True),
    (NIGHT, datetime(2026, 1, 6, 6, tzinfo=BERLIN), False),
    (NIGHT, datetime(2026, 1, 9, 23, tzinfo=BERLIN), True),  # Friday night
    (NIGHT, datetime(2026, 1, 10, 2, tzinfo=BERLIN), False),  # Saturday morning
    (NIGHT, datetime(2026, 1, 11, 23, tzinfo=BERLIN), False),  # Sunday night
    (NIGHT, datetime(2026, 1, 12, 2, tzinfo=BERLIN), True),  # Monday morning
    # excluded dates count by local date
    (Constraints(excluded_dates=frozenset({date(2026, 1, 6)})), utc(2026, 1, 5, 23), False),
    (Constraints(excluded_dates=frozenset({date(2026, 1, 6)})), utc(2026, 1, 5, 22, 59, 59), True),
    (Constraints(excluded_dates=frozenset({date(2026, 1, 6)})), utc(2026, 1, 6, 23), True),
]


@pytest.mark.parametrize(("constraints", "moment", "allowed"), ALLOWS_CASES)
def test_allows(constraints: Constraints, moment: datetime, allowed: bool) -> None:
    assert allows(constraints, moment, BERLIN) is allowed


# --- cron and presets with constraints --------------------------------------------------

EVERY_SECOND = CronSpec("* * * * * *", "Europe/Berlin", OFFICE)
HOURLY = CronSpec("0 * * * *", "Europe/Berlin", OFFICE)

CRON_CASES = [
    # a 1-second cron in a 9-hour window: each edge, and the jump over nights
    ("sec-before-open", EVERY_SECOND, berlin(2026, 1, 5, 7, 59, 58), [berlin(2026, 1, 5, 8)]),
    ("sec-at-open", EVERY_SECOND, berlin(2026, 1, 5, 8), [berlin(2026, 1, 5, 8, 0, 1)]),
    ("sec-before-close", EVERY_SECOND, berlin(2026, 1, 5, 16, 59, 58),
     [berlin(2026, 1, 5, 16, 59, 59), berlin(2026, 1, 6, 8)]),
    ("sec-at-last", EVERY_SECOND, berlin(2026, 1, 5, 16, 59, 59), [berlin(2026, 1, 6, 8)]),
    ("sec-at-close", EVERY_SECOND, berlin(2026, 1, 5, 17), [berlin(2026, 1, 6, 8)]),
    ("sec-over-weekend", EVERY_SECOND, berlin(2026, 1, 9, 16, 59, 59), [berlin(2026, 1, 12, 8)]),
    ("sec-from-saturday", EVERY_SECOND, berlin(2026, 1, 10, 12), [berlin(2026, 1, 12, 8)]),
    ("hourly-office", HOURLY, berlin(2026, 1, 9, 15, 30),
     [berlin(2026, 1, 9, 16), berlin(2026, 1, 12, 8), berlin(2026, 1, 12, 9)]),
    # crossing midnight: Friday night is in, Saturday morning is not
    ("night", CronSpec("0 * * * *", "Europe/Berlin", NIGHT), berlin(2026, 1, 9, 20),
     [berlin(2026, 1, 9, 22), berlin(2026, 1, 9, 23), berlin(2026, 1, 12, 0),
      berlin(2026, 1, 12, 1)]),
    ("night-morning-close", CronSpec("*/30 * * * *", "Europe/Berlin", NIGHT),
     berlin(2026, 1, 6, 5, 15), [berlin(2026, 1, 6, 5, 30), berlin(2026, 1, 6, 22)]),
    # weekdays only (0 = Monday): a daily 08:00 on Mondays and Thursdays
    ("mon-thu", CronSpec("0 8 * * *", "Europe/Berlin", Constraints(frozenset({0, 3}))),
     utc(2026, 1, 1), [berlin(2026, 1, 1, 8), berlin(2026, 1, 5, 8), berlin(2026, 1, 8, 8)]),
    # excluded dates
    ("excluded", cal("daily", time(8), "Europe/Berlin",
                     constraints=Constraints(excluded_dates=frozenset({date(2026, 1, 6)}))),
     berlin(2026, 1, 5, 8), [berlin(2026, 1, 7, 8)]),
    ("excluded-new-york-local-date",
     CronSpec("0 * * * *", "America/New_York",
              Constraints(excluded_dates=frozenset({date(2026, 1, 6)}))),
     utc(2026, 1, 6, 4, 30), [utc(2026, 1, 7, 5)]),
    # DST with weekdays: 2026-03-29 and 10-25 are Sundays in Berlin,
    # 03-08 and 11-01 in New York.
    ("berlin-spring-sunday", cal("daily", time(2, 30), "Europe/Berlin",
                                 constraints=Constraints(frozenset({6}))),
     utc(2026, 3, 23), [utc(2026, 3, 29, 1), utc(2026, 4, 5, 0, 30)]),
    ("berlin-fall-sunday", cal("daily", time(2, 30), "Europe/Berlin",
                               constraints=Constraints(frozenset({6}))),
     utc(2026, 10, 20), [utc(2026, 10, 25, 0, 30), utc(2026, 11, 1, 1, 30)]),
    ("berlin-spring-cron-weekdays", CronSpec("30 2 * * *", "Europe/Berlin",
                                             Constraints(frozenset({5, 6}))),
     utc(2026, 3, 27), [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1), utc(2026, 4, 4, 0, 30)]),
    ("new-york-spring-sunday", cal("daily", time(2, 30), "America/New_York",
                                   constraints=Constraints(frozenset({6}))),
     utc(2026, 3, 2), [utc(2026, 3, 8, 7), utc(2026, 3, 15, 6, 30)]),
    ("new-york-fall-sunday", cal("daily", time(1, 30), "America/New_York",
                                 constraints=Constraints(frozenset({6}))),
     utc(2026, 10, 26), [utc(2026, 11, 1, 5, 30), utc(2026, 11, 8, 6, 30)]),
    ("new-york-weekday-evening", CronSpec("0 * * * *", "America/New_York",
                                          Constraints(WEEKDAYS, time(18), time(20))),
     utc(2026, 3, 6, 23), [utc(2026, 3, 7, 0), utc(2026, 3, 9, 22), utc(2026, 3, 9, 23)]),
    # fall back: an hourly cron with a window on 02:00-03:00 runs in both copies
    ("berlin-fall-both-copies", CronSpec("0 * * * *", "Europe/Berlin",
                                         Constraints(window_start=time(2), window_end=time(3))),
     utc(2026, 10, 24, 12), [utc(2026, 10, 25, 0), utc(2026, 10, 25, 1), utc(2026, 10, 26, 1)]),
    ("new-york-fall-both-copies", CronSpec("*/30 * * * *", "America/New_York",
                                           Constraints(window_start=time(1), window_end=time(2))),
     utc(2026, 11, 1, 5, 15),
     [utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6), utc(2026, 11, 1, 6, 30), utc(2026, 11, 2, 6)]),
    # spring forward: the DST rule moves 02:30 to 03:00, outside [02:00, 03:00); the
    # constraints judge the instant it fires, so that day is skipped
    ("berlin-spring-moved-out", cal("daily", time(2, 30), "Europe/Berlin",
                                    constraints=Constraints(window_start=time(2),
                                                            window_end=time(3))),
     utc(2026, 3, 28, 1), [utc(2026, 3, 28, 1, 30), utc(2026, 3, 30, 0, 30)]),
    ("berlin-spring-window-in-gap", CronSpec("*/20 * * * *", "Europe/Berlin",
                                             Constraints(window_start=time(2), window_end=time(3))),
     utc(2026, 3, 28, 1, 40), [utc(2026, 3, 30, 0), utc(2026, 3, 30, 0, 20)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [case[1:] for case in CRON_CASES],
    ids=[case[0] for case in CRON_CASES],
)
def test_constrained_cron_fire_times(spec: Any, after: datetime, expected: list[datetime]) -> None:
    assert series(spec, after, len(expected)) == expected
    assert next_fire(spec, after) == expected[0]


def test_one_second_cron_ten_fire_times_across_a_weekend() -> None:
    fires = series(EVERY_SECOND, berlin(2026, 1, 9, 16, 59, 55), 10)
    friday = [berlin(2026, 1, 9, 16, 59, s) for s in range(56, 60)]
    monday = [berlin(2026, 1, 12, 8, 0, s) for s in range(6)]
    assert fires == friday + monday


def test_short_window_ten_fire_times_across_three_nights() -> None:
    spec = CronSpec("* * * * * *", "Europe/Berlin", Constraints(window_start=time(8),
                                                                 window_end=time(8, 0, 3)))  # fmt: skip
    days = [5, 5, 5, 6, 6, 6, 7, 7, 7, 8]
    expected = [berlin(2026, 1, d, 8, 0, i % 3) for i, d in enumerate(days)]
    assert series(spec, berlin(2026, 1, 4, 12), 10) == expected


# --- intervals with constraints ---------------------------------------------------------

MON_8 = berlin(2026, 1, 5, 8)
SEVEN = timedelta(minutes=7)


def interval(every: timedelta, anchor: str = "from_enqueue", **fields: Any) -> IntervalSpec:
    fields.setdefault("timezone", "Europe/Berlin")
    return IntervalSpec(every, IntervalAnchor(anchor), **fields)


ONE_SECOND = interval(SECOND, constraints=OFFICE)
GRID_7 = interval(SEVEN, start_at=MON_8, constraints=Constraints(window_start=time(8),
                                                                   window_end=time(9)))  # fmt: skip
HALF_HOUR = timedelta(minutes=30)

INTERVAL_CASES = [
    # fixed rate without start_at: after + every, then the first allowed one
    ("1s-before-open", ONE_SECOND, berlin(2026, 1, 5, 7, 59, 59), [berlin(2026, 1, 5, 8)]),
    ("1s-at-open", ONE_SECOND, berlin(2026, 1, 5, 8), [berlin(2026, 1, 5, 8, 0, 1)]),
    ("1s-before-close", ONE_SECOND, berlin(2026, 1, 5, 16, 59, 58),
     [berlin(2026, 1, 5, 16, 59, 59), berlin(2026, 1, 6, 8)]),
    ("1s-at-close", ONE_SECOND, berlin(2026, 1, 5, 16, 59, 59), [berlin(2026, 1, 6, 8)]),
    ("1s-over-weekend", ONE_SECOND, berlin(2026, 1, 9, 16, 59, 59),
     [berlin(2026, 1, 12, 8), berlin(2026, 1, 12, 8, 0, 1)]),
    ("1s-over-holiday-weekend",
     interval(SECOND, constraints=Constraints(WEEKDAYS, time(8), time(17),
                                              frozenset({date(2026, 1, 12), date(2026, 1, 13)}))),
     berlin(2026, 1, 9, 16, 59, 59), [berlin(2026, 1, 14, 8)]),
    # a grid from start_at keeps its phase: 1440 minutes later is 08:02, not 08:00
    ("grid-inside", GRID_7, MON_8, [berlin(2026, 1, 5, 8, 7)]),
    ("grid-last", GRID_7, berlin(2026, 1, 5, 8, 49),
     [berlin(2026, 1, 5, 8, 56), berlin(2026, 1, 6, 8, 2), berlin(2026, 1, 6, 8, 9)]),
    ("grid-before-start", GRID_7, utc(2026, 1, 1), [MON_8, berlin(2026, 1, 5, 8, 7)]),
    # fall back: a 10-minute grid in 02:00-02:30 runs in both copies of the hour
    ("grid-fall-back",
     interval(timedelta(minutes=10), start_at=utc(2026, 10, 25),
              constraints=Constraints(window_start=time(2), window_end=time(2, 30))),
     utc(2026, 10, 24, 12),
     [utc(2026, 10, 25, 0), utc(2026, 10, 25, 0, 10), utc(2026, 10, 25, 0, 20),
      utc(2026, 10, 25, 1), utc(2026, 10, 25, 1, 10), utc(2026, 10, 25, 1, 20),
      utc(2026, 10, 26, 1)]),
    # spring forward: a window inside the gap does not open that day
    ("1s-window-in-spring-gap",
     interval(SECOND, constraints=Constraints(window_start=time(2), window_end=time(3))),
     utc(2026, 3, 28, 1, 59, 58), [utc(2026, 3, 28, 1, 59, 59), utc(2026, 3, 30)]),
    # from a run's start or finish: after + every, else the next opening
    ("finish-inside", interval(HALF_HOUR, "from_finish", constraints=OFFICE),
     berlin(2026, 1, 5, 12), [berlin(2026, 1, 5, 12, 30)]),
    ("finish-last-second", interval(HALF_HOUR, "from_finish", constraints=OFFICE),
     berlin(2026, 1, 5, 16, 29, 59), [berlin(2026, 1, 5, 16, 59, 59)]),
    ("finish-at-close", interval(HALF_HOUR, "from_finish", constraints=OFFICE),
     berlin(2026, 1, 5, 16, 30), [berlin(2026, 1, 6, 8)]),
    ("finish-friday", interval(HALF_HOUR, "from_finish", constraints=OFFICE),
     berlin(2026, 1, 9, 16, 45, 17), [berlin(2026, 1, 12, 8), berlin(2026, 1, 12, 8, 30)]),
    ("start-weekdays-midnight", interval(timedelta(hours=1), "from_start",
                                         constraints=Constraints(WEEKDAYS)),
     berlin(2026, 1, 9, 23, 30), [berlin(2026, 1, 12)]),
    ("start-excluded-day", interval(timedelta(hours=1), "from_start",
                                    constraints=Constraints(excluded_dates=frozenset({
                                        date(2026, 1, 6)}))),
     berlin(2026, 1, 5, 23, 30), [berlin(2026, 1, 7)]),
    ("start-with-start-at", interval(HALF_HOUR, "from_start", start_at=berlin(2026, 1, 10, 9),
                                     constraints=OFFICE),
     berlin(2026, 1, 5, 12), [berlin(2026, 1, 12, 8)]),
    ("finish-night", interval(timedelta(hours=3), "from_finish", constraints=NIGHT),
     berlin(2026, 1, 9, 22, 30), [berlin(2026, 1, 12)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [case[1:] for case in INTERVAL_CASES],
    ids=[case[0] for case in INTERVAL_CASES],
)
def test_constrained_interval_fire_times(
    spec: IntervalSpec, after: datetime, expected: list[datetime]
) -> None:
    assert series(spec, after, len(expected)) == expected
    assert next_fire(spec, after) == expected[0]


def test_one_second_interval_ten_fire_times_across_nights() -> None:
    spec = interval(SECOND, start_at=MON_8, constraints=Constraints(window_start=time(8),
                                                                    window_end=time(8, 0, 3)))  # fmt: skip
    days = [5, 5, 5, 6, 6, 6, 7, 7, 7, 8]
    expected = [berlin(2026, 1, d, 8, 0, i % 3) for i, d in enumerate(days)]
    assert series(spec, MON_8 - SECOND, 10) == expected
    # and over a weekend with a 9-hour window, landing on Monday's opening
    spec = interval(SECOND, start_at=MON_8, constraints=OFFICE)
    fires = series(spec, berlin(2026, 1, 9, 16, 59, 57), 5)
    assert fires == [berlin(2026, 1, 9, 16, 59, 58), berlin(2026, 1, 9, 16, 59, 59)] + [
        berlin(2026, 1, 12, 8, 0, s) for s in range(3)
    ]


@pytest.mark.parametrize(
    ("spec", "now", "expected"),
    [
        # start_at in the future on a Saturday: the first allowed fire time after it
        (interval(SEVEN, start_at=berlin(2026, 1, 10, 8), constraints=OFFICE),
         NOW, berlin(2026, 1, 12, 8, 4)),  # 2880 min = 411 * 7 + 3: grid point 412
        (interval(SEVEN, "from_finish", start_at=berlin(2026, 1, 10, 8), constraints=OFFICE),
         NOW, berlin(2026, 1, 12, 8)),
        (interval(SEVEN, start_at=MON_8, constraints=OFFICE), MON_8, MON_8),
        (interval(SEVEN, start_at=MON_8, constraints=OFFICE), MON_8 + SECOND, MON_8 + SEVEN),
        (interval(SEVEN, constraints=OFFICE), berlin(2026, 1, 10, 8), berlin(2026, 1, 12, 8, 4)),
    ],
)  # fmt: skip
def test_constrained_interval_first_fire(
    spec: IntervalSpec, now: datetime, expected: datetime
) -> None:
    assert compute_first_fire(spec, now=now) == expected


# --- latest fire with constraints (long outages) ------------------------------------------

LATEST_CASES = [
    ("hourly-before-open", HOURLY, berlin(2026, 1, 12, 7, 59, 59), berlin(2026, 1, 9, 16)),
    ("hourly-at-open", HOURLY, berlin(2026, 1, 12, 8), berlin(2026, 1, 12, 8)),
    ("hourly-weekend", HOURLY, berlin(2026, 1, 11, 12), berlin(2026, 1, 9, 16)),
    ("sec-saturday", EVERY_SECOND, berlin(2026, 1, 10, 12), berlin(2026, 1, 9, 16, 59, 59)),
    ("sec-at-close", EVERY_SECOND, berlin(2026, 1, 9, 17), berlin(2026, 1, 9, 16, 59, 59)),
    ("sec-inside", EVERY_SECOND, berlin(2026, 1, 9, 12, 0, 0), berlin(2026, 1, 9, 12)),
    ("night-saturday", CronSpec("*/10 * * * *", "Europe/Berlin", NIGHT),
     berlin(2026, 1, 10, 12), berlin(2026, 1, 9, 23, 50)),
    ("night-monday-morning", CronSpec("*/10 * * * *", "Europe/Berlin", NIGHT),
     berlin(2026, 1, 12, 7), berlin(2026, 1, 12, 5, 50)),
    ("excluded", cal("daily", time(8), "Europe/Berlin",
                     constraints=Constraints(excluded_dates=frozenset({date(2026, 1, 6)}))),
     berlin(2026, 1, 7, 7, 59, 59), berlin(2026, 1, 5, 8)),
    ("fall-second-copy", CronSpec("0 * * * *", "Europe/Berlin",
                                  Constraints(window_start=time(2), window_end=time(3))),
     utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 1)),
    ("fall-first-copy", CronSpec("0 * * * *", "Europe/Berlin",
                                 Constraints(window_start=time(2), window_end=time(3))),
     utc(2026, 10, 25, 0, 59, 59), utc(2026, 10, 25, 0)),
    ("grid-next-morning", GRID_7, berlin(2026, 1, 6, 8, 1), berlin(2026, 1, 5, 8, 56)),
    ("grid-on-point", GRID_7, berlin(2026, 1, 6, 8, 2), berlin(2026, 1, 6, 8, 2)),
    ("grid-1s-weekend", interval(SECOND, start_at=MON_8, constraints=OFFICE),
     berlin(2026, 1, 11, 23), berlin(2026, 1, 9, 16, 59, 59)),
    ("grid-before-first-opening", interval(SECOND, start_at=berlin(2026, 1, 10),
                                           constraints=OFFICE), berlin(2026, 1, 11), None),
    ("never", CronSpec("0 8 * * SAT", "Europe/Berlin", Constraints(WEEKDAYS)), NOW, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "at_or_before", "expected"),
    [case[1:] for case in LATEST_CASES],
    ids=[case[0] for case in LATEST_CASES],
)
def test_constrained_latest_fire(
    spec: Any, at_or_before: datetime, expected: datetime | None
) -> None:
    assert compute_latest_fire(spec, at_or_before=at_or_before) == expected


def test_latest_fire_agrees_with_the_forward_walk() -> None:
    # Every allowed fire time of a week, walked forwards, is found backwards too.
    spec = CronSpec("*/20 * * * *", "Europe/Berlin", NIGHT)
    after = berlin(2026, 1, 8, 12)
    fires = series(spec, after, 60)
    for earlier, later in zip(fires, fires[1:], strict=False):
        assert compute_latest_fire(spec, at_or_before=later - SECOND) == earlier
        assert compute_latest_fire(spec, at_or_before=later) == later


# --- termination ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        CronSpec("0 8 * * SAT", "Europe/Berlin", Constraints(WEEKDAYS)),
        CronSpec("*/15 8 * * *", "UTC", Constraints(window_start=time(9), window_end=time(10))),
        interval(timedelta(days=1), start_at=utc(2026, 1, 1, 12),
                 constraints=Constraints(window_start=time(8), window_end=time(9))),
        cal("date", time(8), day=29, month=2, constraints=Constraints(frozenset({0}))),  # Monday
    ],
)  # fmt: skip
def test_a_trigger_that_never_fires_ends(spec: Any) -> None:
    assert list(iter_fire_times(spec, after=NOW)) == []
    assert next_fire(spec, NOW) is None


def test_the_gap_before_ending_counts_from_the_last_fire_time() -> None:
    # 29 February on a Tuesday: 2028, then 2040 - twelve years, more than MAX_GAP.
    spec = cal("date", time(8), day=29, month=2, constraints=Constraints(frozenset({1})))
    assert list(iter_fire_times(spec, after=NOW)) == [utc(2028, 2, 29, 8)]
    # A yearly preset keeps firing for longer than MAX_GAP: the gap is per step.
    yearly = cal("year_start", time(8), constraints=Constraints(excluded_dates=frozenset()))
    assert len(series(yearly, NOW, 10)) == 10
    assert MAX_GAP >= timedelta(days=5 * 365)


# --- validation -------------------------------------------------------------------------

FIXED_WINDOW = Constraints(window_start=time(8), window_end=time(17))

VALIDATION_CASES = [
    # weekdays
    (CronSpec("* * * * *", constraints=Constraints(frozenset())), "weekdays",
     "choose at least one weekday"),
    (CronSpec("* * * * *", constraints=Constraints(frozenset({7}))), "weekdays",
     "7 is not a weekday: use 0 (Monday) to 6 (Sunday)"),
    (CronSpec("* * * * *", constraints=Constraints(frozenset({-1, 2}))), "weekdays",
     "-1 is not a weekday: use 0 (Monday) to 6 (Sunday)"),
    (CronSpec("* * * * *", constraints=Constraints(frozenset({"MON"}))), "weekdays",  # type: ignore[arg-type]
     "'MON' is not a weekday: use 0 (Monday) to 6 (Sunday)"),
    # the window
    (CronSpec("* * * * *", constraints=Constraints(window_start=time(8))), "window_end",
     "is required when window_start is set"),
    (CronSpec("* * * * *", constraints=Constraints(window_end=time(8))), "window_start",
     "is required when window_end is set"),
    (CronSpec("* * * * *", constraints=Constraints(window_start=time(8), window_end=time(8))),
     "window_end", "must differ from window_start: leave both empty for the whole day"),
    (CronSpec("* * * * *", constraints=Constraints(window_start="08:00", window_end=time(9))),  # type: ignore[arg-type]
     "window_start", "must be a time of day"),
    (interval(SECOND, constraints=Constraints(window_start=time(8),
                                              window_end=time(9, tzinfo=UTC))),
     "window_end", "must be a local time of day without a time zone"),
    (CronSpec("* * * * *", constraints=Constraints(
        excluded_dates=frozenset({datetime(2026, 1, 1, tzinfo=UTC)}))), "excluded_dates",
     "datetime.datetime(2026, 1, 1, 0, 0, tzinfo=datetime.timezone.utc) is not a date"),
    # a fixed time outside its window (the end is outside: the window is half-open)
    (CronSpec("0 7 * * *", constraints=FIXED_WINDOW), "window_start",
     "the fixed time 07:00 is outside the window 08:00-17:00"),
    (CronSpec("0 17 * * *", constraints=FIXED_WINDOW), "window_start",
     "the fixed time 17:00 is outside the window 08:00-17:00"),
    (CronSpec("0 8,18 * * *", constraints=FIXED_WINDOW), "window_start",
     "the fixed time 18:00 is outside the window 08:00-17:00"),
    (CronSpec("30 0 8 * * *", constraints=Constraints(window_start=time(8, 0, 31),
                                                      window_end=time(9))),
     "window_start", "the fixed time 08:00:30 is outside the window 08:00:31-09:00"),
    (CronSpec("0 12 * * *", constraints=NIGHT), "window_start",
     "the fixed time 12:00 is outside the window 22:00-06:00"),
    (cal("daily", time(7, 59, 59), constraints=FIXED_WINDOW), "window_start",
     "the fixed time 07:59:59 is outside the window 08:00-17:00"),
    (cal("month_end", time(23), constraints=Constraints(window_start=time(6), window_end=time(22))),
     "window_start", "the fixed time 23:00 is outside the window 06:00-22:00"),
    # a constrained trigger that never fires
    (CronSpec("0 8 * * SAT", "Europe/Berlin", Constraints(WEEKDAYS)), "weekdays",
     "never fires: no fire time falls on Monday through Friday"),
    (CronSpec("*/15 8 * * *", constraints=Constraints(WEEKDAYS, time(9), time(10))),
     "cron_expression",
     "never fires: no fire time falls inside the window 09:00-10:00 on Monday through Friday"),
    (interval(timedelta(days=1), start_at=utc(2026, 1, 1, 12),
              constraints=Constraints(window_start=time(8), window_end=time(9))),
     "window_start", "never fires: no fire time falls inside the window 08:00-09:00"),
    (cal("date", time(8), day=29, month=2, constraints=Constraints(frozenset({0}))),
     "weekdays", "never fires: no fire time falls on Monday"),
    (cal("date", time(8), day=24, month=12, constraints=Constraints(
        excluded_dates=frozenset(date(year, 12, 24) for year in range(2026, 2032)))),
     "excluded_dates", "never fires: every fire time in the next 5 years falls on an excluded day"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "field", "message"), VALIDATION_CASES)
def test_constraint_validation_errors(spec: Any, field: str, message: str) -> None:
    error = error_of(lambda: validate_spec(spec, now=NOW))
    assert (error.field, error.message) == (field, message)
    assert str(error) == f"{field}: {message}"


@pytest.mark.parametrize(
    "spec",
    [
        CronSpec("0 8 * * *", constraints=FIXED_WINDOW),  # at the window's start
        CronSpec("0 16 * * *", constraints=FIXED_WINDOW),
        CronSpec("59 59 16 * * *", constraints=FIXED_WINDOW),
        CronSpec("0 23 * * *", constraints=NIGHT),
        CronSpec("0 5 * * *", constraints=NIGHT),
        CronSpec("*/15 * * * *", constraints=FIXED_WINDOW),  # not fixed: a wildcard
        CronSpec("0 6-18 * * *", constraints=FIXED_WINDOW),  # not fixed: a range
        CronSpec("0 */2 * * *", constraints=FIXED_WINDOW),  # not fixed: a step
        cal("daily", time(8), constraints=FIXED_WINDOW),
        cal("date", time(8), day=29, month=2),  # fires in leap years
        cal("date", time(8), day=29, month=2, constraints=Constraints(frozenset({1}))),
        interval(SECOND, constraints=OFFICE),
        interval(HALF_HOUR, "from_finish", constraints=NIGHT),
    ],
)
def test_constraint_validation_accepts(spec: Any) -> None:
    assert validate_spec(spec, now=NOW) is not None


def test_validation_of_a_fixed_rate_without_start_at_does_not_depend_on_now() -> None:
    # Its grid runs through the previous fire time, not through `now`: a daily
    # interval in 08:00-09:00 stays valid when the beat validates it at noon.
    spec = interval(timedelta(days=1), constraints=Constraints(window_start=time(8),
                                                               window_end=time(9)))  # fmt: skip
    for now in (utc(2026, 1, 5, 7, 30), utc(2026, 1, 5, 12)):
        assert validate_spec(spec, now=now) == spec
    assert next_fire(spec, berlin(2026, 1, 5, 8, 30)) == berlin(2026, 1, 6, 8, 30)


def test_validation_normalizes_constraints() -> None:
    # A form may hand over a set and a list; validation makes them frozensets.
    loose: Any = Constraints({0, 1}, excluded_dates=[date(2026, 1, 6)])  # type: ignore[arg-type]
    spec = CronSpec("0 8 * * *", "europe/berlin", loose)
    valid = validate_spec(spec, now=NOW)
    assert valid == CronSpec(
        "0 8 * * *",
        "Europe/Berlin",
        Constraints(frozenset({0, 1}), excluded_dates=frozenset({date(2026, 1, 6)})),
    )
    # constraints that restrict nothing become None
    assert validate_spec(CronSpec("0 8 * * *", constraints=Constraints()), now=NOW) == CronSpec(
        "0 8 * * *"
    )
    valid = validate_spec(
        interval(SECOND, timezone="america/new_york", constraints=OFFICE), now=NOW
    )
    assert isinstance(valid, IntervalSpec) and valid.timezone == "America/New_York"
    assert valid.constraints == OFFICE


# --- words ------------------------------------------------------------------------------

HOLIDAYS = frozenset(date(2026, 1, d) for d in range(1, 13))


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (cal("daily", time(5, 31), "Europe/Berlin"), "daily at 05:31 (Europe/Berlin)"),
        (cal("daily", time(5, 31, 10)), "daily at 05:31:10 (UTC)"),
        (cal("quarter_end", time(23)), "on the last day of each quarter at 23:00 (UTC)"),
        (cal("date", time(18), "Europe/Berlin", day=24, month=12),
         "every year on 24 December at 18:00 (Europe/Berlin)"),
        (cal("day_of_month", time(6), day=15), "monthly on day 15 at 06:00 (UTC)"),
        (cal("month_start", time(6)), "on the first day of each month at 06:00 (UTC)"),
        (cal("half_year_end", time(6)), "on the last day of each half-year at 06:00 (UTC)"),
        (cal("year_end", time(6)), "on the last day of each year at 06:00 (UTC)"),
        (cal("daily", time(8), constraints=Constraints(WEEKDAYS)),
         "daily at 08:00, Monday through Friday (UTC)"),
        (interval(timedelta(minutes=15), constraints=Constraints(WEEKDAYS, time(5, 30), time(6),
                                                                 HOLIDAYS)),
         "every 15 minutes, Monday through Friday, between 05:30 and 06:00 (Europe/Berlin), "
         "except 12 excluded days"),
        (interval(timedelta(minutes=15)), "every 15 minutes"),
        (interval(HALF_HOUR, "from_finish", constraints=Constraints(
            excluded_dates=frozenset({date(2026, 1, 6)}))),
         "every 30 minutes after the previous run ends (Europe/Berlin), except 1 excluded day"),
        (CronSpec("*/15 * * * *", "Europe/Berlin", NIGHT),
         "Every 15 minutes, Monday through Friday, between 22:00 and 06:00 (Europe/Berlin)"),
        (CronSpec("0 8 * * *", constraints=Constraints(frozenset({0, 2, 4}))),
         "At 08:00, Monday, Wednesday and Friday (UTC)"),
    ],
)  # fmt: skip
def test_describe_presets_and_constraints(spec: Any, words: str) -> None:
    assert describe(spec) == words


@pytest.mark.parametrize(
    ("days", "words"),
    [
        ({0, 1, 2, 3, 4}, "Monday through Friday"),
        ({5, 6}, "Saturday and Sunday"),
        ({4, 5, 6, 0}, "Friday through Monday"),
        ({0, 2, 4}, "Monday, Wednesday and Friday"),
        ({0, 1, 2, 5}, "Monday through Wednesday and Saturday"),
        ({6}, "Sunday"),
        (set(range(7)), "every day"),
    ],
)
def test_weekday_words(days: set[int], words: str) -> None:
    assert weekday_words(frozenset(days)) == words


# --- jitter (F-18) ------------------------------------------------------------------------


def test_jitter_is_deterministic_and_reads_the_instant() -> None:
    at = utc(2026, 1, 5, 8)
    first = compute_jitter("trigger-7", at, 300)
    assert compute_jitter("trigger-7", at, 300) == first
    assert compute_jitter("trigger-7", at.astimezone(BERLIN), 300) == first
    assert compute_jitter("trigger-7", at.astimezone(NEW_YORK), 300) == first
    assert first == first // SECOND * SECOND  # whole seconds
    assert compute_jitter("trigger-7", at, 0) == timedelta(0)


def test_jitter_is_the_same_in_another_process() -> None:
    # hash() is salted per process; the jitter must not be.
    code = (
        "from datetime import datetime, UTC;"
        "from jobs.core.jitter import compute_jitter;"
        "print(int(compute_jitter('trigger-7', datetime(2026, 1, 5, 8, tzinfo=UTC), 86400)"
        ".total_seconds()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    root = Path(__file__).parents[2]
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root, env=env
    ).stdout
    assert int(output) == compute_jitter("trigger-7", utc(2026, 1, 5, 8), 86400) // SECOND


def test_jitter_bounds_and_spread() -> None:
    start = utc(2026, 1, 5)
    delays = [compute_jitter("trigger-7", start + i * SECOND, 9) // SECOND for i in range(5000)]
    counts = Counter(delays)
    assert set(counts) == set(range(10))  # 0 and max_seconds both occur
    assert all(400 <= count <= 600 for count in counts.values())  # about 500 each
    by_key = {compute_jitter(f"trigger-{i}", start, 86400) for i in range(200)}
    assert len(by_key) > 190  # different triggers spread out
    assert all(timedelta(0) <= d <= timedelta(days=1) for d in by_key)


@pytest.mark.parametrize("max_seconds", [-1, 86401, 1.5, True, "60"])
def test_jitter_rejects_bad_bounds(max_seconds: Any) -> None:
    error = error_of(lambda: validate_jitter(max_seconds))
    assert error.field == "jitter_seconds"
    error = error_of(lambda: compute_jitter("k", NOW, max_seconds))
    assert error.field == "jitter_seconds"


def test_jitter_accepts_bounds_and_rejects_naive_times() -> None:
    assert validate_jitter(0) == 0 and validate_jitter(86400) == 86400
    naive = datetime(2026, 1, 1)  # noqa: DTZ001 - deliberately naive
    assert error_of(lambda: compute_jitter("k", naive, 5)).field == "fire_at"
