"""F-101: `manage.py backfill <job id> --from … --to …` — runs for every fire
time of a job in a past range (see runs/backfill.py). The summary goes to
stdout; progress (every 10 % of the fire times, F-93) to stderr."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from jobs.errors import TaktError
from jobs.models import Job
from runs.backfill import backfill, backfill_fire_times
from runs.connectivity import require_redis
from runs.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Create runs for every fire time of a job in a past range, e.g."
        " backfill 7 --from 2026-11-01 --to 2026-11-07T23:59 (times without an offset"
        " are read in the server's time zone)"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_id", type=int)
        parser.add_argument("--from", dest="start", required=True, help="ISO-8601 date or time")
        parser.add_argument("--to", dest="end", required=True, help="ISO-8601 date or time")
        parser.add_argument("--dry-run", action="store_true", help="list the fire times only")

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        job = Job.objects.filter(pk=options["job_id"]).first()
        if job is None:
            raise CommandError(f"job: no job with id {options['job_id']}")
        start = _parse(options["start"], "--from")
        end = _parse(options["end"], "--to")
        # The raw stream: Django would colour progress on stderr like an error.
        progress = TerminalProgress(options.get("stderr") or sys.stderr, "backfill")
        try:
            # The plan first: it refuses a job none of whose triggers has
            # fire times to backfill (an interval anchored on a run), by name.
            now = timezone.now()
            fire_times = backfill_fire_times(job, start=start, end=end, now=now)
            result = backfill(
                job,
                start=start,
                end=end,
                now=now,
                dry_run=options["dry_run"],
                fire_times=fire_times,
                on_progress=None
                if options["dry_run"]
                else lambda handled, total: progress(handled, total, "fire times handled"),
            )
        except TaktError as exc:
            raise CommandError(str(exc)) from None
        for line in result.unlisted:
            self.stdout.write(f"not listed: {line}")
        times = len(result.fire_times)
        self.stdout.write(
            f"{times} fire time(s) in the range; {result.already_ran} already have a run"
        )
        if options["dry_run"]:
            for fire in result.fire_times:
                self.stdout.write(fire.isoformat())
            return
        if result.skipped_reason:
            raise CommandError(f"nothing created: {result.skipped_reason}")
        self.stdout.write(f"created {len(result.created)} run(s): {result.created}")


def _parse(raw: str, option: str) -> datetime:
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise CommandError(f"{option}: not an ISO-8601 date or time: {raw!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=ZoneInfo(settings.TIME_ZONE))
    return value
