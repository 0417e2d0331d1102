"""Detached command runs (F-02 `command`, `detached`; the manual's
"Programmstart (nicht modal)").

A detached run starts its program and gives its worker process back at
once: the program is followed by a daemon thread of the same pool process
(`DetachedRun`), which

* started the program itself (runs/commands.py start_command), so the
  supervisor's parent-death signal is tied to it: if the pool process dies
  or is recycled, the program is stopped and the run, whose job lock is no
  longer renewed, is recovered as `lost` like any run of a dead worker;
* gives back the run's group, exclusive and global-limit slots right
  after the start (other jobs of its group may run: "nicht modal"), while
  the job's own lock is kept, renewed, until the program really ends, so
  the job does not start again meanwhile (its overlap policy decides);
* sets the result code after the start (`result_code_at` = start: 0 on the
  run and in its result variable at once, so a dependant waiting for that
  value may start) or leaves it -1 until the exit (`exit`);
* copies the output live, applies the job's timeout itself (no Celery time
  limit is left to do it): stop kills the process group and ends the run
  `timed_out` (-1002), `continue` warns and writes -1003; and stops the
  program when the run is cancelled;
* records the end when the program exits: the status by its exit code
  (success codes), the result code by `result_code_at`, the retry, the
  lock's release, the next held run.

A worker's warm shutdown ends its pool processes once their tasks are
done; a detached program is not a task, so it is stopped with them and
its run recovered as lost (retried where the job says so).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any

from django.db import connection
from redis import RedisError

from jobs.core.command import ResultCodeAt
from jobs.policies import TimeoutAction
from jobs.variables import ResultCode
from runs.autosave import Autosave
from runs.clock import now as shared_now
from runs.commands import CommandNotStarted, exit_code, follow, spec_at_start, start_command
from runs.context import JobContext, JobFailed, context_for
from runs.decisions import Decision, record
from runs.locks import JobLock, LockKeeper
from runs.models import Run, RunStatus
from runs.outage import retry_through_outage
from runs.outcome import Outcome, count_end, ended_elsewhere, record_end
from runs.overlap import release_next_held
from runs.slots import leave_slots
from runs.stopping import save_cancelled_output
from runs.variables import write_result
from runs.waiting import release_waiting
from runs.watches import TimeoutWatch

log = logging.getLogger("takt.execution")

# Seconds the starting task waits for the program to be started (the
# supervisor's start-up, a slow file system).
START_WAIT_S = 60.0


class Stopped(Exception):
    """Raised in the follower to stop the program: its timeout or a cancel."""


def start_detached(run: Run, lock: JobLock, *, now: datetime) -> str:
    """Start a detached run's program in a follower thread and return once
    it runs (or could not start): the run's status then."""
    follower = DetachedRun(run, lock)
    thread = threading.Thread(target=follower.follow, name=f"takt-detached-{run.pk}", daemon=True)
    thread.start()
    if not follower.started.wait(START_WAIT_S):
        log.warning("run %s: its program has not started after %.0f s", run.pk, START_WAIT_S)
    if follower.not_started:
        thread.join()
        return RunStatus.FAILED
    return RunStatus.RUNNING


