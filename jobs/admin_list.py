"""The job list (F-90): one page of jobs with what an operator scans for —
the schedule in words, the next run, the last run (time, status,
duration), the heartbeat state — in a bounded number of queries however
many jobs and runs there are.

Per page: the jobs (next run and last run id as correlated subqueries on
indexes, the heartbeat joined), their triggers with their calendars
(prefetched), and their last runs (one query). No column sorts the whole
table but the name."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.views.main import ChangeList
from django.db.models import OuterRef, Prefetch, QuerySet, Subquery

from runs.models import Run

from .models import Job, Trigger


def annotate_list(queryset: QuerySet[Job]) -> QuerySet[Job]:
    next_run = (
        Trigger.objects.filter(job=OuterRef("pk"), active=True)
        .order_by("next_run_at")
        .values("next_run_at")[:1]
    )
    last_run = (
        Run.objects.filter(job=OuterRef("pk")).order_by("-enqueued_at", "-id").values("id")[:1]
    )
    return (
        queryset.annotate(_next_run=Subquery(next_run), _last_run_id=Subquery(last_run))
        .select_related("heartbeat")
        .prefetch_related(
            Prefetch("triggers", queryset=Trigger.objects.prefetch_related("exclude_calendars"))
        )
    )


class JobChangeList(ChangeList):
    """Loads the last runs of the jobs on the page in one query."""

    def get_results(self, request: Any) -> None:
        super().get_results(request)
        jobs = list(self.result_list)
        wanted = [job._last_run_id for job in jobs if getattr(job, "_last_run_id", None)]
        runs = {
            run.pk: run
            for run in Run.objects.filter(pk__in=wanted).only(
                "pk", "job_id", "status", "started_at", "finished_at", "enqueued_at", "duration_s"
            )
        }
        for job in jobs:
            job._last_run = runs.get(getattr(job, "_last_run_id", None))
        self.result_list = jobs
