"""jobs.core.triggers: validation, fire times, DST (F-10..F-13, F-19). No database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from jobs.core.triggers import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    CronSpec,
    IntervalAnchor,
    IntervalSpec,
    OnceSpec,
    TriggerError,
    canonical_timezone,
    compute_fire_times,
    compute_first_fire,
    compute_latest_fire,
    compute_next_fire,
    describe,
    normalize_cron,
    validate_spec,
)

pytestmark = pytest.mark.usefixtures("berlin_local_time")

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
SECOND = timedelta(seconds=1)
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def cron_next(expression: str, zone: str, after: datetime) -> datetime | None:
    return compute_next_fire(CronSpec(expression, zone), after=after, now=after)


def cron_series(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    times = compute_fire_times(CronSpec(expression, zone), after=after, count=count)
    return [t.astimezone(UTC) for t in times]


# --- TriggerError and time zones -------------------------------------------------


def test_trigger_error_carries_field_and_message() -> None:
    error = TriggerError("timezone", "unknown time zone 'Foo/Bar'")
    assert isinstance(error, ValueError)
    assert (error.field, error.message) == ("timezone", "unknown time zone 'Foo/Bar'")
    assert str(error) == "timezone: unknown time zone 'Foo/Bar'"


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("europe/vienna", "Europe/Vienna"),
        ("Europe/Vienna", "Europe/Vienna"),
        ("EUROPE/BERLIN", "Europe/Berlin"),
        ("america/new_york", "America/New_York"),
        ("utc", "UTC"),
        ("UTC", "UTC"),
        ("etc/gmt+5", "Etc/GMT+5"),
        (" Asia/Kolkata ", "Asia/Kolkata"),
    ],
)
def test_canonical_timezone(name: str, canonical: str) -> None:
    assert canonical_timezone(name) == canonical


@pytest.mark.parametrize("name", ["Foo/Bar", "", "Europe/Berlinn", "CEST", "+01:00"])
def test_canonical_timezone_rejects_unknown(name: str) -> None:
    with pytest.raises(TriggerError) as caught:
        canonical_timezone(name)
    assert caught.value.field == "timezone"
    assert caught.value.message == f"unknown time zone {name!r}"


# --- cron validation ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "normalized"),
    [
        ("0 8 * * mon-fri", "0 8 * * MON-FRI"),
        ("  0   8\t* *  *  ", "0 8 * * *"),
        ("0 0 ? * MON", "0 0 * * MON"),
        ("0 0 1 jan ?", "0 0 1 JAN *"),
        ("/15 * * * *", "*/15 * * * *"),
        ("0 /4 * * *", "0 */4 * * *"),
        ("5/10 * * * *", "5/10 * * * *"),
        ("1,15,30 9-17/2 * * *", "1,15,30 9-17/2 * * *"),
        ("0 0 L * *", "0 0 L * *"),
        ("0 0 lw * *", "0 0 LW * *"),
        ("0 0 * * 5L", "0 0 * * 5L"),
        ("0 0 * * fril", "0 0 * * 5L"),
        ("0 0 * * fri#2", "0 0 * * FRI#2"),
        ("0 0 29 2 *", "0 0 29 2 *"),
        ("0 0 * * 7", "0 0 * * 7"),
        ("0 30 2 * * *", "0 30 2 * * *"),
        ("*/10 * * * * ?", "*/10 * * * * *"),
        ("59 59 23 31 12 6", "59 59 23 31 12 6"),
    ],
)
def test_normalize_cron(expression: str, normalized: str) -> None:
    assert normalize_cron(expression) == normalized


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * *", "expected 5 or 6 fields, got 4"),
        ("", "expected 5 or 6 fields, got 0"),
        ("* * * * * * *", "expected 5 or 6 fields, got 7"),
        ("0 24 * * *", "hour: 24 is out of range 0-23"),
        ("0 25 * * *", "hour: 25 is out of range 0-23"),
        ("60 * * * *", "minute: 60 is out of range 0-59"),
        ("60 0 * * * *", "second: 60 is out of range 0-59"),
        ("0 0 0 * *", "day-of-month: 0 is out of range 1-31"),
        ("0 0 32 * *", "day-of-month: 32 is out of range 1-31"),
        ("0 0 * 13 *", "month: 13 is out of range 1-12"),
        ("0 0 * * 8", "day-of-week: 8 is out of range 0-7"),
        ("0 0 * FOO *", "month: 'FOO' is not a number or a name"),
        ("0 0 * * MONDAY", "day-of-week: 'MONDAY' is not a number or a name"),
        ("x * * * *", "minute: 'X' is not a number"),
        ("-1 * * * *", "minute: empty value"),
        ("1,,2 * * * *", "minute: empty value"),
        ("*/0 * * * *", "minute: step '0' must be a number from 1 to 59"),
        ("*/60 * * * *", "minute: step '60' must be a number from 1 to 59"),
        ("0 */24 * * *", "hour: step '24' must be a number from 1 to 23"),
        ("0 0 * * FRI-MON", "day-of-week: range FRI-MON runs backwards"),
        ("0 17-9 * * *", "hour: range 17-9 runs backwards"),
        ("? * * * *", "minute: '?' is allowed only in day-of-month and day-of-week"),
        ("0 0 * * 5#6", "day-of-week: '#6' must be #1 to #5"),
        ("0 0 * * L", "day-of-week: 'L' needs a day before it, e.g. 5L for the last Friday"),
        ("0 0 L/2 * *", "day-of-month: 'L' is not a number"),
        ("0 0 15W * *", "day-of-month: '15W' is not a number"),
        ("0 0 31 4 *", "never fires: day-of-month 31 does not occur in month 4"),
        ("0 0 30 2 *", "never fires: day-of-month 30 does not occur in month 2"),
        ("0 0 0 31 APR,JUN *", "never fires: day-of-month 31 does not occur in month APR,JUN"),
    ],
)
def test_normalize_cron_rejects(expression: str, message: str) -> None:
    with pytest.raises(TriggerError) as caught:
        normalize_cron(expression)
    assert caught.value.field == "cron_expression"
    assert caught.value.message == message


# --- cron fire times ------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "zone", "after", "expected"),
    [
        # steps, with exact boundaries: strictly after `after`
        ("*/15 * * * *", "UTC", utc(2026, 1, 5, 10, 14, 59), utc(2026, 1, 5, 10, 15)),
        ("*/15 * * * *", "UTC", utc(2026, 1, 5, 10, 15), utc(2026, 1, 5, 10, 30)),
        ("*/15 * * * *", "UTC", utc(2026, 1, 5, 10, 15, 1), utc(2026, 1, 5, 10, 30)),
        ("/15 * * * *", "UTC", utc(2026, 1, 5, 10, 15), utc(2026, 1, 5, 10, 30)),
        ("5/10 * * * *", "UTC", utc(2026, 1, 5, 10, 4, 59), utc(2026, 1, 5, 10, 5)),
        ("5/10 * * * *", "UTC", utc(2026, 1, 5, 10, 5), utc(2026, 1, 5, 10, 15)),
        ("5/10 * * * *", "UTC", utc(2026, 1, 5, 10, 55), utc(2026, 1, 5, 11, 5)),
        ("0 9-17/4 * * *", "UTC", utc(2026, 1, 5, 13), utc(2026, 1, 5, 17)),
        ("0 9-17/4 * * *", "UTC", utc(2026, 1, 5, 17), utc(2026, 1, 6, 9)),
        # lists and names; 2026-01-01 is a Thursday
        ("0 0,12 1,15 * *", "UTC", utc(2026, 1, 1), utc(2026, 1, 1, 12)),
        ("0 0,12 1,15 * *", "UTC", utc(2026, 1, 1, 12), utc(2026, 1, 15)),
        ("0 0 1 JAN *", "UTC", utc(2026, 1, 1), utc(2027, 1, 1)),
        ("0 0 1 JAN *", "UTC", utc(2025, 12, 31, 23, 59, 59), utc(2026, 1, 1)),
        ("0 0 ? * MON", "UTC", utc(2026, 1, 1), utc(2026, 1, 5)),
        ("0 0 * * SUN", "UTC", utc(2026, 1, 1), utc(2026, 1, 4)),
        ("0 0 * * 7", "UTC", utc(2026, 1, 1), utc(2026, 1, 4)),
        # day-of-month and day-of-week both restricted: either matches (Vixie cron)
        ("0 0 13 * FRI", "UTC", utc(2026, 1, 1), utc(2026, 1, 2)),
        # L, LW, nL, #n
        ("0 0 L * *", "UTC", utc(2026, 2, 1), utc(2026, 2, 28)),
        ("0 0 L * *", "UTC", utc(2028, 2, 1), utc(2028, 2, 29)),
        ("0 0 LW * *", "UTC", utc(2026, 5, 1), utc(2026, 5, 29)),  # the 31st is a Sunday
        ("0 0 * * 5L", "UTC", utc(2026, 1, 1), utc(2026, 1, 30)),
        ("0 0 * * FRI#2", "UTC", utc(2026, 1, 1), utc(2026, 1, 9)),
        ("0 0 29 2 *", "UTC", utc(2026, 1, 1), utc(2028, 2, 29)),
        # 6 fields, seconds first
        ("30 * * * * *", "UTC", utc(2026, 1, 5, 10, 0, 29), utc(2026, 1, 5, 10, 0, 30)),
        ("30 * * * * *", "UTC", utc(2026, 1, 5, 10, 0, 30), utc(2026, 1, 5, 10, 1, 30)),
        ("*/20 * * * * *", "UTC", utc(2026, 1, 5, 10, 0, 40), utc(2026, 1, 5, 10, 1)),
        ("0 0 8 * * MON-FRI", "UTC", utc(2026, 1, 2, 8), utc(2026, 1, 5, 8)),
        # time zones: weekday 08:00 Berlin is 07:00 UTC in winter
        ("0 8 * * MON-FRI", "Europe/Berlin", utc(2026, 1, 9, 6, 59, 59), utc(2026, 1, 9, 7)),
        ("0 8 * * MON-FRI", "Europe/Berlin", utc(2026, 1, 9, 7), utc(2026, 1, 12, 7)),
        ("0 8 * * MON-FRI", "europe/berlin", utc(2026, 7, 3, 6), utc(2026, 7, 6, 6)),
        ("0 9 * * *", "America/New_York", utc(2026, 1, 5), utc(2026, 1, 5, 14)),
        ("0 9 * * *", "America/New_York", utc(2026, 7, 6), utc(2026, 7, 6, 13)),
        ("0 0 * * *", "Asia/Kolkata", utc(2026, 1, 5), utc(2026, 1, 5, 18, 30)),
        # sub-second `after`
        ("* * * * * *", "UTC", utc(2026, 1, 5, 10, 0, 0, 500_000), utc(2026, 1, 5, 10, 0, 1)),
    ],
)
def test_cron_next_fire(expression: str, zone: str, after: datetime, expected: datetime) -> None:
    result = cron_next(expression, zone, after)
    assert result == expected
    assert result is not None and result.tzinfo is UTC


@pytest.mark.parametrize("expression", ["30 2 * * *", "0 30 2 * * *", "0 * * * *"])
def test_utc_zone_has_no_dst(expression: str) -> None:
    # Berlin's and New York's transition days are ordinary days in UTC.
    fires = cron_series(expression, "UTC", utc(2026, 3, 29), 3)
    if expression == "0 * * * *":
        assert fires == [utc(2026, 3, 29, 1), utc(2026, 3, 29, 2), utc(2026, 3, 29, 3)]
    else:
        assert fires == [utc(2026, 3, 29, 2, 30), utc(2026, 3, 30, 2, 30), utc(2026, 3, 31, 2, 30)]


# --- DST (F-11) ------------------------------------------------------------------
# Europe/Berlin 2026: 03-29 02:00 CET -> 03:00 CEST at 01:00 UTC;
#                     10-25 03:00 CEST -> 02:00 CET at 01:00 UTC.
# America/New_York 2026: 03-08 02:00 EST -> 03:00 EDT at 07:00 UTC;
#                        11-01 02:00 EDT -> 01:00 EST at 06:00 UTC.

DST_CASES = [
    # Spring forward, fixed time in the gap: the first instant after it (03:00:00).
    ("berlin-spring-daily", "30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 1, 30),
     [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]),
    ("berlin-spring-daily-6", "0 30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 1, 30),
     [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]),
    ("berlin-spring-seconds", "30 30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 1, 30, 30),
     [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30, 30)]),
    ("berlin-spring-many-in-gap", "0 0,30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 1, 30),
     [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0), utc(2026, 3, 30, 0, 30)]),
    ("berlin-spring-second-before", "30 2 * * *", "Europe/Berlin", utc(2026, 3, 29, 0, 59, 59),
     [utc(2026, 3, 29, 1)]),
    ("berlin-spring-at-instant", "30 2 * * *", "Europe/Berlin", utc(2026, 3, 29, 1),
     [utc(2026, 3, 30, 0, 30)]),
    # Spring forward, wildcard: real elapsed time, 01:00 CET then 03:00 CEST.
    ("berlin-spring-hourly", "0 * * * *", "Europe/Berlin", utc(2026, 3, 28, 23, 30),
     [utc(2026, 3, 29, 0), utc(2026, 3, 29, 1), utc(2026, 3, 29, 2)]),
    ("berlin-spring-hourly-6", "0 0 * * * *", "Europe/Berlin", utc(2026, 3, 28, 23, 30),
     [utc(2026, 3, 29, 0), utc(2026, 3, 29, 1), utc(2026, 3, 29, 2)]),
    # Fall back, fixed time in the repeated hour: once, at the first occurrence.
    ("berlin-fall-daily", "30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 0, 30),
     [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]),
    ("berlin-fall-daily-6", "0 30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 0, 30),
     [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]),
    ("berlin-fall-second-before", "30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 29, 59),
     [utc(2026, 10, 25, 0, 30)]),
    ("berlin-fall-at-first", "30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 30),
     [utc(2026, 10, 26, 1, 30)]),
    # Starting in the second copy (02:15 CET) must not yield the first 02:30.
    ("berlin-fall-inside-second-copy", "30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 1, 15),
     [utc(2026, 10, 26, 1, 30)]),
    ("berlin-fall-inside-second-copy-6", "0 30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 1, 15),
     [utc(2026, 10, 26, 1, 30)]),
    ("berlin-fall-between-copies", "30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 45),
     [utc(2026, 10, 26, 1, 30)]),
    # Fall back, wildcard: both copies of 02:00.
    ("berlin-fall-hourly", "0 * * * *", "Europe/Berlin", utc(2026, 10, 24, 23, 30),
     [utc(2026, 10, 25, 0), utc(2026, 10, 25, 1), utc(2026, 10, 25, 2)]),
    ("berlin-fall-hourly-6", "0 0 * * * *", "Europe/Berlin", utc(2026, 10, 24, 23, 30),
     [utc(2026, 10, 25, 0), utc(2026, 10, 25, 1), utc(2026, 10, 25, 2)]),
    ("berlin-fall-hourly-from-first-copy", "0 * * * *", "Europe/Berlin", utc(2026, 10, 25, 0),
     [utc(2026, 10, 25, 1), utc(2026, 10, 25, 2)]),
    ("berlin-fall-step-in-hour", "*/30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 23),
     [utc(2026, 10, 25, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1), utc(2026, 10, 25, 1, 30),
      utc(2026, 10, 26, 1)]),
    ("new-york-spring-daily", "30 2 * * *", "America/New_York", utc(2026, 3, 7, 7, 30),
     [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]),
    ("new-york-spring-daily-6", "0 30 2 * * *", "America/New_York", utc(2026, 3, 7, 7, 30),
     [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]),
    ("new-york-spring-hourly", "0 * * * *", "America/New_York", utc(2026, 3, 8, 5, 30),
     [utc(2026, 3, 8, 6), utc(2026, 3, 8, 7), utc(2026, 3, 8, 8)]),
    ("new-york-spring-hourly-6", "0 0 * * * *", "America/New_York", utc(2026, 3, 8, 5, 30),
     [utc(2026, 3, 8, 6), utc(2026, 3, 8, 7), utc(2026, 3, 8, 8)]),
    # New York repeats 01:00-02:00; 02:30 happens once (EST).
    ("new-york-fall-daily-0230", "30 2 * * *", "America/New_York", utc(2026, 10, 31, 6, 30),
     [utc(2026, 11, 1, 7, 30), utc(2026, 11, 2, 7, 30)]),
    ("new-york-fall-daily-0130", "30 1 * * *", "America/New_York", utc(2026, 10, 31, 5, 30),
     [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]),
    ("new-york-fall-daily-0130-6", "0 30 1 * * *", "America/New_York", utc(2026, 10, 31, 5, 30),
     [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]),
    ("new-york-fall-inside-second-copy", "30 1 * * *", "America/New_York", utc(2026, 11, 1, 6, 15),
     [utc(2026, 11, 2, 6, 30)]),
    ("new-york-fall-hourly", "0 * * * *", "America/New_York", utc(2026, 11, 1, 4, 30),
     [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)]),
    ("new-york-fall-hourly-6", "0 0 * * * *", "America/New_York", utc(2026, 11, 1, 4, 30),
     [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("expression", "zone", "after", "expected"),
    [case[1:] for case in DST_CASES],
    ids=[case[0] for case in DST_CASES],
)
def test_cron_dst(expression: str, zone: str, after: datetime, expected: list[datetime]) -> None:
    assert cron_series(expression, zone, after, len(expected)) == expected
    assert cron_next(expression, zone, after) == expected[0]


LATEST_CASES = [
    ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 29, 59), utc(2026, 10, 24, 0, 30)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 0, 30)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 1, 15), utc(2026, 10, 25, 0, 30)),
    ("0 30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 1, 15), utc(2026, 10, 25, 0, 30)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 26, 1, 29, 59), utc(2026, 10, 25, 0, 30)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 3, 29, 0, 59, 59), utc(2026, 3, 28, 1, 30)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 3, 29, 1), utc(2026, 3, 29, 1)),
    ("30 30 2 * * *", "Europe/Berlin", utc(2026, 3, 29, 1, 0, 1), utc(2026, 3, 29, 1)),
    ("0 * * * *", "Europe/Berlin", utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 1)),
    ("0 * * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 59, 59), utc(2026, 10, 25, 0)),
    ("30 1 * * *", "America/New_York", utc(2026, 11, 1, 6, 45), utc(2026, 11, 1, 5, 30)),
    ("30 1 * * *", "America/New_York", utc(2026, 11, 1, 6, 15), utc(2026, 11, 1, 5, 30)),
    ("0 * * * *", "America/New_York", utc(2026, 3, 8, 6, 59, 59), utc(2026, 3, 8, 6)),
    ("* * * * * *", "UTC", utc(2026, 1, 5, 10, 0, 0, 999_999), utc(2026, 1, 5, 10)),
    ("0 0 29 2 *", "UTC", utc(2027, 6, 1), utc(2024, 2, 29)),
]


@pytest.mark.parametrize(("expression", "zone", "at_or_before", "expected"), LATEST_CASES)
def test_cron_latest_fire(
    expression: str, zone: str, at_or_before: datetime, expected: datetime
) -> None:
    spec = CronSpec(expression, zone)
    assert compute_latest_fire(spec, at_or_before=at_or_before) == expected


def test_fire_times_are_in_the_trigger_zone() -> None:
    times = compute_fire_times(
        CronSpec("30 2 * * *", "Europe/Berlin"), after=utc(2026, 3, 27, 12), count=3
    )
    assert times == [
        datetime(2026, 3, 28, 2, 30, tzinfo=BERLIN),
        datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN),
        datetime(2026, 3, 30, 2, 30, tzinfo=BERLIN),
    ]
    assert [t.utcoffset() for t in times] == [
        timedelta(hours=1),
        timedelta(hours=2),
        timedelta(hours=2),
    ]
    assert [t.strftime("%H:%M %Z") for t in times] == ["02:30 CET", "03:00 CEST", "02:30 CEST"]
    assert all(isinstance(t.tzinfo, ZoneInfo) and t.tzinfo.key == "Europe/Berlin" for t in times)


def test_fire_times_for_each_kind_and_count_bounds() -> None:
    interval = compute_fire_times(IntervalSpec(timedelta(hours=1)), after=utc(2026, 1, 1), count=2)
    assert interval == [utc(2026, 1, 1, 1), utc(2026, 1, 1, 2)]
    assert all(t.tzinfo is UTC for t in interval)
    at = datetime(2026, 12, 1, 8, tzinfo=NEW_YORK)
    once = compute_fire_times(OnceSpec(at), after=NOW, count=5)
    assert once == [at] and once[0].tzinfo is NEW_YORK
    assert compute_fire_times(OnceSpec(at), after=at, count=5) == []
    assert len(compute_fire_times(CronSpec("* * * * * *"), after=NOW, count=1000)) == 1000
    assert compute_fire_times(CronSpec("0 0 * * *", "UTC"), after=NOW, count=1) == [utc(2026, 1, 2)]


@pytest.mark.parametrize("count", [0, -1, 1001])
def test_fire_times_count_out_of_range(count: int) -> None:
    with pytest.raises(TriggerError) as caught:
        compute_fire_times(CronSpec("* * * * *"), after=NOW, count=count)
    assert caught.value.field == "count"


def test_first_fire_for_cron_is_strictly_after_now() -> None:
    spec = CronSpec("0 12 * * *")
    assert compute_first_fire(spec, now=utc(2026, 1, 1, 11, 59, 59)) == utc(2026, 1, 1, 12)
    assert compute_first_fire(spec, now=utc(2026, 1, 1, 12)) == utc(2026, 1, 2, 12)


# --- intervals -------------------------------------------------------------------


@pytest.mark.parametrize(
    "every", [MIN_INTERVAL, timedelta(seconds=2), timedelta(minutes=90), MAX_INTERVAL]
)
def test_interval_bounds_accepted(every: timedelta) -> None:
    assert validate_spec(IntervalSpec(every), now=NOW) == IntervalSpec(every)


@pytest.mark.parametrize(
    ("every", "message"),
    [
        (timedelta(0), "must be between 1 second and 30 days, got 0 s"),
        (-SECOND, "must be between 1 second and 30 days, got -1 s"),
        (MAX_INTERVAL + SECOND, "must be between 1 second and 30 days, got 2592001 s"),
        (timedelta(seconds=1.5), "must be a whole number of seconds"),
        (timedelta(milliseconds=999), "must be a whole number of seconds"),
    ],
)
def test_interval_bounds_rejected(every: timedelta, message: str) -> None:
    with pytest.raises(TriggerError) as caught:
        validate_spec(IntervalSpec(every), now=NOW)
    assert (caught.value.field, caught.value.message) == ("interval_seconds", message)


START = utc(2026, 1, 1, 10)
QUARTER = timedelta(minutes=15)


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [
        (IntervalSpec(QUARTER), utc(2026, 1, 1, 10, 7, 3), utc(2026, 1, 1, 10, 22, 3)),
        (IntervalSpec(SECOND), utc(2026, 1, 1), utc(2026, 1, 1, 0, 0, 1)),
        (IntervalSpec(MAX_INTERVAL), utc(2026, 1, 1), utc(2026, 1, 31)),
        # a grid from start_at: start_at + k * every, strictly after `after`
        (IntervalSpec(QUARTER, start_at=START), utc(2026, 1, 1, 9), START),
        (IntervalSpec(QUARTER, start_at=START), START - SECOND, START),
        (IntervalSpec(QUARTER, start_at=START), START, START + QUARTER),
        (IntervalSpec(QUARTER, start_at=START), START + QUARTER - SECOND, START + QUARTER),
        (IntervalSpec(QUARTER, start_at=START), START + QUARTER, START + 2 * QUARTER),
        (IntervalSpec(QUARTER, start_at=START), utc(2026, 3, 1, 7, 31), utc(2026, 3, 1, 7, 45)),
        # anchored on a run's start or end: after + every, never before start_at
        (
            IntervalSpec(QUARTER, IntervalAnchor.FROM_FINISH),
            utc(2026, 1, 1, 10, 7, 3),
            utc(2026, 1, 1, 10, 22, 3),
        ),
        (
            IntervalSpec(QUARTER, IntervalAnchor.FROM_START, START),
            utc(2026, 1, 1, 10, 7),
            utc(2026, 1, 1, 10, 22),
        ),
        (IntervalSpec(QUARTER, IntervalAnchor.FROM_FINISH, START), utc(2026, 1, 1, 9), START),
    ],
)
def test_interval_next_fire(spec: IntervalSpec, after: datetime, expected: datetime) -> None:
    assert compute_next_fire(spec, after=after, now=after) == expected


@pytest.mark.parametrize(
    ("spec", "now", "expected"),
    [
        (IntervalSpec(QUARTER), START, START + QUARTER),
        (IntervalSpec(QUARTER, start_at=START), START - SECOND, START),
        (IntervalSpec(QUARTER, start_at=START), START, START),
        (IntervalSpec(QUARTER, start_at=START), START + SECOND, START + QUARTER),
        (IntervalSpec(QUARTER, start_at=START), START + QUARTER, START + 2 * QUARTER),
        (
            IntervalSpec(QUARTER, IntervalAnchor.FROM_FINISH, START),
            START + SECOND,
            START + QUARTER + SECOND,
        ),
    ],
)
def test_interval_first_fire(spec: IntervalSpec, now: datetime, expected: datetime) -> None:
    assert compute_first_fire(spec, now=now) == expected


@pytest.mark.parametrize(
    ("start_at", "expected"),
    [
        # Daily from Berlin midnight: elapsed time, so 01:00 CEST after spring forward...
        (datetime(2026, 3, 28, tzinfo=BERLIN), [utc(2026, 3, 28, 23), utc(2026, 3, 29, 23)]),
        # ...and 23:00 CET the day after falling back.
        (datetime(2026, 10, 24, tzinfo=BERLIN), [utc(2026, 10, 24, 22), utc(2026, 10, 25, 22)]),
    ],
)
def test_interval_follows_elapsed_time_across_dst(
    start_at: datetime, expected: list[datetime]
) -> None:
    spec = validate_spec(IntervalSpec(timedelta(days=1), start_at=start_at), now=NOW)
    assert compute_fire_times(spec, after=start_at, count=2) == expected


def test_interval_validation_normalizes_start_at_and_anchor() -> None:
    spec = IntervalSpec(QUARTER, "from_finish", datetime(2026, 1, 1, 11, tzinfo=BERLIN))  # type: ignore[arg-type]
    valid = validate_spec(spec, now=NOW)
    assert valid == IntervalSpec(QUARTER, IntervalAnchor.FROM_FINISH, START)
    assert isinstance(valid, IntervalSpec) and valid.start_at is not None
    assert valid.start_at.tzinfo is UTC and valid.anchor is IntervalAnchor.FROM_FINISH


# --- once ----------------------------------------------------------------------

AT = datetime(2026, 12, 1, 8, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("after", "expected"),
    [(AT - timedelta(days=300), AT), (AT - SECOND, AT), (AT, None), (AT + SECOND, None)],
)
def test_once_fires_once(after: datetime, expected: datetime | None) -> None:
    assert compute_next_fire(OnceSpec(AT), after=after, now=after) == expected


def test_once_first_fire_and_validation() -> None:
    assert compute_first_fire(OnceSpec(AT), now=AT - SECOND) == utc(2026, 12, 1, 7)
    assert compute_first_fire(OnceSpec(AT), now=AT) is None
    assert validate_spec(OnceSpec(AT), now=AT - SECOND) == OnceSpec(AT)
    for now in (AT, AT + SECOND):
        with pytest.raises(TriggerError) as caught:
            validate_spec(OnceSpec(AT), now=now)
        assert (caught.value.field, caught.value.message) == (
            "run_at",
            "2026-12-01 08:00 CET is in the past",
        )


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN), utc(2026, 10, 25, 0, 30)),
        (datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=BERLIN), utc(2026, 10, 25, 1, 30)),
        (datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN), utc(2026, 3, 29, 1)),
        (datetime(2026, 11, 1, 1, 30, fold=1, tzinfo=NEW_YORK), utc(2026, 11, 1, 6, 30)),
    ],
)
def test_once_at_dst_instants(at: datetime, expected: datetime) -> None:
    assert compute_first_fire(OnceSpec(at), now=NOW) == expected


# --- every error names its field --------------------------------------------------

NAIVE = datetime(2026, 12, 1, 8)  # noqa: DTZ001 - deliberately naive


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (CronSpec("0 25 * * *"), "cron_expression"),
        (CronSpec("0 0 31 4 *"), "cron_expression"),
        (CronSpec("0 8 * * *", "Mars/Olympus"), "timezone"),
        (IntervalSpec(timedelta(0)), "interval_seconds"),
        (IntervalSpec(MAX_INTERVAL + SECOND), "interval_seconds"),
        (IntervalSpec(QUARTER, "sideways"), "interval_anchor"),  # type: ignore[arg-type]
        (IntervalSpec(QUARTER, start_at=NAIVE), "start_at"),
        (OnceSpec(NAIVE), "run_at"),
        (OnceSpec(NOW - SECOND), "run_at"),
    ],
)
def test_validate_spec_error_fields(spec: Any, field: str) -> None:
    with pytest.raises(TriggerError) as caught:
        validate_spec(spec, now=NOW)
    assert caught.value.field == field
    assert str(caught.value) == f"{field}: {caught.value.message}"


def test_validate_spec_normalizes_cron() -> None:
    spec = validate_spec(CronSpec(" 0  8 * * mon-fri ", "europe/berlin"), now=NOW)
    assert spec == CronSpec("0 8 * * MON-FRI", "Europe/Berlin")


def test_compute_functions_reject_naive_datetimes() -> None:
    with pytest.raises(TriggerError) as caught:
        compute_next_fire(CronSpec("* * * * *"), after=NAIVE, now=NOW)
    assert caught.value.field == "after"
    with pytest.raises(TriggerError):
        compute_first_fire(CronSpec("* * * * *"), now=NAIVE)


# --- words -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            CronSpec("0 8 * * MON-FRI", "Europe/Berlin"),
            "At 08:00, Monday through Friday (Europe/Berlin)",
        ),
        (CronSpec("*/15 * * * *", "utc"), "Every 15 minutes (UTC)"),
        (CronSpec("0 30 2 * * *", "America/New_York"), "At 02:30 (America/New_York)"),
        (CronSpec("0 0 L * *"), "At 00:00, on the last day of the month (UTC)"),
        # day-of-month and day-of-week both set: either matches, and the words say so
        (CronSpec("0 0 13 * FRI"), "At 00:00, on day 13 of the month, or on Friday (UTC)"),
        (CronSpec("0 0 ? * MON"), "At 00:00, only on Monday (UTC)"),
        (IntervalSpec(timedelta(seconds=1)), "every 1 second"),
        (IntervalSpec(timedelta(seconds=2)), "every 2 seconds"),
        (IntervalSpec(timedelta(minutes=90)), "every 90 minutes"),
        (IntervalSpec(timedelta(hours=2)), "every 2 hours"),
        (IntervalSpec(timedelta(days=1, hours=2)), "every 1 day, 2 hours"),
        (IntervalSpec(timedelta(days=30)), "every 30 days"),
        (IntervalSpec(timedelta(seconds=3661)), "every 1 hour, 1 minute, 1 second"),
        (
            IntervalSpec(timedelta(minutes=5), IntervalAnchor.FROM_FINISH),
            "every 5 minutes after the previous run ends",
        ),
        (
            IntervalSpec(timedelta(minutes=5), IntervalAnchor.FROM_START),
            "every 5 minutes after the previous run starts",
        ),
        (IntervalSpec(QUARTER, start_at=START), "every 15 minutes, starting 2026-01-01 10:00 UTC"),
        (OnceSpec(AT), "once at 2026-12-01 08:00 CET"),
        (OnceSpec(datetime(2026, 7, 1, 8, 0, 30, tzinfo=UTC)), "once at 2026-07-01 08:00:30 UTC"),
    ],
)
def test_describe(spec: Any, words: str) -> None:
    assert describe(spec) == words


def test_describe_rejects_invalid_cron() -> None:
    with pytest.raises(TriggerError):
        describe(CronSpec("0 25 * * *"))


def test_specs_are_frozen_and_default_to_utc() -> None:
    spec = CronSpec("* * * * *")
    assert spec.timezone == "UTC"
    with pytest.raises(AttributeError):
        spec.expression = "0 * * * *"  # type: ignore[misc]
    assert IntervalSpec(SECOND).anchor is IntervalAnchor.FIXED_RATE
