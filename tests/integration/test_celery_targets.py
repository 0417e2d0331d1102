"""A Celery task as a job's target keeps its Celery behaviour where Takt can
honour it: its own queue (the run is sent where the task's workers are),
its positional and keyword arguments; and its own retries do not multiply
Takt's: Takt's retry policy decides (docs/job-kinds.md)."""

from __future__ import annotations

import json

import pytest

from jobs.models import Job
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.publish import publish_runs
from runs.services import create_run
from tests.integration.conftest import SECOND, clock, utc

pytestmark = pytest.mark.django_db

T0 = utc(2027, 2, 1, 8, 0)


def queued_in(client, queue: str) -> list[str]:
    """The run ids waiting in a broker queue (one Redis list per priority:
    `reports`, `reports\x06\x161` ...)."""
    ids = []
    for key in sorted(client.keys(f"{queue}*")):
        if client.type(key) == b"list":
            ids += [json.loads(raw)["headers"]["argsrepr"] for raw in client.lrange(key, 0, -1)]
    return ids


def test_a_run_goes_to_the_celery_tasks_own_queue_unless_the_job_names_one(redis_client):
    own = Job.objects.create(name="own", target="tests.routed_echo", args=[1])
    named = Job.objects.create(name="named", target="tests.routed_echo", queue="nightly")
    plain = Job.objects.create(name="plain", target="tests.celery_echo")
    runs = [create_run(job, trigger=RunTrigger.MANUAL, now=T0) for job in (own, named, plain)]

    publish_runs([r.pk for r in runs], now=T0)

    assert queued_in(redis_client, "reports") == [f"[{runs[0].pk}]"]
    assert queued_in(redis_client, "nightly") == [f"[{runs[1].pk}]"]
    assert queued_in(redis_client, "takt") == [f"[{runs[2].pk}]"]


@pytest.fixture
def host_routing():
    """Celery's defaults as a host project has them (its default queue is
    `celery`, not Takt's), and a task_routes entry for one task."""
    from celery import current_app

    conf, amqp = current_app.conf, current_app.amqp
    before = conf.task_default_queue, conf.task_routes
    conf.task_default_queue = "celery"
    conf.task_routes = {"tests.celery_echo": {"queue": "echoes"}}
    amqp.flush_routes()
    amqp.router = amqp.Router()
    yield
    conf.task_default_queue, conf.task_routes = before
    amqp.flush_routes()
    amqp.router = amqp.Router()


def test_a_task_without_routing_of_its_own_goes_to_takts_queue_not_celerys_default(
    redis_client, host_routing
):
    """Issue 26: with the app's default queue `celery`, a run of a task that
    names no queue (and that task_routes does not route) went to `celery`,
    where the worker started as docs/embedding.md says (-Q takt) never
    looked. task_routes still counts as the task's own routing."""
    plain = Job.objects.create(name="plain", target="tests.self_retry")
    routed = Job.objects.create(name="routed", target="tests.celery_echo")
    own = Job.objects.create(name="own", target="tests.routed_echo")
    runs = [create_run(job, trigger=RunTrigger.MANUAL, now=T0) for job in (plain, routed, own)]

    publish_runs([r.pk for r in runs], now=T0)

    assert queued_in(redis_client, "takt") == [f"[{runs[0].pk}]"]
    assert queued_in(redis_client, "echoes") == [f"[{runs[1].pk}]"]
    assert queued_in(redis_client, "reports") == [f"[{runs[2].pk}]"]
    assert queued_in(redis_client, "celery") == []


def run_at(job: Job) -> Run:
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    execute(run.pk, worker="test", clock=clock(T0, T0 + SECOND))
    return Run.objects.get(pk=run.pk)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tests.autoretry", "the task's own retry would try again"),
        ("tests.self_retry", "asked for a retry"),
    ],
)
def test_a_tasks_own_retries_become_one_failure_and_takts_policy_retries(
    redis_client, target, message
):
    job = Job.objects.create(name=target, target=target, max_retries=1, retry_backoff_s=60)

    run = run_at(job)

    assert run.status == RunStatus.FAILED and message in run.message
    retries = Run.objects.filter(retry_of=run)
    assert retries.count() == 1  # Takt's one retry, not the task's 3 or 5 on top
    assert Run.objects.filter(job=job).count() == 2
