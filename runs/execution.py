"""Executing one run on a worker (F-03, F-23 at start, F-26, F-82).

`execute`:

1. Claims the run: queued → running by compare-and-set (on PostgreSQL in
   one statement that also loads the run, where the job has no triggers
   anchored on its runs). A second delivery of the same message loses here
   and does nothing at all.
2. Takes the job's Redis lock. If another run holds it, the run ends
   `skipped` (overlap policy `skip`).
3. Starts a keeper thread that renews the lock and saves the output so far.
4. Calls the job's target with its context. `job.fail()` and exceptions end
   it `failed`; Celery's soft time limit (the job's timeout) ends it
   `timed_out`.
5. Records the end by compare-and-set, then releases the lock by token, so
   the next run cannot start before this one is recorded as finished.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from jobs.registry import UnknownTarget, resolve

from .context import JobContext, JobFailed
from .locks import LockKeeper, job_lock
from .models import Run, RunStatus
from .services import finish_run, save_output, start_run
from .statements import load_run, start_plain_run

log = logging.getLogger("takt.execution")

RESULT_OK = 0
RESULT_FAILED = 1
RESULT_TIMED_OUT = -1002  # F-32: "timed out, killed"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def execute(
    run_id: int, *, worker: str, clock: Callable[[], datetime] = timezone.now
) -> str | None:
    """Run `run_id` if it is still queued (see the module docstring).
    Returns the final status, or None when this delivery did nothing."""
    started_at = clock()
    run = start_plain_run(run_id, worker=worker, now=started_at)  # one statement, if it applies
    if run is None:
        run = load_run(run_id)
        if run is None:
            log.warning(
                "run %s does not exist (deleted before it started)",
                run_id,
                extra={"run_id": run_id},
            )
            return None
        extra = {"job_id": run.job_id, "run_id": run.pk}
        if run.status != RunStatus.QUEUED:
            log.info("run %s is %s: duplicate delivery ignored", run.pk, run.status, extra=extra)
            return None
        if not start_run(run, worker=worker, now=started_at):
            log.info("run %s was taken by another delivery", run.pk, extra=extra)
            return None

    lock = job_lock(run.job_id)
    if not lock.acquire():
        finish_run(
            run,
            status=RunStatus.SKIPPED,
            now=clock(),
            message=f"skipped: job #{run.job_id} is locked by another run (overlap policy 'skip')",
        )
        return RunStatus.SKIPPED
    try:
        status, message, result, output = _call_target(run, lock)
        finish_run(
            run,
            status=status,
            now=clock(),
            message=message,
            output=output,
            result=result,
            result_code={RunStatus.SUCCEEDED: RESULT_OK, RunStatus.TIMED_OUT: RESULT_TIMED_OUT}.get(
                status, RESULT_FAILED
            ),
        )
    finally:
        lock.release()
    return status


def _call_target(run: Run, lock: Any) -> tuple[str, str, Any, str]:
    job = run.job
    ctx = JobContext(
        name=job.name,
        description=job.description,
        trigger=run.trigger,
        params=dict(run.params or {}),
        run_id=run.pk,
        job_id=job.pk,
        output_limit=settings.TAKT_OUTPUT_LIMIT_BYTES,
    )
    keeper = LockKeeper(lock, on_tick=lambda: save_output(run.pk, ctx.output()))
    keeper.start()
    status, message, result = RunStatus.SUCCEEDED, "", None
    try:
        func, takes_context = resolve(job.target)
        value = func(ctx) if takes_context else func(**ctx.params)
        result = _jsonable(value)
    except SoftTimeLimitExceeded:
        status, message = RunStatus.TIMED_OUT, f"timed out after {job.timeout_s} s and was stopped"
    except JobFailed as exc:
        status, message = RunStatus.FAILED, str(exc)
    except UnknownTarget as exc:
        status, message = RunStatus.FAILED, str(exc)
    except Exception as exc:
        status, message = RunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        ctx.log(traceback.format_exc().rstrip())
    finally:
        keeper.stop()
    return status, message, result, ctx.output()
