"""A project's existing broker: Celery on RabbitMQ (CELERY_BROKER_URL=amqp://…)
with real workers and a real beat, while locks, marks and the decision log
stay in the private Redis (docs/failures.md, "Celery on RabbitMQ").

Needs TAKT_TEST_AMQP_URL (.ci/run sets it to the machine's RabbitMQ); each
session works in a vhost of its own, made with rabbitmqctl and deleted at
the end, so no other data on that RabbitMQ is touched. Executions are
counted in an O_APPEND file (tests.append), outside Takt's tables."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import quote, unquote, urlsplit

import pytest
from celery import current_app
from django.utils import timezone
from kombu import Connection

from heartbeats.api.metrics import TaktCollector
from jobs.models import Job, Trigger
from jobs.testing import takt_settings
from runs.broker import amqp_queue_lengths
from runs.models import Run, RunStatus, RunTrigger
from runs.publish import publish_runs
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until
from tests.e2e.test_resend_e2e import FAST, RESEND_AFTER_S, executions

pytestmark = [pytest.mark.e2e, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

URL_VARIABLE = "TAKT_TEST_AMQP_URL"


def _unavailable(reason: str) -> None:
    """Skip with `reason`; in CI (CI=true) fail instead: there the tests must run."""
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"RabbitMQ tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def amqp_url() -> Iterator[str]:
    """A vhost of this module's own on the RabbitMQ of TAKT_TEST_AMQP_URL,
    as an amqp:// URL; deleted with everything in it at the end."""
    base = os.environ.get(URL_VARIABLE, "")
    if not base:
        _unavailable(
            f"{URL_VARIABLE} is not set: these tests need a real RabbitMQ (.ci/run sets it)"
        )
    if shutil.which("rabbitmqctl") is None:
        _unavailable("rabbitmqctl is not installed: it makes the tests' private vhost")
    parts = urlsplit(base)
    vhost = f"takt-test-{uuid.uuid4().hex[:8]}"
    user = unquote(parts.username or "guest")
    try:
        _rabbitmqctl("add_vhost", vhost)
        _rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"rabbitmqctl could not make the vhost {vhost}: {exc}")
    url = parts._replace(path="/" + quote(vhost, safe="")).geturl()
    try:
        with Connection(url, connect_timeout=5) as connection:
            connection.ensure_connection(max_retries=1)
        yield url
    finally:
        subprocess.run(
            ["rabbitmqctl", "-q", "delete_vhost", vhost], capture_output=True, timeout=60
        )


@pytest.fixture
def on_rabbitmq(amqp_url: str, redis_url: str, redis_client) -> Iterator[dict[str, str]]:
    """This process publishes to the vhost (Takt's Redis stays the private
    one, emptied); yields the variables that put a worker or beat on it.
    The vhost's queue `takt` is emptied before and after."""
    with takt_settings(redis_url, broker_url=amqp_url):
        _purge(amqp_url)
        yield {"CELERY_BROKER_URL": amqp_url}
        _purge(amqp_url)


def _purge(url: str) -> None:
    from amqp.exceptions import NotFound

    with Connection(url) as connection:
        try:
            connection.channel().queue_purge("takt")
        except NotFound:  # not declared yet: nothing to purge
            pass


def queue_arguments(url: str, queue: str) -> str:
    """The arguments RabbitMQ holds for `queue` in the vhost of `url`, as
    rabbitmqctl prints them."""
    vhost = unquote(urlsplit(url).path[1:])
    listing = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "-p", vhost, "name", "arguments"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return next(line for line in listing.splitlines() if line.split()[:1] == [queue])


def appender(path, name: str, *, seconds: float = 0) -> Job:
    return Job.objects.create(
        name=name, target="tests.append", params={"path": str(path), "seconds": seconds}
    )


def depth(queue: str = "takt") -> int:
    """takt_queue_depth{queue} as /metrics reports it."""
    for family in TaktCollector().collect():
        if family.name == "takt_queue_depth":
            return next(int(s.value) for s in family.samples if s.labels["queue"] == queue)
    raise AssertionError("no takt_queue_depth")


def test_a_scheduled_job_runs_once_per_fire_time(start_process, beat, on_rabbitmq, tmp_path):
    path = tmp_path / "executions.log"
    job = appender(path, "amqp every second")
    Trigger.objects.create(job=job, kind="cron", cron_expression="* * * * * *", timezone="UTC")
    start_process("worker", concurrency=2, **on_rabbitmq)
    first, second = beat(**on_rabbitmq), beat(**on_rabbitmq)

    wait_until(lambda: job.runs.count() >= 5, 20, "five fire times dispatched")
    first.stop()
    second.stop()
    wait_until(
        lambda: not job.runs.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).exists(),
        15,
        "runs to end",
    )
    fire_times = Counter(job.runs.values_list("scheduled_for", flat=True))
    assert max(fire_times.values()) == 1, fire_times
    ordered = sorted(fire_times)
    assert all(b - a == timedelta(seconds=1) for a, b in zip(ordered, ordered[1:], strict=False))
    time.sleep(1)  # a late second delivery would show now
    # A fire time whose run found the previous one running is skipped (the
    # default overlap policy): it ends without executing.
    ids = list(job.runs.filter(status=RunStatus.SUCCEEDED).values_list("pk", flat=True))
    assert len(ids) >= 4
    assert executions(path) == Counter({run_id: 1 for run_id in ids})


