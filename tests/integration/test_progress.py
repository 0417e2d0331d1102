"""F-93: `job.progress(done, total, note)`, validated, stored in
Run.progress, and saved live (at most once a second) with the output."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

import runs.autosave
from jobs.errors import InvalidInput
from runs.context import JobContext
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run
from tests.integration.conftest import make_job, utc

T0 = utc(2026, 6, 1, 8, 0)


def context() -> JobContext:
    return JobContext(name="j", description="", trigger="manual", params={}, run_id=1, job_id=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("many",), "done: must be a number, got 'many'"),
        ((True, 10), "done: must be a number, got True"),
        ((-1, 10), "done: must be a finite number of at least 0, got -1"),
        ((float("nan"),), "done: must be a finite number of at least 0, got nan"),
        ((3, 0), "done: 3 is more than total (0)"),
        ((3, "ten"), "total: must be a number, got 'ten'"),
        ((11, 10), "done: 11 is more than total (10)"),
        ((1, 10, 42), "note: must be a string, got int"),
    ],
)
def test_progress_refuses_bad_arguments_naming_them_and_keeps_the_last_good_value(args, message):
    job = context()
    job.progress(2, 10, "two")
    with pytest.raises(InvalidInput) as caught:
        job.progress(*args)
    assert str(caught.value) == message
    assert job.snapshot()[2] == {"done": 2, "total": 10, "note": "two"}


def test_progress_takes_fractions_an_unknown_total_and_cuts_a_long_note():
    job = context()
    job.progress(2.5, 10)
    assert job.snapshot()[2] == {"done": 2.5, "total": 10, "note": ""}
    job.progress(40, note="x" * 600)
    done = job.snapshot()[2]
    assert (done["done"], done["total"], len(done["note"])) == (40, None, 500)
    assert done["note"].endswith("…")


@pytest.mark.django_db
def test_a_run_stores_its_final_progress_and_output_when_it_ends(redis_client):
    job = make_job(target="tests.progress", params={"steps": 3})
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)

    assert execute(run.pk, worker="test") == RunStatus.SUCCEEDED

    run.refresh_from_db()
    assert run.progress == {"done": 3, "total": 3, "note": "step 3"}
    assert run.output.splitlines() == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]


@pytest.mark.django_db
def test_a_run_without_progress_keeps_none(redis_client):
    run = create_run(make_job(), trigger=RunTrigger.MANUAL, now=T0)
    execute(run.pk, worker="test")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.progress is None


@pytest.mark.django_db
def test_bad_progress_arguments_fail_the_run_with_the_error(redis_client):
    job = make_job(target="tests.bad_progress", params={"args": [5, 2]})
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)

    assert execute(run.pk, worker="test") == RunStatus.FAILED

    run.refresh_from_db()
    assert run.message == "InvalidInput: done: 5 is more than total (2)"


def wait_for(predicate, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


@pytest.mark.django_db(transaction=True)
def test_progress_and_output_show_within_two_seconds_while_the_run_goes_on(redis_client):
    job = make_job(
        target="tests.progress",
        params={"steps": 4, "hold_key": "takt-test:hold", "hold_after": 2},
    )
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)

    def work() -> None:
        try:
            execute(run.pk, worker="test")
        finally:
            connection.close()  # this thread's own; the test database is dropped at the end

    worker = threading.Thread(target=work)
    started = time.monotonic()
    worker.start()
    try:
        seen = wait_for(
            lambda: (
                Run.objects.filter(pk=run.pk, progress__done=2)
                .values_list("progress", "output", "status")
                .first()
            ),
            3.0,
        )
        assert seen is not None, "the progress did not show while the run was held"
        assert time.monotonic() - started < 2.5
        assert seen == (
            {"done": 2, "total": 4, "note": "step 2"},
            "step 1 of 4\nstep 2 of 4",
            RunStatus.RUNNING,
        )
    finally:
        redis_client.rpush("takt-test:hold", "go")
        worker.join(timeout=20)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.progress == {"done": 4, "total": 4, "note": "step 4"}


@pytest.mark.django_db(transaction=True)
def test_many_lines_and_progress_calls_cost_about_one_write_a_second(redis_client, monkeypatch):
    writes: list[float] = []  # the live saves (output and progress)
    finals: list[dict] = []  # the save of the final progress at the end
    real_save = runs.autosave._save

    def counted(run_id, **fields):
        if "output" in fields:
            writes.append(time.monotonic())
        else:
            finals.append(fields)
        return real_save(run_id, **fields)

    monkeypatch.setattr(runs.autosave, "_save", counted)
    # 400 steps of 6 ms: 800 changes (a line and a progress each) over about 2.5 s.
    job = make_job(target="tests.progress", params={"steps": 400, "step_s": 0.006})
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)

    started = time.monotonic()
    assert execute(run.pk, worker="test") == RunStatus.SUCCEEDED
    elapsed_s = time.monotonic() - started

    assert 1 <= len(writes) <= elapsed_s / runs.autosave.SAVE_EVERY_S + 1, writes
    gaps = [b - a for a, b in zip(writes, writes[1:], strict=False)]
    assert all(gap >= 0.9 * runs.autosave.SAVE_EVERY_S for gap in gaps), gaps
    assert writes[0] - started >= 0.9  # nothing is written in the run's first second
    assert len(finals) <= 1
    run.refresh_from_db()
    assert run.progress == {"done": 400, "total": 400, "note": "step 400"}
    assert len(run.output.splitlines()) == 400
