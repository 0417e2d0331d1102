"""The Timeline (F-94) and Load forecast (F-95) pages of the admin, and the
JSON views their charts draw from (takt/timeline.js, takt/forecast.js).

Both pages need a staff user with ``jobs.view_job``; the timeline shows
runs only to those who also have ``runs.view_run``. Times go out as UTC
ISO 8601 and are shown in the browser's zone; the forecast is binned by
the zone the page sends (``tz``, the browser's).

Reads are bounded: the timeline reads at most RUN_CAP runs (the newest in
the range) and TRIGGER_CAP triggers, and says when a cap cut something;
the forecast reads the active triggers in chunks of TRIGGER_CHUNK.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Max, prefetch_related_objects
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from runs.models import Run, RunStatus

from . import display, services
from .forecast import MAX_DAYS, LoadTrigger, compute_forecast
from .models import Job, Trigger
from .policies import TimeoutAction
from .triggers import TriggerError, iter_fire_times

log = logging.getLogger("takt.jobs")

RUN_CAP = 5000  # runs per timeline request, the newest in the range
TRIGGER_CAP = 2000  # triggers whose upcoming fire times one request reads
TICK_CAP = 5000  # upcoming fire times per request
TICKS_PER_TRIGGER = 500
TRIGGER_CHUNK = 2000  # triggers per query for the forecast
MIN_RANGE = timedelta(minutes=1)
MAX_RANGE = timedelta(days=7)
DEFAULT_PAST, DEFAULT_FUTURE = timedelta(hours=20), timedelta(hours=4)
# The fields services.trigger_spec reads; has_exclusions last.
SPEC_FIELDS = (
    *services.SCHEDULE_FIELDS,
    "has_exclusions",
)
# A run stopped at its timeout is killed 30 s later: runs that began longer
# ago than the longest timeout and this have ended (or are still running).
KILL_GRACE = timedelta(seconds=60)
_US = timedelta(microseconds=1)


class BadInput(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _moment(request: HttpRequest, name: str, default: datetime) -> datetime:
    text = request.GET.get(name, "").strip()
    if not text:
        return default
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(name, f"{text!r} is not an ISO 8601 date and time") from None
    if value.utcoffset() is None:
        raise BadInput(name, "needs a time zone, e.g. 2026-12-01T09:00:00Z")
    return value.astimezone(UTC)


def _job(request: HttpRequest) -> Job | None:
    text = request.GET.get("job", "").strip()
    if not text:
        return None
    job = Job.objects.filter(pk=int(text)).first() if text.isdigit() else None
    if job is None:
        raise BadInput("job", f"no job with id {text!r}")
    return job


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied


# --- the timeline's data ------------------------------------------------------


def _run_item(run: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A run as a bar (it started: to its end, or to now while it runs) or
    as a point (queued at its due time; skipped or ended unstarted when
    recorded)."""
    started, finished = run["started_at"], run["finished_at"]
    item = {
        "id": run["id"],
        "job": run["job_id"],
        "status": run["status"],
        "trigger": run["trigger"],
    }
    if started is None:
        at = run["scheduled_for"] if run["status"] == RunStatus.QUEUED else finished
        return {**item, "at": _iso(at or run["enqueued_at"])}
    end = finished or (now if run["status"] == RunStatus.RUNNING else started)
    text = display.duration_text(end - started)
    running = finished is None and run["status"] == RunStatus.RUNNING
    return {**item, "start": _iso(started), "end": _iso(end), "running": running, "duration": text}


def _runs(start: datetime, end: datetime, now: datetime, job: Job | None) -> tuple[list[Any], bool]:
    """The runs that overlap [start, end), newest first, at most RUN_CAP
    (and whether the cap cut some). Three queries, on the (job,
    enqueued_at) and (job, status) indexes when `job` is given."""
    scope = Run.objects.filter(job=job) if job else Run.objects.all()
    longest = job.timeout_s if job else Job.objects.aggregate(t=Max("timeout_s"))["t"] or 0
    since = start - timedelta(seconds=longest) - KILL_GRACE
    fields = ("id", "job_id", "status", "trigger", "scheduled_for", "enqueued_at")
    fields += ("started_at", "finished_at")
    recent = (
        scope.filter(enqueued_at__gte=since, enqueued_at__lt=end)
        .exclude(finished_at__lt=start)
        .order_by("-enqueued_at", "-id")
        .values(*fields)[: RUN_CAP + 1]
    )
    rows = list(recent)
    # Runs still going that began before `since`: only a job whose timeout
    # action is "continue" has them (a stuck run is recovered as lost). On
    # the (job, status) index.
    if job is None:
        scope = Run.objects.filter(
            job__in=Job.objects.filter(timeout_action=TimeoutAction.CONTINUE)
        )
    seen = {row["id"] for row in rows}
    older = scope.filter(status=RunStatus.RUNNING).order_by("-enqueued_at").values(*fields)
    rows += [row for row in older[:RUN_CAP] if row["id"] not in seen]
    return [_run_item(r, now) for r in rows[:RUN_CAP]], len(rows) > RUN_CAP


