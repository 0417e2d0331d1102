"""F-70..F-73: `manage.py takt_maintenance [--only lost,expire,cleanup,checks]
[--dry-run]` — one maintenance pass (runs/maintenance.py), the same as the
built-in hourly job. Prints a line per section and its findings; exits 1
when a section failed. Progress (a line per section and cleanup batch,
F-93) goes to stderr."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from runs.connectivity import require_redis
from runs.maintenance import run_maintenance, section_names
from runs.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Recover lost runs, expire runs queued or running too long, delete finished runs"
        " past retention (audited), and check retry delays and the schema."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--only",
            default="",
            help=f"comma-separated sections to run (default: all): {','.join(section_names())}",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would change; change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        only = [name.strip() for name in options["only"].split(",") if name.strip()]
        try:
            report = run_maintenance(
                now=timezone.now(),
                only=only or None,
                dry_run=options["dry_run"],
                by="manage.py takt_maintenance",
                # The raw stream: Django would colour progress on stderr like an error.
                progress=TerminalProgress(
                    options.get("stderr") or sys.stderr, "takt_maintenance", step_pct=0
                ),
            )
        except ValueError as exc:
            raise CommandError(f"--only: {exc}") from None
        for line in report.lines():
            self.stdout.write(line)
        failed = [s.label for s in report.sections if s.error]
        if failed:
            raise CommandError(f"maintenance failed in: {', '.join(failed)}")
