"""Dependencies (F-33): a job whose trigger of kind `dependency` names an
upstream job is started when a run of that job ends with one of the
trigger's statuses ("when Import succeeds, start Transform"; "when Import
fails, start Alert"). Chains and fan-out follow from there: each started
run's own end starts its dependants in turn.

`start_dependents` runs in the transaction that records the upstream run's
end (runs/ending.py), so the end and the runs it starts commit together or
not at all; each new run carries the upstream run as its `cause` and the
trigger as its `source_trigger`, and the unique (job, cause) key makes a
second attempt (two triggers naming the same job, a retried end) create
nothing. A run that is retried starts nothing yet: its last attempt's end
decides.

The dependant's own rules still hold: only an active trigger fires (its
job enabled, not paused); its overlap policy admits the run; maintenance
mode records it `skipped` (refused) unless its target is allowed; while
the queue is paused it waits; a condition that does not hold records it
`skipped` with the reason (F-32). Cycles are refused when saved
(jobs/validation.py), so a chain always ends.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction

from jobs.models import Job, Trigger
from jobs.policies import TriggerKind
from runs.decisions import Decision, record
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run

log = logging.getLogger("takt.dependencies")


def has_dependents(job: Job) -> bool:
    """Whether a dependency trigger names this job (loaded with the run by
    runs/statements.py; else one indexed query)."""
    known = getattr(job, "has_dependents", None)
    if known is not None:
        return bool(known)
    return Trigger.objects.filter(kind=TriggerKind.DEPENDENCY, upstream_job_id=job.pk).exists()


def start_dependents(upstream: Run, status: str, *, now: datetime) -> list[Run]:
    """Create the runs that `upstream`'s end in `status` starts; returns
    them (the caller publishes the queued ones after commit)."""
    triggers = Trigger.objects.filter(
        kind=TriggerKind.DEPENDENCY, upstream_job_id=upstream.job_id, active=True
    ).select_related("job")
    started: list[Run] = []
    decisions: list[Decision] = []
    for trigger in triggers:
        if status not in (trigger.upstream_statuses or ["succeeded"]):
            continue
        job = trigger.job
        if job.parent_id is not None:  # refused when saved; a child never starts by itself
            continue
        try:
            with transaction.atomic():  # a savepoint: a duplicate spoils only this insert
                run = create_run(
                    job,
                    trigger=RunTrigger.DEPENDENCY,
                    now=now,
                    cause=upstream,
                    source_trigger=trigger,
                    refuse=False,
                )
        except IntegrityError:
            log.info(
                "run %s's end already started job %s", upstream.pk, job.pk, extra={"job_id": job.pk}
            )
            continue
        started.append(run)
        what = "started" if run.status == RunStatus.QUEUED else f"recorded {run.status}"
        detail = (
            f"run #{upstream.pk} of job #{upstream.job_id} ended {status}: {what} run #{run.pk}"
        )
        if run.status == RunStatus.SKIPPED:
            detail += f" ({run.message})"
        decisions.append(Decision("dependency_started", job.pk, run.pk, trigger.pk, detail, now))
    if decisions:
        transaction.on_commit(lambda: record(decisions))
    return started
