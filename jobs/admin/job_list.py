"""The job list (F-90): one page of jobs with what an operator scans for —
the schedule in words, the next run, the last run (time, status,
duration), the heartbeat state — in a bounded number of queries however
many jobs and runs there are.

The page's jobs are chosen first, plainly (the (name, id) index, with its
OFFSET), and only those 100 are then looked up: their triggers with their
calendars and their heartbeats (prefetched), their next fire time, their
last run. Computed per listed row instead, PostgreSQL would evaluate the
look-ups for every row an OFFSET skips too. No column sorts the whole
table but the name."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.views.main import ChangeList
from django.db.models import Min, OuterRef, Prefetch, QuerySet, Subquery

from jobs.models import Job, Trigger
from runs.models import Run


def with_page_relations(queryset: QuerySet[Job]) -> QuerySet[Job]:
    """The relations a listed job shows, loaded for the page only."""
    return queryset.select_related("concurrency_group").prefetch_related(
        Prefetch("triggers", queryset=Trigger.objects.prefetch_related("exclude_calendars")),
        "heartbeat",
    )


def load_page_details(jobs: list[Job]) -> None:
    """Set `_next_run` (the soonest active trigger's next fire time) and
    `_last_run` (the newest run, or None) on each job of a page: three
    queries, on the trigger's job index and the run's (job, enqueued_at)."""
    ids = [job.pk for job in jobs]
    next_runs = dict(
        Trigger.objects.filter(job_id__in=ids, active=True)
        .values_list("job_id")
        .annotate(soonest=Min("next_run_at"))
        .order_by()
    )
    newest = Run.objects.filter(job=OuterRef("pk")).order_by("-enqueued_at", "-id").values("id")[:1]
    last_ids = dict(
        Job.objects.filter(pk__in=ids).annotate(last=Subquery(newest)).values_list("pk", "last")
    )
    runs = {
        run.pk: run
        for run in Run.objects.filter(pk__in=[i for i in last_ids.values() if i]).only(
            "pk", "job_id", "status", "started_at", "finished_at", "enqueued_at", "duration_s"
        )
    }
    for job in jobs:
        job._next_run = next_runs.get(job.pk)  # type: ignore[attr-defined]
        job._last_run = runs.get(last_ids.get(job.pk) or 0)  # type: ignore[attr-defined]


class JobChangeList(ChangeList):
    """Loads the details of the jobs on the page after choosing them."""

    def get_results(self, request: Any) -> None:
        super().get_results(request)
        jobs = list(self.result_list)
        load_page_details(jobs)
        self.result_list = jobs