def test_queued_runs_start_by_priority_while_the_worker_is_busy(
    start_process, on_rabbitmq, amqp_url, tmp_path
):
    path = tmp_path / "executions.log"
    start_process("worker", concurrency=1, **on_rabbitmq)
    busy = enqueue_job(appender(path, "amqp busy", seconds=2), trigger=RunTrigger.MANUAL)
    wait_until(lambda: executions(path)[busy.pk] == 1, 15, "the long run to start")
    order = [(7, "a"), (2, "b"), (5, "c"), (0, "d"), (2, "e")]
    runs = {
        enqueue_job(appender(path, f"amqp priority {name}"), trigger="api", priority=p).pk: name
        for p, name in order
    }
    assert amqp_queue_lengths(["takt"]) == {"takt": 5}  # waiting behind the busy one
    wait_until(
        lambda: Run.objects.filter(pk__in=runs, status=RunStatus.SUCCEEDED).count() == 5,
        20,
        "every run",
    )
    started = Run.objects.filter(pk__in=runs).order_by("started_at").values_list("pk", flat=True)
    assert [runs[pk] for pk in started] == ["d", "b", "e", "c", "a"]
    # The worker and this publisher declared Takt's queue alike, with its priorities.
    assert "x-max-priority" in queue_arguments(amqp_url, "takt")


def test_a_run_published_while_no_worker_runs_runs_once_after_one_starts(
    start_process, on_rabbitmq, tmp_path
):
    path = tmp_path / "executions.log"
    run = enqueue_job(appender(path, "amqp early"), trigger=RunTrigger.MANUAL)
    run.refresh_from_db()
    assert run.published_at is not None
    assert amqp_queue_lengths(["takt", "amqp-no-such-queue"]) == {
        "takt": 1,
        "amqp-no-such-queue": 0,
    }
    assert depth() == 1

    start_process("worker", concurrency=2, **on_rabbitmq)
    wait_until(lambda: executions(path)[run.pk] == 1, 20, "the run to execute")
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, 10, "success")
    time.sleep(1)
    assert executions(path) == Counter({run.pk: 1})
    assert depth() == 0


def test_a_message_delivered_twice_runs_once(start_process, on_rabbitmq, tmp_path):
    path = tmp_path / "executions.log"
    run = enqueue_job(appender(path, "amqp twice"), trigger=RunTrigger.MANUAL)
    # The same run's message again, as a beat that died before marking it
    # would send it: two messages for one run in the queue.
    assert publish_runs([run.pk], now=timezone.now()) == 1
    assert amqp_queue_lengths(["takt"]) == {"takt": 2}
    assert depth() == 2

    start_process("worker", concurrency=2, **on_rabbitmq)
    # Bounded generously: a CI run saw 20 s pass here on a loaded machine
    # (the processes' logs are printed with a failure to say why).
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, 60, "success")
    wait_until(lambda: amqp_queue_lengths(["takt"]) == {"takt": 0}, 20, "both messages taken")
    time.sleep(1)  # the second delivery has been consumed: it did nothing
    assert executions(path) == Counter({run.pk: 1})


def test_a_message_the_broker_lost_is_sent_again_and_runs_once(
    start_process, beat, on_rabbitmq, amqp_url, tmp_path
):
    """The lost-message sweep asks RabbitMQ, not Redis, whether a run's
    queue is empty: a run marked `sent` whose message was purged is sent
    again by the beat."""
    path = tmp_path / "executions.log"
    run = enqueue_job(appender(path, "amqp purged"), trigger=RunTrigger.MANUAL)
    time.sleep(RESEND_AFTER_S)
    _purge(amqp_url)  # an operator's purge: the mark still says `sent`
    assert amqp_queue_lengths(["takt"]) == {"takt": 0}

    start_process("worker", concurrency=2, **on_rabbitmq, **FAST)
    beat(**on_rabbitmq, **FAST)
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, 30, "re-sent")
    time.sleep(1)
    assert executions(path) == Counter({run.pk: 1})


def test_the_processes_published_to_rabbitmq_not_to_redis(on_rabbitmq, redis_client):
    """Nothing of kombu's Redis transport appears in Takt's Redis."""
    assert current_app.conf.broker_url.startswith("amqp")
    enqueue_job(appender("/dev/null", "amqp where"), trigger=RunTrigger.MANUAL)
    assert redis_client.llen("takt") == 0
    assert not redis_client.exists("_kombu.binding.takt")
    assert amqp_queue_lengths(["takt"]) == {"takt": 1}
