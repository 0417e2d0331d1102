"""The job of the structured-log test (tests/e2e/test_production_e2e.py),
registered in its worker by TAKT_JOB_MODULES: it writes a line each way a
job can, through the run's context, its own logger and print()."""

from __future__ import annotations

import logging
from typing import Any

from jobs import takt_job

log = logging.getLogger("tests.logging_jobs")


@takt_job("tests.log_lines")
def log_lines(job: Any) -> str:
    job.log("line from job.log")
    log.warning("line from the job's own logger")
    print("line from print")
    return "logged"
