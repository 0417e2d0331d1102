"""The run and its job as a worker reads them in one statement
(runs/statements.py: load_run; on PostgreSQL also start_plain_run, which
claims the run in the same statement) hold what the ORM reads: every loaded
field with the same value and type, every other field its default, and no
two loads sharing a mutable default."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from jobs.groups import ConcurrencyGroup
from jobs.models import Job
from runs.models import Run, RunTrigger
from runs.services import create_run
from runs.statements import JOB_FIELDS, RUN_FIELDS, load_run, start_plain_run
from tests.integration.conftest import make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def _job() -> Job:
    group = ConcurrencyGroup.objects.create(name="nightly group", limit=3)
    parent = make_job("parent")
    return make_job(
        "loaded",
        kind="command",
        target="",
        command=["echo", "{day}"],
        env={"LANG": "C.UTF-8"},
        args=[1, "two"],
        condition_values=["go"],
        notify={"on": ["failed"]},
        concurrency_group=group,
        parent=parent,
        timeout_s=90,
        max_retries=2,
        success_codes=[0, 3],
        description="a job with most fields set",
    )


def _same(ours, orm, names) -> None:  # type: ignore[no-untyped-def]
    for name in names:
        value, expected = getattr(ours, name), getattr(orm, name)
        assert (value, type(value)) == (expected, type(expected)), name


def _loaded_as_the_orm_reads_it(run: Run, loaded: Run) -> None:
    orm = Run.objects.select_related("job").get(pk=run.pk)
    assert loaded.pk == orm.pk and loaded.job.pk == orm.job.pk
    _same(loaded, orm, [n for n in RUN_FIELDS if n not in ("status", "started_at")])
    _same(loaded.job, orm.job, JOB_FIELDS)
    assert loaded.job.group_limit == 3 and loaded.job.has_children is False
    fresh = Job()
    others = [f.attname for f in Job._meta.concrete_fields if f.attname not in JOB_FIELDS]
    _same(loaded.job, fresh, [n for n in others if n not in ("id", "created_at", "updated_at")])
    assert loaded._state.adding is True  # as Run(**fields) made it: never saved whole


def test_a_loaded_run_and_job_hold_what_the_orm_reads():
    job = _job()
    cause = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    run = create_run(
        job,
        trigger=RunTrigger.API,
        now=T0,
        scheduled_for=T0 + timedelta(minutes=1),
        params={"day": "2026-06-01", "n": [1, 2]},
        priority=7,
        cause=cause,
    )

    first, second = load_run(run.pk), load_run(run.pk)

    assert first is not None and second is not None
    _loaded_as_the_orm_reads_it(run, first)
    assert first.status == "queued" and first.started_at is None
    first.job.params["changed"] = True  # a default dict: each load has its own
    assert second.job.params == {}
    assert load_run(run.pk + 1000) is None


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the one-statement claim is PostgreSQL's"
)
def test_a_claimed_run_and_job_hold_what_the_orm_reads():
    job = _job()
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0, params={"day": "x"})

    claimed = start_plain_run(run.pk, worker="w1", now=T0 + timedelta(seconds=2))

    assert claimed is not None
    _loaded_as_the_orm_reads_it(run, claimed)
    assert claimed.status == "running" and claimed.started_at == T0 + timedelta(seconds=2)
    assert start_plain_run(run.pk, worker="w2", now=T0) is None  # no longer queued
