"""The measuring half of benchmarks/profile_run.py, run in a child process
with the benchmark's environment: `python -m benchmarks.profile_inner N TOP`."""

from __future__ import annotations

import cProfile
import io
import logging
import pstats
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import django


def _shape(sql: str) -> str:
    """A statement with its literals taken out, shortened."""
    sql = re.sub(r"'[^']*'", "?", sql)
    sql = re.sub(r"\b\d+(\.\d+)?\b", "?", sql)
    return re.sub(r"\(\?(, \?)*\)", "(…)", sql)[:150]


def side(name: str, n: int, top: int, body: Callable[[], Any]) -> Any:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    profile = cProfile.Profile()
    with CaptureQueriesContext(connection) as captured:
        wall, cpu = time.perf_counter(), time.process_time()
        profile.enable()
        result = body()
        profile.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    statements = captured.captured_queries
    print(f"\n## {name}: {n} runs on {connection.vendor}")
    print(f"wall {wall / n * 1000:.2f} ms/run, CPU of this process {cpu / n * 1000:.2f} ms/run")
    print(f"statements: {len(statements) / n:.2f}/run")
    for shape, count in Counter(_shape(q["sql"]) for q in statements).most_common(12):
        print(f"  {count / n:5.2f}  {shape}")
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).strip_dirs().sort_stats(key).print_stats(top)
        print(out.getvalue().split("\n", 4)[-1].rstrip())
    return result


def main(n: int, top: int) -> None:
    django.setup()
    logging.disable(logging.WARNING)
    from jobs.models import Job
    from runs.execution import execute
    from runs.models import Run
    from runs.services import enqueue_job

    jobs = [
        Job.objects.create(key=f"profile.{i}", name=f"profile.{i}", target="bench.noop")
        for i in range(n + 10)
    ]
    for job in jobs[n:]:  # warm-up: caches, prepared statements, connections
        execute(enqueue_job(job, trigger="api").id, worker="profile")
    runs = side("producer: enqueue_job()", n, top, lambda: [enqueue_job(j) for j in jobs[:n]])
    ids = [run.id for run in runs]
    side("worker: execute()", n, top, lambda: [execute(i, worker="profile") for i in ids])
    statuses = Counter(Run.objects.filter(id__in=ids).values_list("status", flat=True))
    print(f"\nruns: {dict(statuses)}")


def dispatch(k: int, top: int) -> None:
    """One beat tick with `k` runs due at once (table 2's case), in process."""
    django.setup()
    logging.disable(logging.WARNING)
    from datetime import timedelta

    from django.utils import timezone

    from benchmarks import seed
    from jobs.models import Trigger
    from runs.models import Run
    from runs.tick import run_tick

    ids = seed.add_due_jobs(k, parked_at=timezone.now() + timedelta(days=1))
    run_tick(now=timezone.now())  # warm-up: nothing due yet
    fire = timezone.now()
    Trigger.objects.filter(pk__in=ids).update(next_run_at=fire)
    side(f"beat: one tick with {k} runs due", k, top, lambda: run_tick(now=fire))
    published = Run.objects.filter(published_at__isnull=False).count()
    print(f"\nruns recorded {Run.objects.count()}, published {published}")


def idle(jobs: int, top: int, ticks: int = 500) -> None:
    """`ticks` idle beat ticks (table 1's case) with `jobs` idle jobs: the
    scheduler's own tick as celery beat calls it, in process."""
    django.setup()
    logging.disable(logging.WARNING)
    from django.utils import timezone

    from benchmarks import seed
    from runs.beat import TaktScheduler
    from scheduler_project.celery import app

    seed.grow_idle_takt(jobs, timezone.now())
    scheduler = TaktScheduler(app=app, lazy=True)
    for _ in range(20):  # warm-up: connection, caches, prepared statements
        scheduler.tick()

    def loop() -> None:
        for _ in range(ticks):
            scheduler.tick()

    side(f"beat: {ticks} idle ticks with {jobs} jobs (per tick)", ticks, top, loop)


if __name__ == "__main__":
    if sys.argv[1] == "dispatch":
        dispatch(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "idle":
        idle(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main(int(sys.argv[1]), int(sys.argv[2]))
