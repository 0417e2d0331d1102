"""Issue 26: a run sent to a queue no live worker reads waits for good (the
beat's re-send sees a non-empty queue). Each worker reports the queues it
consumes; "Why didn't it run?" names the queue at once, and the beat's
check raises one critical alert per such queue after QUEUED_STUCK_AFTER,
resolved when a worker reads it or no run waits there. With a worker that
did not say what it reads (an older Takt), nothing is claimed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine

from heartbeats.explaining import explain_job
from heartbeats.models import Alert
from heartbeats.processes import report_process, worker_detail
from heartbeats.unread_queues import check_unread_queues
from jobs.models import Job
from runs.models import Run
from runs.publish import publish_runs
from runs.services import create_run
from tests.integration.conftest import utc

pytestmark = pytest.mark.django_db

T0 = utc(2027, 3, 1, 9, 0)
LATER = T0 + timedelta(seconds=61)


def utc_text(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def published(job: Job) -> Run:
    run = create_run(job, trigger="manual", now=T0)
    publish_runs([run.pk], now=T0)
    return run


@pytest.fixture
def routed(redis_client: Any) -> Job:
    """A job whose Celery task routes itself to the queue `reports`
    (tests.sample_jobs.routed_echo), with one run published at T0."""
    job = Job.objects.create(name="Monthly report", target="tests.routed_echo")
    published(job)
    return job


def active_runs(job: Job) -> str:
    """What "Why didn't it run?" says of the job's active runs at LATER."""
    with time_machine.travel(LATER, tick=False):
        checks = explain_job(job, now=LATER).checks
    (check,) = [c for c in checks if c.name == "active runs"]
    return check.text(utc_text)


def workers(*queues: list[str] | None) -> None:
    """A live beat, and a live worker reading each of `queues`."""
    report_process("beat@here", now=LATER, detail="scheduler=on")
    for n, read in enumerate(queues):
        detail = "concurrency=2" if read is None else worker_detail(2, read)
        report_process(f"worker:celery@w{n}", now=LATER, detail=detail)


def test_why_and_an_alert_name_the_queue_no_worker_reads(routed):
    workers(["takt"])
    why = active_runs(routed)
    assert "is queued; it waits on the queue 'reports', which no live worker reads" in why, why

    assert check_unread_queues(now=LATER) == ["reports"]
    alert = Alert.objects.get(key="queue-unread:reports")
    assert alert.severity == "critical" and alert.resolved_at is None
    assert alert.title == "Runs wait on queue 'reports', which no worker reads"
    assert "'Monthly report'" in alert.message and "-Q reports" in alert.message
    assert "the live workers read: takt" in alert.message

    workers(["reports", "takt"])  # a worker reads it now: resolved
    assert check_unread_queues(now=LATER + timedelta(seconds=30)) == []
    assert Alert.objects.get(key="queue-unread:reports").resolved_at is not None
    assert "no live worker reads" not in active_runs(routed)


def test_a_run_on_a_read_queue_or_not_yet_waiting_long_is_no_alert(redis_client):
    plain = Job.objects.create(name="plain", target="tests.celery_echo")
    published(plain)  # to `takt`, which the worker reads
    late = Job.objects.create(name="late", target="tests.routed_echo")
    run = create_run(late, trigger="manual", now=LATER)
    publish_runs([run.pk], now=LATER)  # to `reports`, only just
    workers(["takt"])
    assert check_unread_queues(now=LATER) == []
    assert not Alert.objects.filter(key__startswith="queue-unread:").exists()


def test_a_worker_that_did_not_say_what_it_reads_makes_no_queue_unread(routed):
    workers(["takt"], None)
    assert check_unread_queues(now=LATER) == []
    assert "no live worker reads" not in active_runs(routed)