class DetachedRun:
    def __init__(self, run: Run, lock: JobLock) -> None:
        self.run, self.lock = run, lock
        self.ctx: JobContext = context_for(run)
        self.ctx.fencing_token = lock.fence  # F-113
        self.started = threading.Event()
        self.not_started = False
        self.cancelled = False
        self.began = time.monotonic()
        job = run.job
        self.stop_at_timeout = job.timeout_action != TimeoutAction.CONTINUE
        self.watch = None if self.stop_at_timeout else TimeoutWatch(run, self.ctx)
        self.keeper = LockKeeper(lock, on_tick=self._tick, on_cancel=self._cancel)

    def follow(self) -> None:
        """The follower thread: start, follow, record the end."""
        extra = {"job_id": self.run.job_id, "run_id": self.run.pk}
        try:
            outcome = self._run()
            self._end(outcome)
        except Exception:
            log.exception("following detached run %s failed", self.run.pk, extra=extra)
        finally:
            self.started.set()
            connection.close()  # this thread's own connection

    def _run(self) -> Outcome:
        job = self.run.job
        autosave = Autosave(self.run.pk, self.ctx)  # the output, live and throttled
        self.ctx.on_change = autosave.changed
        self.keeper.start()
        try:
            return self._started_and_followed(job)
        finally:
            autosave.close()

    def _started_and_followed(self, job: Any) -> Outcome:
        try:
            spec = spec_at_start(job)
            process = start_command(self.ctx, spec)
        except CommandNotStarted as exc:
            self.not_started = True
            return Outcome(RunStatus.FAILED, str(exc), code=ResultCode.COULD_NOT_START)
        self._started(at_start=job.result_code_at == ResultCodeAt.START)
        try:
            returncode = follow(process, self.ctx, check=self._check)
            exit_code(returncode, spec, self.ctx)
        except Stopped as stop:
            if self.cancelled:
                return Outcome(RunStatus.CANCELLED, str(stop))
            return Outcome(RunStatus.TIMED_OUT, str(stop), code=ResultCode.TIMED_OUT_KILLED)
        except JobFailed as exc:
            return self._with_code(Outcome(RunStatus.FAILED, str(exc)))
        return self._with_code(Outcome(RunStatus.SUCCEEDED, result=returncode))

    def _with_code(self, outcome: Outcome) -> Outcome:
        """The exit code as the run's result code (after the exit), or the 0
        it was given at the start; a warning of `continue` in the message."""
        at_start = self.run.job.result_code_at == ResultCodeAt.START
        outcome.code = 0 if at_start else self.ctx.result_code
        if self.watch is not None and self.watch.warned:
            outcome.message = "; ".join(m for m in (self.watch.warning, outcome.message) if m)
        return outcome

    def _started(self, *, at_start: bool) -> None:
        """The program runs: its slots go back, its result code is taken if
        the job says so, and the starting task may return."""
        now = shared_now()
        run = self.run
        if self.lock.members:
            try:
                leave_slots(self.lock)
                release_waiting(now=now)
            except RedisError:  # the slots lapse with their TTL; the beat sends the waiting
                log.exception("could not give back the slots of detached run %s", run.pk)
        if at_start:
            Run.objects.filter(pk=run.pk).update(result_code=0)
            if run.job.result_variable_id is not None:
                write_result(run, 0, now=now)
        record([Decision("detached", run.job_id, run.pk, detail="its program runs detached")])
        self.started.set()

    def _check(self) -> None:
        """Between reads of the output: the cancel, then the timeout."""
        if self.cancelled:
            raise Stopped("cancelled")
        limit = self.run.job.timeout_s
        if self.stop_at_timeout and time.monotonic() - self.began >= limit:
            raise Stopped(f"timed out after {limit} s and was stopped")

    def _tick(self) -> None:  # the renewer thread, every third of the lock's TTL
        if self.watch is not None:
            self.watch.check()
        if self.ctx.on_change is not None:
            self.ctx.on_change()  # wakes the saver: this thread never waits on the database

    def _cancel(self) -> float | None:
        """The renewer saw the run's cancel marker: stop the program."""
        if not self.cancelled:
            self.cancelled = True
            save_cancelled_output(self.run.pk, self.ctx.output())
        return None

    def _end(self, outcome: Outcome) -> None:
        run = self.run
        outcome.output = self.ctx.output()
        ended_at = shared_now()
        counted = outcome.status
        try:
            recorded = retry_through_outage(
                lambda: record_end(run, outcome, ended_at),
                what=f"recording the end of detached run {run.pk}",
            )
            if not recorded:
                counted = ended_elsewhere(run, outcome, ended_at)
        finally:
            self.keeper.stop()
            count_end(run, self.lock, counted)
        release_next_held(run.job_id)
        log.info("detached run %s ended %s", run.pk, counted, extra=_extra(run))


def _extra(run: Run) -> dict[str, Any]:
    return {"job_id": run.job_id, "run_id": run.pk}
