"""The one Celery task Takt needs: take a run id, execute it."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .execution import execute


@shared_task(name="takt.execute_run", bind=True, ignore_result=True, acks_late=True)
def execute_run(self: Any, run_id: int) -> None:
    execute(run_id, worker=self.request.hostname or "unknown")
