"""Cancelling a run (F-50's `cancelled`): runs.cancel.cancel_run against the
real database and Redis — queued and running runs, refusals that change
nothing, the worker's end racing the cancel, held runs sent after it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from heartbeats.models import Heartbeat
from jobs.errors import InvalidInput
from jobs.models import Job, Trigger
from runs.cancel import RedisUnreachable, RunNotCancellable, RunNotFound, cancel_run
from runs.decisions import query
from runs.ending import finish_run
from runs.execution import execute
from runs.locks import cancel_key, job_lock, job_lock_key
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run, enqueue_job, start_run
from tests.integration.conftest import SECOND, broker_task_ids, clock, make_job, make_trigger, utc
from tests.processes import free_port

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def running_run(
    job: Job, *, at=T0, slot: int = 0, trigger: Trigger | None = None
) -> tuple[Run, Any]:
    """A run a worker has started, holding a slot of its job's lock under
    its own token; with `trigger`, that trigger's scheduled run."""
    if trigger is None:
        run = create_run(job, trigger=RunTrigger.MANUAL, now=at)
    else:
        run = create_run(job, trigger=RunTrigger.SCHEDULE, now=at, source_trigger=trigger)
    assert start_run(run, worker="w1", now=at)
    lock = job_lock(job.pk, slot=slot, run_id=run.pk)
    assert lock.acquire()
    return run, lock


def snapshot(run: Run) -> dict[str, Any]:
    run.refresh_from_db()
    return {f.name: getattr(run, f.name) for f in Run._meta.concrete_fields}


def test_a_queued_run_is_cancelled_and_its_message_never_runs(
    redis_client, django_capture_on_commit_callbacks
):
    job = make_job("export")
    run = enqueue_job(job, trigger=RunTrigger.MANUAL, now=T0)

    with django_capture_on_commit_callbacks(execute=True):
        cancelled = cancel_run(run.pk, by="alice", now=T0 + 5 * SECOND)

    assert cancelled.status == RunStatus.CANCELLED
    assert (cancelled.cancelled_by, cancelled.message) == (
        "alice",
        "cancelled by alice before it started",
    )
    assert (cancelled.finished_at, cancelled.started_at, cancelled.duration_s) == (
        T0 + 5 * SECOND,
        None,
        None,
    )
    entry = query(job_id=job.pk, limit=1)[0]
    assert (entry["kind"], entry["run"], entry["detail"]) == (
        "cancelled",
        str(run.pk),
        "by alice; it was queued",
    )
    # Its message is still in the broker: the worker that takes it does nothing.
    assert execute(run.pk, worker="w", clock=clock(T0 + 6 * SECOND)) is None
    assert snapshot(run)["status"] == RunStatus.CANCELLED
    assert [e["kind"] for e in query(job_id=job.pk, limit=5)] == ["cancelled"]


def test_a_held_run_is_cancelled_and_no_longer_held(redis_client):
    job = make_job("buffered", overlap_policy="buffer_one")
    running_run(job)
    waiting = enqueue_job(job, trigger=RunTrigger.MANUAL, now=T0 + SECOND)
    assert waiting.held

    cancelled = cancel_run(waiting.pk, by="alice", now=T0 + 2 * SECOND)

    assert (cancelled.status, cancelled.held) == (RunStatus.CANCELLED, False)


def test_a_running_run_is_cancelled_and_its_lock_is_free_at_once(
    redis_client, django_capture_on_commit_callbacks
):
    job = make_job("long", overlap_policy="allow", max_instances=3)
    run, lock = running_run(job, at=T0, slot=1)
    other_run, other_lock = running_run(job, at=T0 + SECOND, slot=0)
    assert other_lock.key == job_lock_key(job.pk)
    stranger = job_lock(job.pk, slot=2)  # a token that names no run
    assert stranger.acquire()
    neighbour = job_lock(job.pk + 1, run_id=run.pk)  # another job's key: never touched
    assert neighbour.acquire()

    with django_capture_on_commit_callbacks(execute=True):
        cancelled = cancel_run(run.pk, by="alice", now=T0 + 90 * SECOND)

    assert cancelled.status == RunStatus.CANCELLED
    assert (cancelled.cancelled_by, cancelled.message) == ("alice", "cancelled by alice")
    assert (cancelled.finished_at, cancelled.duration_s) == (T0 + 90 * SECOND, 90.0)
    assert lock.holder() is None and not lock.renew()  # its slot is free at once
    assert redis_client.exists(cancel_key(run.pk)) == 1  # its worker's keeper will see this
    assert other_lock.holder() == other_lock.token  # never another run's slot
    assert stranger.holder() == stranger.token
    assert neighbour.holder() == neighbour.token
    assert snapshot(other_run)["status"] == RunStatus.RUNNING
    entry = query(job_id=job.pk, limit=1)[0]
    assert (entry["kind"], entry["detail"]) == ("cancelled", "by alice; it was running")


