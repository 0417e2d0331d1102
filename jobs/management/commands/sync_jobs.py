"""F-75: sync the jobs declared in code (TAKT_JOBS, TAKT_JOBS_FILE,
@takt_job(schedule=...)) into the database, as the beat does at start."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from jobs.audit import AuditedCommand
from jobs.declared import sync_declared_jobs


class Command(AuditedCommand):
    help = (
        "Create, update and disable code-managed jobs so that the database matches the jobs"
        " declared in code. --dry-run shows what would change."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="show the changes, write nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = sync_declared_jobs(now=timezone.now(), dry_run=options["dry_run"])
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        for action, keys in (("create", report.created), ("update", report.updated)):
            for key in keys:
                self.stdout.write(f"{action:<10} {key}")
                for line in report.changes[key]:
                    self.stdout.write(f"    {line}")
        for key in report.unchanged:
            self.stdout.write(f"{'unchanged':<10} {key}")
        for key in report.retired:
            self.stdout.write(f"{'disable':<10} {key} (no longer declared)")
        prefix = "dry run, nothing written: " if options["dry_run"] else ""
        self.stdout.write(prefix + report.summary())
