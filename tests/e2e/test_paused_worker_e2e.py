"""A paused worker's run stops once its lock is gone (F-113, issue 28 finding 1),
with a real prefork worker, beat and Redis.

The whole worker (its main process and pool child) is stopped with SIGSTOP
while its run of a long `skip` job holds the job's lock, for longer than the
lock's TTL, then woken with SIGCONT. Its lock keeper notices at once that
more than the TTL passed since its last renewal and stops the job as a
cancel does (SIGUSR1: the soft limit raised in the job's thread). The job
writes a line per step to an O_APPEND file (tests.steps) and one on its way
out, so the test sees when the body stopped, outside Takt's own records.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis
from django.utils import timezone

from jobs.models import Job
from runs.cancel import cancel_run
from runs.execution import LOST_STOPPED
from runs.locks import job_lock_key
from runs.models import Run, RunStatus, RunTrigger
from runs.recovery import LOST_MESSAGE
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LOCK_TTL_S = 3  # the live processes' TAKT_LOCK_TTL_SECONDS (tests/live_fixtures.py)
LOST_CHECK_S = 1  # the beat's TAKT_LOST_CHECK_SECONDS
STOP_BOUND_S = 1.0  # issue 28: stopped within a second of waking


def lines(path: Path, run: Run | None = None) -> list[list[str]]:
    """The job's lines (of `run`'s body only, if given), split: run id,
    pid, "step" n or "end" what, wall time."""
    found = [line.split() for line in path.read_text().splitlines()] if path.exists() else []
    return [p for p in found if run is None or p[0] == str(run.pk)]


def long_skip_job(path: Path, *, max_retries: int = 0) -> Job:
    return Job.objects.create(
        name="long skip job",
        target="tests.steps",
        params={"path": str(path), "seconds": 60, "step_s": 0.05},
        overlap_policy="skip",
        max_retries=max_retries,
        retry_backoff_s=1,
        retry_jitter=0,
    )


def holding_and_stepping(run: Run, path: Path, client: redis.Redis) -> bool:
    """The run is running, holds its job's lock and its body has taken a few steps."""
    steps = [p for p in lines(path, run) if p[2] == "step"]
    running = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exists()
    return running and len(steps) >= 5 and bool(client.exists(job_lock_key(run.job_id)))


def wake_and_time_the_stop(worker_pid: int, run: Run, path: Path) -> tuple[float, list[str], int]:
    """SIGCONT to the worker's group; waits for the job's end line. Returns
    the seconds from the wake to the body's end, the end line and how many
    steps the body took after the wake."""
    woke_at = time.time()
    os.killpg(worker_pid, signal.SIGCONT)

    def end_line() -> list[str] | None:
        return next((p for p in lines(path, run) if p[2] == "end"), None)

    end = wait_until(end_line, 15, f"the body of run {run.pk} to stop after its worker woke")
    after = [p for p in lines(path, run) if p[2] == "step" and float(p[-1]) >= woke_at]
    return float(end[-1]) - woke_at, end, len(after)


def test_a_worker_paused_past_its_lock_ttl_stops_its_run_on_waking_and_keeps_the_beats_record(
    start_process, beat, redis_client, tmp_path
):
    # The scenario: the beat marks the paused worker's run lost
    # while it sleeps and its retry runs on the other worker; on waking the
    # paused body stops within a second (before the fix it ran on beside
    # its retry), and the run stays as the beat recorded it.
    path = tmp_path / "steps.log"
    job = long_skip_job(path, max_retries=1)
    worker = start_process("worker", concurrency=1)
    checker = beat(TAKT_LOST_CHECK_SECONDS=str(LOST_CHECK_S))
    run = enqueue_job(job, trigger=RunTrigger.MANUAL)
    wait_until(
        lambda: holding_and_stepping(run, path, redis_client),
        30,
        "the run to hold its job lock and take steps",
    )
    start_process("worker", concurrency=1)  # the survivor, which takes the retry

    os.killpg(worker.pid, signal.SIGSTOP)  # the worker and its pool child
    try:
        wait_until(
            lambda: Run.objects.get(pk=run.pk).status == RunStatus.LOST,
            LOCK_TTL_S + LOST_CHECK_S + 15,
            "the beat to mark the paused worker's run lost",
        )
        retry = Run.objects.get(retry_of=run)
        wait_until(
            lambda: holding_and_stepping(retry, path, redis_client),
            30,
            "the retry to hold the job's lock and take steps on the other worker",
        )
    except BaseException:
        os.killpg(worker.pid, signal.SIGCONT)
        raise
    stopped_s, end, steps_after = wake_and_time_the_stop(worker.pid, run, path)

    print(f"paused worker: body stopped {stopped_s:.3f} s after waking, {steps_after} steps")
    assert end[3] == "SoftTimeLimitExceeded", end  # stopped as a cancel stops it
    assert stopped_s < STOP_BOUND_S, stopped_s
    assert steps_after <= 2, steps_after  # beside its retry, which goes on:
    assert Run.objects.get(pk=retry.pk).status == RunStatus.RUNNING
    cancel_run(retry.pk, by="the test", now=timezone.now())
    wait_until(
        lambda: any(p[2] == "end" for p in lines(path, retry)), 15, "the retry's body to stop"
    )
    lost_line = f"lock {job_lock_key(job.pk)} was lost before the run ended: no renewal for"
    wait_until(lambda: lost_line in worker.log(), 10, "the worker's line about the lost lock")
    wait_until(
        lambda: "the lost-run check marked it lost first" in worker.log(),
        10,
        "the worker to give up its end to the beat's record",
    )
    run.refresh_from_db()
    assert (run.status, run.message) == (RunStatus.LOST, f"{LOST_MESSAGE}; retry 1 of 1 in 1 s")
    wait_until(  # logged after the end is recorded
        lambda: f"run {run.pk} of job {job.pk} lost" in checker.log(),
        10,
        "the beat's line saying why the run is lost",
    )
    assert f"run {run.pk} of job {job.pk} ended succeeded" not in worker.log()
    assert len({p[1] for p in lines(path, run)}) == 1  # one process: stopped, not killed