@pytest.mark.parametrize(
    "status", [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED, RunStatus.CANCELLED]
)
def test_a_finished_run_is_refused_and_nothing_changes(redis_client, status):
    job = make_job("done")
    run, lock = running_run(job)
    assert finish_run(run, status=status, now=T0 + 3 * SECOND, message="as it was")
    before = snapshot(run)

    with pytest.raises(RunNotCancellable) as refused:
        cancel_run(run.pk, by="alice", now=T0 + 10 * SECOND)

    assert str(refused.value) == (
        f"run #{run.pk} already ended {status} at 2026-06-01 08:00:03 UTC;"
        " only a queued or running run can be cancelled"
    )
    assert refused.value.status == status
    assert snapshot(run) == before
    assert lock.holder() == lock.token  # (its worker releases it, not the cancel)
    assert redis_client.exists(cancel_key(run.pk)) == 0
    assert query(job_id=job.pk, limit=5) == []


def test_an_unknown_run_and_a_nameless_canceller_are_refused(redis_client):
    with pytest.raises(RunNotFound, match=r"^run #999999 does not exist$"):
        cancel_run(999999, by="alice", now=T0)
    run = enqueue_job(make_job(), trigger=RunTrigger.MANUAL, now=T0)
    with pytest.raises(InvalidInput) as refused:
        cancel_run(run.pk, by=" ", now=T0)
    assert refused.value.field == "by"
    assert snapshot(run)["status"] == RunStatus.QUEUED


@pytest.mark.parametrize("started", [False, True])
def test_without_redis_the_cancel_names_the_url_and_changes_nothing(redis_client, started):
    job = make_job("no-redis")
    if started:
        run, lock = running_run(job)
    else:
        run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    before = snapshot(run)
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"

    with override_settings(REDIS_URL=url), pytest.raises(RedisUnreachable) as refused:
        cancel_run(run.pk, by="alice", now=T0 + SECOND)

    message = str(refused.value)
    assert message.startswith(
        f"cannot reach Redis at redis://:***@127.0.0.1:{url.rsplit(':', 1)[1]}"
    )
    assert message.endswith(f"run #{run.pk} was not cancelled")
    assert "secret" not in message
    assert snapshot(run) == before
    if started:
        assert lock.holder() == lock.token


def test_the_workers_end_loses_to_a_cancel_and_keeps_the_output(redis_client):
    """The job is cancelled while it runs (by itself, as an operator would)
    and then returns: its end loses the compare-and-set. The run stays
    cancelled with all the output, is not retried, is no failure, and the
    worker does not release the slot that another run took meanwhile."""
    job = make_job("racer", target="tests.cancel_self", params={"by": "bob"}, max_retries=3)
    run = enqueue_job(job, trigger=RunTrigger.MANUAL, now=T0)
    newcomer = job_lock(job.pk, run_id=run.pk + 1000)

    def take_the_free_lock(sender: Any, **kwargs: Any) -> None:
        newcomer.acquire()  # the next run starts as soon as the slot is free

    from runs.signals import run_finished

    run_finished.connect(take_the_free_lock, dispatch_uid="test-take-lock")
    try:
        status = execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND))
    finally:
        run_finished.disconnect(dispatch_uid="test-take-lock")

    run.refresh_from_db()
    assert status == run.status == RunStatus.CANCELLED
    assert (run.cancelled_by, run.message) == ("bob", "cancelled by bob")
    assert run.output.splitlines() == ["before the cancel", "after the cancel"]
    assert run.result is None
    assert not Run.objects.filter(retry_of=run).exists()
    assert Job.objects.get(pk=job.pk).consecutive_failures == 0
    assert newcomer.holder() == newcomer.token  # the worker's release left it alone
    end = query(job_id=job.pk, limit=1)[0]
    assert (end["kind"], end["detail"].endswith("ended cancelled")) == ("end", True)


