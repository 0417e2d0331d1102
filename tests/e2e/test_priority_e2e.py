"""F-22 with a real worker: queued runs start by priority, then age.
(Its own module: no module-wide worker may drain the queue first.)"""

from __future__ import annotations

import pytest

from jobs.models import Job
from runs.models import Run, RunStatus
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_queued_runs_start_by_priority_then_age(start_process):
    order = [(7, "a"), (2, "b"), (5, "c"), (0, "d"), (2, "e")]
    for priority, name in order:
        job = Job.objects.create(name=f"e2e priority {name}", target="tests.echo")
        enqueue_job(job, trigger="api", priority=priority)
    # One worker with one slot, started after every run was queued.
    solo = start_process("worker", concurrency=1)
    wait_until(
        lambda: Run.objects.filter(status=RunStatus.SUCCEEDED).count() == len(order),
        20,
        "every run",
    )
    solo.stop()
    started = [r.job.name[-1] for r in Run.objects.select_related("job").order_by("started_at")]
    assert started == ["d", "b", "e", "c", "a"]
