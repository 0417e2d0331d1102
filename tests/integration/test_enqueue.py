"""Starting runs from Python (F-40, F-43, F-27) and the outbox (F-83):
the run is recorded, then its message reaches the private Redis broker."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.conf import settings
from django.db import transaction

from jobs import enqueue_job
from jobs.errors import InvalidInput, JobNotFound
from runs.dispatch import claim_due_runs
from runs.models import Run, RunStatus, RunTrigger
from runs.outbox import sweep_unpublished
from runs.services import create_run
from tests.integration.conftest import SECOND, broker_task_ids, hourly, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
HOUR = 3600 * SECOND


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Run the on-commit publishing as a real commit would."""
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        yield callbacks


def test_enqueue_records_a_queued_api_run_and_publishes_it_after_commit(
    redis_client, django_capture_on_commit_callbacks
):
    job = make_job(params={"colour": "green"}, priority=7)

    with django_capture_on_commit_callbacks(execute=True):
        run = enqueue_job(job.pk)
        assert broker_task_ids(redis_client) == []  # nothing is sent before the commit

    assert isinstance(run, Run) and run.pk is not None
    run.refresh_from_db()
    assert (run.job, run.trigger, run.status, run.priority, run.params) == (
        job,
        RunTrigger.API,
        RunStatus.QUEUED,
        6,  # F-22: one step ahead of the job's scheduled runs
        {"colour": "green"},
    )
    assert run.scheduled_for == run.enqueued_at and run.published_at is not None
    assert broker_task_ids(redis_client) == [run.task_id]


def test_enqueue_as_manual_with_params_and_priority(redis_client):
    job = make_job(params={"a": 1, "b": 2})

    run = enqueue_job(job, trigger=RunTrigger.MANUAL, params={"b": 3}, priority=0, now=T0)

    run.refresh_from_db()
    assert (run.trigger, run.params, run.priority, run.enqueued_at) == (
        RunTrigger.MANUAL,
        {"a": 1, "b": 3},
        0,
        T0,
    )


def test_enqueue_works_on_a_disabled_job():
    job = make_job(enabled=False)

    run = enqueue_job(job.pk, trigger=RunTrigger.MANUAL, now=T0)

    assert run.status == RunStatus.QUEUED
    assert job.triggers.filter(active=True).count() == 0


def test_enqueue_on_a_busy_job_records_a_skipped_run():
    job = make_job()
    first = enqueue_job(job, now=T0)

    second = enqueue_job(job, now=T0 + SECOND)

    assert (first.status, second.status) == (RunStatus.QUEUED, RunStatus.SKIPPED)
    assert second.message == "skipped: the job already has an active run (overlap policy 'skip')"


def test_the_same_dedupe_key_returns_the_active_run():
    job = make_job()
    first = enqueue_job(job, dedupe_key="invoice-42", now=T0)

    assert enqueue_job(job, dedupe_key="invoice-42", now=T0 + SECOND) == first
    assert Run.objects.count() == 1


