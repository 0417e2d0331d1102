"""A run's live view (F-93): the JSON the run's page polls about once a
second while the run is queued or running (takt/run_live.js, the snippet
admin/takt_runs/run/live_panel.html).

``GET <admin>/runs/run/<id>/live/`` (staff with ``takt_runs.view_run``)::

    {"id": 7, "job": {"id": 2, "name": "Takt operations"},
     "status": "running", "active": true, "message": "",
     "progress": {"done": 40, "total": 100, "percent": 40.0, "note": "…"},
     "output": "…the last LIVE_OUTPUT_CHARS…", "output_truncated": false,
     "enqueued_at": "…Z", "started_at": "…Z", "finished_at": null,
     "duration_s": 12.5, "notice": "",
     "html": {"status": "<span class='takt-badge …'>", "started_at": "<time …>",
              "finished_at": "—", "duration": "12.5 s"}}

`progress` is null before the job reports any; `percent` is null without
a total. `duration_s` is the time so far while the run runs. `notice`
says why a queued run waits: "waiting for a worker: none is running" when
no worker's process heartbeat (heartbeats.processes) is within its
deadline. The `html` values are those of jobs.admin.display, so the page shows
times, durations and badges as every Takt page does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from heartbeats.models import Heartbeat
from heartbeats.processes import PROCESS_DEADLINE_S
from jobs.admin import display
from runs.admin.badges import status_badge
from runs.models import ACTIVE_STATUSES, Run, RunStatus
from runs.progress import progress_from_json

LIVE_OUTPUT_CHARS = 32_000
# In the reader's language (the page's request): str() them when sent.
NO_WORKER = _("waiting for a worker: none is running")
WAITING = _("waiting for a free worker")
HELD = _("waiting for the job's running run to end")


def workers_alive(*, now: datetime) -> bool:
    """Whether any worker reported its process heartbeat within the deadline."""
    # This view is glue, like the beat: it may read the heartbeats app,
    # which the runs core never imports (heartbeats → runs → jobs).

    return Heartbeat.objects.filter(
        job__isnull=True,
        name__startswith="worker:",
        last_run_at__gte=now - timedelta(seconds=PROCESS_DEADLINE_S),
    ).exists()


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def output_tail(output: str, limit: int = LIVE_OUTPUT_CHARS) -> tuple[str, bool]:
    """The last `limit` characters of `output`, from a line's start; and
    whether anything was cut."""
    if len(output) <= limit:
        return output, False
    tail = output[-limit:]
    newline = tail.find("\n")
    return (tail[newline + 1 :] if 0 <= newline < len(tail) - 1 else tail), True


def live_data(run: Run, *, now: datetime) -> dict[str, Any]:
    """The live view of `run` at `now` (see the module docstring)."""
    active = run.status in ACTIVE_STATUSES
    progress = progress_from_json(run.progress)
    if run.duration_s is not None:
        duration_s: float | None = run.duration_s
    elif run.started_at is not None and active:
        duration_s = max((now - run.started_at).total_seconds(), 0.0)
    else:
        duration_s = None
    notice = ""
    if run.status == RunStatus.QUEUED:
        notice = str(HELD if run.held else (WAITING if workers_alive(now=now) else NO_WORKER))
    output, truncated = output_tail(run.output or "")
    return {
        "id": run.pk,
        "job": {"id": run.job_id, "name": run.job.name},
        "status": run.status,
        "active": active,
        "message": run.message,
        "progress": None
        if progress is None
        else {**progress.as_json(), "percent": progress.percent},
        "output": output,
        "output_truncated": truncated,
        "enqueued_at": _iso(run.enqueued_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration_s": duration_s,
        "notice": notice,
        "html": {
            "status": status_badge(run.status),
            "started_at": display.time_html(run.started_at),
            "finished_at": display.time_html(run.finished_at),
            "duration": display.run_duration_text(run.status, duration_s),
        },
    }


def live_view(request: HttpRequest, run_id: int) -> JsonResponse:
    """The JSON of one run; 403 without ``takt_runs.view_run``, 404 for an unknown run."""
    if not request.user.has_perm("takt_runs.view_run"):
        detail = gettext("you may not view runs (takt_runs.view_run)")
        return JsonResponse({"detail": detail}, status=403)
    run = get_object_or_404(Run.objects.select_related("job"), pk=run_id)
    return JsonResponse(live_data(run, now=timezone.now()))  # admin_view: never cached


def live_urls(admin_site: AdminSite) -> list[URLPattern]:
    """The URL patterns for RunAdmin.get_urls: ``<id>/live/``, named
    ``admin:takt_runs_run_live``, behind the admin's staff login."""
    return [path("<int:run_id>/live/", admin_site.admin_view(live_view), name="takt_runs_run_live")]
