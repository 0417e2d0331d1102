"""Start a run of a job now (F-74): ``manage.py run_job <id> [--wait]``."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.errors import TaktError
from runs.connectivity import require_redis
from runs.models import ACTIVE_STATUSES, Run, RunStatus, RunTrigger
from runs.services import enqueue_job

POLL_S = 0.2


class Command(BaseCommand):
    help = "Start a run of a job now (also when the job is disabled); --wait prints its outcome."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_id", help="the job's id")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="wait for the run to end; exit 1 unless it succeeded",
        )
        parser.add_argument(
            "--wait-timeout",
            type=float,
            default=None,
            help="seconds to wait (default: job timeout + 60)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        try:
            run = enqueue_job(options["job_id"], trigger=RunTrigger.MANUAL)
        except TaktError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"run {run.pk} of job {run.job_id} ({run.job.name}): {run.status}")
        if not options["wait"]:
            return
        limit = options["wait_timeout"] or run.job.timeout_s + 60
        deadline = time.monotonic() + limit
        while run.status in ACTIVE_STATUSES:
            if time.monotonic() > deadline:
                raise CommandError(
                    f"run {run.pk} still {run.status} after {limit:g} s (is a worker running?)"
                )
            time.sleep(POLL_S)
            run = Run.objects.get(pk=run.pk)
        self.stdout.write(
            f"run {run.pk}: {run.status} in {run.duration_s or 0:.2f} s {run.message}".rstrip()
        )
        if run.output:
            self.stdout.write(run.output)
        if run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"run {run.pk} ended {run.status}")
