"""One scheduler in a fresh process: build it over the jobs already in the
database, tick it, edit one job and tick again; print the timings and the
process's RSS as one JSON line.

    python -m benchmarks.probe takt --reps 5   (DJANGO_SETTINGS_MODULE=scheduler_project.settings)
    python -m benchmarks.probe dcb --reps 5    (DJANGO_SETTINGS_MODULE=benchmarks.settings)

The ticks are the scheduler's own `tick()` as celery beat calls it:
TaktScheduler.tick (close_old_connections + runs.tick.run_tick) and
django-celery-beat's DatabaseScheduler.tick (schedule-changed check, heap).
An edit is what the admin does: load one row, change its schedule, save().
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

import django


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _takt() -> tuple[Callable[[], Any], Callable[[int], None]]:
    from jobs.models import Trigger
    from runs.beat import TaktScheduler
    from scheduler_project.celery import app

    ids = list(Trigger.objects.values_list("pk", flat=True))

    def edit(i: int) -> None:
        trigger = Trigger.objects.select_related("job").get(pk=random.choice(ids))
        trigger.interval_seconds = 3600 + 1 + i % 2  # a new schedule: next_run_at recomputed
        trigger.save()

    return lambda: TaktScheduler(app=app), edit


def _dcb() -> tuple[Callable[[], Any], Callable[[int], None]]:
    from django_celery_beat.models import PeriodicTask
    from django_celery_beat.schedulers import DatabaseScheduler

    from scheduler_project.celery import app

    ids = list(PeriodicTask.objects.values_list("pk", flat=True))

    def edit(i: int) -> None:
        task = PeriodicTask.objects.get(pk=random.choice(ids))
        task.description = f"edited {i}"
        task.save()  # its signal marks the schedule changed, as an admin edit does

    return lambda: DatabaseScheduler(app=app), edit


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["takt", "dcb"])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    django.setup()
    import psutil

    random.seed(3)
    make, edit = (_takt if args.kind == "takt" else _dcb)()
    t0 = time.perf_counter()
    scheduler = make()
    scheduler.tick()  # the first tick builds the heap (django-celery-beat)
    build = time.perf_counter() - t0
    scheduler.tick()  # warm
    idle, edited = [], []
    for i in range(args.reps):
        time.sleep(0.05)
        idle.append(_timed(scheduler.tick))
        edit(i)
        # A changed-timestamp must be strictly newer than the last one seen.
        time.sleep(0.01)
        edited.append(_timed(scheduler.tick))
    print(
        json.dumps(
            {
                "build_s": build,
                "idle_s": idle,
                "edit_s": edited,
                "rss_bytes": psutil.Process().memory_info().rss,
            }
        )
    )


if __name__ == "__main__":
    main()
