"""What every view of Takt's REST API uses, whatever the project's
REST_FRAMEWORK settings say: in a project that embeds Takt
(docs/embedding.md) its API keeps its own authentication (API tokens, the
admin's session), permissions (the models' permissions), filters,
pagination (100 a page, at most TAKT_API_MAX_PAGE_SIZE), error format and
schema class (drf-spectacular's AutoSchema, also under `extend_schema`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.utils.translation import gettext as _
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema as spectacular_extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

from jobs import audit
from jobs.api.auth import ApiTokenAuthentication, ModelPermissions, caller, is_user
from jobs.api.errors import body_too_large, exception_handler
from jobs.tokens import ApiToken

PAGE_SIZE = 100


class TaktPagination(LimitOffsetPagination):
    """`limit` rows a page (default 100) from `offset` on. A `limit` above
    TAKT_API_MAX_PAGE_SIZE, or one or an `offset` that is not a whole
    number (limit: from 1), is refused with a 400 naming the parameter,
    never changed silently: one request must not make the web process
    read and serialise a whole table."""

    default_limit = PAGE_SIZE

    @property
    def max_limit(self) -> int:
        return int(settings.TAKT_API_MAX_PAGE_SIZE)

    def get_limit(self, request: Any) -> int:
        raw = request.query_params.get(self.limit_query_param)
        if raw is None:
            return self.default_limit
        limit = _whole_number(raw)
        if limit is None or not 1 <= limit <= self.max_limit:
            said = {"max": self.max_limit, "value": raw}
            raise ValidationError(
                {
                    self.limit_query_param: [
                        _("must be a whole number from 1 to %(max)s, got %(value)r") % said
                    ]
                }
            )
        return limit

    def get_offset(self, request: Any) -> int:
        raw = request.query_params.get(self.offset_query_param)
        if raw is None:
            return 0
        offset = _whole_number(raw)
        if offset is None or offset < 0:
            raise ValidationError(
                {
                    self.offset_query_param: [
                        _("must be a whole number from 0, got %(value)r") % {"value": raw}
                    ]
                }
            )
        return offset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["description"] = (
                    f"Rows a page: {self.default_limit} unless given, at most {self.max_limit}"
                    " (TAKT_API_MAX_PAGE_SIZE); a larger one is refused (400 on `limit`)."
                )
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_limit}
        return parameters


def _whole_number(raw: str) -> int | None:
    text = raw.strip()
    return int(text) if re.fullmatch(r"-?[0-9]{1,18}", text) else None


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
    """Mixed in first by every API view of Takt's. A body larger than
    DATA_UPLOAD_MAX_MEMORY_SIZE is refused before it is read (body_refusal);
    a create or update answers with the object as stored after it, read
    again (the next fire time the save computed, say), as a GET would.

    A view's input serializers derive from jobs.strict_input.StrictInput
    (ModelRulesSerializer does), and a write without a body calls
    refuse_any_body, so that no field is ignored; the test over every
    write in the URLs (tests/integration/test_api_refusals.py) fails for a
    new one that does not."""

    authentication_classes: list[Any] = [ApiTokenAuthentication, SessionAuthentication]
    permission_classes: list[Any] = [ModelPermissions]
    filter_backends: list[Any] = [DjangoFilterBackend]
    pagination_class: Any = TaktPagination
    schema = AutoSchema()

    def get_exception_handler(self) -> Any:
        return exception_handler

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        # Every audited write is recorded as from the API (F-120); who is
        # known once `initial` has authenticated the request.
        with audit.recording(audit.Source.API):
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        refusal = body_refusal(request.META)
        if refusal:
            raise ValidationError({"detail": refusal})
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        context = audit.current()
        context.by = audit_caller(request)
        context.user = request.user if is_user(request) else None

    def perform_create(self, serializer: Any) -> None:
        super().perform_create(serializer)  # type: ignore[misc]
        serializer.instance = self.get_queryset().get(pk=serializer.instance.pk)  # type: ignore[attr-defined]

    def perform_update(self, serializer: Any) -> None:
        super().perform_update(serializer)  # type: ignore[misc]
        serializer.instance = self.get_queryset().get(pk=serializer.instance.pk)  # type: ignore[attr-defined]


def audit_caller(request: Any) -> str:
    """Who writes, as the audit trail records it: ``<user> (API)`` from the
    admin's session, ``<user> (API token <name>)`` or ``token <name> (API)``."""
    token = request.auth
    if is_user(request) and isinstance(token, ApiToken):
        return f"{request.user.get_username()} (API token {token.name})"
    return caller(request)


def body_refusal(meta: Any) -> str | None:
    """Why a request's body is too large to read (its Content-Length past
    Django's DATA_UPLOAD_MAX_MEMORY_SIZE), or None: refused before anything
    reads it (Django would raise RequestDataTooBig as DRF reads it, which
    jobs.api.errors answers the same way)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        size = int(meta.get("CONTENT_LENGTH") or 0)
    except (TypeError, ValueError):
        return None
    return body_too_large() if limit is not None and size > limit else None


F = TypeVar("F", bound=Callable[..., Any])


def extend_schema(**kwargs: Any) -> Callable[[F], F]:
    """drf-spectacular's `extend_schema`, on drf-spectacular's AutoSchema
    whatever the project's REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] says.

    On a view's method, drf-spectacular's decorator builds the method's
    schema class, when the module is imported, on the method's previous
    annotation or else on DEFAULT_SCHEMA_CLASS: DRF's own AutoSchema
    unless the project names drf-spectacular's, and on it the served schema
    fails (a 500: the two classes' get_operation differ). A method without
    an annotation is given AutoSchema as its previous one first. Takt's
    API modules use this one, never drf-spectacular's."""
    decorate = spectacular_extend_schema(**kwargs)

    def decorator(f: F) -> F:
        if not isinstance(f, type) and getattr(f, "schema", None) is None:
            if not hasattr(f, "kwargs"):  # @action's own kwargs stay the same dict
                f.kwargs = {}  # type: ignore[attr-defined]
            f.kwargs.setdefault("schema", AutoSchema)  # type: ignore[attr-defined]
        return decorate(f)

    return decorator
