"""The one Celery task Takt needs: take a run id, execute it."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from runs.execution import execute
from runs.models import EXECUTE_RUN_TASK
from runs.outage import MAX_BACKOFF_S, OutageTooLong
from scheduler_project.connections import ConnectionReuse
from scheduler_project.logconfig import log_context

log = logging.getLogger("takt.execution")

# A run that follows another within a second reuses its connection as it is
# (scheduler_project/connections.py): back-to-back runs save a round trip each.
_connection = ConnectionReuse(fresh_s=1.0)


@shared_task(name=EXECUTE_RUN_TASK, bind=True, ignore_result=True, acks_late=True)
def execute_run(self: Any, run_id: int) -> None:
    worker = self.request.hostname or "unknown"
    try:
        with _connection.use(), log_context(run_id=run_id, worker=worker):
            execute(run_id, worker=worker, claim_wait_s=claim_wait_s(self))
    except OutageTooLong as exc:
        # Nothing was done: the run is still queued. Send it again rather
        # than hold a pool process any longer (a second delivery executes once).
        log.warning("%s; sending run %s again", exc, run_id, extra={"run_id": run_id})
        raise self.retry(countdown=MAX_BACKOFF_S, max_retries=None) from exc


def claim_wait_s(task: Any) -> float:
    """How long this delivery's claim waits for the database
    (`compute_claim_wait_s` of TAKT_DB_OUTAGE_MAX_SECONDS and the message's
    time limits)."""
    hard, soft = tuple(getattr(task.request, "timelimit", None) or (None, None))[:2]
    return compute_claim_wait_s(settings.TAKT_DB_OUTAGE_MAX_SECONDS, hard_s=hard, soft_s=soft)


def compute_claim_wait_s(max_s: float, *, hard_s: float | None, soft_s: float | None) -> float:
    """`max_s`, at most half the run's time limit (the soft one, else the
    hard one; None: no limit): a run claimed late still has its time to
    run, and the hard limit never strikes while the claim waits."""
    limit = soft_s or hard_s
    return min(float(max_s), float(limit) / 2) if limit else float(max_s)
