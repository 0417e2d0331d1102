"""A worker executing one run, in-process (F-03, F-12, F-23, F-60, F-82,
F-83): runs.execution.execute against the real database and Redis."""

from __future__ import annotations

import pytest

from heartbeats.models import Heartbeat
from jobs.models import Job
from runs.dispatch import claim_due_runs
from runs.ending import finish_run
from runs.execution import execute
from runs.locks import job_lock, job_lock_key
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run, enqueue_job, start_run
from tests.integration.conftest import SECOND, clock, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def run_of(job: Job, *, trigger: str = RunTrigger.MANUAL) -> Run:
    return create_run(job, trigger=trigger, now=T0)


def execute_at(run: Run, *times) -> str | None:
    return execute(run.pk, worker="test", clock=clock(*times))


def test_a_run_that_returns_succeeds_with_its_output_and_result(redis_client):
    job = make_job("echo", params={"colour": "green"})
    run = run_of(job)

    status = execute_at(run, T0 + SECOND, T0 + 3 * SECOND)

    run.refresh_from_db()
    assert status == run.status == RunStatus.SUCCEEDED
    assert run.output.splitlines() == [
        "hello from echo",
        "trigger=manual",
        "params=[('colour', 'green')]",
    ]
    assert (run.result, run.result_code, run.message) == ({"echo": {"colour": "green"}}, 0, "")
    assert (run.worker, run.started_at, run.finished_at, run.duration_s) == (
        "test",
        T0 + SECOND,
        T0 + 3 * SECOND,
        2.0,
    )
    assert redis_client.exists(job_lock_key(job.pk)) == 0  # released after the run


def test_job_fail_ends_the_run_failed_with_its_message(redis_client):
    run = run_of(make_job(target="tests.fail", params={"message": "disk full"}))

    assert execute_at(run, T0, T0 + SECOND) == RunStatus.FAILED

    run.refresh_from_db()
    assert (run.status, run.message, run.output, run.result_code) == (
        RunStatus.FAILED,
        "disk full",
        "about to fail",
        1,
    )


def test_an_exception_fails_the_run_with_the_error_and_the_traceback_in_the_output(redis_client):
    job = make_job(target="tests.raise")
    run = run_of(job)

    assert execute_at(run, T0, T0 + SECOND) == RunStatus.FAILED

    run.refresh_from_db()
    assert run.message == "RuntimeError: exploded on purpose"
    assert run.output.startswith("Traceback (most recent call last):")
    assert 'in explode\n    raise RuntimeError("exploded on purpose")' in run.output
    assert run.output.endswith("RuntimeError: exploded on purpose")
    assert redis_client.exists(job_lock_key(job.pk)) == 0


def test_an_unknown_target_fails_the_run_and_says_which(redis_client):
    job = make_job(target="tests.echo")
    Job.objects.filter(pk=job.pk).update(target="tests.gone")  # unregistered since it was saved
    run = run_of(job)

    assert execute_at(run, T0, T0 + SECOND) == RunStatus.FAILED
    run.refresh_from_db()
    assert run.message == "no job callable or Celery task is registered as 'tests.gone'"


def test_a_celery_task_target_is_called_with_the_jobs_args_and_the_runs_params(redis_client):
    job = make_job("beat task", target="tests.celery_echo", args=[1, "x"], params={"k": 2})
    run = run_of(job)

    assert execute_at(run, T0, T0 + SECOND) == RunStatus.SUCCEEDED

    run.refresh_from_db()
    assert (run.result, run.message) == ({"args": [1, "x"], "kwargs": {"k": 2}}, "")


def test_params_given_at_enqueue_are_merged_over_the_jobs_and_the_args_kept(redis_client):
    job = make_job("beat task", target="tests.celery_echo", args=[1, "x"], params={"k": 2})
    run = enqueue_job(job, params={"k": 3, "day": "today"}, now=T0)

    assert execute_at(run, T0, T0 + SECOND) == RunStatus.SUCCEEDED

    run.refresh_from_db()
    assert run.result == {"args": [1, "x"], "kwargs": {"k": 3, "day": "today"}}


@pytest.mark.parametrize("state", ["running", "finished"])
def test_a_duplicate_delivery_of_a_run_that_is_not_queued_does_nothing(state, redis_client):
    run = run_of(make_job(target="tests.count", params={"key": "exec:dup"}))
    if state == "running":
        assert start_run(run, worker="other worker", now=T0)
    else:
        assert execute_at(run, T0, T0 + SECOND) == RunStatus.SUCCEEDED
    before = Run.objects.filter(pk=run.pk).values().get()
    executions = redis_client.get("exec:dup")

    assert execute_at(run, T0 + 5 * SECOND, T0 + 6 * SECOND) is None

    assert Run.objects.filter(pk=run.pk).values().get() == before
    assert redis_client.get("exec:dup") == executions
    assert redis_client.exists(job_lock_key(run.job_id)) == 0


def test_a_run_whose_job_lock_is_held_ends_skipped_and_leaves_the_lock_to_its_owner(redis_client):
    job = make_job(target="tests.count", params={"key": "exec:locked"})
    holder = job_lock(job.pk)
    assert holder.acquire()
    run = run_of(job)

    assert execute_at(run, T0, T0 + SECOND) == RunStatus.SKIPPED

    run.refresh_from_db()
    assert (run.status, run.finished_at) == (RunStatus.SKIPPED, T0 + SECOND)
    assert run.message == f"skipped: job #{job.pk} is locked by another run (overlap policy 'skip')"
    assert redis_client.get("exec:locked") is None  # the target never ran
    assert holder.holder() == holder.token
    assert not Heartbeat.objects.filter(job=job).exists()  # a skip is not a report


