"""Cancel a queued or running run: ``manage.py cancel_run <id> [--by NAME]``
(runs.cancel.cancel_run). Exits 1 with the reason for an unknown or ended
run, or when Redis cannot be reached (naming the URL it tried)."""

from __future__ import annotations

import getpass
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from jobs.errors import TaktError
from runs.cancel import cancel_run


def _default_by() -> str:
    try:
        return f"{getpass.getuser()} (manage.py)"
    except (OSError, KeyError):  # no user name in this environment
        return "manage.py"


class Command(BaseCommand):
    help = (
        "Cancel a queued or running run: a running one loses its job's lock at once and its"
        " process is told to stop (killed after TAKT_CANCEL_GRACE_SECONDS if it goes on)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int, help="the run's id")
        parser.add_argument(
            "--by",
            default=None,
            help="who cancels it, as the run records it (default: your user name (manage.py))",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        by = options["by"] if options["by"] is not None else _default_by()
        try:
            run = cancel_run(options["run_id"], by=by, now=timezone.now())
        except TaktError as exc:
            raise CommandError(str(exc)) from None
        name = f"run #{run.pk} of job #{run.job_id} ({run.job.name})"
        if run.started_at is None:
            self.stdout.write(f"{name} cancelled by {run.cancelled_by} before it started")
            return
        grace_s = settings.TAKT_CANCEL_GRACE_SECONDS
        self.stdout.write(
            f"{name} cancelled by {run.cancelled_by} after {run.duration_s or 0:.1f} s"
            f" on {run.worker or 'an unknown worker'}: its job's lock is free and its process"
            f" is told to stop (killed after {grace_s} s if it goes on)"
        )
