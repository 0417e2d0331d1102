"""Cancelling runs under a real prefork worker and beat: the cancelled
job is stopped (and cleans up), a job that swallows the stop is killed
after the grace period, a worker that missed the stop broadcast stops the
run from its cancel marker, and the job goes on running as scheduled."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
import redis
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.cancel import cancel_run
from runs.locks import job_lock_key
from runs.models import Run, RunStatus, RunTrigger
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until
from tests.e2e.test_api_e2e import doc_block, run_bash
from tests.integration.api_helpers import make_token
from tests.processes import ROOT, Proc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

GRACE_S = 2  # TAKT_CANCEL_GRACE_SECONDS of this module's worker
# The worker's renewal interval is a third of the e2e lock TTL (3 s): 1 s.


@pytest.fixture(scope="module")
def worker(start_process: Callable[..., Proc]) -> Iterator[Proc]:
    proc = start_process("worker", TAKT_CANCEL_GRACE_SECONDS=str(GRACE_S))
    yield proc
    proc.stop()


def make_job(target: str, **fields) -> Job:
    return Job.objects.create(name=f"e2e {target}", target=target, **fields)


def running(run: Run, timeout: float = 20) -> Run:
    def started() -> Run | None:
        fresh = Run.objects.get(pk=run.pk)
        # The keeper saved some output: the job's callable is under way.
        return fresh if fresh.status == RunStatus.RUNNING and fresh.output else None

    return wait_until(started, timeout, f"run {run.pk} to run")


def pid_in(output: str) -> int:
    return int(output.splitlines()[0].rsplit(" ", 1)[1])


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_cancelled_loop_stops_its_lock_is_free_and_the_next_fire_time_runs(
    worker, beat, redis_url
):
    job = make_job("tests.loop", params={"seconds": 60}, overlap_policy="skip")
    Trigger.objects.create(job=job, kind="cron", cron_expression="*/3 * * * * *")
    beat()
    first = wait_until(
        lambda: job.runs.filter(status=RunStatus.RUNNING).exclude(output="").first(),
        20,
        "the first scheduled run to loop",
    )
    client = redis.Redis.from_url(redis_url)
    assert client.get(job_lock_key(job.pk)) is not None

    asked = time.monotonic()
    cancelled = cancel_run(first.pk, by="e2e-operator", now=timezone.now())
    assert cancelled.status == RunStatus.CANCELLED
    assert client.get(job_lock_key(job.pk)) is None  # free at once
    Job.objects.filter(pk=job.pk).update(params={"seconds": 0})  # the next ones return

    stopped = wait_until(
        lambda: "cleaned up" in Run.objects.get(pk=first.pk).output, 5, "the loop to stop"
    )
    stop_s = time.monotonic() - asked
    first.refresh_from_db()
    assert stopped and first.status == RunStatus.CANCELLED  # not timed_out, not failed
    assert (first.cancelled_by, first.message) == ("e2e-operator", "cancelled by e2e-operator")
    assert first.output.splitlines()[-1] == "cleaned up"  # its finally ran
    print(f"cancel to stop: {stop_s:.2f} s")

    after = wait_until(
        lambda: (
            job.runs.filter(status=RunStatus.SUCCEEDED, started_at__gt=first.finished_at)
            .order_by("started_at")
            .first()
        ),
        10,
        "the next fire time to run",
    )
    assert after.trigger == RunTrigger.SCHEDULE and after.result == "looped"
    assert Job.objects.get(pk=job.pk).consecutive_failures == 0
    Trigger.objects.filter(job=job).update(active=False)


def test_a_job_that_swallows_the_stop_is_killed_after_the_grace_period(worker):
    job = make_job("tests.stubborn", params={"seconds": 60})
    run = running(enqueue_job(job, trigger=RunTrigger.MANUAL))
    pid = pid_in(run.output)

    asked = time.monotonic()
    cancel_run(run.pk, by="e2e-operator", now=timezone.now())
    wait_until(lambda: gone(pid), GRACE_S + 10, f"process {pid} to be killed")
    kill_s = time.monotonic() - asked

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert "ignored SoftTimeLimitExceeded" in run.output  # told once, then killed
    # Not before the grace; and the kill, not the job's own end (60 s): a
    # 2-core machine four times oversubscribed was seen taking 7 s for the
    # control message, the timer and the wait's poll together.
    assert GRACE_S <= kill_s < GRACE_S + 10, kill_s
    print(f"cancel to kill: {kill_s:.2f} s (grace {GRACE_S} s)")

    # The worker goes on serving: a new pool child runs the next run.
    echo = Job.objects.create(name="e2e after the kill", target="tests.echo")
    nxt = enqueue_job(echo, trigger=RunTrigger.MANUAL)
    wait_until(lambda: Run.objects.get(pk=nxt.pk).status == RunStatus.SUCCEEDED, 15, "the next run")
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED  # not lost, not failed


def test_a_worker_that_missed_the_stop_broadcast_stops_the_run_from_its_marker(
    worker, live_env, redis_url
):
    """`manage.py cancel_run` whose stop broadcast goes to another broker
    database (no worker listens there): the run's keeper finds the cancel
    marker at its next renewal and stops the job itself."""
    job = make_job("tests.loop", params={"seconds": 60})
    run = running(enqueue_job(job, trigger=RunTrigger.MANUAL))
    elsewhere = redis_url.rsplit("/", 1)[0] + "/7"

    asked = time.monotonic()
    done = subprocess.run(
        [sys.executable, "manage.py", "cancel_run", str(run.pk), "--by", "night shift"],
        cwd=ROOT,
        env={**live_env, "CELERY_BROKER_URL": elsewhere},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"run #{run.pk} of job #{job.pk} (e2e tests.loop) cancelled by night shift" in (
        done.stdout
    )
    wait_until(lambda: "cleaned up" in Run.objects.get(pk=run.pk).output, 5, "the loop to stop")
    print(f"cancel (command) to stop without the broadcast: {time.monotonic() - asked:.2f} s")
    run.refresh_from_db()
    assert (run.status, run.cancelled_by) == (RunStatus.CANCELLED, "night shift")

    again = subprocess.run(
        [sys.executable, "manage.py", "cancel_run", str(run.pk)],
        cwd=ROOT,
        env=live_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 1
    assert f"run #{run.pk} already ended cancelled at" in again.stderr


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_curl_example_cancels_a_running_run_over_http(worker, web, tmp_path):
    job = make_job("tests.loop", params={"seconds": 60}, api_trigger_permission="token")
    token = make_token(job=job, name="host-b")
    run = running(enqueue_job(job, trigger=RunTrigger.MANUAL))

    env = {"TAKT_URL": web, "TAKT_TOKEN": token, "TAKT_RUN_ID": str(run.pk)}
    body = json.loads(run_bash(doc_block("cancel-example"), cwd=tmp_path, **env))

    assert (body["status"], body["cancelled_by"]) == ("cancelled", "token:host-b")
    wait_until(lambda: "cleaned up" in Run.objects.get(pk=run.pk).output, 5, "the loop to stop")
    again = json.loads(run_bash(doc_block("cancel-example"), cwd=tmp_path, **env))
    assert again["status"][0].startswith(f"run #{run.pk} already ended cancelled at")
