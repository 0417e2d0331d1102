from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from heartbeats.ping import ping_view
from runs.metrics import metrics_view

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/heartbeats/<str:name>", ping_view, name="heartbeat-ping"),
    path("api/v1/heartbeats/<str:name>/<str:signal>", ping_view, name="heartbeat-ping-signal"),
    path("api/v1/", include("scheduler_project.api_urls")),
]