@pytest.mark.parametrize("job_id", [999_999, "abc", None])
def test_an_unknown_job_raises_job_not_found(job_id):
    with pytest.raises(JobNotFound, match="no job with id"):
        enqueue_job(job_id)
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"params": ["a"]}, "params"),
        ({"params": "a=1"}, "params"),
        ({"params": {"when": T0}}, "params"),
        ({"params": {"ids": {1, 2}}}, "params"),
        ({"priority": 10}, "priority"),
        ({"priority": -1}, "priority"),
        ({"priority": "1"}, "priority"),
        ({"run_at": datetime(2026, 6, 1, 12)}, "run_at"),  # noqa: DTZ001 - naive on purpose
        ({"trigger": "schedule"}, "trigger"),
        ({"trigger": "catchup"}, "trigger"),
        ({"trigger": "whenever"}, "trigger"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(kwargs, field, redis_client, committed):
    job = make_job()

    with pytest.raises(InvalidInput) as exc:
        enqueue_job(job.pk, **kwargs)

    assert exc.value.field == field and str(exc.value).startswith(f"{field}: ")
    assert not Run.objects.exists()
    assert broker_task_ids(redis_client) == []


def test_a_run_for_later_waits_in_the_outbox_until_it_is_due(redis_client, committed):
    job = make_job()
    run = enqueue_job(job, run_at=T0 + HOUR, now=T0)
    assert (run.status, run.scheduled_for, run.published_at) == (RunStatus.QUEUED, T0 + HOUR, None)
    assert sweep_unpublished(now=T0 + 10 * SECOND) == 0
    assert broker_task_ids(redis_client) == []

    assert sweep_unpublished(now=T0 + HOUR) == 1

    run.refresh_from_db()
    assert run.published_at == T0 + HOUR
    assert broker_task_ids(redis_client) == [run.task_id]
    assert sweep_unpublished(now=T0 + 2 * HOUR) == 0  # sent once
    assert broker_task_ids(redis_client) == [run.task_id]


def test_a_run_for_later_is_not_sent_early_by_the_stale_outbox_sweep(redis_client, committed):
    run = enqueue_job(make_job(), run_at=T0 + HOUR, now=T0)

    sent = sweep_unpublished(now=T0 + HOUR - SECOND)

    run.refresh_from_db()
    assert (sent, run.published_at, broker_task_ids(redis_client)) == (0, None, [])


def test_a_recorded_but_unsent_run_is_published_once_it_is_stale(redis_client):
    job = make_job()
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)  # the publisher died here
    done = create_run(make_job("finished"), trigger=RunTrigger.MANUAL, now=T0)
    Run.objects.filter(pk=done.pk).update(status=RunStatus.SUCCEEDED)
    stale_after = settings.TAKT_REPUBLISH_AFTER_SECONDS * SECOND

    assert sweep_unpublished(now=T0 + stale_after) == 0  # not older than the limit yet
    assert broker_task_ids(redis_client) == []

    assert sweep_unpublished(now=T0 + stale_after + SECOND) == 1

    run.refresh_from_db()
    assert run.published_at == T0 + stale_after + SECOND
    assert broker_task_ids(redis_client) == [run.task_id]
    assert Run.objects.get(pk=done.pk).published_at is None  # only queued runs are sent
    assert sweep_unpublished(now=T0 + 10 * stale_after) == 0


def test_a_run_requested_for_tomorrow_does_not_block_todays_schedule():
    job = make_job()
    hourly(job, created_at=T0 - 30 * 60 * SECOND)
    enqueue_job(job, run_at=T0 + 24 * HOUR, now=T0 - 60 * SECOND)

    claim_due_runs(now=T0, limit=10)

    scheduled = job.runs.get(trigger=RunTrigger.SCHEDULE)
    assert scheduled.status == RunStatus.QUEUED, scheduled.message


def test_a_run_requested_for_later_is_not_skipped_because_the_job_is_busy_now():
    job = make_job()
    enqueue_job(job, now=T0)  # running now

    later = enqueue_job(job, run_at=T0 + HOUR, now=T0 + SECOND)

    assert later.status == RunStatus.QUEUED, later.message


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_params_that_are_not_valid_json_numbers_are_refused_naming_params(value):
    job = make_job()

    with pytest.raises(InvalidInput) as exc, transaction.atomic():
        enqueue_job(job, params={"ratio": value})

    assert exc.value.field == "params"


def test_manual_and_api_runs_default_to_a_higher_priority_than_scheduled_ones():
    job = make_job(priority=5)
    hourly(job, created_at=T0 - 30 * 60 * SECOND)
    claim_due_runs(now=T0, limit=10)
    scheduled = job.runs.get()
    Run.objects.filter(pk=scheduled.pk).update(status=RunStatus.SUCCEEDED)

    manual = enqueue_job(job, trigger=RunTrigger.MANUAL, now=T0 + SECOND)
    Run.objects.filter(pk=manual.pk).update(status=RunStatus.SUCCEEDED)
    api = enqueue_job(job, now=T0 + 2 * SECOND)

    assert (
        manual.priority < scheduled.priority and api.priority < scheduled.priority
    )  # 0 runs first
