"""The built-in jobs' targets: "Takt maintenance" (created enabled, hourly
at minute 7 UTC, by jobs/migrations/0007_builtin_maintenance_job.py) and
"Takt operations" (disabled, no trigger, jobs/migrations/0010); and the
system functions an operator's jobs run (F-29): maintenance mode on and
off, pausing and resuming the queue, and the parent's no-op target.

The maintenance allow-list (allowed_during_maintenance=True): maintenance
off (it must run to end a maintenance window), pause and resume the queue.
Not on it: maintenance on (nothing to do while it is on), the operations
job, and the hourly maintenance job: its cleanup deletes runs in batches
and its checks write alerts, exactly the writes a maintenance window
(a backup, a database upgrade) keeps out. Its fire times during
maintenance are recorded as refused, and it runs again at its first hour
after maintenance; lost runs are recovered meanwhile by every beat's own
check, which is not a job."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from jobs.policies import PARENT_TARGET
from jobs.registry import takt_job
from runs import (
    lock_files,
    remote,  # noqa: F401  (registers takt.remote_run)
)
from runs.maintenance import run_maintenance
from runs.queue import pause_queue, remove_lock_files, resume_queue, set_maintenance


@takt_job("takt.maintenance")
def maintenance(job: Any) -> dict[str, Any]:
    """F-70..F-73: one maintenance pass (runs.maintenance), all sections or
    those its params' "only" names. Reports its progress per section and
    cleanup batch (F-93), logs a line per section and its findings; fails
    the run when a section failed."""

    return _maintenance(job, only=job.params.get("only"))


@takt_job("takt.cleanup")
def cleanup(job: Any) -> dict[str, Any]:
    """F-02 `system`: the maintenance pass's cleanup alone: finished runs
    older than TAKT_RETENTION_DAYS are deleted in batches, each announced
    by an audit row."""
    return _maintenance(job, only=["cleanup"])


def _maintenance(job: Any, *, only: list[str] | None) -> dict[str, Any]:
    report = run_maintenance(
        now=timezone.now(),
        only=only,
        by=f"job '{job.name}' (run #{job.run_id})",
        progress=job.progress,
    )
    for line in report.lines():
        job.log(line)
    failed = [s.failure for s in report.sections if s.failure is not None]
    if failed:
        job.fail("; ".join(f"{f.title}: {f.detail}" for f in failed))
    return report.counts()


@takt_job("takt.operation")
def operation(job: Any) -> dict[str, Any]:
    """F-93: the target of the built-in "Takt operations" job (made by
    jobs/migrations/0010): the long operation its params name, a backfill,
    a bulk run or an import (runs/operations.py, runs/operation_kinds.py)."""
    # Imported here: an import of jobs loads the serializers (~20 MB), which
    # a worker then carries only once it runs an operation.
    from runs.operation_kinds import perform

    return perform(job)


@takt_job("takt.maintenance_on")
def maintenance_on(job: Any) -> bool:
    """Switch maintenance mode on (F-29), with params {"note": "..."}; from
    then on only jobs on the allow-list start. Returns whether it changed."""
    note = str(job.params.get("note") or f"by job '{job.name}' (run #{job.run_id})")
    changed = set_maintenance(True, note=note, now=timezone.now())
    job.log("maintenance mode on" if changed else "maintenance mode was on already")
    return changed


@takt_job("takt.maintenance_off", allowed_during_maintenance=True)
def maintenance_off(job: Any) -> bool:
    """Switch maintenance mode off and delete every lock file of
    TAKT_MAINTENANCE_LOCK_FILE: on this worker's machine at once, and on
    each beat's machine at that beat's next tick (runs.lock_files).
    Allowed during maintenance: it ends it. Returns whether anything
    changed."""
    # The files first: switching off writes the workers' copy at once, and
    # with a file still there that copy would say "on" until the beat's
    # next tick.
    removed = remove_lock_files()
    changed = set_maintenance(False, now=timezone.now())
    job.log("maintenance mode off" if changed else "maintenance mode was off already")
    for path in removed:
        job.log(f"removed the lock file {path}")
    if lock_files.configured():
        job.log("asked every beat to remove the lock files it sees")
    return changed or bool(removed)


@takt_job("takt.remove_lock_file", allowed_during_maintenance=True)
def remove_lock_file(job: Any) -> list[str]:
    """Delete one lock file of TAKT_MAINTENANCE_LOCK_FILE (params
    {"path": "..."}; without it, all), wherever a beat sees it (F-29).
    Maintenance by that file ends when no live beat sees it any more.
    Returns the paths deleted on this worker's machine."""
    path = job.params.get("path")
    if path is not None and str(path) not in lock_files.configured():
        raise ValueError(
            f"path: {path!r} is not one of TAKT_MAINTENANCE_LOCK_FILE's files"
            f" ({', '.join(lock_files.configured()) or 'none configured'})"
        )
    removed = remove_lock_files(None if path is None else [str(path)])
    for each in removed:
        job.log(f"removed the lock file {each}")
    job.log("asked every beat to remove it where it sees it")
    return removed


@takt_job("takt.pause_queue", allowed_during_maintenance=True)
def pause_queue_job(job: Any) -> bool:
    """Pause the queue (F-28), with params {"note": "..."}. Returns whether
    it changed."""
    note = str(job.params.get("note") or "")
    changed = pause_queue(note=note, by=f"job '{job.name}'", now=timezone.now())
    job.log("queue paused" if changed else "the queue was paused already")
    return changed


@takt_job("takt.resume_queue", allowed_during_maintenance=True)
def resume_queue_job(job: Any) -> bool:
    """Resume the queue; due fire times are caught up once. Allowed while
    the queue is paused, as every allow-listed function is."""
    changed = resume_queue(now=timezone.now())
    job.log("queue resumed" if changed else "the queue was not paused")
    return changed


@takt_job(PARENT_TARGET)
def children(job: Any) -> None:
    """The target of a parent job (F-04): a parent's run runs its children,
    not its target; this one does nothing (it is never called for a job
    with children)."""
    job.log("this job has no children to run")
