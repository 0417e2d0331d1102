"""The built-in jobs' targets: "Takt maintenance" (created enabled, hourly
at minute 7 UTC, by jobs/migrations/0007_builtin_maintenance_job.py) and
"Takt operations" (disabled, no trigger, jobs/migrations/0010)."""

from __future__ import annotations

from typing import Any

from jobs.registry import takt_job
from runs import remote  # noqa: F401  (registers takt.remote_run)
from runs.maintenance import run_maintenance


@takt_job("takt.maintenance")
def maintenance(job: Any) -> dict[str, Any]:
    """F-70..F-73: one maintenance pass (runs.maintenance). Reports its
    progress per section and cleanup batch (F-93), logs a line per section
    and its findings; fails the run when a section failed."""
    from django.utils import timezone

    report = run_maintenance(
        now=timezone.now(), by=f"job '{job.name}' (run #{job.run_id})", progress=job.progress
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
