from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from heartbeats.api.metrics import metrics_view
from heartbeats.api.ping import ping_view
from heartbeats.api.views import heartbeat_or_ping

# This project is Takt's own: its admin says so (a project that embeds Takt keeps its own).
admin.site.site_header = "Takt"
admin.site.site_title = "Takt"
admin.site.index_title = "Jobs, runs and heartbeats"
admin.site.index_template = (
    "admin/takt/index.html"  # the landing page (heartbeats/admin/summary.py)
)

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    # GET /api/v1/heartbeats/<id> is the API's; POST is a ping (heartbeats.api).
    path("api/v1/heartbeats/<str:name>", heartbeat_or_ping, name="heartbeat-ping"),
    path("api/v1/heartbeats/<str:name>/<str:signal>", ping_view, name="heartbeat-ping-signal"),
    path("api/v1/", include("scheduler_project.api_urls")),
]
