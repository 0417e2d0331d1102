"""Result variables and conditions at run time (F-32): a job writes its
result code (-1 while it runs), another starts only on an accepted value
and consumes it; every trigger source checks the condition; two
dependants consuming one result start once. SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.exceptions import ValidationError
from django.db import connections

from jobs.errors import ConditionNotMet
from jobs.models import ResultVariable
from runs.decisions import query
from runs.execution import execute
from runs.models import RunStatus, RunTrigger
from runs.services import create_run, enqueue_job, start_run
from runs.tick import run_tick
from runs.variables import take_condition
from tests.integration.conftest import SECOND, clock, make_job, make_trigger, utc
from tests.integration.test_claim_races import race

T0 = utc(2026, 6, 1, 8, 0)
# Real commits: the decision log's entries go out after each commit.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def variable(transactional_db):
    return ResultVariable.objects.create(name="Import done")


def run_job(job, **fields):
    run = enqueue_job(job, trigger="manual", now=T0, **fields)
    return execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND)), run


@pytest.mark.parametrize(
    ("target", "params", "code"),
    [
        ("tests.echo", {}, 0),
        ("tests.result_code", {"code": 200}, 200),
        ("tests.fail", {}, 1),  # job.fail()
        ("tests.raise", {}, -1005),  # an exception: error while it ran
        ("tests.nope", {}, -1001),  # could not be started
    ],
)
def test_a_job_writes_its_result_code_into_its_variable(
    variable, redis_client, target, params, code
):
    job = make_job("writer", target="tests.echo", result_variable=variable, params=params)
    job.target = target  # an unknown target is refused when saved, not when run
    job.save(update_fields=["target"])

    status, run = run_job(job)

    variable.refresh_from_db()
    run.refresh_from_db()
    assert (variable.value, run.result_code) == (code, code)
    assert variable.changed_by_run == run.pk
    assert variable.changed_at == T0 + SECOND
    kinds = [e["kind"] for e in query(job_id=job.pk)]
    assert kinds.count("variable_changed") == 2  # -1 at the start, the code at the end


def test_the_variable_is_pending_while_the_run_runs(variable, redis_client):
    variable.value = 0
    variable.save()
    job = make_job(
        "writer",
        target="tests.result_code",
        result_variable=variable,
        params={"variable": "Import done", "code": 0},
    )
    status, run = run_job(job)
    run.refresh_from_db()
    assert "Import done is -1 while it runs" in run.output


def test_a_run_prevented_from_starting_leaves_the_variable_as_it_was(variable, redis_client):
    variable.value = 0
    variable.save()
    job = make_job(
        "reader", condition_variable=variable, condition_values=[0], condition_consume=True
    )
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    busy = create_run(job, trigger=RunTrigger.MANUAL, now=T0)  # the job's own run first
    from runs.locks import job_lock

    job_lock(job.pk).acquire()  # another run holds the job (overlap policy skip)

    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.SKIPPED
    variable.refresh_from_db()
    assert variable.value == 0
    assert busy.pk


def test_a_condition_holds_back_every_trigger_source(variable, redis_client):
    job = make_job("reader", condition_variable=variable, condition_values=[0, 200])
    trigger = make_trigger(job, created_at=T0, kind="interval", interval_seconds=60)

    with pytest.raises(ConditionNotMet, match="variable 'Import done' is -1, it must be 0 or 200"):
        enqueue_job(job, trigger="manual", now=T0)
    # the schedule: the fire time passes with no run, logged once
    run_tick(now=T0 + 60 * SECOND)
    run_tick(now=T0 + 120 * SECOND)
    assert not job.runs.exists()
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 180 * SECOND
    kinds = [e["kind"] for e in query(job_id=job.pk)]
    assert kinds == ["condition_not_met"]
    # a run created before the variable changed back is skipped by the worker
    variable.value = 200
    variable.save()
    run = enqueue_job(job, trigger="manual", now=T0)
    variable.value = -1
    variable.save()
    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.SKIPPED
    run.refresh_from_db()
    assert run.message.startswith("skipped: condition not met: variable 'Import done' is -1")


def test_consume_starts_a_dependant_once_per_result(variable, redis_client):
    job = make_job(
        "reader", condition_variable=variable, condition_values=[0, 200], condition_consume=True
    )
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=60)
    variable.value = 0
    variable.save()

    run_tick(now=T0 + 60 * SECOND)
    run = job.runs.get()
    assert execute(run.pk, worker="w", clock=clock(T0 + 61 * SECOND)) == RunStatus.SUCCEEDED
    variable.refresh_from_db()
    assert (variable.value, variable.changed_by_run) == (-1, run.pk)

    run_tick(now=T0 + 120 * SECOND)  # the same result does not start it again
    assert job.runs.count() == 1


def test_a_retry_is_not_held_back_by_the_condition_its_first_try_consumed(variable, redis_client):
    job = make_job(
        "flaky reader",
        target="tests.fail",
        condition_variable=variable,
        condition_values=[0],
        condition_consume=True,
        max_retries=1,
        retry_backoff_s=1,
        retry_jitter=0,
    )
    variable.value = 0
    variable.save()
    status, run = run_job(job)
    assert status == RunStatus.FAILED
    retry = job.runs.get(trigger=RunTrigger.RETRY)
    assert execute(retry.pk, worker="w", clock=clock(T0 + 2 * SECOND)) == RunStatus.FAILED


def test_two_dependants_consuming_one_result_start_exactly_once(redis_client):
    variable = ResultVariable.objects.create(name="Import done", value=0)
    runs = []
    for name in ("transform", "report"):
        job = make_job(
            name, condition_variable=variable, condition_values=[0], condition_consume=True
        )
        run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
        assert start_run(run, worker="w", now=T0)
        runs.append(run)

    pending = iter(runs)
    outcomes = race(2, lambda: take_condition(next(pending), now=T0))

    assert sorted(o is None for o in outcomes) == [False, True]  # one started
    loser = next(o for o in outcomes if o is not None)
    # it read the value after the winner took it, or before (its update then
    # found no accepted value left)
    assert "is -1" in loser or "consumed" in loser
    variable.refresh_from_db()
    assert variable.value == -1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"condition_values": [0]}, "condition_variable"),
        ({"condition_consume": True}, "condition_consume"),
        ({"with_variable": True, "condition_values": []}, "condition_values"),
        ({"with_variable": True, "condition_values": ["0"]}, "condition_values"),
        ({"with_variable": True, "condition_values": [True]}, "condition_values"),
    ],
)
def test_a_bad_condition_is_refused_naming_the_field(variable, fields, field):
    fields = dict(fields)
    if fields.pop("with_variable", False):
        fields["condition_variable"] = variable
    job = make_job("ok")
    for name, value in fields.items():
        setattr(job, name, value)
    with pytest.raises(ValidationError) as caught:
        job.full_clean()
    assert field in caught.value.message_dict


def test_a_variable_name_that_clashes_is_refused_whatever_the_case(variable):
    with pytest.raises(ValidationError) as caught:
        ResultVariable(name="import DONE ").full_clean()
    assert caught.value.message_dict == {
        "name": ["a result variable with this name exists already"]
    }


def test_a_run_past_its_timeout_that_goes_on_says_so_in_its_variable(
    variable, redis_client, settings
):
    """-1003 "timed out, still running" while it runs on (timeout action
    `continue`), its own code once it really ends."""
    settings.TAKT_LOCK_TTL_SECONDS = 3  # the keeper's watch looks every second
    job = make_job(
        "slow",
        target="tests.sleep",
        params={"seconds": 2.5},
        timeout_s=1,
        timeout_action="continue",
        result_variable=variable,
    )
    run = enqueue_job(job, trigger="manual", now=T0)
    seen = []

    def work() -> None:
        try:
            seen.append(execute(run.pk, worker="w"))
        finally:
            connections.close_all()  # this thread's own

    worker = threading.Thread(target=work)
    worker.start()
    try:
        deadline = time.monotonic() + 5
        while ResultVariable.objects.get(pk=variable.pk).value != -1003:
            assert time.monotonic() < deadline, "never -1003"
            time.sleep(0.05)
    finally:
        worker.join(timeout=10)
    assert seen == [RunStatus.SUCCEEDED]
    variable.refresh_from_db()
    assert variable.value == 0


def test_a_consumed_result_makes_one_run_while_that_run_waits_to_start(variable, redis_client):
    """A slow worker: the reader's run for a result has not started (nor
    consumed it) when its next fire times come; they pass with no run
    rather than making runs its start would skip. Catch-up fire times of one
    claim make one run too."""
    job = make_job(
        "reader", condition_variable=variable, condition_values=[0, 200], condition_consume=True
    )
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=60)
    variable.value = 200
    variable.save()

    run_tick(now=T0 + 180 * SECOND)  # three fire times due at once
    run_tick(now=T0 + 240 * SECOND)  # and one more before its run started
    run = job.runs.get()
    held = [e for e in query(job_id=job.pk) if e["kind"] == "condition_not_met"]
    assert [e["detail"] for e in held] == [
        "condition held back: variable 'Import done' is 200, and a run that waits to start"
        " will consume it"
    ]
    assert execute(run.pk, worker="w", clock=clock(T0 + 241 * SECOND)) == RunStatus.SUCCEEDED
    assert not job.runs.exclude(status=RunStatus.SUCCEEDED).exists()

    variable.value = 0  # a fresh result starts it again
    variable.save()
    run_tick(now=T0 + 300 * SECOND)
    assert job.runs.count() == 2
