"""F-28 / F-74: pause the queue for the whole cluster (see runs/queue.py)."""

from __future__ import annotations

import getpass
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.audit import AuditedCommand
from runs.connectivity import require_redis
from runs.queue import pause_queue


class Command(AuditedCommand):
    help = "Pause the queue: no run is enqueued or started until resume_queue; running runs go on."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--note", default="", help="why (shown with the pause)")
        parser.add_argument(
            "--until",
            default=None,
            help="resume by itself at this ISO 8601 time (without an offset: the server's zone)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        now = timezone.now()
        until = _parse_until(options["until"], now=now)
        changed = pause_queue(note=options["note"], by=getpass.getuser(), until=until, now=now)
        self.stdout.write("queue paused" if changed else "queue was already paused")


def _parse_until(raw: str | None, *, now: datetime) -> datetime | None:
    if raw is None:
        return None
    value = parse_datetime(raw)
    if value is None:
        raise CommandError(f"--until: not an ISO 8601 date and time: {raw!r}")
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    if value <= now:
        raise CommandError(f"--until: {raw} is not in the future")
    return value
