"""A run's message is the one Celery's own `send_task` would send for it:
the same body, headers and properties (routing, priority, time limits, the
arguments' repr), so workers, Flower and anything reading the broker see an
ordinary Celery task. Takt builds it without send_task's per-message work
(runs/publish.py, _Sender); this holds the two together."""

from __future__ import annotations

import json

import pytest
from celery import current_app

from jobs.models import Job
from runs.core.broker import message_priority
from runs.models import EXECUTE_RUN_TASK, RunTrigger, task_id_for
from runs.publish import publish_runs
from runs.services import create_run
from tests.integration.conftest import utc

pytestmark = pytest.mark.django_db

T0 = utc(2027, 2, 1, 8, 0)


def _pop_all(client) -> list[dict]:
    messages = []
    for key in sorted(client.keys("*")):
        if client.type(key) == b"list":
            messages += [json.loads(raw) for raw in client.lrange(key, 0, -1)]
            client.delete(key)
    return messages


def _comparable(message: dict) -> dict:
    message = json.loads(json.dumps(message))
    message["properties"].pop("delivery_tag")  # a fresh uuid for every message
    return message


@pytest.mark.parametrize(
    ("fields", "queue", "limits"),
    [
        ({"priority": 2, "timeout_s": 600}, "takt", (600, 630)),
        ({"queue": "nightly", "timeout_action": "continue"}, "nightly", (None, None)),
    ],
)
def test_a_runs_message_is_the_one_send_task_sends(redis_client, fields, queue, limits):
    job = Job.objects.create(name="job", target="tests.echo", **fields)
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    _pop_all(redis_client)

    assert publish_runs([run.pk], now=T0) == 1
    (takt,) = _pop_all(redis_client)

    soft, hard = limits
    priority = message_priority(run.priority, amqp=False)  # Redis
    current_app.send_task(
        EXECUTE_RUN_TASK, args=[run.pk], task_id=task_id_for(run.pk), queue=queue,
        priority=priority, soft_time_limit=soft, time_limit=hard, ignore_result=True,
        argsrepr=f"[{run.pk}]", kwargsrepr="{}",
    )  # fmt: skip
    (celery,) = _pop_all(redis_client)

    assert _comparable(takt) == _comparable(celery)
    assert takt["headers"]["id"] == task_id_for(run.pk)
    assert takt["properties"]["priority"] == priority
    assert takt["headers"]["timelimit"] == [hard, soft]
