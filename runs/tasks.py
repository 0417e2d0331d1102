"""The one Celery task Takt needs: take a run id, execute it."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from scheduler_project.connections import ConnectionReuse

from .execution import execute
from .outage import MAX_BACKOFF_S, OutageTooLong

log = logging.getLogger("takt.execution")

# A run that follows another within a second reuses its connection as it is
# (scheduler_project/connections.py): back-to-back runs save a round trip each.
_connection = ConnectionReuse(fresh_s=1.0)


@shared_task(name="takt.execute_run", bind=True, ignore_result=True, acks_late=True)
def execute_run(self: Any, run_id: int) -> None:
    try:
        with _connection.use():
            execute(
                run_id, worker=self.request.hostname or "unknown", claim_wait_s=claim_wait_s(self)
            )
    except OutageTooLong as exc:
        # Nothing was done: the run is still queued. Send it again rather
        # than hold a pool process any longer (a second delivery executes once).
        log.warning("%s; sending run %s again", exc, run_id, extra={"run_id": run_id})
        raise self.retry(countdown=MAX_BACKOFF_S, max_retries=None) from exc


def claim_wait_s(task: Any) -> float:
    """How long a claim waits for the database: TAKT_DB_OUTAGE_MAX_SECONDS,
    at most half the run's time limit (so a run claimed late still has its
    time to run, and the hard limit never strikes while it waits)."""
    wait = float(settings.TAKT_DB_OUTAGE_MAX_SECONDS)
    hard, soft = tuple(getattr(task.request, "timelimit", None) or (None, None))[:2]
    limit = soft or hard
    return min(wait, float(limit) / 2) if limit else wait
