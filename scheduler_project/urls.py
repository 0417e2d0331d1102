from django.apps import apps
from django.contrib import admin
from django.urls import include, path, re_path
from django.utils.translation import gettext_lazy
from django.views.generic import RedirectView

# The admin modules of every app (settings: SimpleAdminConfig, so that only
# the web process, which loads this URLconf, imports them).
admin.autodiscover()

# This project is Takt's own: its admin says so (a project that embeds Takt keeps its own).
admin.site.site_header = "Takt"
admin.site.site_title = "Takt"
admin.site.index_title = gettext_lazy("Jobs, runs and heartbeats")  # jobs/locale
admin.site.index_template = (
    "admin/takt/index.html"  # the landing page (heartbeats/admin/summary.py)
)

# django-celery-beat is installed only to read its PeriodicTasks
# (import_celery_beat): its pages would offer a second scheduler here.
if apps.is_installed("django_celery_beat"):
    from django_celery_beat import models as celery_beat

    for model in (
        celery_beat.PeriodicTask,
        celery_beat.IntervalSchedule,
        celery_beat.CrontabSchedule,
        celery_beat.SolarSchedule,
        celery_beat.ClockedSchedule,
    ):
        if admin.site.is_registered(model):
            admin.site.unregister(model)

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    # Bookmarks from before Takt's apps had labels of their own
    # (docs/embedding.md#app-labels-and-tables): /admin/jobs/job/ and so on.
    re_path(
        r"^admin/(?P<app>jobs|runs|heartbeats)/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/takt_%(app)s/%(rest)s", query_string=True, permanent=True),
    ),
    path("admin/", admin.site.urls),
    path("", include("jobs.urls")),  # the API, pings and metrics, as a project includes them
]
