"""Command jobs (F-02 `command`) with real workers and a real beat: a command
on a cron trigger runs and records its output; the job's timeout (Celery's
soft time limit) kills a process tree whose grandchild ignores SIGTERM; a
worker killed with SIGKILL while a command runs leaves no part of it
running (runs/supervise.py), whether the whole worker or its pool process
alone dies."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.cancel import cancel_run
from runs.models import Run, RunStatus, RunTrigger
from runs.services import enqueue_job
from tests.chaos.fleet import children_of
from tests.e2e.conftest import wait_until
from tests.processes import alive

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

GRACE_S = 1  # the workers' TAKT_COMMAND_KILL_GRACE_SECONDS


def command_job(name: str, command: list[str], **fields) -> Job:
    job = Job(name=name, kind="command", command=command, **fields)
    job.full_clean()
    job.save()
    return job


def tree_script(pids: Path) -> str:
    """A child that waits for a grandchild ignoring SIGTERM; both write
    their pid to `pids`."""
    return f"sh -c 'trap \"\" TERM; echo $$ >> {pids}; exec sleep 60' & echo $$ >> {pids}; wait"


def recorded(pids: Path, count: int = 2) -> list[int]:
    wait_until(
        lambda: pids.exists() and len(pids.read_text().split()) == count,
        20,
        "the command's processes to start",
    )
    return [int(p) for p in pids.read_text().split()]


def test_a_command_on_a_cron_trigger_runs_and_records_its_output(start_process, beat):
    job = command_job("tick", ["sh", "-c", 'echo "run $TAKT_RUN_ID"; echo warn >&2; exit 4'])
    job.success_codes = [0, 4]
    job.save()
    Trigger.objects.create(job=job, kind="cron", cron_expression="*/2 * * * * *")
    worker = start_process("worker")
    beat()
    # The first fire time may pass while the beat starts: a catch-up run.
    scheduled = Run.objects.filter(job=job, trigger=RunTrigger.SCHEDULE)
    try:
        wait_until(
            lambda: scheduled.filter(status=RunStatus.SUCCEEDED).count() >= 2,
            30,
            "two scheduled runs of the command to succeed",
        )
    finally:
        worker.stop()
    for run in scheduled.filter(status=RunStatus.SUCCEEDED)[:2]:
        assert run.result_code == 4
        assert run.output.splitlines()[1:] == [f"run {run.pk}", "[stderr] warn"]


def test_the_timeout_kills_the_whole_tree(start_process, tmp_path):
    pids = tmp_path / "pids"
    job = command_job("slow", ["sh", "-c", tree_script(pids)], timeout_s=2)
    worker = start_process("worker", TAKT_COMMAND_KILL_GRACE_SECONDS=str(GRACE_S))
    try:
        run = enqueue_job(job, trigger=RunTrigger.MANUAL)
        processes = recorded(pids)
        wait_until(
            lambda: Run.objects.get(pk=run.pk).status == RunStatus.TIMED_OUT,
            2 + GRACE_S + 10,
            "the run to time out",
        )
    finally:
        worker.stop()
    run.refresh_from_db()
    assert run.result_code == -1002
    assert run.message == "timed out after 2 s and was stopped"
    assert not [pid for pid in processes if alive(pid)]


@pytest.mark.parametrize("killed", ["the whole worker", "its pool process"])
def test_a_worker_killed_while_a_command_runs_leaves_none_of_it_running(
    start_process, tmp_path, killed
):
    pids = tmp_path / "pids"
    job = command_job("long", ["sh", "-c", tree_script(pids)], timeout_s=120)
    worker = start_process("worker", concurrency=1, TAKT_COMMAND_KILL_GRACE_SECONDS=str(GRACE_S))
    enqueue_job(job, trigger=RunTrigger.MANUAL)
    processes = recorded(pids)
    (pool,) = children_of(worker.pid)

    if killed == "the whole worker":
        os.killpg(worker.pid, signal.SIGKILL)  # the command is in a session of its own
        worker.popen.wait(timeout=10)
    else:
        os.kill(pool, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_until(
        lambda: not any(alive(pid) for pid in processes),
        GRACE_S + 5,
        "the command's processes to be gone",
    )
    print(f"command gone {time.monotonic() - killed_at:.2f} s after {killed} was killed")
    worker.stop()


def test_a_cancelled_command_run_stops_its_processes(start_process, tmp_path):
    pids = tmp_path / "pids"
    job = command_job("to cancel", ["sh", "-c", tree_script(pids)], timeout_s=120)
    worker = start_process("worker", TAKT_COMMAND_KILL_GRACE_SECONDS=str(GRACE_S))
    try:
        run = enqueue_job(job, trigger=RunTrigger.MANUAL)
        processes = recorded(pids)
        cancel_run(run.pk, by="e2e-operator", now=timezone.now())
        wait_until(
            lambda: not any(alive(pid) for pid in processes),
            GRACE_S + 5,
            "the cancelled command's processes to be gone",
        )
    finally:
        worker.stop()
    run.refresh_from_db()
    assert (run.status, run.cancelled_by) == (RunStatus.CANCELLED, "e2e-operator")


def test_a_detached_command_leaves_the_worker_free_and_ends_with_its_program(start_process):
    detached = command_job("export", ["sh", "-c", "sleep 3; echo exported"], detached=True)
    quick = command_job("quick", ["true"])
    worker = start_process("worker", concurrency=1)  # one pool process for both
    try:
        long_run = enqueue_job(detached, trigger=RunTrigger.MANUAL)
        wait_until(
            lambda: Run.objects.get(pk=long_run.pk).status == RunStatus.RUNNING,
            15,
            "the detached run to start",
        )
        quick_run = enqueue_job(quick, trigger=RunTrigger.MANUAL)
        wait_until(
            lambda: Run.objects.get(pk=quick_run.pk).status == RunStatus.SUCCEEDED,
            10,
            "the other run to succeed on the same pool process",
        )
        assert Run.objects.get(pk=long_run.pk).status == RunStatus.RUNNING
        wait_until(
            lambda: Run.objects.get(pk=long_run.pk).status == RunStatus.SUCCEEDED,
            15,
            "the detached run to end with its program",
        )
    finally:
        worker.stop()
    long_run.refresh_from_db()
    assert long_run.output.splitlines()[1:] == ["exported"]
    assert long_run.duration_s >= 3
