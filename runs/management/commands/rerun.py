"""Run ended runs again (runs/rerun.py):
``manage.py rerun <run id> [<run id> …]`` or
``manage.py rerun --job <id> --failed-since <ISO>``. Each new run is a
`manual` run with the old one's parameters, linked to it. Exits 1 naming
the first run that could not be run again (those before it were)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.errors import TaktError
from runs.connectivity import require_redis
from runs.management.commands.backfill import _parse
from runs.rerun import failed_since, rerun


class Command(BaseCommand):
    help = (
        "Run ended runs again with their parameters (new manual runs, linked to them),"
        " or every failed, timed-out or lost run of a job since a time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_ids", nargs="*", type=int, help="the runs' ids")
        parser.add_argument("--job", type=int, default=None, help="with --failed-since: the job")
        parser.add_argument(
            "--failed-since",
            default=None,
            help="ISO-8601 time (the server's zone if it names none): re-run the job's runs"
            " that went wrong since then and that no retry or re-run repeats yet",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ids: list[int] = options["run_ids"]
        since = options["failed_since"]
        if (since is None) != (options["job"] is None):
            raise CommandError("--job and --failed-since go together")
        if since is not None:
            if ids:
                raise CommandError("give run ids or --job with --failed-since, not both")
            ids = failed_since(options["job"], _parse(since, "--failed-since"))
            if not ids:
                self.stdout.write("no failed run to re-run")
                return
        elif not ids:
            raise CommandError("give the ids of the runs to re-run (or --job and --failed-since)")
        require_redis()
        for run_id in ids:
            try:
                new = rerun(run_id)
            except TaktError as exc:
                raise CommandError(f"run #{run_id}: {exc}") from None
            self.stdout.write(
                f"run #{new.pk} re-runs run #{run_id} of job #{new.job_id}: {new.status}"
            )
