"""Detached command runs (F-02 `command`, `detached`; runs/detached.py):
runs.execution.execute returns once the program runs, and a follower thread
records the end, against the real database and Redis with real processes.
The result code after the start or after the exit, the group slot given
back while the job's lock is kept, the timeout and a cancel killing the
program, a program that cannot start."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings
from django.utils import timezone

from jobs.models import ConcurrencyGroup, Job, ResultVariable
from runs.cancel import cancel_run
from runs.execution import execute
from runs.locks import job_lock_key
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run
from runs.slots import group_key, slot_holders
from tests.e2e.conftest import wait_until
from tests.processes import alive

# The follower thread writes on its own connection: committed data.
pytestmark = pytest.mark.django_db(transaction=True)


def detached_job(script: str, **fields) -> Job:
    job = Job(
        name="detached", kind="command", command=["sh", "-c", script], detached=True, **fields
    )
    job.full_clean()
    job.save()
    return job


def start(job: Job) -> tuple[Run, str | None, float]:
    """Execute a new run of `job` as a worker would: (run, the status
    execute returned, seconds it took)."""
    run = create_run(job, trigger=RunTrigger.MANUAL, now=timezone.now())
    began = time.monotonic()
    status = execute(run.pk, worker="test")
    return run, status, time.monotonic() - began


def ended(run: Run, timeout: float = 15) -> Run:
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status != RunStatus.RUNNING,
        timeout,
        f"detached run {run.pk} to end",
    )
    run.refresh_from_db()
    return run


def test_the_result_code_is_taken_after_the_start_and_the_run_ends_with_the_program(
    redis_client,
):
    variable = ResultVariable.objects.create(name="Export started")
    job = detached_job("echo begin; sleep 1; echo done >&2; exit 3", result_variable=variable)

    run, status, took = start(job)

    assert status == RunStatus.RUNNING and took < 1, took  # the worker process is free
    run.refresh_from_db()
    variable.refresh_from_db()
    assert (run.status, run.result_code, variable.value) == (RunStatus.RUNNING, 0, 0)
    run = ended(run)
    variable.refresh_from_db()
    assert (run.status, run.result_code, variable.value) == (RunStatus.FAILED, 0, 0)
    assert run.message == "the command exited with code 3 (success: 0)"
    assert run.output.splitlines()[1:] == ["begin", "[stderr] done"]
    assert run.duration_s >= 1
    # Released at the real end, right after the end is recorded.
    wait_until(lambda: not redis_client.exists(job_lock_key(job.pk)), 5, "the lock's release")


def test_the_result_code_is_taken_after_the_exit(redis_client):
    variable = ResultVariable.objects.create(name="Export ended")
    job = detached_job("sleep 0.5; exit 4", result_code_at="exit", success_codes=[4])
    job.result_variable = variable
    job.save()

    run, status, _ = start(job)

    variable.refresh_from_db()
    assert (status, Run.objects.get(pk=run.pk).result_code, variable.value) == (
        RunStatus.RUNNING,
        None,
        -1,
    )
    run = ended(run)
    variable.refresh_from_db()
    assert (run.status, run.result_code, variable.value) == (RunStatus.SUCCEEDED, 4, 4)


def test_the_group_slot_goes_back_at_the_start_the_job_stays_locked(redis_client):
    group = ConcurrencyGroup.objects.create(name="Exports", limit=1)
    job = detached_job("sleep 1", concurrency_group=group)

    run, status, _ = start(job)

    assert status == RunStatus.RUNNING
    assert slot_holders(group_key(group.pk)) == []  # other jobs of the group may run
    assert redis_client.exists(job_lock_key(job.pk))  # this one does not start again
    second, _, _ = start(job)  # the overlap policy (skip) sees the running run
    second.refresh_from_db()
    assert (second.status, second.message) == (
        RunStatus.SKIPPED,
        "skipped: the job already has an active run (overlap policy 'skip')",
    )
    assert ended(run).status == RunStatus.SUCCEEDED


@override_settings(TAKT_COMMAND_KILL_GRACE_SECONDS=1)
def test_the_timeout_kills_the_program_and_ends_the_run_timed_out(redis_client, tmp_path):
    pid_file = tmp_path / "pid"
    job = detached_job(f"echo $$ > {pid_file}; exec sleep 60", timeout_s=1)

    run, _, _ = start(job)

    run = ended(run)
    assert (run.status, run.result_code) == (RunStatus.TIMED_OUT, -1002)
    assert run.message == "timed out after 1 s and was stopped"
    assert not alive(int(pid_file.read_text()))


@override_settings(TAKT_LOCK_TTL_SECONDS=3, TAKT_COMMAND_KILL_GRACE_SECONDS=1)
def test_a_cancel_stops_the_program(redis_client, tmp_path):
    pid_file = tmp_path / "pid"
    job = detached_job(f"echo $$ > {pid_file}; echo working; exec sleep 60", timeout_s=120)
    run, _, _ = start(job)
    wait_until(pid_file.exists, 5, "the program to start")

    cancel_run(run.pk, by="ops", now=timezone.now())

    # The keeper sees the cancel at its next renewal (a third of the TTL).
    wait_until(lambda: not alive(int(pid_file.read_text())), 5, "the program to be stopped")
    run = ended(run)
    assert (run.status, run.cancelled_by) == (RunStatus.CANCELLED, "ops")
    assert "working" in run.output


def test_a_program_that_cannot_start_fails_the_run_at_once(redis_client):
    job = Job(name="nothing", kind="command", command=["/no/such/program"], detached=True)
    job.full_clean()
    job.save()

    run, status, _ = start(job)

    run.refresh_from_db()
    assert (status, run.status, run.result_code) == (RunStatus.FAILED, RunStatus.FAILED, -1001)
    assert run.message.startswith("the command could not be started: No such file or directory")
    assert not redis_client.exists(job_lock_key(job.pk))
