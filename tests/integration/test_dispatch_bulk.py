"""The claim goes in bulk when nothing races it, and falls back to row-by-row
work (with the same outcome) when something does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from runs.dispatch import claim_due_runs
from runs.models import Run, RunStatus, RunTrigger
from tests.integration.conftest import hourly, make_job

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _due_jobs(n: int) -> list:
    jobs = [make_job(name=f"job {i}") for i in range(n)]
    for job in jobs:
        hourly(job, created_at=T0 - timedelta(minutes=30))
    return jobs


def test_a_batch_of_due_triggers_costs_a_fixed_number_of_queries(django_assert_max_num_queries):
    _due_jobs(40)
    # The runs' INSERT is one statement, or as many as the database's limit
    # of parameters per statement needs (SQLite: 999): fixed per batch.
    fields = len([f for f in Run._meta.concrete_fields if not f.primary_key])
    limit = connection.ops.bulk_batch_size([None] * fields, [None] * 40)
    inserts = -(-40 // limit)

    with django_assert_max_num_queries(8 + inserts):  # incl. the queue's last resume
        result = claim_due_runs(now=T0, limit=100)

    assert len(result.queued) == 40
    assert Run.objects.filter(status=RunStatus.QUEUED, scheduled_for=T0).count() == 40


def test_a_fire_time_that_already_has_a_run_sends_the_batch_row_by_row():
    jobs = _due_jobs(5)
    Run.objects.create(
        job=jobs[2],
        trigger=RunTrigger.SCHEDULE,
        scheduled_for=T0,
        enqueued_at=T0,
        status=RunStatus.SUCCEEDED,
    )

    result = claim_due_runs(now=T0, limit=100)

    assert len(result.queued) == 4 and result.lost_races == 1
    assert Run.objects.filter(scheduled_for=T0).count() == 5
    assert all(job.triggers.get().next_run_at == T0 + timedelta(hours=1) for job in jobs)
