"""The job of the Sentinel failover test (tests/e2e/test_sentinel_e2e.py),
registered in its worker by TAKT_JOB_MODULES: each execution appends its
run's id to a side-channel file outside Takt's tables and Redis, so a run
executed twice shows as two lines whatever Takt recorded."""

from __future__ import annotations

import os
from typing import Any

from jobs import takt_job


@takt_job("tests.append_run_id")
def append_run_id(job: Any) -> int:
    line = f"{job.run_id} {job.job_id} {os.getpid()}\n".encode()
    fd = os.open(job.params["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write with O_APPEND: lines never interleave
    finally:
        os.close(fd)
    return job.run_id
