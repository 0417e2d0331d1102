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


def test_runs_inserted_in_bulk_hold_what_the_orm_would_store():
    """runs.statements.insert_runs (PostgreSQL: one array per column) writes
    every field as Run.objects.create does: JSON, empty and null values,
    enums, foreign keys."""
    from runs.statements import insert_runs

    job, other = make_job(name="a"), make_job(name="b")
    fields = [
        {"job": job, "params": {"day": "2026-03-02", "n": [1, 2]}, "priority": 0,
         "trigger": RunTrigger.MANUAL, "dedupe_key": "k1", "message": "", "held": True},
        {"job": other, "params": {}, "priority": 9, "trigger": RunTrigger.SCHEDULE,
         "result": [1, "x"], "progress": None, "missed_count": 3, "attempt": 2},
    ]  # fmt: skip
    common = {"status": RunStatus.QUEUED, "scheduled_for": T0, "enqueued_at": T0}
    bulk = insert_runs([Run(**common, **f) for f in fields])
    later = {"scheduled_for": T0 + timedelta(hours=1), "dedupe_key": ""}  # both unique
    created = [Run.objects.create(**{**common, **f, **later}) for f in fields]

    skip = ("id", "scheduled_for", "dedupe_key")
    columns = [f.attname for f in Run._meta.concrete_fields if f.attname not in skip]
    for ours, orm in zip(bulk, created, strict=True):
        assert ours.pk and ours.pk != orm.pk
        got = Run.objects.values(*columns).get(pk=ours.pk)
        assert got == Run.objects.values(*columns).get(pk=orm.pk)
    assert Run.objects.get(pk=bulk[0].pk).dedupe_key == "k1"
