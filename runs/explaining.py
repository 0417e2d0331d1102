"""Gathering the facts for "Why didn't it run?" (F-66): the job, its
triggers, the queue switch, its active runs and its Redis lock; the
checklist itself is the pure jobs.explain.explain."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from jobs.constraints import allows
from jobs.explain import Explanation, JobFacts, TriggerFacts, explain
from jobs.models import Job, QueueState
from jobs.services import trigger_constraints, trigger_description
from jobs.triggers import zone_of

from .locks import job_lock
from .overlap import activity


def job_facts(job: Job, *, now: datetime) -> JobFacts:
    queue = QueueState.objects.filter(pk=1).first()
    triggers = []
    for trigger in job.triggers.all():
        constraints = trigger_constraints(trigger, now=now)
        zone = zone_of(trigger.timezone or settings.TIME_ZONE)
        triggers.append(
            TriggerFacts(
                description=trigger_description(trigger),
                active=trigger.active,
                next_run_at=trigger.next_run_at,
                allowed_now=constraints is None or allows(constraints, now, zone),
            )
        )
    running, waiting = activity([job.pk], now=now).get(job.pk, (0, 0))
    try:
        lock_held = job_lock(job.pk).holder() is not None
    except Exception:  # Redis down: say so through the lock check
        lock_held = True
    return JobFacts(
        name=job.name,
        enabled=job.enabled,
        scheduler_enabled=bool(settings.TAKT_SCHEDULER_ENABLED),
        queue_paused=bool(queue and queue.paused),
        queue_pause_note=queue.pause_note if queue else "",
        paused=job.paused,
        pause_note=job.pause_note,
        paused_until=job.paused_until,
        triggers=tuple(triggers),
        running=running,
        waiting=waiting,
        overlap_policy=job.overlap_policy,
        max_instances=job.max_instances,
        lock_held=lock_held,
    )


def explain_job(job: Job, *, now: datetime) -> Explanation:
    return explain(job_facts(job, now=now), now=now)
