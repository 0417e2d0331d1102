"""Parent and child jobs at run time (F-04): a parent job's run executes
its enabled children in their order (child_order, then id), each as a run
of its own with trigger `parent` and the parent run as its `cause`, and
ends with their outcome (runs/core/children.py decides each step).

1. A worker starts the parent run like any other (claim, the job's lock,
   its condition, its variable), then, instead of calling a target,
   creates the first child's run and gives the job's lock back; the parent
   run stays `running` without holding a worker. (`start_children`)
2. Each child run goes through the ordinary path: a worker, its own lock,
   group, condition, retries. Its end is recorded by runs/ending.py, which
   in the same transaction takes the parent's next step
   (`advance_parent`): the next child's run, or the parent's end, which is
   recorded through finish_run like any end (so a parent that is itself a
   child advances its own parent, and its dependants start).
3. A child skipped at creation (its overlap policy, maintenance, an unmet
   condition) is recorded and the next one starts at once.

No parent run is left between two children by a crash: a step commits
with the end that caused it. A parent run holds no lock while its
children run: the lost-run check (runs/recovery.py) leaves it alone while
one of its children is queued or running. Cancelling a parent run cancels
its active child (runs/cancel.py). The unique (job, cause) key of runs
with trigger `parent` makes a second attempt to start the same child for
the same parent run create nothing.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction

from jobs.models import Job
from runs.core.children import ChildFacts, compute_parent_step
from runs.decisions import Decision, record
from runs.models import ACTIVE_STATUSES, Run, RunStatus, RunTrigger
from runs.publish import publish_after_commit
from runs.services import create_run

log = logging.getLogger("takt.children")

# What finishing a parent run takes: the run, its status, its message.
ParentEnd = tuple[Run, str, str]


def has_children(job: Job) -> bool:
    """Whether the job is a parent (loaded with the run by
    runs/statements.py; else one indexed query)."""
    known = getattr(job, "has_children", None)
    if known is not None:
        return bool(known)
    return Job.objects.filter(parent_id=job.pk).exists()


def is_child_run(run: Run) -> bool:
    """Whether the run is (a retry of) a child's run for a parent run."""
    if run.cause_id is None or run.trigger not in (RunTrigger.PARENT, RunTrigger.RETRY):
        return False
    return getattr(run.job, "parent_id", None) is not None


def start_children(parent: Run, *, now: datetime) -> ParentEnd | None:
    """Step 1: the first child's run (published after commit), or the
    parent's end when it has no child to run. Call in a transaction."""
    started: list[Run] = []
    end = _step(parent, now=now, started=started)
    _publish(started)
    return end


def advance_parent(child: Run, *, now: datetime, started: list[Run]) -> ParentEnd | None:
    """Step 2, in the transaction of `child`'s end: the parent run's next
    child (appended to `started`, for the caller to publish), or what ends
    the parent run; None when it waits, or the cause is no running parent
    run (it was cancelled, or the run is a dependency's)."""
    parent = (
        Run.objects.filter(pk=child.cause_id, status=RunStatus.RUNNING)
        .select_related("job")
        .first()
    )
    if parent is None or child.job.parent_id != parent.job_id:
        return None
    return _step(parent, now=now, started=started)


def _step(parent: Run, *, now: datetime, started: list[Run]) -> ParentEnd | None:
    children = list(Job.objects.filter(parent_id=parent.job_id).order_by("child_order", "pk"))
    latest: dict[int, str] = {}
    for job_id, status in (
        Run.objects.filter(cause_id=parent.pk, job__parent_id=parent.job_id)
        .order_by("pk")
        .values_list("job_id", "status")
    ):
        latest[job_id] = status  # the newest run of each child (a retry's) wins
    by_id = {child.pk: child for child in children}
    facts = [
        ChildFacts(c.pk, c.name, latest.get(c.pk)) for c in children if c.enabled or c.pk in latest
    ]
    while True:
        step = compute_parent_step(facts, stop_on_failure=parent.job.stop_on_child_failure)
        if step.finish is not None:
            return parent, step.finish, step.message
        if step.start is None:
            return None  # a child is queued or running
        run = _start_child(parent, by_id[step.start], now=now)
        if run is None:
            return None  # another step started it just now
        started.append(run)
        facts = [
            ChildFacts(f.job_id, f.name, run.status) if f.job_id == run.job_id else f for f in facts
        ]


def _start_child(parent: Run, child: Job, *, now: datetime) -> Run | None:
    try:
        with transaction.atomic():  # a savepoint: a duplicate spoils only this insert
            run = create_run(child, trigger=RunTrigger.PARENT, now=now, cause=parent, refuse=False)
    except IntegrityError:
        return None
    detail = f"child {child.name!r} of parent run #{parent.pk}: run #{run.pk} {run.status}"
    if run.status == RunStatus.SKIPPED:
        detail += f" ({run.message})"
    decision = Decision("child_started", child.pk, run.pk, detail=detail, at=now)
    transaction.on_commit(lambda: record([decision]))
    log.info("%s", detail, extra={"job_id": child.pk, "run_id": run.pk})
    return run


def active_children(parent_id: int) -> bool:
    """Whether a child run of this parent run is queued or running."""
    return Run.objects.filter(cause_id=parent_id, status__in=ACTIVE_STATUSES).exists()


def _publish(runs: list[Run]) -> None:
    queued = [r for r in runs if r.status == RunStatus.QUEUED and not r.held]
    if queued:
        publish_after_commit(queued)
