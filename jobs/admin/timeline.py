"""The Timeline (F-94) and Load forecast (F-95) pages of the admin and the
JSON views their charts draw from (takt/timeline.js, takt/forecast.js;
the data is built in jobs.admin.timeline_data).

Both pages need a staff user with ``takt_jobs.view_job`` (others get the admin's
refusal); the timeline shows runs only to those who also have
``takt_runs.view_run``. Times are shown in the browser's zone; the forecast is
binned by the zone the page sends (``tz``, the browser's).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib.admin import AdminSite
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs.admin.timeline_data import (
    DEFAULT_FUTURE,
    DEFAULT_PAST,
    BadInput,
    forecast_payload,
    timeline_payload,
)
from jobs.core.forecast import MAX_DAYS
from jobs.models import Job, Trigger


def _moment(request: HttpRequest, name: str, default: datetime) -> datetime:
    text = request.GET.get(name, "").strip()
    if not text:
        return default
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        message = _("%(value)r is not an ISO 8601 date and time") % {"value": text}
        raise BadInput(name, message) from None
    if value.utcoffset() is None:
        raise BadInput(name, _("needs a time zone, e.g. 2026-12-01T09:00:00Z"))
    return value.astimezone(UTC)


def _job(request: HttpRequest) -> Job | None:
    text = request.GET.get("job", "").strip()
    if not text:
        return None
    job = Job.objects.filter(pk=int(text)).first() if text.isdigit() else None
    if job is None:
        raise BadInput("job", _("no job with id %(id)r") % {"id": text})
    return job


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied


# --- views ----------------------------------------------------------------------


def _json(build: Callable[[], dict[str, Any]]) -> JsonResponse:
    try:
        return JsonResponse(build())
    except BadInput as exc:
        return JsonResponse({"errors": {exc.field: exc.message}}, status=400)


def timeline_data_view(request: HttpRequest) -> JsonResponse:
    """GET ?start=&end= (ISO 8601 with a zone; default the last 20 hours and
    the next 4) &job=<id> (optional)."""
    _require(request, "takt_jobs.view_job")
    now = timezone.now()

    def build() -> dict[str, Any]:
        start = _moment(request, "start", now - DEFAULT_PAST)
        end = _moment(request, "end", now + DEFAULT_FUTURE)
        return timeline_payload(
            start=start,
            end=end,
            now=now,
            job=_job(request),
            with_runs=request.user.has_perm("takt_runs.view_run"),
        )

    return _json(build)


def forecast_data_view(request: HttpRequest) -> JsonResponse:
    """GET ?tz=<IANA zone> (default the server's) &days=1..14 (default 7)."""
    _require(request, "takt_jobs.view_job")
    zone = request.GET.get("tz", "").strip() or settings.TIME_ZONE
    text = request.GET.get("days", "7").strip()

    def build() -> dict[str, Any]:
        if not (text.isdigit() and 1 <= int(text) <= MAX_DAYS):
            message = _("must be a whole number from 1 to %(max)s, got %(value)r")
            raise BadInput("days", message % {"max": MAX_DAYS, "value": text})
        return cached_forecast(zone=zone, days=int(text), now=timezone.now())

    return _json(build)


# A forecast of 100,000 triggers takes seconds to count: it is kept this long
# per zone, number of days and hour (the hour it starts from), per process.
FORECAST_CACHE_S = 60


def cached_forecast(*, zone: str, days: int, now: datetime) -> dict[str, Any]:
    """forecast_payload, computed at most once a minute for the same zone,
    days and hour while the active triggers stay the same (their count, the
    newest id and edit); `cached` says whether this one was."""
    stamp = Trigger.objects.filter(active=True).aggregate(
        n=Count("id"), last=Max("id"), edited=Max("updated_at")
    )
    version = f"{stamp['n']}:{stamp['last']}:{stamp['edited'] and stamp['edited'].timestamp()}"
    key = f"takt:forecast:{zone}:{days}:{now:%Y%m%d%H}:{version}"
    hit = cache.get(key)
    if hit is not None:
        return {**hit, "cached": True}
    payload = {**forecast_payload(zone=zone, days=days, now=now), "cached": False}
    cache.set(key, payload, FORECAST_CACHE_S)
    return payload


TIMELINE, FORECAST = gettext_lazy("Timeline"), gettext_lazy("Load forecast")


def timeline_urls(admin_site: AdminSite) -> list[URLPattern]:
    """The pages and their data, for JobAdmin.get_urls (before the admin's
    own patterns): admin:takt_jobs_job_timeline (?job=<id> for one job),
    admin:takt_jobs_job_timeline_data, admin:takt_jobs_job_forecast,
    admin:takt_jobs_job_forecast_data."""

    def page(template: str, title: Any, script: str) -> Callable[[HttpRequest], HttpResponse]:
        def view(request: HttpRequest) -> HttpResponse:
            _require(request, "takt_jobs.view_job")
            text = request.GET.get("job", "")
            job = get_object_or_404(Job, pk=int(text)) if text.isdigit() else None
            context = {
                **admin_site.each_context(request),
                "title": _("%(page)s: %(job)s") % {"page": title, "job": job.name}
                if job
                else title,
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
            wrap(page("admin/takt_jobs/timeline.html", TIMELINE, "takt/timeline.js")),
            name="takt_jobs_job_timeline",
        ),
        path("timeline/data/", wrap(timeline_data_view), name="takt_jobs_job_timeline_data"),
        path(
            "forecast/",
            wrap(page("admin/takt_jobs/forecast.html", FORECAST, "takt/forecast.js")),
            name="takt_jobs_job_forecast",
        ),
        path("forecast/data/", wrap(forecast_data_view), name="takt_jobs_job_forecast_data"),
    ]
