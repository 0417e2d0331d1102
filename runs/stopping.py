"""Stopping a cancelled run's process (the worker's side of runs/cancel.py),
or a run whose lock is gone.

A running run learns that it was cancelled in two ways, so that a missed
one still stops it:

1. The cancel broadcasts Celery's ``revoke(terminate=True, signal="SIGUSR1")``
   after its commit (runs.overlap.revoke_after_commit): the worker running
   the run sends SIGUSR1 to its pool child. In a prefork child SIGUSR1 is
   Celery's soft time limit: `SoftTimeLimitExceeded` is raised inside the
   job, so its ``finally`` blocks and context managers run.
2. The cancel leaves a marker in Redis (runs.locks.release_cancelled). The
   run's lock keeper finds it at its next renewal (every third of
   TAKT_LOCK_TTL_SECONDS) and calls `CancelWatch`: it saves the output so
   far on the cancelled run and, if the job has not been told yet (a worker
   that missed the broadcast), sends SIGUSR1 to its own process.

A run whose job lock is lost (F-113: its worker was paused longer than the
lock's TTL, or another owner holds the lock; runs/locks.py) is stopped the
same way by `LostWatch`, which its lock keeper calls at once.

TAKT_CANCEL_GRACE_SECONDS after the job was told, a run still inside its
callable (it caught the exception and went on) is killed: the watch saves
its output, counts its end and sends SIGKILL to its own process. The pool
starts a new child; the worker serves the next run.

`StopGate` lets SIGUSR1 raise only inside a job's callable, once per run: a
stop (or a soft time limit) that arrives while the worker records a run's
end, or between runs, is ignored, so a late signal never breaks the
bookkeeping or stops the next run. Signals and the kill are used only in a
billiard pool child (where SIGUSR1 is the soft time limit's signal); under
another pool a cancelled run loses its lock and its end is ignored, but its
callable runs on until it returns.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from billiard.pool import soft_timeout_sighandler
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from runs.models import Run, RunStatus

log = logging.getLogger("takt.execution")


class StopGate:
    """SIGUSR1 in a pool child, as the module docstring says. One per
    process (`GATE`); its state is the current run's, as a prefork child
    runs one run at a time."""

    def __init__(self) -> None:
        self.pid = 0  # the process whose SIGUSR1 handler is ours
        self.open = False  # a job's callable is under way
        self.raised_at: float | None = None  # time.monotonic() of the stop raised in it

    @property
    def active(self) -> bool:
        """Whether this process can be told to stop (a billiard pool child)."""
        return self.pid == os.getpid()

    def _install(self) -> None:
        # Only billiard's child installs soft_timeout_sighandler (a Celery
        # main process has its own SIGUSR1 handler, a test process none).
        if self.active or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGUSR1) is soft_timeout_sighandler:
            signal.signal(signal.SIGUSR1, self._handle)
            self.pid = os.getpid()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.open and self.raised_at is None:
            self.raised_at = time.monotonic()
            raise SoftTimeLimitExceeded()

    @contextmanager
    def job_callable(self) -> Iterator[None]:
        """Around the call of a job's target: the only place a stop raises."""
        self._install()
        self.raised_at = None
        self.open = True
        try:
            yield
        finally:
            self.open = False

    def tell(self) -> bool:
        """Raise the stop in the job (from the renewer thread) unless it was
        raised already; False when it cannot be (not in its callable, or not
        a pool child)."""
        if not (self.active and self.open and self.raised_at is None):
            return False
        os.kill(os.getpid(), signal.SIGUSR1)
        return True

    def kill(self) -> None:
        """SIGKILL this pool child (never a worker's main process)."""
        if self.active:
            os.kill(os.getpid(), signal.SIGKILL)


GATE = StopGate()


def save_cancelled_output(run_id: int, output: str) -> bool:
    """Store a cancelled run's output (what its job logged until it
    stopped); False when the run is not cancelled."""
    return bool(Run.objects.filter(pk=run_id, status=RunStatus.CANCELLED).update(output=output))


class CancelWatch:
    """A run's LockKeeper.on_cancel: called by the renewer thread once the
    run's cancel marker was seen, then as often as it asks (it returns the
    seconds until its next call). `output` gives the run's output so far,
    `on_kill` counts its end before the process is killed."""

    what = "was cancelled"  # in the log's lines: "run 7 was cancelled and …"

    def __init__(
        self,
        run_id: int,
        job_id: int,
        *,
        output: Callable[[], str],
        on_kill: Callable[[], None],
        gate: StopGate = GATE,
    ) -> None:
        self.run_id, self.job_id = run_id, job_id
        self.output, self.on_kill, self.gate = output, on_kill, gate
        self.told_at: float | None = None  # time.monotonic() when the job was told to stop
        self.killed = False

    def save_output(self) -> None:
        save_cancelled_output(self.run_id, self.output())

    def __call__(self) -> float | None:
        extra = {"job_id": self.job_id, "run_id": self.run_id}
        now = time.monotonic()
        grace_s = settings.TAKT_CANCEL_GRACE_SECONDS
        if self.told_at is None:
            self.save_output()
            self.told_at = self.gate.raised_at
            if self.told_at is None:  # the broadcast did not reach it (or not yet)
                told = self.gate.tell()
                self.told_at = now
                if told:
                    log.info("run %s %s: told its job to stop", self.run_id, self.what, extra=extra)
                else:
                    log.warning(
                        "run %s %s, but this process cannot stop its job"
                        " (not a prefork pool child): it runs on until it returns",
                        self.run_id,
                        self.what,
                        extra=extra,
                    )
            else:
                log.info("run %s %s and was told to stop", self.run_id, self.what, extra=extra)
        left_s = self.told_at + grace_s - now
        if left_s > 0 or self.killed:
            return max(left_s, 0) or None
        if not self.gate.active:
            return None  # nothing to kill here; the run's end will be ignored
        self.killed = True
        self.save_output()
        log.warning(
            "run %s %s and still runs %s s after it was told to stop: killing its process %s",
            self.run_id,
            self.what,
            grace_s,
            os.getpid(),
            extra=extra,
        )
        self.on_kill()
        self.gate.kill()
        return None


class LostWatch(CancelWatch):
    """A run's LockKeeper.on_lost (F-113): its job lock is gone (the worker
    was paused longer than the TTL, or another owner holds the lock), so
    another run of the job may be under way. It stops the job as a cancel
    does: SIGUSR1 at once (the soft limit raised in the job's thread; a
    command job's process group is killed after TAKT_COMMAND_KILL_GRACE_SECONDS),
    SIGKILL of the pool child after TAKT_CANCEL_GRACE_SECONDS for a job that
    ignores it, `on_kill` recording its end first. The run is still
    `running` in the database: its end is recorded by the worker (`lost`,
    runs/execution.py) unless the beat's lost-run check did so first."""

    what = "lost its job lock"

    def save_output(self) -> None:
        return None  # the run's end records it
