"""Coordination with real worker and beat processes (F-04, F-31..F-33):
what an operator sees in the run history when jobs share a group, one is
exclusive, a chain of dependencies runs, a parent runs its children, a
condition consumes a result, and a worker holding a group's slot is
killed."""

from __future__ import annotations

import time

import pytest

from jobs.models import ConcurrencyGroup, Job, ResultVariable, Trigger
from runs.models import Run, RunStatus, RunTrigger
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LOCK_TTL_S = 3  # TAKT_LOCK_TTL_SECONDS of the live processes (tests/live_fixtures.py)
POLL_S = 0.2  # TAKT_POLL_SECONDS


def job(name: str, target: str = "tests.echo", **fields) -> Job:
    return Job.objects.create(name=name, target=target, **fields)


def sleeper(name: str, seconds: float, **fields) -> Job:
    return job(name, "tests.sleep", params={"seconds": seconds}, **fields)


def every(j: Job, seconds: int) -> Trigger:
    return Trigger.objects.create(job=j, kind="interval", interval_seconds=seconds)


def stop(*jobs: Job) -> None:
    Trigger.objects.filter(job__in=jobs).update(active=False)


def ended(j: Job) -> list[Run]:
    return list(j.runs.filter(status=RunStatus.SUCCEEDED).order_by("started_at"))


def never_overlap(runs: list[Run]) -> None:
    ordered = sorted(runs, key=lambda r: r.started_at)
    for before, after in zip(ordered, ordered[1:], strict=False):
        assert after.started_at >= before.finished_at, (before.pk, after.pk)


def test_two_jobs_of_one_group_never_overlap(worker, beat):
    group = ConcurrencyGroup.objects.create(name="Imports", colour="#aa3300")
    first = sleeper("import orders", 0.6, concurrency_group=group)
    second = sleeper("import stock", 0.6, concurrency_group=group)
    every(first, 1)
    every(second, 1)
    beat()

    wait_until(lambda: len(ended(first)) >= 3 and len(ended(second)) >= 3, 40, "three runs of each")
    stop(first, second)

    never_overlap(ended(first) + ended(second))  # two pool processes, one group slot
    # a run that found the group full waited; none was skipped for the group
    assert not Run.objects.filter(message__contains="group").exclude(status="succeeded").exists()


def test_an_exclusive_job_waits_for_the_group_then_blocks_it(worker, beat):
    group = ConcurrencyGroup.objects.create(name="Imports", limit=2)
    grouped = sleeper("import", 2, concurrency_group=group)
    exclusive = sleeper("backup", 1.5, exclusive=True)
    late = sleeper("late import", 0.1, concurrency_group=group)
    beat()  # its sweep sends runs when their slots free

    running = enqueue_job(grouped, trigger="manual")
    wait_until(lambda: Run.objects.get(pk=running.pk).status == "running", 20, "the grouped run")
    backup = enqueue_job(exclusive, trigger="manual")
    wait_until(
        lambda: Run.objects.get(pk=backup.pk).waiting_for == "exclusive", 10, "backup to wait"
    )
    after = enqueue_job(late, trigger="manual")  # the group has room, the backup is next
    wait_until(
        lambda: all(
            Run.objects.get(pk=r.pk).status == "succeeded" for r in (running, backup, after)
        ),
        30,
        "all three",
    )

    running, backup, after = (Run.objects.get(pk=r.pk) for r in (running, backup, after))
    assert backup.started_at >= running.finished_at  # waited for the grouped run
    assert after.started_at >= backup.finished_at  # and the group waited for it


def test_a_dependency_chain_runs_in_order(worker):
    a, b, c = job("extract"), job("transform"), job("load")
    for down, up in ((b, a), (c, b)):
        Trigger.objects.create(job=down, kind="dependency", upstream_job=up)

    first = enqueue_job(a, trigger="manual")
    wait_until(lambda: c.runs.filter(status="succeeded").exists(), 30, "the chain to end")

    first.refresh_from_db()
    second, third = b.runs.get(), c.runs.get()
    assert (second.cause_id, third.cause_id) == (first.pk, second.pk)
    assert first.finished_at <= second.started_at and second.finished_at <= third.started_at
    assert {r.trigger for r in (second, third)} == {RunTrigger.DEPENDENCY}


def test_a_parent_runs_its_three_children_in_order(worker):
    parent = job("nightly", "takt.children")
    children = [
        sleeper(f"step {i}", 0.3, parent=parent, child_order=i) for i in (3, 1, 2)
    ]  # made out of order
    in_order = sorted(children, key=lambda j: j.child_order)

    run = enqueue_job(parent, trigger="manual")
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "succeeded", 30, "the parent run")

    kids = list(Run.objects.filter(cause=run).order_by("started_at"))
    assert [k.job_id for k in kids] == [j.pk for j in in_order]
    assert all(k.trigger == RunTrigger.PARENT and k.status == "succeeded" for k in kids)
    never_overlap(kids)
    run.refresh_from_db()
    assert run.message == "children: 'step 1' succeeded, 'step 2' succeeded, 'step 3' succeeded"
    assert run.finished_at >= kids[-1].finished_at


def test_a_consumed_condition_starts_its_job_once_per_result(worker, beat):
    done = ResultVariable.objects.create(name="Import done")
    writer = job("import", "tests.result_code", result_variable=done, params={"code": 200})
    reader = job(
        "transform", condition_variable=done, condition_values=[0, 200], condition_consume=True
    )
    every(reader, 1)  # it looks every second; it starts only on a fresh result
    beat()

    for n in (1, 2, 3):
        enqueue_job(writer, trigger="manual")
        wait_until(lambda n=n: len(ended(reader)) == n, 20, f"the reader's run {n}")
        wait_until(lambda: ResultVariable.objects.get(pk=done.pk).value == -1, 5, "consumed")
    time.sleep(2.5)  # two more of its fire times: the same result starts nothing
    stop(reader)

    assert len(ended(writer)) == 3 and len(ended(reader)) == 3
    assert not reader.runs.exclude(status="succeeded").exists()  # held back, not skipped
    for write, read in zip(ended(writer), ended(reader), strict=True):
        assert write.finished_at <= read.started_at
