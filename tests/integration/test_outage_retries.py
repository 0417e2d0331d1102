"""Retries after a broken connection must not do a step twice or strand
it (runs/outage.py): a claim or an end may have committed just before the
connection broke, and the retry must recognise it as its own."""

from __future__ import annotations

import logging

import pytest

from runs.ending import finish_run
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.outcome import Outcome, ended_elsewhere
from runs.services import create_run, start_run
from tests.integration.conftest import SECOND, clock, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def test_a_claim_that_committed_before_the_connection_broke_goes_on_when_retried(redis_client):
    run = create_run(make_job("echo"), trigger=RunTrigger.MANUAL, now=T0)
    # The claim's UPDATE committed, then the connection broke before the answer.
    assert start_run(Run.objects.get(pk=run.pk), worker="w", now=T0 + SECOND)

    # The retry, with the same claim time, takes the run as its own and runs it.
    assert execute(run.pk, worker="w", clock=clock(T0 + SECOND, T0 + 2 * SECOND)) == "succeeded"

    run.refresh_from_db()
    assert (run.status, run.started_at, run.finished_at) == (
        RunStatus.SUCCEEDED,
        T0 + SECOND,
        T0 + 2 * SECOND,
    )
    assert run.output.startswith("hello from echo")


def test_another_delivery_of_a_claimed_run_still_does_nothing(redis_client):
    run = create_run(make_job("echo"), trigger=RunTrigger.MANUAL, now=T0)
    assert start_run(Run.objects.get(pk=run.pk), worker="w", now=T0 + SECOND)

    assert execute(run.pk, worker="w", clock=clock(T0 + 2 * SECOND)) is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_an_end_that_committed_before_the_connection_broke_is_not_taken_for_another(caplog):
    run = create_run(make_job("echo"), trigger=RunTrigger.MANUAL, now=T0)
    start_run(run, worker="w", now=T0 + SECOND)
    ended_at = T0 + 3 * SECOND
    assert finish_run(run, status=RunStatus.SUCCEEDED, now=ended_at, output="done")
    caplog.set_level(logging.INFO, logger="takt.execution")

    # The retry's compare-and-set finds the run ended: by this very end.
    outcome = Outcome(RunStatus.SUCCEEDED, output="done")
    assert ended_elsewhere(run, outcome, ended_at) == RunStatus.SUCCEEDED

    messages = [r.getMessage() for r in caplog.records if r.name == "takt.execution"]
    assert messages == [f"run {run.pk}: its end was recorded before the connection broke"]
    assert Run.objects.get(pk=run.pk).output == "done"


def test_an_end_that_lost_to_a_cancel_is_still_told_apart(caplog):
    run = create_run(make_job("echo"), trigger=RunTrigger.MANUAL, now=T0)
    start_run(run, worker="w", now=T0 + SECOND)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
    caplog.set_level(logging.INFO, logger="takt.execution")

    outcome = Outcome(RunStatus.SUCCEEDED, output="half")
    assert ended_elsewhere(run, outcome, T0 + 3 * SECOND) == RunStatus.CANCELLED
    assert Run.objects.get(pk=run.pk).output == "half"  # a cancelled run keeps its output
