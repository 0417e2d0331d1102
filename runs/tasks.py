"""The one Celery task Takt needs: take a run id, execute it."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import close_old_connections

from .execution import execute


@shared_task(name="takt.execute_run", bind=True, ignore_result=True, acks_late=True)
def execute_run(self: Any, run_id: int) -> None:
    close_old_connections()  # drop a connection that broke or aged out (CONN_MAX_AGE)
    try:
        execute(run_id, worker=self.request.hostname or "unknown")
    finally:
        close_old_connections()
