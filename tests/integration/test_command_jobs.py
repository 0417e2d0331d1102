"""Command jobs (F-02 `command`, wait mode) executed by runs.execution.execute
in-process against the real database and Redis, with real processes: argv
against shell, working directory, environment, exit codes and success
codes, stdout and stderr interleaved with the byte cap, a timeout that
kills a process tree, a program that cannot start. The job's timeout is
raised as Celery's soft time limit raises it (SoftTimeLimitExceeded from a
signal handler in the pool process)."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import ValidationError
from django.test import override_settings

from jobs.models import Job
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run
from tests.integration.conftest import SECOND, clock, utc
from tests.processes import alive

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def command_job(command: list[str], **fields) -> Job:
    job = Job(name="cmd", kind="command", command=command, **fields)
    job.full_clean()
    job.save()
    return job


def run_job(job: Job, **run_fields) -> Run:
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0, **run_fields)
    execute(run.pk, worker="test", clock=clock(T0 + SECOND, T0 + 2 * SECOND))
    run.refresh_from_db()
    return run


def lines(run: Run) -> list[str]:
    return run.output.splitlines()[1:]  # the first line says what was started


def test_an_argument_list_reaches_the_program_as_it_is_and_zero_succeeds(redis_client):
    job = command_job(["printf", "%s|", "two words", "$HOME", "*"])

    run = run_job(job)

    assert (run.status, run.result_code, run.message) == (RunStatus.SUCCEEDED, 0, "")
    first, *rest = run.output.splitlines()
    assert re.fullmatch(r"\$ printf '%s\|' 'two words' '\$HOME' '\*'  \(pid \d+\)", first)
    assert rest == ["two words|$HOME|*|"]


def test_with_shell_on_the_command_line_is_run_by_sh(redis_client):
    job = command_job(["echo $((6 * 7)) | tr 4 X"], shell=True)

    assert lines(run_job(job)) == ["X2"]


def test_working_directory_environment_and_the_runs_facts(redis_client, tmp_path):
    job = command_job(
        ["sh", "-c", 'pwd; echo "$GREETING"; echo "$TAKT_TRIGGER $TAKT_PARAM_FILE $TAKT_PARAMS"'],
        cwd=str(tmp_path),
        env={"GREETING": "grüß dich"},
        params={"file": "/in/a.csv"},
    )

    run = run_job(job)

    assert lines(run) == [
        str(tmp_path),
        "grüß dich",
        'manual /in/a.csv {"file": "/in/a.csv"}',
    ]


def test_the_program_gets_its_runs_fencing_token(redis_client):
    # F-113: the same number a callable sees as job.fencing_token.
    job = command_job(["sh", "-c", 'echo "token=$TAKT_FENCING_TOKEN"'])

    first, second = (lines(run_job(job))[0] for _ in range(2))

    assert re.fullmatch(r"token=\d+", first) and re.fullmatch(r"token=\d+", second)
    assert int(second.removeprefix("token=")) > int(first.removeprefix("token="))


def test_nice_lowers_the_process_priority(redis_client):
    job = command_job(["sh", "-c", "cut -d' ' -f19 /proc/self/stat"], nice=7)

    assert lines(run_job(job)) == ["7"]


@pytest.mark.parametrize(
    ("script", "success_codes", "status", "code", "message"),
    [
        ("exit 0", [], RunStatus.SUCCEEDED, 0, ""),
        ("exit 3", [], RunStatus.FAILED, 3, "the command exited with code 3 (success: 0)"),
        ("exit 1", [0, 1], RunStatus.SUCCEEDED, 1, ""),
        ("exit 2", [0, 1], RunStatus.FAILED, 2, "the command exited with code 2 (success: 0, 1)"),
        ("kill -TERM $$", [], RunStatus.FAILED, 143, "the command was killed by SIGTERM"),
    ],
)
def test_the_exit_code_is_the_result_code_and_decides_the_status(
    redis_client, script, success_codes, status, code, message
):
    run = run_job(command_job(["sh", "-c", script], success_codes=success_codes))

    assert (run.status, run.result_code, run.message) == (status, code, message)


def test_stdout_and_stderr_interleave_in_order_each_stderr_line_marked(redis_client):
    script = (
        "echo one; sleep 0.05; echo two >&2; sleep 0.05; echo three; sleep 0.05; printf tail >&2"
    )

    assert lines(run_job(command_job(["sh", "-c", script]))) == [
        "one",
        "[stderr] two",
        "three",
        "[stderr] tail",
    ]


@override_settings(TAKT_OUTPUT_LIMIT_BYTES=2048)
def test_the_output_is_capped_in_bytes_and_says_what_was_cut(redis_client):
    # 100 lines of 99 bytes ("é" is two bytes) + newline: 10,000 bytes.
    script = "i=0; while [ $i -lt 100 ]; do printf '%097dé\\n' $i; i=$((i+1)); done"

    run = run_job(command_job(["sh", "-c", script]))

    assert run.status == RunStatus.SUCCEEDED  # drained to the end, not blocked on a full pipe
    kept = run.output.splitlines()
    assert kept[-1].startswith("[output truncated: ") and kept[-1].endswith(" more bytes not kept]")
    cut = int(kept[-1].split()[2])
    assert len("\n".join(kept[:-1]).encode()) + 1 + cut == len(kept[0].encode()) + 1 + 10_000
    assert len("\n".join(kept[:-1]).encode()) <= 2048


@contextmanager
def soft_time_limit(seconds: float) -> Iterator[None]:
    """Raise SoftTimeLimitExceeded in this thread after `seconds`, from a
    signal handler, as billiard's pool process does at a task's soft limit."""

    def expired(signum, frame):
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, expired)
    # pytest-timeout's ceiling is on the same timer: it is given back after.
    ceiling, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    began = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if ceiling:
            signal.setitimer(signal.ITIMER_REAL, max(ceiling - (time.monotonic() - began), 0.01))


# Committed data: the run's autosave thread writes its output on its own
# connection while the run goes on (SQLite would wait for the test's transaction).
@pytest.mark.django_db(transaction=True)
@override_settings(TAKT_COMMAND_KILL_GRACE_SECONDS=1)
def test_a_timeout_kills_the_whole_process_tree_term_first_then_kill(redis_client, tmp_path):
    pids = tmp_path / "pids"
    # A grandchild that ignores SIGTERM, and a child that waits for it.
    script = f"sh -c 'trap \"\" TERM; echo $$ >> {pids}; sleep 60' & echo $$ >> {pids}; wait"
    job = command_job(["sh", "-c", script], timeout_s=1)
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)

    started = time.monotonic()
    with soft_time_limit(0.5):
        status = execute(run.pk, worker="test", clock=clock(T0 + SECOND, T0 + 2 * SECOND))
    elapsed = time.monotonic() - started

    run.refresh_from_db()
    assert (status, run.result_code) == (RunStatus.TIMED_OUT, -1002)
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 2
    assert not any(alive(pid) for pid in recorded)
    assert 1.4 < elapsed < 5  # SIGTERM ignored by one: SIGKILL after the 1 s grace
    # The supervisor SIGKILLed what ignored SIGTERM, itself with it.
    assert run.output.splitlines()[-1] == "the command was stopped (exit -9)"


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"command": ["/no/such/program"]}, "No such file or directory"),
        ({"command": [os.devnull]}, "Permission denied"),
    ],
)
def test_a_program_that_cannot_start_fails_the_run_with_code_minus_1001(redis_client, fields, why):
    run = run_job(command_job(**fields))

    assert (run.status, run.result_code) == (RunStatus.FAILED, -1001)
    assert run.message.startswith(f"the command could not be started: {why}")


def test_a_working_directory_gone_since_the_job_was_saved_could_not_start(redis_client, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    job = command_job(["true"], cwd=str(gone))
    gone.rmdir()

    run = run_job(job)

    assert (run.status, run.result_code) == (RunStatus.FAILED, -1001)
    assert run.message == (
        f"the command could not be started: cwd: {str(gone)!r} is not a directory on this machine"
    )


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"command": []}, "command", "a command job needs its command"),
        ({"command": ["ls", 3]}, "command", "every item of the command must be a string"),
        ({"command": ["ls", "-l"], "shell": True}, "command", "with shell on, the command is one"),
        ({"command": "ls -l"}, "command", "a command job needs its command"),
        ({"cwd": "relative/dir"}, "cwd", "'relative/dir' is a relative path"),
        ({"cwd": "/no/such/dir"}, "cwd", "'/no/such/dir' is not a directory on this machine"),
        ({"nice": 20}, "nice", "Ensure this value is less than or equal to 19."),
        ({"nice": -5}, "nice", "Ensure this value is greater than or equal to 0."),
        ({"env": {"N": 1}}, "env", "N: the value must be a string, got int 1"),
        ({"env": ["A=1"]}, "env", "environment additions are a JSON object"),
        ({"success_codes": [0, 256]}, "success_codes", "exit codes from 0 to 255"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(fields, field, message):
    job = Job(name="cmd", kind="command", **{"command": ["true"], **fields})

    with pytest.raises(ValidationError) as caught:
        job.full_clean()

    assert field in caught.value.message_dict
    assert any(m.startswith(message) for m in caught.value.message_dict[field])
    assert not Job.objects.filter(name="cmd").exists()


def test_a_callable_job_still_needs_its_target():
    with pytest.raises(ValidationError) as caught:
        Job(name="no target", kind="callable").full_clean()

    assert caught.value.message_dict["target"][0].startswith("a callable job needs its target")
