"""F-28 / F-74: resume the queue; due times are caught up once."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from jobs.audit import AuditedCommand
from runs.connectivity import require_redis
from runs.queue import resume_queue


class Command(AuditedCommand):
    help = "Resume the queue: each due trigger is caught up once, held runs are sent again."

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        changed = resume_queue(now=timezone.now())
        self.stdout.write("queue resumed" if changed else "queue was not paused")
