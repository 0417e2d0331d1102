"""Gathering the facts for "Why didn't it run?" (F-66): the job and its
triggers, the live beats with their scheduler switches and the live
workers (their heartbeats), the queue switches, the job's active runs and
who holds its Redis lock. The checklist itself is the pure
heartbeats.core.explain.explain. Here, in heartbeats, because it reads all three apps
(heartbeats → runs → jobs)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from heartbeats.core.explain import (
    BeatFacts,
    Explanation,
    JobFacts,
    RunFacts,
    TriggerFacts,
    explain,
)
from heartbeats.processes import BEAT_PREFIX, WORKER_PREFIX, live_processes
from jobs.core.constraints import allows
from jobs.core.triggers import zone_of
from jobs.models import Job, QueueState
from jobs.specs import allowed_in_maintenance, trigger_constraints, trigger_description
from runs.locks import job_lock, token_run_id
from runs.models import Run, RunStatus
from runs.queue import lock_file_present


def _trigger_facts(job: Job, *, now: datetime) -> tuple[TriggerFacts, ...]:
    facts = []
    for trigger in job.triggers.all():
        try:
            constraints = trigger_constraints(trigger, now=now)
        except Exception:  # an invalid stored trigger: say it is not allowed now
            constraints, allowed = None, False
        else:
            zone = zone_of(trigger.timezone or settings.TIME_ZONE)
            allowed = constraints is None or allows(constraints, now, zone)
        facts.append(
            TriggerFacts(
                description=trigger_description(trigger),
                enabled=trigger.enabled,
                next_run_at=trigger.next_run_at,
                allowed_now=allowed,
            )
        )
    return tuple(facts)


def _lock_holders(job: Job) -> tuple[int, ...]:
    """The runs whose tokens hold the job's lock slots (one round trip per
    slot; a job has max_instances slots under overlap 'allow')."""
    slots = job.max_instances if job.overlap_policy == "allow" else 1
    holders = []
    for slot in range(max(slots, 1)):
        run_id = token_run_id(job_lock(job.pk, slot=slot).holder())
        if run_id is not None:
            holders.append(run_id)
    return tuple(holders)


def _active_runs(job: Job, holders: tuple[int, ...], *, now: datetime) -> tuple[RunFacts, ...]:
    runs = Run.objects.filter(
        job=job, status__in=(RunStatus.QUEUED, RunStatus.RUNNING), scheduled_for__lte=now
    ).only("pk", "status", "started_at", "scheduled_for", "worker", "held")[:50]
    return tuple(
        RunFacts(
            run_id=run.pk,
            status=run.status,
            since=(run.started_at or run.scheduled_for)
            if run.status == RunStatus.RUNNING
            else run.scheduled_for,
            worker=run.worker,
            lock_alive=run.pk in holders,
            held=run.held,
        )
        for run in runs
    )


def job_facts(job: Job, *, now: datetime) -> JobFacts:
    """Everything the checklist looks at; raises redis.RedisError when
    Redis cannot be reached (the caller says so)."""
    queue = QueueState.objects.filter(pk=1).first()
    holders = _lock_holders(job)
    beats = live_processes(BEAT_PREFIX, now=now)
    return JobFacts(
        name=job.name,
        enabled=job.enabled,
        triggers=_trigger_facts(job, now=now),
        beats=tuple(BeatFacts(b.name, b.scheduler_enabled) for b in beats),
        workers=len(live_processes(WORKER_PREFIX, now=now)),
        queue_paused=bool(queue and queue.paused),
        queue_pause_note=queue.pause_note if queue else "",
        queue_paused_until=queue.paused_until if queue and queue.paused else None,
        maintenance=bool(queue and queue.maintenance) or lock_file_present(),
        allowed_during_maintenance=allowed_in_maintenance(job),
        paused=job.paused,
        pause_note=job.pause_note,
        paused_until=job.paused_until,
        max_runs=job.max_runs,
        runs_done=job.runs_done,
        active_runs=_active_runs(job, holders, now=now),
        overlap_policy=job.overlap_policy,
        max_instances=job.max_instances,
        lock_holders=holders,
        poll_s=float(settings.TAKT_POLL_SECONDS),
        lock_ttl_s=float(settings.TAKT_LOCK_TTL_SECONDS),
    )


def explain_job(job: Job, *, now: datetime) -> Explanation:
    return explain(job_facts(job, now=now), now=now)
