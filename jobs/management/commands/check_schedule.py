"""F-19: print the next fire times of a cron expression."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from jobs import triggers as core


class Command(BaseCommand):
    help = 'Print the next N fire times of a cron expression, e.g. check_schedule "30 2 * * *" --tz Europe/Berlin'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("expression", help="5 fields, or 6 with seconds first; quote it")
        parser.add_argument("--tz", default=None, help="IANA time zone (default: the server's)")
        parser.add_argument(
            "--after", default=None, help="ISO-8601 start; without an offset it is read in --tz"
        )
        parser.add_argument("--count", default="5", help="how many fire times (1-1000, default 5)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tz = core.canonical_timezone(options["tz"] or settings.TIME_ZONE)
            expression = core.normalize_cron(options["expression"])
            after = _parse_after(options["after"], tz)
            count = _parse_count(options["count"])
            times = core.compute_fire_times(core.CronSpec(expression, tz), after=after, count=count)
        except core.TriggerError as exc:
            raise CommandError(str(exc)) from None
        for t in times:
            self.stdout.write(t.isoformat())


def _parse_after(raw: str | None, tz: str) -> datetime:
    if raw is None:
        return timezone.now()
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise core.TriggerError("after", f"not an ISO-8601 date-time: {raw!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=ZoneInfo(tz))


def _parse_count(raw: str) -> int:
    try:
        count = int(raw)
    except ValueError:
        raise core.TriggerError("count", f"expected a whole number, got {raw!r}") from None
    if not 1 <= count <= 1000:
        raise core.TriggerError("count", f"must be between 1 and 1000, got {count}")
    return count
