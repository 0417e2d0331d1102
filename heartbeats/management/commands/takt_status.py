"""F-74: `manage.py takt_status` — the queue at a glance (the fields of the
API's GET /api/v1/queue, F-41)."""

from __future__ import annotations

import json
from datetime import datetime
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
        status = {**queue_status(now=now), "now": now}
        if options["json"]:
            self.stdout.write(json.dumps(status, default=_iso))
            return
        width = max(len(k) for k in status)
        for key, value in status.items():
            self.stdout.write(f"{key.ljust(width)}  {_plain(value)}")


def _iso(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {value!r}")


def _plain(value: Any) -> str:
    """One line per field: times in ISO 8601, the live beats and workers by name."""
    if value in (None, "") or value == []:
        return "-"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return ", ".join(f"{item['name']} ({_fields(item)})" for item in value)
    return str(value)


def _fields(process: dict[str, Any]) -> str:
    """A live beat's or worker's fields but its name and time; its clock's
    skew when it measured one ("clock_skew_s=+90.0", "(off)" beyond the limit)."""
    said = []
    for key, value in process.items():
        if key in ("name", "last_seen_at", "clock_off") or (
            key == "clock_skew_s" and value is None
        ):
            continue
        if key == "clock_skew_s":
            value = f"{value:+.1f}" + (" (off)" if process.get("clock_off") else "")
        said.append(f"{key}={value}")
    return ", ".join(said)