def _with_calendars(triggers: list[Trigger]) -> list[Trigger]:
    """`triggers`, those with excluded calendars holding them (one query)."""
    prefetch_related_objects([t for t in triggers if t.has_exclusions], "exclude_calendars")
    return triggers


def _ticks(
    start: datetime, end: datetime, now: datetime, job: Job | None
) -> tuple[list[Any], bool]:
    """Fire times in [start, end) of the active triggers: each one's
    next_run_at (`overdue` when past: due, not fired yet) and those after it
    and after now; and whether a cap cut some. At most TICK_CAP, shared
    by the TRIGGER_CAP triggers due first (at most TICKS_PER_TRIGGER and
    at least one each)."""
    triggers = Trigger.objects.filter(active=True, next_run_at__lt=end)
    if job:
        triggers = triggers.filter(job=job)
    chosen = list(triggers.order_by("next_run_at", "id")[: TRIGGER_CAP + 1])
    cut = len(chosen) > TRIGGER_CAP
    chosen = _with_calendars(chosen[:TRIGGER_CAP])
    # Share the cap: many triggers get a few fire times each, few get many.
    each = min(TICKS_PER_TRIGGER, max(1, TICK_CAP // max(len(chosen), 1)))
    ticks: list[Any] = []
    for trigger in chosen:
        first = trigger.next_run_at
        assert first is not None
        # A past next_run_at is due and shown; the fire times after it that
        # are past too are the missed-run policy's, so ticks go on from now.
        after = max(first, start - _US, now - _US)
        try:
            later = iter_fire_times(services.trigger_spec(trigger, now=now), after=after)
        except (TriggerError, ValueError, ValidationError):
            later = iter([])  # shown as its next run only
        times = itertools.chain([first] if first >= start else [], later)
        mine = list(itertools.islice(itertools.takewhile(lambda t: t < end, times), each + 1))
        cut |= len(mine) > each
        for at in mine[:each]:
            ticks.append(
                {"job": trigger.job_id, "trigger": trigger.pk, "at": _iso(at), "overdue": at < now}
            )
    return ticks, cut


def timeline_payload(
    *, start: datetime, end: datetime, now: datetime, job: Job | None, with_runs: bool
) -> dict[str, Any]:
    """The timeline's JSON: one row per job with runs or fire times in
    [start, end) (or the one `job`), its runs and upcoming fire times."""
    if end - start < MIN_RANGE:
        raise BadInput("end", "must be at least a minute after start")
    if end - start > MAX_RANGE:
        raise BadInput("end", "must be at most 7 days after start")
    runs, runs_cut = _runs(start, end, now, job) if with_runs else ([], False)
    ticks, ticks_cut = _ticks(start, end, now, job)
    ids = {r["job"] for r in runs} | {t["job"] for t in ticks} | ({job.pk} if job else set())
    rows = Job.objects.filter(pk__in=ids).order_by("name", "id").values_list("id", "name")
    change = reverse("admin:jobs_job_change", args=[0]).replace("/0/", "/{id}/")
    return {
        "start": _iso(start),
        "end": _iso(end),
        "now": _iso(now),
        "rows": [{"id": pk, "name": name, "url": change.format(id=pk)} for pk, name in rows],
        "runs": runs,
        "runs_shown": with_runs,
        "runs_truncated": runs_cut,
        "run_cap": RUN_CAP,
        "run_url": reverse("admin:runs_run_change", args=[0]).replace("/0/", "/{id}/"),
        "ticks": ticks,
        "ticks_truncated": ticks_cut,
        "tick_cap": TICK_CAP,
    }


# --- the forecast's data ------------------------------------------------------


def _active_triggers(now: datetime, unreadable: list[tuple[int, str]]) -> Iterator[LoadTrigger]:
    """The active triggers as the pure core reads them, in id order,
    TRIGGER_CHUNK per query as plain rows (and those with holiday calendars
    once more, with their calendars). Rows with the same schedule share one
    spec. A trigger whose fields make no spec goes to `unreadable` with the
    reason."""
    specs: dict[tuple[Any, ...], Any] = {}
    after = 0
    while True:
        rows = list(
            Trigger.objects.filter(active=True, pk__gt=after)
            .order_by("pk")
            .values_list("pk", "next_run_at", "job__name", *SPEC_FIELDS)[:TRIGGER_CHUNK]
        )
        calendared = {row[0] for row in rows if row[-1]}  # has_exclusions
        full = {t.pk: t for t in _with_calendars(list(Trigger.objects.filter(pk__in=calendared)))}
        for pk, next_at, job_name, *fields in rows:
            key = tuple(fields)
            if pk in full or key not in specs:
                trigger = full.get(pk) or Trigger(
                    pk=pk, **dict(zip(SPEC_FIELDS, fields, strict=True))
                )
                try:
                    spec: Any = services.trigger_spec(trigger, now=now)
                except (ValueError, ValidationError) as exc:
                    spec = "; ".join(getattr(exc, "messages", [str(exc)]))
                if pk not in full:
                    specs[key] = spec
            else:
                spec = specs[key]
            if isinstance(spec, str):
                unreadable.append((pk, spec))
            else:
                yield LoadTrigger(pk, spec, next_at, job_name)
        if len(rows) < TRIGGER_CHUNK:
            return
        after = rows[-1][0]


def forecast_payload(*, zone: str, days: int, now: datetime) -> dict[str, Any]:
    """The load forecast's JSON (see jobs.forecast.compute_forecast), with
    how long it took. Raises BadInput("tz") or BadInput("days")."""
    started = time.perf_counter()
    unreadable: list[tuple[int, str]] = []
    try:
        result = compute_forecast(_active_triggers(now, unreadable), zone=zone, now=now, days=days)
    except TriggerError as exc:
        raise BadInput("tz" if exc.field == "timezone" else exc.field, exc.message) from None
    invalid = sorted(unreadable + result.invalid)
    if invalid:
        log.warning("load forecast: %d trigger(s) cannot be evaluated", len(invalid))
    return {
        "zone": result.zone,
        "now": _iso(now),
        "starts_at": _iso(result.starts_at),
        "ends_at": _iso(result.ends_at),
        "days": [day.isoformat() for day in result.days],
        "counts": result.counts,
        "hour_seconds": result.hour_seconds,
        "now_cell": list(result.now_cell),
        "busiest": [
            [
                [{"trigger": b.trigger_id, "job": b.label, "count": b.count} for b in cell]
                for cell in day
            ]
            for day in result.busiest
        ],
        "total": result.total,
        "triggers": result.triggers,
        "approximate": len(result.approximate),
        "invalid": [{"trigger": pk, "error": message} for pk, message in invalid],
        "elapsed_ms": round((time.perf_counter() - started) * 1000),
    }


# --- views ----------------------------------------------------------------------


def _json(build: Callable[[], dict[str, Any]]) -> JsonResponse:
    try:
        return JsonResponse(build())
    except BadInput as exc:
        return JsonResponse({"errors": {exc.field: exc.message}}, status=400)


def timeline_data(request: HttpRequest) -> JsonResponse:
    """GET ?start=&end= (ISO 8601 with a zone; default the last 20 hours and
    the next 4) &job=<id> (optional)."""
    _require(request, "jobs.view_job")
    now = timezone.now()

    def build() -> dict[str, Any]:
        start = _moment(request, "start", now - DEFAULT_PAST)
        end = _moment(request, "end", now + DEFAULT_FUTURE)
        return timeline_payload(
            start=start,
            end=end,
            now=now,
            job=_job(request),
            with_runs=request.user.has_perm("runs.view_run"),
        )

    return _json(build)


def forecast_data(request: HttpRequest) -> JsonResponse:
    """GET ?tz=<IANA zone> (default the server's) &days=1..14 (default 7)."""
    _require(request, "jobs.view_job")
    zone = request.GET.get("tz", "").strip() or settings.TIME_ZONE
    text = request.GET.get("days", "7").strip()

    def build() -> dict[str, Any]:
        if not (text.isdigit() and 1 <= int(text) <= MAX_DAYS):
            raise BadInput("days", f"must be a whole number from 1 to {MAX_DAYS}, got {text!r}")
        return forecast_payload(zone=zone, days=int(text), now=timezone.now())

    return _json(build)


def timeline_urls(admin_site: AdminSite) -> list[URLPattern]:
    """The pages and their data, for JobAdmin.get_urls (before the admin's
    own patterns): admin:jobs_job_timeline (?job=<id> for one job),
    admin:jobs_job_timeline_data, admin:jobs_job_forecast,
    admin:jobs_job_forecast_data."""

    def page(template: str, title: str, script: str) -> Callable[[HttpRequest], HttpResponse]:
        def view(request: HttpRequest) -> HttpResponse:
            _require(request, "jobs.view_job")
            text = request.GET.get("job", "")
            job = get_object_or_404(Job, pk=int(text)) if text.isdigit() else None
            context = {
                **admin_site.each_context(request),
                "title": f"{title}: {job.name}" if job else title,
                "opts": Job._meta,
                "job": job,
                "script": script,
            }
            return TemplateResponse(request, template, context)

        return view

    wrap = admin_site.admin_view
    return [
        path(
            "timeline/",
            wrap(page("admin/jobs/timeline.html", "Timeline", "takt/timeline.js")),
            name="jobs_job_timeline",
        ),
        path("timeline/data/", wrap(timeline_data), name="jobs_job_timeline_data"),
        path(
            "forecast/",
            wrap(page("admin/jobs/forecast.html", "Load forecast", "takt/forecast.js")),
            name="jobs_job_forecast",
        ),
        path("forecast/data/", wrap(forecast_data), name="jobs_job_forecast_data"),
    ]
