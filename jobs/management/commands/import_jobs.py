"""F-74: create or update jobs from a file written by export_jobs
(jobs.importing), all or nothing. The plan goes to stdout; progress lines
(every 10 %) to stderr (F-93)."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from jobs import capabilities
from jobs.audit import AuditedCommand
from jobs.exchange import FORMATS, InvalidDefinition, format_of
from jobs.importing import import_text, plan_lines, summary_line
from runs.progress import TerminalProgress


class Command(AuditedCommand):
    help = (
        "Import jobs from a YAML or JSON file (as export_jobs writes it; - reads standard"
        " input). Jobs are matched by key, else by id and name; --dry-run shows the changes."
        " Progress goes to standard error."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the file to read, or - for standard input")
        parser.add_argument("--format", choices=FORMATS, help="default: by the suffix, else yaml")
        parser.add_argument(
            "--dry-run", action="store_true", help="show the changes, write nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = options["file"]
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from None
        by = f"{getpass.getuser()} (import_jobs)"
        try:
            items = import_text(
                text,
                format_of(path, options["format"]),
                now=timezone.now(),
                by=by,
                dry_run=options["dry_run"],
                # Whoever runs manage.py has the shell already: every
                # capability, script jobs too (docs/security.md).
                granted=capabilities.ALL,
                # The raw stream: Django would colour progress on stderr like an error.
                on_progress=TerminalProgress(options.get("stderr") or sys.stderr, "import_jobs"),
            )
        except InvalidDefinition as exc:
            raise CommandError(f"nothing imported:\n{exc}") from None
        for line in plan_lines(items):
            self.stdout.write(line)
        self.stdout.write(summary_line(items, dry_run=options["dry_run"]))
