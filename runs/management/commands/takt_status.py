"""F-74: `manage.py takt_status` — the queue at a glance (the fields of the
API's GET /queue, F-41)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db.models import Count, Min
from django.utils import timezone

from jobs.models import QueueState, Trigger
from runs.models import Run, RunStatus


def queue_status() -> dict[str, Any]:
    state = QueueState.objects.filter(pk=1).first()
    counts = dict(
        Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
        .values_list("status")
        .annotate(n=Count("id"))
    )
    nxt = Trigger.objects.filter(active=True).aggregate(m=Min("next_run_at"))["m"]
    return {
        "next_scheduled": nxt.isoformat() if nxt else None,
        "scheduler_enabled": bool(settings.TAKT_SCHEDULER_ENABLED),
        "paused": bool(state and state.paused),
        "pause_note": state.pause_note if state and state.paused else "",
        "active_count": counts.get(RunStatus.RUNNING, 0),
        "queued_count": counts.get(RunStatus.QUEUED, 0),
        "now": timezone.now().isoformat(),
    }


class Command(BaseCommand):
    help = "Print the queue's state: paused, scheduler switch, running and queued runs, next fire time."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        status = queue_status()
        if options["json"]:
            self.stdout.write(json.dumps(status))
            return
        width = max(len(k) for k in status)
        for key, value in status.items():
            self.stdout.write(f"{key.ljust(width)}  {value if value not in (None, '') else '-'}")
