"""Running an ended run again (issue 30): a new `manual` run of its job with
its parameters, linked to it (`rerun_of`), admitted as "Run now" is
(enqueue_job: the overlap policy, maintenance, the paused queue, the job's
condition). The run page's button, the run list's action, the job list's
"Re-run failed runs since…" (an operation with progress, F-93),
`POST /api/v1/runs/<id>/rerun` and `manage.py rerun` all come here.

What the new run gets: the run's own `params` (the job's params as they
were then, with what its caller set), over the job's params now, so a key
the job gained since is there too; the job's priority for a manual run,
not the run's. A run still queued or running is not run again (cancel it,
or wait), nor one of Takt's own operations, nor a child job's run alone
(its parent runs it: re-run the parent's run).
"""

from __future__ import annotations

from datetime import datetime

from django.utils.translation import gettext, pgettext

from jobs.errors import InvalidInput, TaktError
from jobs.policies import INTERNAL_TARGETS
from runs.models import ACTIVE_STATUSES, FAILED_STATUSES, Run, RunTrigger
from runs.services import enqueue_job


class RunNotRerunnable(TaktError):
    """The run cannot be run again (still active, an operation): says why."""


def rerun(run: Run | int, *, now: datetime | None = None) -> Run:
    """A new manual run repeating `run` (a Run or its id). Raises
    InvalidInput (field `run`) for no such run, RunNotRerunnable, and what
    enqueue_job raises when the job cannot start now."""
    original = _original(run)
    if original.status in ACTIVE_STATUSES:
        raise RunNotRerunnable(
            gettext("run #%(id)s is still %(status)s: only a run that has ended is run again")
            % {"id": original.pk, "status": pgettext("run status badge", original.status)}
        )
    if original.job.target in INTERNAL_TARGETS:
        raise RunNotRerunnable(
            gettext("run #%(id)s is one of Takt's own operations: start it again where it began")
            % {"id": original.pk}
        )
    return enqueue_job(
        original.job,
        params=original.params,
        trigger=RunTrigger.MANUAL,
        rerun_of=original,
        now=now,
    )


def failed_since(job_id: int, since: datetime) -> list[int]:
    """The ids of the job's runs that ended failed, timed out or lost since
    `since` and that no later run repeats (a retry or a re-run), oldest
    first: what "Re-run failed runs since…" runs again."""
    return list(
        Run.objects.filter(job_id=job_id, status__in=FAILED_STATUSES, enqueued_at__gte=since)
        .filter(retries__isnull=True, reruns__isnull=True)
        .order_by("enqueued_at", "pk")
        .values_list("pk", flat=True)
    )


def _original(run: Run | int) -> Run:
    run_id = run.pk if isinstance(run, Run) else run
    found = Run.objects.select_related("job").filter(pk=run_id).first()
    if found is None:
        raise InvalidInput("run", gettext("no run with id %(id)r") % {"id": run_id})
    return found
