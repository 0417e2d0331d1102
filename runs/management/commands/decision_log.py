"""F-65: `manage.py decision_log [--job ID] [--limit N]` — the scheduler's
decisions, newest first (runs/decisions.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.connectivity import require_redis
from runs.decisions import query


class Command(BaseCommand):
    help = "Print the scheduler's latest decisions (due, skipped, refused, held, end, double start prevented)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--job", type=int, default=None, help="only this job's")
        parser.add_argument("--limit", type=int, default=50)

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        for entry in query(job_id=options["job"], limit=options["limit"]):
            run = f" run {entry['run']}" if entry.get("run") else ""
            trigger = f" trigger {entry['trigger']}" if entry.get("trigger") else ""
            self.stdout.write(
                f"{entry['at']}  {entry['kind']:<24} job {entry['job']}{run}{trigger}  {entry['detail']}"
            )
