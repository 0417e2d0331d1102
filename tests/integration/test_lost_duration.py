"""A lost run's duration is unknown (issue 12): its worker died at some
moment between its last lock renewal and the detection, so Takt records no
duration (not the detection delay) and every page, the API and the
retry-delay check say so or leave it out."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from jobs.models import Job
from runs.maintenance import run_maintenance
from runs.models import Run, RunStatus
from runs.recovery import check_lost_runs
from tests.integration.conftest import SECOND, make_job, running_run, utc

pytestmark = pytest.mark.django_db

NOW = utc(2026, 6, 10, 12, 0)
LONG_AGO = NOW - 208 * SECOND  # the chaos run's 0.3 s run, found lost 208 s after its start


def lost_run(job: Job) -> Run:
    run = running_run(job, started_at=LONG_AGO)
    assert check_lost_runs(now=NOW)["lost"] == 1
    run.refresh_from_db()
    return run


def test_a_lost_run_has_no_duration_and_the_pages_and_api_say_unknown(redis_client, admin_client):
    job = make_job("nightly")
    run = lost_run(job)
    assert (run.status, run.started_at, run.finished_at, run.duration_s) == (
        RunStatus.LOST,
        LONG_AGO,
        NOW,
        None,
    )

    api = admin_client.get(f"/api/v1/runs/{run.pk}").json()
    assert (api["status"], api["duration_s"]) == ("lost", None)
    live = admin_client.get(reverse("admin:takt_runs_run_live", args=[run.pk])).json()
    assert (live["duration_s"], live["html"]["duration"]) == (None, "unknown")
    run_list = admin_client.get(reverse("admin:takt_runs_run_changelist")).content.decode()
    assert '<td class="field-duration">unknown</td>' in run_list
    run_page = admin_client.get(
        reverse("admin:takt_runs_run_change", args=[run.pk])
    ).content.decode()
    assert '<span data-live="duration">unknown</span>' in run_page
    job_page = admin_client.get(
        reverse("admin:takt_jobs_job_change", args=[job.pk])
    ).content.decode()
    assert "<td>unknown</td>" in job_page
    assert "208" not in run_list + job_page


def test_a_lost_run_raises_no_retry_delay_warning_but_a_long_finished_run_does(redis_client):
    flaky = make_job("flaky", max_retries=2, retry_backoff_s=10)
    lost_run(flaky)
    # A lost run recorded before this change, with the detection delay as
    # its duration, counts no more either.
    Run.objects.create(
        job=flaky,
        status=RunStatus.LOST,
        scheduled_for=LONG_AGO,
        enqueued_at=LONG_AGO,
        started_at=LONG_AGO,
        finished_at=NOW,
        duration_s=208.0,
    )

    assert run_maintenance(now=NOW, only=["checks"]).lines() == ["Checks: all checks passed"]

    Run.objects.filter(job=flaky, status=RunStatus.LOST).update(status=RunStatus.SUCCEEDED)
    Run.objects.filter(job=flaky, duration_s=None).update(duration_s=11.0)
    assert run_maintenance(now=NOW, only=["checks"]).lines() == [
        "Checks: 1 warning",
        f"  warning: Retry delay shorter than the longest run: job 'flaky' (#{flaky.pk})"
        " (first retry after 10 s; longest recorded run 208 s)",
    ]


def test_the_migration_forgets_the_durations_of_runs_already_lost(redis_client):
    migration = importlib.import_module("runs.migrations.0011_lost_runs")
    state = MigrationExecutor(connection).loader.project_state(("takt_runs", "0011_lost_runs"))
    job = make_job()
    fields = {"scheduled_for": NOW, "enqueued_at": NOW, "started_at": NOW, "finished_at": NOW}
    lost = Run.objects.create(job=job, status=RunStatus.LOST, duration_s=208.0, **fields)
    done = Run.objects.create(job=job, status=RunStatus.SUCCEEDED, duration_s=0.3, **fields)

    migration.forget_lost_durations(state.apps, None)

    assert Run.objects.get(pk=lost.pk).duration_s is None
    assert Run.objects.get(pk=done.pk).duration_s == 0.3
