"""System jobs (F-02 `system`): Takt's built-in functions as a job's kind,
validated with their params, executed in-process by runs.execution against
the real database and Redis; every system function is registered."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from jobs import registry
from jobs.core.system import SYSTEM_FUNCTIONS
from jobs.models import Job
from runs.execution import execute
from runs.models import RunStatus, RunTrigger
from runs.queue import queue_state
from runs.services import create_run
from tests.integration.conftest import SECOND, clock, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def system_job(target: str, **params) -> Job:
    job = Job(name=target, kind="system", target=target, params=params)
    job.full_clean()
    job.save()
    return job


def test_every_system_function_is_a_registered_target():
    assert set(SYSTEM_FUNCTIONS) <= set(registry.registered_names())


def test_the_built_in_maintenance_job_is_a_system_job():
    assert Job.objects.get(target="takt.maintenance", code_managed=True).kind == "system"


def test_a_pause_queue_job_pauses_the_queue_with_its_note(redis_client):
    run = create_run(
        system_job("takt.pause_queue", note="nightly backup"), trigger=RunTrigger.MANUAL, now=T0
    )
    try:
        status = execute(run.pk, worker="test", clock=clock(T0 + SECOND, T0 + 2 * SECOND))
        run.refresh_from_db()
        state = queue_state()
        assert (status, run.output) == (RunStatus.SUCCEEDED, "queue paused")
        assert (state.paused, state.pause_note) == (True, "nightly backup")
    finally:
        run = create_run(system_job("takt.resume_queue"), trigger=RunTrigger.MANUAL, now=T0)
        assert execute(run.pk, worker="test", clock=clock(T0, T0)) == RunStatus.SUCCEEDED
    assert not queue_state().paused


def test_a_maintenance_job_runs_only_the_sections_it_names(redis_client):
    now = timezone.now()  # the expiry looks at the real clock's days
    run = create_run(
        system_job("takt.maintenance", only=["expire"]), trigger=RunTrigger.MANUAL, now=now
    )

    execute(run.pk, worker="test", clock=clock(now, now + SECOND))

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert [line.split(":")[0] for line in run.output.splitlines()] == ["Expire runs"]


@pytest.mark.parametrize(
    ("target", "params", "field", "start"),
    [
        ("takt.hello_world", {}, "target", "'takt.hello_world' is not a system function"),
        ("", {}, "target", "no target is a system function"),
        ("takt.pause_queue", {"reason": "x"}, "params", "takt.pause_queue does not take reason"),
        ("takt.maintenance", {"only": ["vacuum"]}, "params", "only: a list of sections"),
    ],
)
def test_bad_input_is_refused_naming_the_field(target, params, field, start):
    with pytest.raises(ValidationError) as caught:
        Job(name="sys", kind="system", target=target, params=params).full_clean()

    assert caught.value.message_dict[field][0].startswith(start)
    assert not Job.objects.filter(name="sys").exists()
