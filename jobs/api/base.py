"""What every view of Takt's REST API uses, whatever the project's
REST_FRAMEWORK settings say: in a project that embeds Takt
(docs/embedding.md) its API keeps its own authentication (API tokens, the
admin's session), permissions (the models' permissions), filters,
pagination (100 a page) and error format."""

from __future__ import annotations

from typing import Any

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.openapi import AutoSchema
from rest_framework.authentication import SessionAuthentication
from rest_framework.pagination import LimitOffsetPagination

from jobs.api.auth import ApiTokenAuthentication, ModelPermissions
from jobs.api.errors import exception_handler

PAGE_SIZE = 100


class TaktPagination(LimitOffsetPagination):
    default_limit = PAGE_SIZE


class TaktApi:
    """Mixed in first by every API view of Takt's."""

    authentication_classes: list[Any] = [ApiTokenAuthentication, SessionAuthentication]
    permission_classes: list[Any] = [ModelPermissions]
    filter_backends: list[Any] = [DjangoFilterBackend]
    pagination_class: Any = TaktPagination
    schema = AutoSchema()

    def get_exception_handler(self) -> Any:
        return exception_handler
