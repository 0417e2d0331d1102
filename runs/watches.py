"""What the lock keeper checks on a running run, besides its lock
(runs.execution): whether it passed its job's long_run_s (F-62/F-63), and,
for timeout action `continue`, its timeout (F-26)."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.utils import timezone

from jobs.specs import long_run_seconds
from runs.context import JobContext
from runs.models import Run
from runs.signals import run_running_long
from runs.variables import TIMED_OUT_RUNNING, write_result

log = logging.getLogger("takt.execution")


def send_signal(signal: Any, run: Run, **kwargs: Any) -> None:
    try:
        signal.send(sender=Run, run=run, **kwargs)
    except Exception:
        log.exception("a receiver of %s failed for run %s", signal, run.pk)


class LongRunWatch:
    """F-62/F-63: tell once when a run passes its job's long_run_s."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.started = time.monotonic()
        self.told = False
        self.limit = long_run_seconds(run.job)

    def check(self) -> None:
        elapsed = time.monotonic() - self.started
        if self.told or not self.limit or elapsed < self.limit:
            return
        self.told = True
        send_signal(run_running_long, self.run, seconds=elapsed)


class TimeoutWatch:
    """Timeout action `continue` (F-26): no time limit stops the run; once it
    passes the job's timeout, a warning goes into its output and message,
    and the job stays locked (the keeper renews the lock) until it ends."""

    def __init__(self, run: Run, ctx: JobContext) -> None:
        self.run, self.ctx = run, ctx
        self.started = time.monotonic()
        self.warned = False
        self.warning = ""

    def check(self) -> None:
        limit = self.run.job.timeout_s
        if self.warned or time.monotonic() - self.started < limit:
            return
        self.warned = True
        self.warning = (
            f"ran past its timeout of {limit} s; kept running (timeout action 'continue'),"
            " the job stays locked until it ends"
        )
        self.ctx.log(f"warning: {self.warning}")
        # F-32: "timed out, still running" until its real end writes its code.
        write_result(self.run, TIMED_OUT_RUNNING, now=timezone.now())
        log.warning(
            "run %s %s",
            self.run.pk,
            self.warning,
            extra={"job_id": self.run.job_id, "run_id": self.run.pk},
        )