@pytest.mark.parametrize("paused", ["the whole worker", "its pool child only"])
def test_a_paused_worker_that_wakes_before_the_beat_looks_records_its_run_lost(
    start_process, redis_client, tmp_path, paused
):
    # No beat: nobody marked the run yet. The worker stops it and records
    # it `lost` itself, saying why. A pool child paused alone (its main
    # process goes on, reporting the worker alive) holds the lock keeper
    # of its run all the same.
    path = tmp_path / "steps.log"
    job = long_skip_job(path)
    worker = start_process("worker", concurrency=1)
    run = enqueue_job(job, trigger=RunTrigger.MANUAL)
    wait_until(
        lambda: holding_and_stepping(run, path, redis_client),
        30,
        "the run to hold its job lock and take steps",
    )

    child = int(lines(path, run)[0][1])
    if paused == "the whole worker":
        os.killpg(worker.pid, signal.SIGSTOP)
    else:
        assert child != worker.pid
        os.kill(child, signal.SIGSTOP)
    try:
        wait_until(
            lambda: not redis_client.exists(job_lock_key(job.pk)),
            LOCK_TTL_S + 10,
            "the paused worker's job lock to expire",
        )
    except BaseException:
        os.killpg(worker.pid, signal.SIGCONT)
        raise
    stopped_s, end, steps_after = wake_and_time_the_stop(worker.pid, run, path)

    print(f"paused {paused}, no beat: body stopped {stopped_s:.3f} s after waking")
    assert end[3] == "SoftTimeLimitExceeded", end
    assert stopped_s < STOP_BOUND_S, stopped_s
    wait_until(lambda: Run.objects.get(pk=run.pk).status != RunStatus.RUNNING, 10, "the run's end")
    run.refresh_from_db()
    assert run.status == RunStatus.LOST, (run.status, run.message)
    head = LOST_STOPPED.split("{reason}")[0]
    assert run.message.startswith(f"{head}no renewal for "), run.message
    assert run.message.endswith("; stopped on its worker"), run.message
    assert run.duration_s is None  # as for every lost run


def test_a_job_that_ignores_the_stop_for_its_lost_lock_is_killed_after_the_grace(
    start_process, redis_client
):
    # As a cancelled run that ignores its stop: the pool child is killed
    # TAKT_CANCEL_GRACE_SECONDS after the job was told, its end recorded first.
    grace_s = 1
    job = Job.objects.create(
        name="stubborn", target="tests.stubborn", params={"seconds": 60}, overlap_policy="skip"
    )
    worker = start_process("worker", concurrency=1, TAKT_CANCEL_GRACE_SECONDS=str(grace_s))
    run = enqueue_job(job, trigger=RunTrigger.MANUAL)
    wait_until(
        lambda: (
            redis_client.exists(job_lock_key(job.pk))
            and Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exclude(output="").exists()
        ),
        30,
        "the run to hold its job lock and save its first line",
    )

    os.killpg(worker.pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: not redis_client.exists(job_lock_key(job.pk)),
            LOCK_TTL_S + 10,
            "the paused worker's job lock to expire",
        )
    finally:
        woke_at = time.monotonic()
        os.killpg(worker.pid, signal.SIGCONT)
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status != RunStatus.RUNNING,
        grace_s + 10,
        "the stubborn run's end",
    )
    ended_s = time.monotonic() - woke_at

    print(f"paused worker, stubborn job: ended {ended_s:.3f} s after waking (grace {grace_s} s)")
    run.refresh_from_db()
    assert run.status == RunStatus.LOST, (run.status, run.message)
    assert run.message.endswith("; stopped on its worker; killed: it ignored the stop")
    assert "ignored SoftTimeLimitExceeded" in run.output  # it was told first
    assert grace_s <= ended_s < grace_s + 2, ended_s
    killing = f"run {run.pk} lost its job lock and still runs {grace_s} s after it was told to stop"
    wait_until(lambda: killing in worker.log(), 10, "the worker's line about the kill")
