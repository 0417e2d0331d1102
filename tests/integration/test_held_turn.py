"""The runs of one claim wait behind each other (F-23, issue 28 item 4): a
held run is sent only when its turn has come: no run of its job running,
sent or waiting for a slot ahead of it, and the job's lock slot free in
Redis. A run's end is recorded in the database before its worker frees
the slot; a beat's sweep in between used to send the next held run, whose
worker found the lock taken and ended it "skipped: job #n is locked by
another run" (41-104 times per scenario with two beats)."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from jobs.models import ConcurrencyGroup
from runs.dispatch import claim_due_runs
from runs.execution import execute
from runs.locks import job_lock
from runs.models import Run, RunStatus
from runs.outbox import sweep_unpublished
from runs.overlap import release_next_held
from runs.services import create_run, start_run
from runs.slots import acquire_start
from runs.waiting import slot_needs
from tests.integration.conftest import (
    SECOND,
    broker_task_ids,
    clock,
    make_job,
    make_trigger,
    running_run,
    utc,
)
from tests.processes import free_port

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
CLAIM_AT = T0 + 3 * SECOND + SECOND / 2


def claimed_chain(**fields) -> list[Run]:
    """Three fire times due in one claim of a `skip` job (a beat that
    started late, run_all): the first sent, the other two held."""
    job = make_job(missed_run_policy="run_all", **fields)
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=1)
    claim_due_runs(now=CLAIM_AT, limit=10)
    runs = list(job.runs.order_by("scheduled_for"))
    assert [(r.status, r.held) for r in runs] == [("queued", False), ("queued", True)] + [
        ("queued", True)
    ]
    return runs


def held(run: Run) -> bool:
    run.refresh_from_db()
    return run.status == RunStatus.QUEUED and run.held


def test_a_held_run_waits_while_the_run_ahead_is_sent_but_not_started(redis_client):
    first, second, third = claimed_chain()
    sweep_unpublished(now=CLAIM_AT + SECOND)  # the other beat's sweep, before a worker took `first`
    assert held(second), "sent while the run ahead of it was on its way"

    assert execute(first.pk, worker="w", clock=clock(CLAIM_AT + SECOND)) == RunStatus.SUCCEEDED
    sweep_unpublished(now=CLAIM_AT + 2 * SECOND)
    assert not held(second)
    sweep_unpublished(now=CLAIM_AT + 2 * SECOND)  # a second beat, `second` not started yet
    assert held(third), "two runs of one claim on their way at once"


def test_a_held_run_is_not_sent_while_the_ended_run_still_holds_the_lock_slot(redis_client):
    first, second, _ = claimed_chain()
    # `first` runs on a worker: it holds the job's lock slot …
    lock = job_lock(first.job_id, run_id=first.pk)
    assert lock.acquire()
    assert start_run(first, worker="w", now=CLAIM_AT)
    # … and its end is recorded in the database before the slot is freed:
    Run.objects.filter(pk=first.pk).update(status=RunStatus.SUCCEEDED, finished_at=CLAIM_AT)
    sweep_unpublished(now=CLAIM_AT + SECOND)  # a beat's sweep in that window
    assert held(second), "sent while the job's lock slot was still taken"

    assert lock.release()  # the worker frees the slot: the next sweep sends it
    sweep_unpublished(now=CLAIM_AT + 2 * SECOND)
    assert not held(second)
    assert execute(second.pk, worker="w", clock=clock(CLAIM_AT + 2 * SECOND)) == "succeeded"


def test_a_buffering_run_sends_the_next_one_itself_once_its_slot_is_free(
    redis_client, django_capture_on_commit_callbacks
):
    first, second, _ = claimed_chain(overlap_policy="buffer_all", max_buffered=5)
    with django_capture_on_commit_callbacks(execute=True):
        assert execute(first.pk, worker="w", clock=clock(CLAIM_AT)) == RunStatus.SUCCEEDED
    # its end freed the slot, then sent the next one without waiting for a sweep
    assert not held(second) and second.task_id in broker_task_ids(redis_client)


def test_a_held_run_waits_behind_a_run_of_its_job_that_waits_for_a_group_slot(redis_client):
    group = ConcurrencyGroup.objects.create(name="Imports", colour="#aa3300", limit=2)
    first, second, _ = claimed_chain(concurrency_group=group)
    for name in ("a", "b"):  # two runs of other jobs fill the group
        other = create_run(make_job(name, concurrency_group=group), trigger="manual", now=T0)
        assert start_run(other, worker="elsewhere", now=T0)
        assert acquire_start(other.job_id, run_id=other.pk, needs=slot_needs(other.job))[1] is True

    assert execute(first.pk, worker="w", clock=clock(CLAIM_AT)) == RunStatus.QUEUED
    first.refresh_from_db()
    assert first.waiting_for == "group"
    sweep_unpublished(now=CLAIM_AT + SECOND)
    # Sent now, it would wait for the group too, and once both slots freed
    # both runs would be sent at once: one of them skipped at the job's lock.
    assert held(second), "sent while the run ahead of it waited for a slot"


def test_a_held_run_is_not_sent_while_redis_cannot_say_whether_the_slot_is_free(
    redis_client, monkeypatch
):
    first, second, _ = claimed_chain()
    Run.objects.filter(pk=first.pk).update(status=RunStatus.SUCCEEDED, finished_at=CLAIM_AT)
    unreachable = redis.Redis(
        port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    monkeypatch.setattr("runs.locks.get_redis", lambda: unreachable)
    assert release_next_held(first.job_id) is None  # the next sweep asks again
    assert held(second)


def test_a_run_that_finds_the_slot_still_held_by_an_ended_run_waits_instead_of_skipping(
    redis_client,
):
    job = make_job()  # overlap policy skip
    ended = create_run(job, trigger="manual", now=T0)
    lock = job_lock(job.pk, run_id=ended.pk)
    assert lock.acquire() and start_run(ended, worker="elsewhere", now=T0)
    Run.objects.filter(pk=ended.pk).update(status=RunStatus.SUCCEEDED, finished_at=T0)
    # A run sent just then (the job looked free) meets the slot not yet freed:
    run = create_run(job, trigger="manual", now=T0 + SECOND)
    assert execute(run.pk, worker="w", clock=clock(T0 + SECOND)) == RunStatus.QUEUED
    assert held(run), run.message  # not "skipped: job #n is locked by another run"

    assert lock.release()
    sweep_unpublished(now=T0 + 2 * SECOND)
    assert not held(run)
    assert execute(run.pk, worker="w", clock=clock(T0 + 2 * SECOND)) == RunStatus.SUCCEEDED


@pytest.mark.parametrize("max_instances", [1, 2])
def test_a_run_that_finds_the_slot_held_by_a_running_run_is_still_skipped(
    redis_client, max_instances
):
    """max_instances is `allow`'s: a `skip` job with 2 has one slot all the
    same (it had two at the worker, and ran beside itself)."""
    job = make_job(max_instances=max_instances)  # overlap policy skip
    run = create_run(job, trigger="manual", now=T0 + SECOND)  # sent: the job looked free
    busy = running_run(job, started_at=T0)  # … but another run took the lock first
    assert job_lock(job.pk, run_id=busy.pk).acquire()
    assert execute(run.pk, worker="w", clock=clock(T0 + SECOND)) == RunStatus.SKIPPED
    run.refresh_from_db()
    assert run.message == f"skipped: job #{job.pk} is locked by another run (overlap policy 'skip')"
