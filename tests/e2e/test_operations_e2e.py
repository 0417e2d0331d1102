"""Long operations and progress with a real worker (F-93): an import run
as an operation from start to end, its progress moving while it runs; a
job's own progress live; the maintenance run's progress."""

from __future__ import annotations

import importlib
import json
import time
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.models import Run, RunStatus, RunTrigger
from runs.operations import start_operation
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ENDED = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)
# Enough that checking them takes a few seconds (30 to 120 jobs a second
# here), during which the progress is saved once a second; on SQLite the
# saving half holds the write lock, so its progress shows at the end.
JOBS = 400


@pytest.fixture
def builtin_jobs() -> None:
    """The migrations' built-in jobs (an earlier transactional test's flush
    removes them), with the maintenance job's hourly trigger off."""
    for name, create in (
        ("0007_builtin_maintenance_job", "create_maintenance_job"),
        ("0010_builtin_operations_job", "create_operations_job"),
    ):
        getattr(importlib.import_module(f"jobs.migrations.{name}"), create)(apps, None)
    Trigger.objects.filter(job__target="takt.maintenance").update(active=False)


def follow(run: Run, timeout_s: float) -> list[dict]:
    """Poll the run every 50 ms until it ends; the distinct progress values
    seen while it was running, in order."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, progress = Run.objects.filter(pk=run.pk).values_list("status", "progress").get()
        if status in ENDED:
            return seen
        if status == RunStatus.RUNNING and progress and (not seen or seen[-1] != progress):
            seen.append(progress)
        time.sleep(0.05)
    raise AssertionError(f"run #{run.pk} did not end within {timeout_s} s")


def test_an_import_runs_on_a_worker_with_its_progress_moving_to_the_end(worker, builtin_jobs):
    entries = [
        {"key": f"e2e.{n}", "name": f"Imported {n}", "target": "tests.echo",
         "triggers": [{"kind": "cron", "cron_expression": "0 3 * * *"}]}
        for n in range(JOBS)
    ]  # fmt: skip
    run = start_operation(
        "import_jobs", {"text": json.dumps(entries), "format": "json", "source": "e2e.json"},
        by="e2e", now=timezone.now(),
    )  # fmt: skip

    seen = follow(run, 120)

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.message + run.output[-2000:]
    done, steps = [p["done"] for p in seen], 2 * JOBS  # a check and a save per job
    assert [n for n in done if n < steps], seen  # saved while it ran (at most once a second)
    assert done == sorted(done) and {p["total"] for p in seen} == {steps}
    last = JOBS - 1
    assert run.progress == {
        "done": steps,
        "total": steps,
        "note": f"saved job {JOBS} (key 'e2e.{last}', name 'Imported {last}')",
    }
    assert run.output.splitlines()[-1] == f"{JOBS} create, 0 update, 0 unchanged"
    assert Job.objects.filter(key__startswith="e2e.").count() == JOBS


def test_a_jobs_own_progress_shows_while_it_runs(worker):
    job = Job.objects.create(
        name="e2e progress", target="tests.progress", params={"steps": 8, "step_s": 0.5}
    )
    run = enqueue_job(job, trigger=RunTrigger.MANUAL)

    seen = follow(run, 30)

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    done = [p["done"] for p in seen]
    assert len([n for n in done if n < 8]) >= 2 and done == sorted(done), seen
    assert run.progress == {"done": 8, "total": 8, "note": "step 8"}


def test_the_maintenance_run_reports_its_sections_and_cleanup_batches(worker, builtin_jobs):
    old = Job.objects.create(name="e2e old runs", target="tests.echo")
    done_at = timezone.now() - timedelta(days=15)
    Run.objects.bulk_create(
        Run(job=old, trigger=RunTrigger.MANUAL, status=RunStatus.SUCCEEDED,
            scheduled_for=done_at, enqueued_at=done_at, finished_at=done_at)
        for _ in range(2500)
    )  # fmt: skip
    run = enqueue_job(Job.objects.get(target="takt.maintenance"), trigger=RunTrigger.MANUAL)

    wait_until(lambda: Run.objects.get(pk=run.pk).status in ENDED, 60, "the maintenance run")

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.message
    assert run.progress == {
        "done": 9,
        "total": 9,
        "note": "Stalled schedules: none (every trigger that can fire has a next fire time or a"
        " run to set it)",
    }
    assert "deleted 2500 finished runs older than 14 days in 3 batches" in run.output
    assert not old.runs.exists()