@pytest.fixture(params=["upsert", "orm"])
def heartbeat_path(request, monkeypatch):
    """Both ways a heartbeat is written: one INSERT … ON CONFLICT
    (PostgreSQL, SQLite) and the ORM update-or-create (other databases)."""
    if request.param == "orm":
        monkeypatch.setattr("heartbeats.services.UPSERT_VENDORS", ())
    return request.param


def test_the_heartbeat_appears_with_the_first_report_and_keeps_the_last_success(
    redis_client, heartbeat_path
):
    job = make_job("nightly report")
    assert not Heartbeat.objects.filter(job=job).exists()
    holder = job_lock(job.pk)
    holder.acquire()
    assert execute_at(run_of(job), T0, T0 + SECOND) == RunStatus.SKIPPED
    holder.release()
    assert not Heartbeat.objects.exists()  # a skipped run is not a report

    ok = run_of(job)
    execute_at(ok, T0 + 10 * SECOND, T0 + 12 * SECOND)
    beat = Heartbeat.objects.get(job=job)
    assert (beat.name, beat.last_status, beat.run_count, beat.failure_count) == (
        "nightly report",
        "succeeded",
        1,
        0,
    )
    assert beat.last_run_at == beat.last_success_at == T0 + 12 * SECOND
    assert beat.last_run_id == ok.pk

    Job.objects.filter(pk=job.pk).update(target="tests.fail")
    bad = run_of(job)
    execute_at(bad, T0 + 20 * SECOND, T0 + 25 * SECOND)

    beat.refresh_from_db()
    assert (beat.last_status, beat.last_result, beat.run_count, beat.failure_count) == (
        "failed",
        "failed on purpose",
        2,
        1,
    )
    assert (beat.last_run_at, beat.last_success_at, beat.last_run_id) == (
        T0 + 25 * SECOND,
        T0 + 12 * SECOND,
        bad.pk,
    )
    assert Heartbeat.objects.count() == 1


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        ("from_finish", T0 + 65 * SECOND + 60 * SECOND),
        ("from_start", T0 + 61 * SECOND + 60 * SECOND),
    ],
)
def test_an_interval_anchored_on_the_run_waits_for_it_then_counts_from_it(
    anchor, expected, redis_client
):
    job = make_job()
    trigger = make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=60, interval_anchor=anchor
    )
    assert trigger.next_run_at == T0 + 60 * SECOND
    claim_due_runs(now=T0 + 60 * SECOND, limit=10)
    trigger.refresh_from_db()
    assert trigger.next_run_at is None  # waiting for the run
    assert claim_due_runs(now=T0 + 600 * SECOND, limit=10).claimed == 0

    execute_at(job.runs.get(), T0 + 61 * SECOND, T0 + 65 * SECOND)

    trigger.refresh_from_db()
    assert trigger.next_run_at == expected
    claim_due_runs(now=expected, limit=10)
    assert job.runs.filter(status=RunStatus.QUEUED, scheduled_for=expected).exists()


def test_a_from_start_interval_skipped_while_the_job_was_busy_fires_again(redis_client):
    job = make_job()
    trigger = make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=60, interval_anchor="from_start"
    )
    manual = run_of(job)
    assert start_run(manual, worker="test", now=T0 + 30 * SECOND)  # still running at T0+60 s
    claim_due_runs(now=T0 + 60 * SECOND, limit=10)
    assert job.runs.get(trigger=RunTrigger.SCHEDULE).status == RunStatus.SKIPPED
    manual.refresh_from_db()
    assert finish_run(manual, status=RunStatus.SUCCEEDED, now=T0 + 90 * SECOND)

    trigger.refresh_from_db()
    assert trigger.next_run_at is not None, "the trigger never fires again"


def test_the_heartbeat_receiver_survives_garbage_collection():
    import gc
    import weakref

    from runs.signals import run_finished

    gc.collect()
    live = [
        ref
        for _, ref, _ in run_finished.receivers
        if not isinstance(ref, weakref.ReferenceType) or ref() is not None
    ]
    assert live, "the heartbeat receiver was collected: heartbeats would never be written"


def test_deleting_a_job_deletes_its_heartbeat_and_its_name_can_be_reused(redis_client):
    for _ in range(2):  # the second round re-creates and deletes the same name
        job = make_job("weekly export")
        execute_at(run_of(job), T0, T0 + SECOND)
        assert Heartbeat.objects.filter(name="weekly export").count() == 1
        job.delete()
        assert not Heartbeat.objects.filter(name="weekly export").exists()


def test_a_job_sees_its_runs_fencing_token_which_grows_from_run_to_run(redis_client):
    # F-113: what a job passes to the systems it writes to, so that they
    # can refuse the writes of a run older than the last one they saw.
    job = make_job("fence", target="tests.fence")
    first = run_of(job)
    assert execute_at(first, T0 + SECOND, T0 + 2 * SECOND) == RunStatus.SUCCEEDED
    second = run_of(job)
    assert execute_at(second, T0 + 3 * SECOND, T0 + 4 * SECOND) == RunStatus.SUCCEEDED

    first.refresh_from_db()
    second.refresh_from_db()
    assert isinstance(first.result, int) and isinstance(second.result, int)
    assert second.result > first.result
