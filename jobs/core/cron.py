"""Cron expressions for the pure core (F-10, F-11): validation with messages
that name the cron field, the DST-aware walk over fire times, and words.

cronsim parses and walks cron expressions; this module adds one DST rule for 5- and 6-field
expressions alike (F-11, as Debian's cron does it):

* A *fixed-time* trigger (neither the minute nor the hour field starts with
  ``*``) matches local wall-clock time. A wall time inside a spring-forward
  gap fires at the first instant after the gap; a wall time that occurs twice
  (fall back) fires once, at its first occurrence.
* A *wildcard* trigger (minute or hour starts with ``*``: a wildcard or a
  step) follows real elapsed time: an hourly job fires in both copies of a
  repeated hour, and a gap removes only instants that never exist.

cronsim's own Debian fix-up covers 5-field expressions only, lands a 6-field
02:30:30 on 03:00:30, and can return a time *before* its start when started
in the second copy of a repeated hour. So fixed-time triggers walk naive wall
times in cronsim and `_wall_to_utc` maps each one to an instant.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

_SECOND = timedelta(seconds=1)
_TINY = timedelta(microseconds=1)
_ZERO = timedelta(0)


def gettext_noop(message: str) -> str:
    """Marks `message` for translation (makemessages finds it) and returns it
    unchanged: the pure core imports no Django; the edge translates
    (jobs/i18n.py: gettext(error.template) % error.params)."""
    return message


def same(message: str) -> str:
    """The default `translate` of the words functions: English as marked."""
    return message


class TriggerError(ValueError):
    """Invalid trigger input; ``field`` names the model field, ``message`` says
    what is wrong (in English). A message marked with gettext_noop keeps its
    ``template`` and named ``params`` apart, so the edge can translate it."""

    def __init__(self, field: str, message: str, /, **params: object) -> None:
        text = message % params if params else message
        super().__init__(f"{field}: {text}")
        self.field = field
        self.message = text
        self.template = message
        self.params = params


# (name, lowest, highest) per cron field; 5-field expressions drop "second".
_FIELDS = (
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),  # 0 and 7 are Sunday
)
_MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
_NAMES = {
    "month": {name: i + 1 for i, name in enumerate(_MONTHS)},
    "day-of-week": {name: i for i, name in enumerate("SUN MON TUE WED THU FRI SAT".split())},
}
_DAY_FIELDS = ("day-of-month", "day-of-week")


def _cron_error(field: str, message: str, **params: object) -> TriggerError:
    """An error of one cron field: `message` starts with "%(field)s: " (the
    field's name stays English: it is the cron syntax's own word)."""
    return TriggerError("cron_expression", message, field=field, **params)


@functools.cache
def _zone_names() -> dict[str, str]:
    names = {name.casefold(): name for name in available_timezones()}
    names.setdefault("utc", "UTC")  # even where no tz database is installed
    return names


def canonical_timezone(name: str) -> str:
    """The IANA name `name` in canonical spelling, matched case-insensitively
    ("europe/vienna" -> "Europe/Vienna"). Raises TriggerError("timezone")."""
    canonical = _zone_names().get(name.strip().casefold()) if isinstance(name, str) else None
    if canonical is None:
        raise TriggerError("timezone", gettext_noop("unknown time zone %(name)r"), name=name)
    return canonical


def _value(field: tuple[str, int, int], text: str) -> int:
    name, lowest, highest = field
    names = _NAMES.get(name, {})
    if text in names:
        return names[text]
    if not (text.isascii() and text.isdigit()):
        if not text:
            raise _cron_error(name, gettext_noop("%(field)s: empty value"))
        if names:
            raise _cron_error(
                name, gettext_noop("%(field)s: %(text)r is not a number or a name"), text=text
            )
        raise _cron_error(name, gettext_noop("%(field)s: %(text)r is not a number"), text=text)
    if not lowest <= int(text) <= highest:
        raise _cron_error(
            name,
            gettext_noop("%(field)s: %(value)d is out of range %(lowest)d-%(highest)d"),
            value=int(text),
            lowest=lowest,
            highest=highest,
        )
    return int(text)


def _normalize_term(field: tuple[str, int, int], term: str) -> str:
    name, lowest, highest = field
    if term.startswith("/"):
        term = "*" + term  # Quartz-style "/15" means "*/15"
    if name == "day-of-month" and term in ("L", "LW"):
        return term
    if name == "day-of-week" and "#" in term:
        day, _, nth = term.partition("#")
        _value(field, day)
        if nth not in ("1", "2", "3", "4", "5"):
            raise _cron_error(name, gettext_noop("%(field)s: '#%(nth)s' must be #1 to #5"), nth=nth)
        return term
    if name == "day-of-week" and term.endswith("L"):
        if term == "L":
            raise _cron_error(
                name,
                gettext_noop("%(field)s: 'L' needs a day before it, e.g. 5L for the last Friday"),
            )
        return f"{_value(field, term[:-1])}L"  # cronsim reads only a number before L
    base, slash, step = term.partition("/")
    if slash and not (step.isascii() and step.isdigit() and 0 < int(step) <= highest - lowest):
        raise _cron_error(
            name,
            gettext_noop("%(field)s: step %(step)r must be a number from 1 to %(most)d"),
            step=step,
            most=highest - lowest,
        )
    if "-" in base:
        start, _, end = base.partition("-")
        if _value(field, start) > _value(field, end):
            raise _cron_error(
                name, gettext_noop("%(field)s: range %(range)s runs backwards"), range=base
            )
    elif base != "*":
        _value(field, base)
    return term


def normalize_cron(expression: str) -> str:
    """Validate a cron expression and return it normalized: single spaces,
    upper-case names, ``?`` -> ``*``, a bare ``/n`` -> ``*/n``, ``FRIL`` -> ``5L``.

    5 fields, or 6 with seconds first (Spring style). Raises
    TriggerError("cron_expression") naming the cron field at fault, or
    starting "never fires:" for an expression no date matches ("0 0 31 4 *").
    """
    parts = expression.upper().split() if isinstance(expression, str) else []
    if len(parts) not in (5, 6):
        raise TriggerError(
            "cron_expression",
            gettext_noop("expected 5 or 6 fields, got %(count)d"),
            count=len(parts),
        )
    fields = _FIELDS[6 - len(parts) :]
    normalized = []
    for field, text in zip(fields, parts, strict=True):
        if text == "?" and field[0] not in _DAY_FIELDS:
            raise _cron_error(
                field[0],
                gettext_noop("%(field)s: '?' is allowed only in day-of-month and day-of-week"),
            )
        terms = ["*"] if text == "?" else [_normalize_term(field, t) for t in text.split(",")]
        normalized.append(",".join(terms))
    result = " ".join(normalized)
    try:
        # A fixed start keeps this pure; cronsim gives up after 50 years.
        next(CronSim(result, datetime(2000, 1, 1, tzinfo=UTC)))
    except CronSimError:
        # Every field passed our checks, so cronsim objects to a day that no
        # selected month has (31 in April, 30 in February).
        dom, month = normalized[-3], normalized[-2]
        raise TriggerError(
            "cron_expression",
            gettext_noop("never fires: day-of-month %(dom)s does not occur in month %(month)s"),
            dom=dom,
            month=month,
        ) from None
    except StopIteration:
        raise TriggerError(
            "cron_expression", gettext_noop("never fires: no date matches")
        ) from None
    return result


def cron_fixed_times(expression: str) -> tuple[time, ...] | None:
    """The local times of day at which a *fixed-time* cron fires, ascending:
    its second (0 in a 5-field expression), minute and hour fields are each a
    number or a list of numbers. None when any of them has a wildcard, a range
    or a step. Raises TriggerError("cron_expression") for an invalid cron."""
    parts = normalize_cron(expression).split()
    if len(parts) == 5:
        parts = ["0", *parts]
    values: list[list[int]] = []
    for text in parts[:3]:
        terms = text.split(",")
        if not all(term.isascii() and term.isdigit() for term in terms):
            return None
        values.append(sorted({int(term) for term in terms}))
    seconds, minutes, hours = values
    return tuple(time(h, m, s) for h in hours for m in minutes for s in seconds)


# --- fire times -------------------------------------------------------------


@functools.cache
def zone_of(name: str) -> tzinfo:
    canonical = canonical_timezone(name)
    return UTC if canonical == "UTC" else ZoneInfo(canonical)


@functools.lru_cache(maxsize=1024)
def compile_cron(expression: str, timezone_name: str) -> tuple[str, tzinfo, bool]:
    """(normalized expression, zone, follows wall-clock time?)."""
    expr = normalize_cron(expression)
    minute, hour = expr.split()[-5:-3]
    return expr, zone_of(timezone_name), not (minute.startswith("*") or hour.startswith("*"))


def _wall_to_utc(wall: datetime, zone: tzinfo) -> datetime:
    """The instant a fixed-time trigger fires for naive local time `wall`."""
    # fold=0 picks the first occurrence of a repeated wall time.
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == wall:
        return instant
    # `wall` lies in a spring-forward gap. Read with the offset after the
    # change it is an instant before the gap, with the one before the change
    # an instant after it: bisect between them for the end of the gap.
    before = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = 0, int((instant - before) / _SECOND)
    while high - low > 1:
        middle = (low + high) // 2
        if (before + middle * _SECOND).astimezone(zone).replace(tzinfo=None) > wall:
            high = middle
        else:
            low = middle
    return before + high * _SECOND


def cron_fire_times(
    expression: str, timezone_name: str, start: datetime, *, reverse: bool
) -> Iterator[datetime]:
    """UTC fire times strictly after `start`, or with `reverse` at or before it, in order."""
    expr, zone, wall_clock = compile_cron(expression, timezone_name)
    if reverse:
        # cronsim's reverse walk begins one second before the time it is given.
        begin = (start.astimezone(UTC).replace(microsecond=0) + _SECOND).astimezone(zone)
    else:
        begin = start.astimezone(zone)
    instants: Iterator[datetime]
    if wall_clock:
        wall = begin.replace(tzinfo=None)
        if reverse and begin.fold:
            # In the second copy of a repeated hour, the wall times still ahead
            # in that hour map to its first copy, already past: walk them too.
            wall += (begin.replace(fold=0).utcoffset() or _ZERO) - (begin.utcoffset() or _ZERO)
        instants = (_wall_to_utc(w, zone) for w in CronSim(expr, wall, reverse=reverse))
    else:
        instants = (fire.astimezone(UTC) for fire in CronSim(expr, begin, reverse=reverse))
    # Wall times map to instants in order, but gap times share one instant and
    # a walk begun in a repeated hour meets wall times of its first copy.
    bound = start
    for instant in instants:
        if instant <= bound if reverse else instant > bound:
            yield instant
            bound = instant - _TINY if reverse else instant


# --- words ------------------------------------------------------------------


# cron-descriptor names days and months in the process's locale (English
# here); its other languages translate the rest of the sentence.
_DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# How cron-descriptor joins the day-of-week clause, per locale: (", or ", "only ").
_EITHER = {"en_US": (", or ", "only "), "de_DE": (", oder ", "nur ")}


def cron_words(
    expression: str, locale_code: str = "en_US", translate: Callable[[str], str] = same
) -> str:
    """A cron expression in words by cron-descriptor, in `locale_code` (one
    of _EITHER's); day and month names through `translate`."""
    # Imported here: only the admin and the API describe schedules in words.
    from cron_descriptor import ExpressionDescriptor, Options

    options = Options()
    options.locale_code = locale_code  # not the process locale
    options.use_24hour_time_format = True
    either_word, only_word = _EITHER.get(locale_code, _EITHER["en_US"])
    try:
        descriptor = ExpressionDescriptor(expression, options)
        words = str(descriptor.get_description())
        dom, dow = expression.split()[-3::2]
        if not (dom.startswith("*") or dow.startswith("*")):
            # Both day fields set: cron fires when *either* matches, which
            # cron-descriptor's "..., only on Friday" would hide.
            # (cron-descriptor 2 says "or" itself; 1.x, which django-celery-beat
            # pins, does not.)
            day = str(descriptor.get_day_of_week_description())
            if not day.startswith(either_word):
                either = day.removeprefix(", ").removeprefix(only_word)
                words = words.replace(day, f"{either_word}{either}", 1)
        if locale_code != "en_US":
            names = "|".join(_DAY_NAMES + _MONTH_NAMES)
            words = re.sub(rf"\b({names})\b", lambda m: translate(m.group(1)), words)
        return words
    except Exception:  # cron-descriptor rejects a few forms cronsim takes
        return f"cron {expression}"
