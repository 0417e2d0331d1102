"""The one Celery task Takt needs: take a run id, execute it."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from scheduler_project.connections import ConnectionReuse

from .execution import execute

# A run that follows another within a second reuses its connection as it is
# (scheduler_project/connections.py): back-to-back runs save a round trip each.
_connection = ConnectionReuse(fresh_s=1.0)


@shared_task(name="takt.execute_run", bind=True, ignore_result=True, acks_late=True)
def execute_run(self: Any, run_id: int) -> None:
    with _connection.use():
        execute(run_id, worker=self.request.hostname or "unknown")
