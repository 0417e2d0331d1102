"""F-66: `manage.py explain_job <id>` — which condition holds a job back:
each check of heartbeats/core/explain.py on a line ([ok] or [NO], its name
and detail, times in UTC), then the verdict."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from heartbeats.explaining import explain_job
from jobs.models import Job
from runs.connectivity import require_redis


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Command(BaseCommand):
    help = (
        "Walk the checklist (enabled, beat, scheduler switch, queue, maintenance, job pause,"
        " parent or children, trigger, weekday and time window, next fire time, condition,"
        " active runs, group, exclusive, global limit, worker, lock) for one job and say which"
        " check holds it back, or when it runs next and what starts it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        job = Job.objects.filter(pk=options["job_id"]).first()
        if job is None:
            raise CommandError(f"job: no job with id {options['job_id']}")
        answer = explain_job(job, now=timezone.now())
        self.stdout.write(f"job {job.pk} ({job.name}):")
        for check in answer.checks:
            self.stdout.write(f"  [{'ok' if check.ok else 'NO'}] {check.name}: {check.text(_utc)}")
        self.stdout.write(answer.verdict(_utc))
