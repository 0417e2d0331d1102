"""A plain Celery app with no Django and no Takt: the anchor for a worker's
memory. `celery -A benchmarks.plain_app worker` with the same pool and
concurrency as Takt's worker runs N of its no-op tasks; the e2e section
prints both workers' RSS side by side.

Its broker is REDIS_URL (the benchmark's private Redis), its queue
`bench-plain`; the task counts itself with one INCR, as bench.noop_task."""

from __future__ import annotations

import os

from celery import Celery

QUEUE = "bench-plain"
DONE_KEY = "bench:plain-app:done"

# The worker's environment names the broker (benchmarks/infra.py); the
# benchmark process imports this module only for QUEUE and DONE_KEY.
app = Celery("plain", broker=os.environ.get("REDIS_URL"))
app.conf.update(
    task_default_queue=QUEUE,
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
)


@app.task(name="bench.plain_noop", ignore_result=True)
def plain_noop() -> None:
    with app.connection_for_write() as connection:
        connection.default_channel.client.incr(DONE_KEY)
