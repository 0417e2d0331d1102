"""Holiday calendars (F-105): the HolidayCalendar model and the days it
names, for triggers to skip (helpers that read a calendar and raise
ValidationError naming its field); the trigger side is in jobs.specs and
jobs.services.

A calendar's days are the public holidays of its country (and subdivision)
from the `holidays` package, plus its extra dates. They are computed for a
range of years and cached per process by content (country, subdivision,
extra dates, years), so an edited calendar is never served stale and the
beat does not recompute a country's holidays on every claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from functools import lru_cache
from types import MappingProxyType

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs.audit import audited


def parse_extra_dates(text: str) -> dict[date, str]:
    """One ISO date (YYYY-MM-DD) per line, optionally followed by a name;
    blank lines and lines starting with '#' are skipped. Raises
    ValidationError on "extra_dates" naming the first bad line."""
    days: dict[date, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        first, _, name = line.partition(" ")
        try:
            day = date.fromisoformat(first)
        except ValueError:
            raise ValidationError(
                {
                    "extra_dates": gettext(
                        "line %(number)s: %(line)r does not start with a date (YYYY-MM-DD)"
                    )
                    % {"number": number, "line": line}
                }
            ) from None
        days[day] = name.strip() or "extra date"
    return days


def canonical_region(country: str, subdivision: str) -> tuple[str, str]:
    """(country, subdivision) in the spelling the `holidays` package knows
    ("de", "by" -> "DE", "BY"); both may be empty. Raises ValidationError on
    "country" (unknown) or "subdivision" (unknown for the country, or given
    without a country), naming the value."""
    country, subdivision = country.strip().upper(), subdivision.strip()
    if not country:
        if subdivision:
            raise ValidationError({"subdivision": gettext("needs a country")})
        return "", ""
    import holidays  # here, not at the top: about 4 MB a process without calendars never needs

    supported = holidays.list_supported_countries(include_aliases=True)
    if country not in supported:
        raise ValidationError(
            {
                "country": gettext(
                    "unknown country %(country)r: use an ISO 3166 code such as DE or US"
                )
                % {"country": country}
            }
        )
    if not subdivision:
        return country, ""
    known = {s.casefold(): s for s in supported[country]}
    if subdivision.casefold() not in known:
        listed = ", ".join(supported[country][:40]) or gettext("none")
        raise ValidationError(
            {
                "subdivision": gettext(
                    "unknown subdivision %(subdivision)r of %(country)s (known: %(known)s)"
                )
                % {"subdivision": subdivision, "country": country, "known": listed}
            }
        )
    return country, known[subdivision.casefold()]


def validate_calendar(calendar: HolidayCalendar) -> None:
    """Check a calendar's country, subdivision and extra dates; store the
    canonical country and subdivision spellings. Raises ValidationError
    naming the field."""
    calendar.country, calendar.subdivision = canonical_region(
        calendar.country, calendar.subdivision
    )
    parse_extra_dates(calendar.extra_dates)


@lru_cache(maxsize=256)
def _days(
    country: str, subdivision: str, extra_dates: str, first_year: int, last_year: int
) -> Mapping[date, str]:
    country, subdivision = canonical_region(country, subdivision)
    days: dict[date, str] = {}
    if country:
        import holidays  # loaded by canonical_region above

        years = range(first_year, last_year + 1)
        days.update(holidays.country_holidays(country, subdiv=subdivision or None, years=years))
    days.update(
        (day, name)
        for day, name in parse_extra_dates(extra_dates).items()
        if first_year <= day.year <= last_year
    )
    return MappingProxyType(days)


def calendar_days(calendar: HolidayCalendar, years: range) -> Mapping[date, str]:
    """The calendar's days in `years` (a range of years, step 1) with their
    names: its country's public holidays plus its extra dates. Raises
    ValidationError as `validate_calendar` for a calendar stored without
    validation."""
    if not years:
        return MappingProxyType({})
    return _days(calendar.country, calendar.subdivision, calendar.extra_dates, years[0], years[-1])


def upcoming_days(calendar: HolidayCalendar, *, today: date, count: int) -> list[tuple[date, str]]:
    """The calendar's next `count` days from `today` on (today included),
    looking up to 5 years ahead; for the admin's preview."""
    days = calendar_days(calendar, range(today.year, today.year + 6))
    return sorted((d, n) for d, n in days.items() if d >= today)[:count]


class HolidayCalendar(models.Model):
    """Named days that triggers can skip (F-105): the public holidays of a
    country (and subdivision) from the `holidays` package, plus extra dates.
    Its days are computed by jobs.calendars.calendar_days."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    description = models.TextField(_("description"), blank=True)
    country = models.CharField(
        _("country"),
        max_length=8,
        blank=True,
        help_text=_("ISO 3166 code whose public holidays count, e.g. DE. Empty: extra dates only."),
    )
    subdivision = models.CharField(
        _("subdivision"),
        max_length=16,
        blank=True,
        help_text=_("State or province code, e.g. BY (Bavaria)."),
    )
    extra_dates = models.TextField(
        _("extra dates"),
        blank=True,
        help_text=_(
            "One date per line (YYYY-MM-DD), optionally followed by a name: 2025-12-24 Christmas Eve."
        ),
    )
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    history = audited(excluded=["updated_at"])

    class Meta:
        verbose_name = _("holiday calendar")
        verbose_name_plural = _("holiday calendars")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        validate_calendar(self)
