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


class CappedCountPagination(TaktPagination):
    """For a table that grows without bound (the runs): `count` counts at
    most `count_cap` rows, or as deep as the page asked for if that is
    further (`SELECT COUNT(*) FROM (… LIMIT n)`), so a page of the newest
    runs never waits for a count of every run (0.6 s at 10,000,000 runs,
    benchmarks/README.md). `count_capped` says that more rows exist than
    `count`; `next` is given whenever they do."""

    count_cap = 10_000
    capped = False

    def get_count(self, queryset: Any) -> int:
        # DRF reads the offset after the count: read it here too.
        depth = max(self.count_cap, self.get_offset(self.request) + self.limit)
        n = int(queryset.order_by()[: depth + 1].count())
        self.capped = n > depth
        return n  # depth + 1 when capped: the link to the next page sees a row past it

    def get_paginated_response(self, data: Any) -> Any:
        response = super().get_paginated_response(data)
        if self.capped:
            response.data["count"] = self.count - 1
        response.data["count_capped"] = self.capped
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paged = super().get_paginated_response_schema(schema)
        paged["properties"]["count"]["description"] = (
            f"rows counted: all of them, or at most {self.count_cap:,} (or as deep as the"
            " page asked for) when count_capped is true"
        )
        paged["properties"]["count_capped"] = {
            "type": "boolean",
            "description": "more rows exist than count says",
        }
        paged["required"] = [*paged.get("required", []), "count_capped"]
        return paged


class TaktApi:
    """Mixed in first by every API view of Takt's."""

    authentication_classes: list[Any] = [ApiTokenAuthentication, SessionAuthentication]
    permission_classes: list[Any] = [ModelPermissions]
    filter_backends: list[Any] = [DjangoFilterBackend]
    pagination_class: Any = TaktPagination
    schema = AutoSchema()

    def get_exception_handler(self) -> Any:
        return exception_handler
