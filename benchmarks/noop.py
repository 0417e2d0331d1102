"""The no-op work both sides of the end-to-end comparison run.

Imported by workers through TAKT_JOB_MODULES=benchmarks.noop, so that one
worker process (same pool, same settings) serves both:

* ``bench.noop``: a Takt job callable that does nothing. Takt's bookkeeping
  around it (run row, compare-and-set, lock, heartbeat) is what is measured.
* ``bench.noop_task``: a plain Celery task that does nothing but count
  itself in Redis (one INCR), which is how the benchmark sees it finish:
  there is no result backend.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from jobs.registry import takt_job

DONE_KEY = "bench:plain:done"


@takt_job("bench.noop")
def noop(job: Any) -> None:
    return None


@shared_task(name="bench.noop_task", ignore_result=True)
def noop_task() -> None:
    from runs.locks import get_redis

    get_redis().incr(DONE_KEY)
