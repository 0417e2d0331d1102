"""F-28 / F-74: pause the queue for the whole cluster (see jobs/queue.py)."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from jobs.queue import pause_queue
from runs.connectivity import require_redis


class Command(BaseCommand):
    help = "Pause the queue: no run is enqueued or started until resume_queue; running runs go on."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--note", default="", help="why (shown with the pause)")

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        changed = pause_queue(note=options["note"], by=getpass.getuser(), now=timezone.now())
        self.stdout.write("queue paused" if changed else "queue was already paused")
