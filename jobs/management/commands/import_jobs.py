"""F-74: create or update jobs from a file written by export_jobs
(jobs.exchange), all or nothing."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from jobs.exchange import FORMATS, InvalidDefinition, format_of, import_jobs, load


class Command(BaseCommand):
    help = (
        "Import jobs from a YAML or JSON file (as export_jobs writes it; - reads standard"
        " input). Jobs are matched by key, else by id and name; --dry-run shows the changes."
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
            data = load(text, format_of(path, options["format"]))
            items = import_jobs(data, now=timezone.now(), by=by, dry_run=options["dry_run"])
        except InvalidDefinition as exc:
            raise CommandError(f"nothing imported:\n{exc}") from None
        for item in items:
            self.stdout.write(f"{item.action:<10} {item.label}")
            if item.action == "update":
                for line in item.changes:
                    self.stdout.write(f"    {line}")
        counts = {a: sum(i.action == a for i in items) for a in ("create", "update", "unchanged")}
        summary = ", ".join(f"{n} {a}" for a, n in counts.items())
        self.stdout.write(("dry run, nothing written: " if options["dry_run"] else "") + summary)
