"""Filling and emptying the benchmark database (runs inside a process set up
with benchmarks.settings).

bulk_create bypasses Trigger.save(), so next_run_at and `active` are set
here directly, the way Trigger.save() would set them for an enabled job.
Every job targets the no-op callable ``bench.noop``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.db import connection, transaction

from jobs.models import Job, Trigger

BATCH = 2000
IDLE_INTERVAL_S = 3600


def wipe() -> None:
    """Delete every run, heartbeat, trigger, job and PeriodicTask."""
    from django_celery_beat.models import PeriodicTask, PeriodicTasks

    from benchmarks.seed_bulk import empty
    from heartbeats.models import Heartbeat
    from runs.models import Run

    empty([Run, Heartbeat, Trigger, Job, PeriodicTask, PeriodicTasks])
    analyze()


def analyze() -> None:
    """Fresh planner statistics and visibility maps, as autovacuum would have
    them (PostgreSQL), so that no autovacuum of the rows just inserted runs
    on these two cores in the middle of a measurement."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("VACUUM ANALYZE")


def _add_jobs(count: int, prefix: str, make_trigger: Callable[[Job, int], Trigger | None]) -> None:
    start = Job.objects.count()
    for lo in range(0, count, BATCH):
        n = min(BATCH, count - lo)
        with transaction.atomic():
            jobs = Job.objects.bulk_create(
                Job(name=f"{prefix} {start + lo + i}", target="bench.noop", timeout_s=300)
                for i in range(n)
            )
            triggers = [make_trigger(job, lo + i) for i, job in enumerate(jobs)]
            Trigger.objects.bulk_create(t for t in triggers if t is not None)


def _interval(job: Job, seconds: int, next_run_at: datetime, start_at: datetime | None = None):  # type: ignore[no-untyped-def]
    return Trigger(
        job=job,
        kind="interval",
        interval_seconds=seconds,
        interval_anchor="fixed_rate",
        start_at=start_at,
        next_run_at=next_run_at,
        active=True,
    )


def grow_idle_takt(total: int, now: datetime) -> None:
    """Enabled jobs with hourly triggers that are due 30 to 60 minutes from
    `now` (never during a measurement), until there are `total`."""
    missing = total - Job.objects.count()
    offset = timedelta(seconds=1800)
    _add_jobs(
        max(0, missing),
        "bench idle",
        lambda job, i: _interval(job, IDLE_INTERVAL_S, now + offset + timedelta(seconds=i % 1800)),
    )
    analyze()


def grow_idle_dcb(total: int, now: datetime) -> None:
    """The same schedule as django-celery-beat PeriodicTasks: every hour,
    last run 0 to 30 minutes before `now`."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

    every, _ = IntervalSchedule.objects.get_or_create(every=IDLE_INTERVAL_S, period="seconds")
    have = PeriodicTask.objects.count()
    for lo in range(have, total, BATCH):
        n = min(BATCH, total - lo)
        PeriodicTask.objects.bulk_create(
            PeriodicTask(
                name=f"bench idle {lo + i}",
                task="bench.noop_task",
                interval=every,
                enabled=True,
                last_run_at=now - timedelta(seconds=(lo + i) % 1800),
            )
            for i in range(n)
        )
    PeriodicTasks.update_changed()
    analyze()


def add_due_jobs(count: int, parked_at: datetime) -> list[int]:
    """`count` jobs with daily triggers parked at `parked_at`; a measurement
    moves them all to one fire time. Returns the trigger ids."""
    before = set(Trigger.objects.values_list("pk", flat=True))
    _add_jobs(count, "bench due", lambda job, i: _interval(job, 86400, parked_at))
    analyze()
    return sorted(set(Trigger.objects.values_list("pk", flat=True)) - before)


def add_plain_jobs(count: int) -> list[Job]:
    """Jobs without triggers, for enqueue_job()."""
    _add_jobs(count, "bench e2e", lambda job, i: None)
    analyze()
    return list(Job.objects.filter(name__startswith="bench e2e").order_by("pk"))


def add_lag_jobs(mix: Iterable[tuple[int, int]], first_fire: datetime, seed: int = 7) -> int:
    """Jobs on fixed-rate interval triggers: `mix` is (count, seconds)
    pairs. Each trigger's grid gets a random phase, so the load is spread
    over the interval as with real, independently created jobs; the first
    fire time is at or after `first_fire`. Returns the number of jobs."""
    rng = random.Random(seed)
    plan = [secs for count, secs in mix for _ in range(count)]
    rng.shuffle(plan)

    def make(job: Job, i: int) -> Trigger:
        secs = plan[i]
        phase = timedelta(seconds=rng.uniform(0, secs))
        start_at = first_fire + phase
        return _interval(job, secs, start_at, start_at=start_at)

    _add_jobs(len(plan), "bench lag", make)
    analyze()
    return len(plan)