def race_end_and_cancel(run: Run) -> dict[str, Any]:
    """The worker's end and an operator's cancel of `run` at the same
    instant, each in a thread with its own connection."""
    barrier = threading.Barrier(2, timeout=30)
    got: dict[str, Any] = {}

    def end() -> None:
        try:
            barrier.wait()
            got["end"] = finish_run(run, status=RunStatus.SUCCEEDED, now=T0 + SECOND)
        finally:
            connections.close_all()

    def cancel() -> None:
        try:
            barrier.wait()
            got["cancel"] = cancel_run(run.pk, by="alice", now=T0 + SECOND).status
        except RunNotCancellable as exc:
            got["cancel"] = str(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=end), threading.Thread(target=cancel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return got


@pytest.mark.django_db(transaction=True)
def test_a_cancel_racing_the_workers_end_exactly_one_wins(redis_client):
    """On real connections, many times over: one of the two wins, the other
    sees the truth (a refused cancel names the status the run ended with)."""
    job = make_job("race")
    for _round in range(12):
        run, lock = running_run(job)
        got = race_end_and_cancel(run)
        final = Run.objects.get(pk=run.pk).status
        if final == RunStatus.SUCCEEDED:
            assert got["end"] is True
            assert got["cancel"].startswith(f"run #{run.pk} already ended succeeded at")
            assert lock.release()  # the cancel left it to its worker
        else:
            assert (final, got["end"], got["cancel"]) == (RunStatus.CANCELLED, False, final)
            assert lock.holder() is None


def test_the_held_runs_behind_a_cancelled_run_are_sent(
    redis_client, django_capture_on_commit_callbacks
):
    job = make_job("buffered", overlap_policy="buffer_all", max_buffered=2)
    run, _lock = running_run(job)
    first = enqueue_job(job, trigger=RunTrigger.MANUAL, now=T0 + SECOND)
    second = enqueue_job(job, trigger=RunTrigger.MANUAL, now=T0 + 2 * SECOND)
    assert first.held and second.held

    with django_capture_on_commit_callbacks(execute=True):
        cancel_run(run.pk, by="alice", now=T0 + 3 * SECOND)

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.held, second.held) == (False, True)  # one at a time, oldest first
    assert first.task_id in broker_task_ids(redis_client)
    assert execute(first.pk, worker="w", clock=clock(T0 + 4 * SECOND)) == RunStatus.SUCCEEDED


def test_a_trigger_anchored_on_run_ends_moves_on_after_a_cancel(redis_client):
    job = make_job("after-finish")
    trigger = make_trigger(
        job,
        created_at=T0 - 60 * SECOND,
        kind="interval",
        interval_seconds=300,
        interval_anchor="from_finish",
    )
    run, _lock = running_run(job, trigger=trigger)
    Trigger.objects.filter(pk=trigger.pk).update(next_run_at=None)  # waits for its run's end

    cancel_run(run.pk, by="alice", now=T0 + 30 * SECOND)

    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 330 * SECOND


def test_a_cancelled_run_is_neither_a_success_nor_a_failure_for_its_heartbeat(redis_client):
    job = make_job("watched", heartbeat_deadline_s=3600)
    done = enqueue_job(job, trigger=RunTrigger.MANUAL, now=T0)
    assert execute(done.pk, worker="w", clock=clock(T0, T0 + SECOND)) == RunStatus.SUCCEEDED
    before = Heartbeat.objects.get(job=job)

    run, _lock = running_run(job, at=T0 + 60 * SECOND)
    cancel_run(run.pk, by="alice", now=T0 + 90 * SECOND)

    after = Heartbeat.objects.get(job=job)
    assert (after.last_status, after.last_run_id, after.failure_count) == (
        RunStatus.SUCCEEDED,
        done.pk,
        0,
    )
    assert after.last_run_at == before.last_run_at
    assert Job.objects.get(pk=job.pk).consecutive_failures == 0
