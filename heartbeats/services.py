"""Writes to heartbeats. A heartbeat that cannot be written never fails the
run it reports (F-60)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from runs.models import Run, RunStatus

from .models import Heartbeat

log = logging.getLogger("takt.heartbeats")

REPORTED_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)


def record_run_heartbeat(run: Run) -> bool:
    """Fold a finished run into its job's heartbeat (created by the first
    report). Skipped and cancelled runs are not reports. Returns whether a
    heartbeat was written; never raises."""
    if run.status not in REPORTED_STATUSES:
        return False
    failed = run.status != RunStatus.SUCCEEDED
    changes = {
        "name": run.job.name,
        "last_run_at": run.finished_at,
        "last_status": run.status,
        "last_result": (run.message or str(run.result or ""))[:2000],
        "last_run_id": run.pk,
        "deadline_s": run.job.heartbeat_deadline_s,
        "run_count": F("run_count") + 1,
        "failure_count": F("failure_count") + (1 if failed else 0),
    }
    if not failed:
        changes["last_success_at"] = run.finished_at
    try:
        if Heartbeat.objects.filter(job_id=run.job_id).update(**changes):
            return True
        try:
            with transaction.atomic():  # the first report creates the row
                Heartbeat.objects.create(
                    job_id=run.job_id,
                    **{k: v for k, v in changes.items() if k not in ("run_count", "failure_count")},
                    run_count=1,
                    failure_count=1 if failed else 0,
                )
        except IntegrityError:  # another worker's first report was quicker
            Heartbeat.objects.filter(job_id=run.job_id).update(**changes)
        return True
    except Exception:
        log.exception("writing the heartbeat of run %s failed", run.pk)
    return False


def on_run_finished(sender: Any, run: Run, **kwargs: Any) -> None:
    """Receiver of runs.signals.run_finished."""
    record_run_heartbeat(run)
