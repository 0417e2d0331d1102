from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from runs.metrics import metrics_view

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
]
