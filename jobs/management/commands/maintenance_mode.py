"""F-29 / F-74: `manage.py maintenance_mode on|off [--note …]`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser
from django.utils import timezone

from jobs.audit import AuditedCommand
from runs.connectivity import require_redis
from runs.queue import lock_file_present, set_maintenance


class Command(AuditedCommand):
    help = (
        "Switch maintenance mode: while on, only jobs marked 'allowed during maintenance'"
        " start; every other start is refused and recorded."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("state", choices=["on", "off"])
        parser.add_argument("--note", default="", help="why (shown on the queue)")

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        on = options["state"] == "on"
        changed = set_maintenance(on, note=options["note"], now=timezone.now())
        word = "on" if on else "off"
        self.stdout.write(
            f"maintenance mode {word}" if changed else f"maintenance mode was already {word}"
        )
        if not on and lock_file_present():
            self.stdout.write(
                "note: the maintenance lock file still exists, so maintenance goes on"
            )
