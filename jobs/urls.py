"""Takt's URLs, to include in any project under any prefix
(docs/embedding.md)::

    path("takt/", include("jobs.urls"))  # /takt/api/v1/..., /takt/metrics

The REST API and its schema (api/v1/), heartbeat pings
(api/v1/heartbeats/<name>[/<signal>]), the Prometheus metrics
(metrics) and the texts of the admin pages' scripts in the reader's
language (jsi18n, Django's JavaScriptCatalog of the djangojs catalogues
of Takt and of Django's admin: a Takt page loads this one, not two).
The admin pages are the project's own admin site's.
"""

from __future__ import annotations

from django.urls import include, path
from django.views.i18n import JavaScriptCatalog

from heartbeats.api.metrics import metrics_view
from heartbeats.api.ping import ping_view
from heartbeats.api.views import heartbeat_or_ping
from jobs.js_catalog import JS_CATALOG_PACKAGES

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    # takt/admin.js and the other scripts of jobs/static (jobs.templatetags.takt).
    path("jsi18n", JavaScriptCatalog.as_view(packages=JS_CATALOG_PACKAGES), name="takt-jsi18n"),
    # GET /api/v1/heartbeats/<id> is the API's; POST is a ping (heartbeats.api).
    path("api/v1/heartbeats/<str:name>", heartbeat_or_ping, name="heartbeat-ping"),
    path("api/v1/heartbeats/<str:name>/<str:signal>", ping_view, name="heartbeat-ping-signal"),
    path("api/v1/", include("scheduler_project.api_urls")),
]
