"""Concurrency groups, the exclusive job and the global limit at run time
(F-31, F-34): runs.execution against the database and the private Redis.
A run that finds its slot taken waits (held, `waiting_for`) and is sent
again when the slot frees; it is never skipped for that."""

from __future__ import annotations

import time

import pytest

from jobs.models import ConcurrencyGroup
from runs.decisions import query
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.outbox import sweep_unpublished
from runs.services import create_run, start_run
from runs.slots import acquire_start, group_key, slot_holders
from runs.waiting import release_waiting, slot_needs
from tests.integration.conftest import broker_task_ids, clock, make_job, utc

T0 = utc(2026, 6, 1, 8, 0)


def started_elsewhere(job, *, ttl_s: float | None = None):
    """A run of `job` that a worker elsewhere started: running in the
    database, holding its job's lock and slots in Redis."""
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    assert start_run(run, worker="elsewhere", now=T0)
    lock = None
    if ttl_s is not None:
        from runs.locks import job_lock

        lock = job_lock(job.pk, run_id=run.pk, ttl_s=ttl_s)
        lock.acquire()
    lock, acquired = acquire_start(job.pk, run_id=run.pk, needs=slot_needs(job), lock=lock)
    assert acquired is True
    return run, lock


def queued(job):
    return create_run(job, trigger=RunTrigger.MANUAL, now=T0)


@pytest.fixture
def group(db):
    return ConcurrencyGroup.objects.create(name="Imports", colour="#aa3300", limit=1)


def test_two_jobs_of_one_group_run_one_after_the_other(group, redis_client):
    first = make_job("import a", concurrency_group=group)
    second = make_job("import b", concurrency_group=group)
    running, lease = started_elsewhere(first)

    waiting = queued(second)
    assert execute(waiting.pk, worker="w", clock=clock(T0)) == RunStatus.QUEUED

    waiting.refresh_from_db()
    assert (waiting.status, waiting.held, waiting.waiting_for) == ("queued", True, "group")
    assert waiting.started_at is None
    entry = query(job_id=second.pk)[0]
    assert entry["kind"] == "waiting_for_slot"
    assert f"held by run #{running.pk}" in entry["detail"]

    lease.release()  # the first run ended: its slot frees …
    assert release_waiting(now=T0) == [waiting.pk]  # … and the waiting run is sent
    waiting.refresh_from_db()
    assert (waiting.held, waiting.waiting_for) == (False, "")
    assert waiting.task_id in broker_task_ids(redis_client)
    assert query(job_id=second.pk)[0]["kind"] == "slot_granted"

    assert execute(waiting.pk, worker="w", clock=clock(T0)) == RunStatus.SUCCEEDED
    assert slot_holders(group_key(group.pk)) == []  # released with its lock


def test_jobs_of_different_groups_and_ungrouped_jobs_run_in_parallel(group, redis_client):
    other = ConcurrencyGroup.objects.create(name="Reports")
    started_elsewhere(make_job("import", concurrency_group=group))

    for job in (make_job("report", concurrency_group=other), make_job("plain")):
        assert execute(queued(job).pk, worker="w", clock=clock(T0)) == RunStatus.SUCCEEDED


def test_a_group_with_a_limit_of_two(group, redis_client):
    group.limit = 2
    group.save()
    jobs = [make_job(f"j{i}", concurrency_group=group) for i in range(3)]
    started_elsewhere(jobs[0])
    started_elsewhere(jobs[1])
    assert execute(queued(jobs[2]).pk, worker="w", clock=clock(T0)) == RunStatus.QUEUED


def test_the_waiting_runs_go_in_priority_order(group, redis_client):
    _, lease = started_elsewhere(make_job("running", concurrency_group=group))
    low = make_job("low", concurrency_group=group, priority=7)
    high = make_job("high", concurrency_group=group, priority=1)
    for job in (low, high):  # the low one waited first
        assert execute(queued(job).pk, worker="w", clock=clock(T0)) == RunStatus.QUEUED

    lease.release()
    sent = release_waiting(now=T0)

    assert sent == [high.runs.get().pk]
    assert low.runs.get().held  # still waiting: the slot is reserved for the high one


def test_an_exclusive_job_waits_for_the_groups_then_blocks_them(group, redis_client):
    _, lease = started_elsewhere(make_job("grouped", concurrency_group=group))
    exclusive = make_job("backup", exclusive=True)

    run = queued(exclusive)
    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.QUEUED
    run.refresh_from_db()
    assert run.waiting_for == "exclusive"
    # while it waits, no new grouped run starts, though the group has room
    other_group = ConcurrencyGroup.objects.create(name="Reports", limit=5)
    late = queued(make_job("late report", concurrency_group=other_group))
    assert execute(late.pk, worker="w", clock=clock(T0)) == RunStatus.QUEUED
    # an ungrouped job is not held back
    assert execute(queued(make_job("plain")).pk, worker="w", clock=clock(T0)) == "succeeded"

    lease.release()
    assert release_waiting(now=T0) == [run.pk]  # the exclusive one first; the report waits on
    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.SUCCEEDED
    late.refresh_from_db()  # its end freed the groups and sent the report
    assert not late.held and late.task_id in broker_task_ids(redis_client)


def test_the_global_limit_counts_every_run(db, redis_client, settings):
    settings.TAKT_MAX_CONCURRENCY = 1
    running, lease = started_elsewhere(make_job("first"))
    run = queued(make_job("second"))

    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.QUEUED
    run.refresh_from_db()
    assert run.waiting_for == "limit"
    assert query(job_id=run.job_id)[0]["kind"] == "limit_reached"

    lease.release()
    assert release_waiting(now=T0) == [run.pk]
    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.SUCCEEDED


def test_a_run_that_waits_for_a_slot_is_not_sent_by_the_job_level_sweep(group, redis_client):
    """The outbox sweep sends a held run whose job runs nothing only if it
    waits for its job: one waiting for a slot waits for the slot."""
    started_elsewhere(make_job("holder", concurrency_group=group))
    run = queued(make_job("waits", concurrency_group=group))
    execute(run.pk, worker="w", clock=clock(T0))
    queues = [k for k in redis_client.keys("takt*") if redis_client.type(k) == b"list"]
    if queues:
        redis_client.delete(*queues)

    sweep_unpublished(now=T0)

    run.refresh_from_db()
    assert run.held and run.task_id not in broker_task_ids(redis_client)


def test_a_killed_workers_slot_frees_within_its_ttl_and_the_next_tick(group, redis_client):
    """The holder renews nothing (killed): its member lapses after the TTL;
    the beat's sweep then sends the waiting run."""
    started_elsewhere(make_job("killed", concurrency_group=group), ttl_s=0.4)
    run = queued(make_job("next", concurrency_group=group))
    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.QUEUED

    sweep_unpublished(now=T0)
    assert Run.objects.get(pk=run.pk).held  # not yet: the slot is still taken
    time.sleep(0.45)
    sweep_unpublished(now=T0)

    run.refresh_from_db()
    assert not run.held and run.task_id in broker_task_ids(redis_client)
