"""F-74: write jobs with their triggers as YAML or JSON (jobs.exchange),
for import_jobs on another installation or for version control."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.exchange import FORMATS, InvalidDefinition, dump, export_data, export_queryset, format_of


class Command(BaseCommand):
    help = (
        "Export jobs as YAML (default) or JSON: every job not declared in code, or those"
        " given with --key; --all includes the code-managed ones."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--format", choices=FORMATS, help="default: by --output's suffix, else yaml"
        )
        parser.add_argument("--output", "-o", help="write to this file instead of standard output")
        parser.add_argument(
            "--key", nargs="+", action="extend", default=[], help="only the jobs with these keys"
        )
        parser.add_argument(
            "--all", action="store_true", help="include jobs declared in code (code_managed)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        output = options["output"]
        fmt = format_of(output or "", options["format"])
        try:
            jobs = export_queryset(options["key"], include_code_managed=options["all"])
        except InvalidDefinition as exc:
            raise CommandError(str(exc)) from None
        text = dump(export_data(jobs), fmt)
        if output is None:
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--output: cannot write {output}: {exc}") from None
        self.stderr.write(f"exported {len(jobs)} job(s) to {output}")
