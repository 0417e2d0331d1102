"""F-19: print the next fire times of a cron expression, or of a saved
trigger of any kind (with its weekdays, window and excluded calendars)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from jobs import specs
from jobs.core import triggers as core
from jobs.models import Trigger


class Command(BaseCommand):
    help = (
        'Print the next N fire times of a cron expression, e.g. check_schedule "30 2 * * *"'
        " --tz Europe/Berlin, or of a saved trigger: check_schedule --trigger 7"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "expression", nargs="?", help="5 fields, or 6 with seconds first; quote it"
        )
        parser.add_argument(
            "--trigger", default=None, help="a saved trigger's id instead (--tz is then its own)"
        )
        parser.add_argument("--tz", default=None, help="IANA time zone (default: the server's)")
        parser.add_argument(
            "--after", default=None, help="ISO-8601 start; without an offset it is read in --tz"
        )
        parser.add_argument("--count", default="5", help="how many fire times (1-1000, default 5)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["trigger"] is not None:
                if options["expression"] is not None:
                    raise core.TriggerError("trigger", "give an expression or --trigger, not both")
                trigger = _load_trigger(options["trigger"])
                tz = core.canonical_timezone(trigger.timezone or settings.TIME_ZONE)
                after = _parse_after(options["after"], tz)
                spec = specs.trigger_spec(trigger, now=after)
            else:
                if options["expression"] is None:
                    raise core.TriggerError(
                        "cron_expression", "give a cron expression or --trigger ID"
                    )
                tz = core.canonical_timezone(options["tz"] or settings.TIME_ZONE)
                after = _parse_after(options["after"], tz)
                spec = core.CronSpec(core.normalize_cron(options["expression"]), tz)
            count = _parse_count(options["count"])
            times = core.compute_fire_times(spec, after=after, count=count)
        except (core.TriggerError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{f}: {', '.join(m)}" for f, m in exc.message_dict.items())
            ) from None
        for t in times:
            self.stdout.write(t.isoformat())


def _load_trigger(raw: str) -> Trigger:
    try:
        return Trigger.objects.get(pk=int(raw))
    except (ValueError, Trigger.DoesNotExist):
        raise core.TriggerError("trigger", f"no trigger with id {raw!r}") from None


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
