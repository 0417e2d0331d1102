"""Calendar presets (F-14): daily, a day of the month, a date, and the first
or last day of a month, quarter, half-year or year, each at a local time of
day. Part of the pure core.

A preset compiles to a cron expression (6 fields when its time has seconds,
else 5; ``L`` for a last day), so the cron walk and its DST rule (F-11) apply
unchanged: a time in a spring-forward gap fires at the first instant after
the gap, a time that occurs twice fires once, at its first occurrence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import time
from enum import StrEnum

from jobs.core.constraints import Constraints
from jobs.core.cron import TriggerError, gettext_noop, same

MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
# The most days each month can have (29 February: fires in leap years).
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class CalendarRule(StrEnum):
    # Every day.
    DAILY = "daily"
    # Monthly on `day` (1..31). Months without that day are skipped: day 31
    # fires only in the seven months that have a 31st (MONTH_END for last days).
    DAY_OF_MONTH = "day_of_month"
    # Yearly on `month`/`day`; 29 February fires in leap years only.
    DATE = "date"
    MONTH_START = "month_start"
    MONTH_END = "month_end"
    # Quarters start in January, April, July, October; end in March, June,
    # September, December.
    QUARTER_START = "quarter_start"
    QUARTER_END = "quarter_end"
    # Half years start on 1 January and 1 July; end on 30 June and 31 December.
    HALF_YEAR_START = "half_year_start"
    HALF_YEAR_END = "half_year_end"
    YEAR_START = "year_start"
    YEAR_END = "year_end"


@dataclass(frozen=True)
class CalendarSpec:
    """A preset firing at local time `at` (whole seconds) in `timezone`.
    `day` is used by DAY_OF_MONTH and DATE, `month` by DATE only."""

    rule: CalendarRule
    at: time
    timezone: str = "UTC"
    day: int | None = None
    month: int | None = None
    constraints: Constraints | None = None


# rule -> (day-of-month, month) cron fields; DAY_OF_MONTH and DATE fill them in.
_FIELDS = {
    CalendarRule.DAILY: ("*", "*"),
    CalendarRule.MONTH_START: ("1", "*"),
    CalendarRule.MONTH_END: ("L", "*"),
    CalendarRule.QUARTER_START: ("1", "1,4,7,10"),
    CalendarRule.QUARTER_END: ("L", "3,6,9,12"),
    CalendarRule.HALF_YEAR_START: ("1", "1,7"),
    CalendarRule.HALF_YEAR_END: ("L", "6,12"),
    CalendarRule.YEAR_START: ("1", "1"),
    CalendarRule.YEAR_END: ("31", "12"),
}
_WORDS = {
    CalendarRule.DAILY: "daily",
    CalendarRule.MONTH_START: "on the first day of each month",
    CalendarRule.MONTH_END: "on the last day of each month",
    CalendarRule.QUARTER_START: "on the first day of each quarter",
    CalendarRule.QUARTER_END: "on the last day of each quarter",
    CalendarRule.HALF_YEAR_START: "on the first day of each half-year",
    CalendarRule.HALF_YEAR_END: "on the last day of each half-year",
    CalendarRule.YEAR_START: "on the first day of each year",
    CalendarRule.YEAR_END: "on the last day of each year",
}


def _number(value: object, field: str, lowest: int, highest: int) -> int:
    if value is None:
        raise TriggerError(field, gettext_noop("is required for this calendar rule"))
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= highest:
        raise TriggerError(
            field,
            gettext_noop("must be a number from %(lowest)s to %(highest)s, got %(value)r"),
            lowest=lowest,
            highest=highest,
            value=value,
        )
    return value


def _check_day_month(spec: CalendarSpec) -> tuple[int | None, int | None]:
    uses_day = spec.rule in (CalendarRule.DAY_OF_MONTH, CalendarRule.DATE)
    if not uses_day and spec.day is not None:
        raise TriggerError("day", gettext_noop("is used only by the rules day_of_month and date"))
    if spec.rule is not CalendarRule.DATE and spec.month is not None:
        raise TriggerError("month", gettext_noop("is used only by the rule date"))
    if not uses_day:
        return None, None
    day = _number(spec.day, "day", 1, 31)
    if spec.rule is CalendarRule.DAY_OF_MONTH:
        return day, None
    month = _number(spec.month, "month", 1, 12)
    if day > _MONTH_DAYS[month - 1]:
        raise TriggerError(
            "day",
            gettext_noop("%(day)s %(month_name)s never occurs"),
            day=day,
            month_name=MONTH_NAMES[month - 1],
        )
    return day, month


def check_calendar(spec: CalendarSpec) -> CalendarSpec:
    """Check a preset's rule, time, day and month; return it with `rule` as a
    CalendarRule. The time zone and constraints are left to the caller.
    Raises TriggerError naming the field: "rule" (unknown), "at" (not
    a naive time of day in whole seconds), "day" (missing, outside 1..31, set
    for a rule that does not use it, or a date that never occurs such as
    30 February), "month" (missing or outside 1..12 for DATE, or set for
    another rule)."""
    if spec.rule not in CalendarRule.__members__.values():
        raise TriggerError("rule", gettext_noop("unknown calendar rule %(rule)r"), rule=spec.rule)
    spec = CalendarSpec(
        CalendarRule(spec.rule), spec.at, spec.timezone, spec.day, spec.month, spec.constraints
    )
    at = spec.at
    if not isinstance(at, time) or at.tzinfo is not None:
        raise TriggerError("at", gettext_noop("must be a local time of day without a time zone"))
    if at.microsecond:
        raise TriggerError("at", gettext_noop("must be a whole number of seconds"))
    _check_day_month(spec)
    return spec


def calendar_cron(spec: CalendarSpec) -> str:
    """The cron expression a preset fires on, e.g. "0 23 L 3,6,9,12 *" for
    QUARTER_END at 23:00. Raises TriggerError as `check_calendar`."""
    spec = check_calendar(spec)
    day, month = _check_day_month(spec)
    dom, months = _FIELDS.get(spec.rule, (str(day), str(month) if month else "*"))
    at = spec.at
    clock = f"{at.second} {at.minute} {at.hour}" if at.second else f"{at.minute} {at.hour}"
    return f"{clock} {dom} {months} *"


# Each preset's words with its time of day.
_AT_WORDS = {
    CalendarRule.DAILY: gettext_noop("daily at %(clock)s"),
    CalendarRule.MONTH_START: gettext_noop("on the first day of each month at %(clock)s"),
    CalendarRule.MONTH_END: gettext_noop("on the last day of each month at %(clock)s"),
    CalendarRule.QUARTER_START: gettext_noop("on the first day of each quarter at %(clock)s"),
    CalendarRule.QUARTER_END: gettext_noop("on the last day of each quarter at %(clock)s"),
    CalendarRule.HALF_YEAR_START: gettext_noop("on the first day of each half-year at %(clock)s"),
    CalendarRule.HALF_YEAR_END: gettext_noop("on the last day of each half-year at %(clock)s"),
    CalendarRule.YEAR_START: gettext_noop("on the first day of each year at %(clock)s"),
    CalendarRule.YEAR_END: gettext_noop("on the last day of each year at %(clock)s"),
}
_MONTH_WORDS = (
    gettext_noop("January"),
    gettext_noop("February"),
    gettext_noop("March"),
    gettext_noop("April"),
    gettext_noop("May"),
    gettext_noop("June"),
    gettext_noop("July"),
    gettext_noop("August"),
    gettext_noop("September"),
    gettext_noop("October"),
    gettext_noop("November"),
    gettext_noop("December"),
)


def calendar_words(spec: CalendarSpec, translate: Callable[[str], str] = same) -> str:
    """The preset in words, without its time zone: "daily at 05:31",
    "monthly on day 15 at 06:00", "every year on 24 December at 18:00", "on
    the last day of each quarter at 23:00". Raises TriggerError as
    `check_calendar`."""
    spec = check_calendar(spec)
    day, month = _check_day_month(spec)
    clock = spec.at.strftime("%H:%M:%S" if spec.at.second else "%H:%M")
    if spec.rule is CalendarRule.DAY_OF_MONTH:
        words = translate(gettext_noop("monthly on day %(day)s at %(clock)s"))
        return words % {"day": day, "clock": clock}
    if spec.rule is CalendarRule.DATE:
        assert month is not None
        words = translate(gettext_noop("every year on %(day)s %(month)s at %(clock)s"))
        return words % {"day": day, "month": translate(_MONTH_WORDS[month - 1]), "clock": clock}
    return translate(_AT_WORDS[spec.rule]) % {"clock": clock}
