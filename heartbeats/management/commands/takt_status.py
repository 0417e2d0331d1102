"""F-74: `manage.py takt_status` — the queue at a glance (the fields of the
API's GET /api/v1/queue, F-41)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from heartbeats.queue_status import queue_status


class Command(BaseCommand):
    help = "Print the queue's state: paused, maintenance, scheduler switch, running and queued runs, next fire time."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        status = queue_status(now=now)
        nxt = status["next_scheduled"]
        status["next_scheduled"] = nxt.isoformat() if nxt else None
        status["now"] = now.isoformat()
        if options["json"]:
            self.stdout.write(json.dumps(status))
            return
        width = max(len(k) for k in status)
        for key, value in status.items():
            self.stdout.write(f"{key.ljust(width)}  {value if value not in (None, '') else '-'}")
