"""A job's output in the process log (issue 25, "bounds everywhere"): off
by default (TAKT_LOG_JOB_OUTPUT), so what a job prints (its environment,
a secret) stays in its run; when on, only the lines the run keeps
(TAKT_OUTPUT_LIMIT_BYTES) and one line saying the rest was not logged.
Real command jobs run by runs.execution.execute in-process, their log
lines taken from the `takt.job` logger by a handler of the test's own."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.integration.test_command_jobs import command_job, run_job

pytestmark = pytest.mark.django_db


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, run_id: int) -> list[str]:
        return [r.getMessage() for r in self.records if getattr(r, "run_id", None) == run_id]


@pytest.fixture
def job_log() -> Iterator[Lines]:
    logger = logging.getLogger("takt.job")
    handler, level = Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_by_default_no_line_of_the_output_reaches_the_process_log(redis_client, job_log):
    job = command_job(["env"], env={"TAKT_TEST_SECRET": "s3cret-value"})

    run = run_job(job)

    assert "TAKT_TEST_SECRET=s3cret-value" in run.output.splitlines()  # the run keeps it
    assert job_log.messages(run.pk) == []
    assert not any("s3cret-value" in r.getMessage() for r in job_log.records)


# 10,000 lines of 99 bytes ("é" is two bytes) + newline: 1,000,000 bytes.
MANY_LINES = "i=0; while [ $i -lt 10000 ]; do printf '%097dé\\n' $i; i=$((i+1)); done"
# One line of 300,000 bytes: the worker cuts it into pieces of 64 KiB.
ONE_BIG_LINE = "head -c 300000 /dev/zero | tr '\\0' x"


@pytest.mark.parametrize("script", [MANY_LINES, ONE_BIG_LINE], ids=["many lines", "one big line"])
@override_settings(TAKT_LOG_JOB_OUTPUT=True, TAKT_OUTPUT_LIMIT_BYTES=2048)
def test_when_on_the_log_holds_at_most_what_the_run_keeps(redis_client, job_log, script):
    run = run_job(command_job(["sh", "-c", script]))

    logged = job_log.messages(run.pk)
    kept = run.output.splitlines()
    assert kept[-1].startswith("[output truncated: ")
    assert logged[:-1] == kept[:-1]  # the same lines, in order
    assert logged[-1] == f"[output truncated: no more lines of run {run.pk} logged]"
    assert sum(len(m.encode()) + 1 for m in logged[:-1]) <= 2048


@override_settings(TAKT_LOG_JOB_OUTPUT=True)
def test_when_on_the_lines_carry_the_run(redis_client, job_log):
    run = run_job(command_job(["sh", "-c", "echo one; echo two >&2"]))

    assert job_log.messages(run.pk)[1:] == ["one", "[stderr] two"]  # after what was started
    assert {(r.job_id, r.run_id) for r in job_log.records} == {(run.job_id, run.pk)}  # type: ignore[attr-defined]
