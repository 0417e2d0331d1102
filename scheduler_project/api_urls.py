"""/api/v1/: each app registers its routes (jobs, runs, heartbeats), plus the
served OpenAPI schema and its Swagger UI. Paths take no trailing slash
(`/api/v1/jobs/3/run`), and accept one."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.urls import include, path
from rest_framework.routers import DefaultRouter

import jobs.api.auth  # noqa: F401, E402  (its schema extension describes API tokens)
from jobs.api.schema import TaktSchemaView, TaktSwaggerView

APPS_WITH_ROUTES = (
    "jobs.api.views",
    "jobs.api.coordination",
    "jobs.api.history",
    "runs.api.views",
    "runs.api.decisions",
    "heartbeats.api.views",
)


class Router(DefaultRouter):
    """Routes that match with or without a trailing slash."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"


router = Router()
extra: list[Any] = []
for module_name in APPS_WITH_ROUTES:
    extra += import_module(module_name).register(router)

urlpatterns = [
    path("schema", TaktSchemaView.as_view(), name="api-schema"),
    path("docs", TaktSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    *extra,
    path("", include(router.urls)),
]
