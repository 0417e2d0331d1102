"""Runs sent to a queue that no live worker reads (issue 26).

A run goes to Takt's queue (`takt`) unless its job, or its Celery task's
own routing, names another (runs.publish.queue_of). A worker consumes the
queues of its `-Q`; every live worker reports them with its heartbeat
(heartbeats.processes). A run published to a queue none of them reads waits
there for good, and the beat's sweep would only send it again (its queue is
not empty). So the beat, with its own heartbeat (every REPORT_EVERY_S),
raises one alert per such queue, naming the queue, how many runs wait and
whose, once a run has waited there QUEUED_STUCK_AFTER; the alert resolves
when a worker reads the queue or no run waits on it any more. A fleet with
a worker of an older Takt, which does not report its queues, raises
nothing: no queue can be called unread then.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import Count

from heartbeats.alerts import raise_alert, resolve_all_but
from heartbeats.core.runs import QUEUED_STUCK_AFTER
from heartbeats.processes import read_queues
from jobs.models import Job
from runs.models import Run, RunStatus
from runs.publish import queue_of

ALERT_PREFIX = "queue-unread:"


def check_unread_queues(*, now: datetime) -> list[str]:
    """Raise or repeat the alert of each queue that holds runs no live
    worker will take (module docstring), resolve the others; returns the
    unread queues. One query of the queued, published runs (the partial
    index of active runs), one of the live workers, one of the jobs."""
    read = read_queues(now=now)
    if read is None:
        return []
    waiting = dict(
        Run.objects.filter(
            status=RunStatus.QUEUED,
            held=False,
            published_at__isnull=False,
            published_at__lte=now - QUEUED_STUCK_AFTER,
        )
        .values_list("job_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    unread: dict[str, list[tuple[Job, int]]] = defaultdict(list)
    routes: dict[str, str] = {}
    for job in Job.objects.filter(pk__in=list(waiting)).order_by("name"):
        queue = queue_of(job, routes)
        if queue not in read:
            unread[queue].append((job, waiting[job.pk]))
    for queue, jobs in sorted(unread.items()):
        runs = sum(n for _, n in jobs)
        names = ", ".join(f"'{job.name}' (#{job.pk}): {n}" for job, n in jobs[:10])
        more = f" and {len(jobs) - 10} more jobs" if len(jobs) > 10 else ""
        readers = ", ".join(sorted(read)) or "none"
        raise_alert(
            f"{ALERT_PREFIX}{queue}",
            severity="critical",
            title=f"Runs wait on queue '{queue}', which no worker reads",
            message=f"{runs} run(s) were sent to the queue '{queue}' and no live worker"
            f" consumes it (the live workers read: {readers}). Runs per job: {names}{more}."
            f" Start a worker with -Q {queue} (or add it to a worker's -Q), or give the"
            " jobs a queue a worker reads (docs/embedding.md, Processes).",
            now=now,
        )
    resolve_all_but(
        ALERT_PREFIX,
        unread,
        message="a live worker reads the queue, or no run waits on it",
        now=now,
    )
    return sorted(unread)
