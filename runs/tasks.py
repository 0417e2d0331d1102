"""The one Celery task Takt needs: take a run id, execute it."""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task
from django.db import close_old_connections, connection

from .execution import execute

# A database connection used by a run that ended less than this long ago,
# without an error, is used again as it is. Otherwise Django checks it first
# (CONN_HEALTH_CHECKS: a round trip), and drops it when broken or older than
# CONN_MAX_AGE. Back-to-back runs so save one round trip each.
FRESH_S = 1.0
_last_end = float("-inf")


@shared_task(name="takt.execute_run", bind=True, ignore_result=True, acks_late=True)
def execute_run(self: Any, run_id: int) -> None:
    global _last_end
    now = time.monotonic()
    aged = connection.close_at is not None and now >= connection.close_at
    if now - _last_end > FRESH_S or connection.errors_occurred or aged:
        close_old_connections()
    try:
        execute(run_id, worker=self.request.hostname or "unknown")
    finally:
        _last_end = time.monotonic()
