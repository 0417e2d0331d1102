"""The audit trail in the API (F-120), read-only:
`GET /api/v1/history/<kind>/<id>` lists one object's changes, newest
first (a job's include its triggers'), each with when, what, who, from
where, the note and the fields before and after (jobs.history). A user
needs the view permission of the object's model; a job-scoped token
reads nothing here. Query parameters: `limit` and `offset`; any other is
refused (400), never ignored."""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.api.auth import is_user
from jobs.api.base import TaktApi, extend_schema
from jobs.history import entries_for
from jobs.models import (
    ApiToken,
    ConcurrencyGroup,
    HolidayCalendar,
    Job,
    QueueState,
    ResultVariable,
    Trigger,
)
from jobs.strict_input import field_refusals

KINDS: dict[str, type[Model]] = {
    "jobs": Job,
    "triggers": Trigger,
    "groups": ConcurrencyGroup,
    "variables": ResultVariable,
    "calendars": HolidayCalendar,
    "tokens": ApiToken,
    "queue": QueueState,
}
QUERY_PARAMETERS = ("limit", "offset", "format")


class ChangeSerializer(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    diff = serializers.CharField(help_text="a unified diff of a script's change; else empty")


class EntrySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    model = serializers.CharField(help_text="job, trigger, concurrencygroup, …")
    object_id = serializers.IntegerField()
    object_text = serializers.CharField()
    action = serializers.ChoiceField(["create", "change", "delete"])
    source = serializers.CharField(help_text="admin, api, command, sync or code")
    by = serializers.CharField(help_text="who: a user, `token <name> (API)`, `manage.py <command>`")
    note = serializers.CharField()
    changes = ChangeSerializer(many=True)


class HistoryView(TaktApi, APIView):
    """One object's audit trail (F-120), newest first; a job's includes
    its triggers'. The object may have been deleted."""

    permission_classes = [IsAuthenticated]  # and the model's view permission, below
    filter_backends: list[Any] = []  # no filters: limit and offset only (no queryset to filter)

    @extend_schema(
        operation_id="history",
        parameters=[
            # Named here: the view has no queryset to read their types from.
            OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=sorted(KINDS)),
            OpenApiParameter("object_id", int, OpenApiParameter.PATH),
        ],
        responses=EntrySerializer(many=True),
    )
    def get(self, request: Request, kind: str, object_id: int) -> Response:
        unknown = field_refusals(request.query_params.keys(), QUERY_PARAMETERS)
        if unknown:
            raise ValidationError(unknown)
        model = KINDS.get(kind)
        if model is None:
            raise NotFound(
                _("no history of %(kind)r: one of %(kinds)s")
                % {"kind": kind, "kinds": ", ".join(KINDS)}
            )
        perm = f"{model._meta.app_label}.view_{model._meta.model_name}"
        if not is_user(request) or not request.user.has_perm(perm):
            raise PermissionDenied()
        entries = entries_for(model, int(object_id))
        page = self.paginator.paginate_queryset(entries, request, view=self)  # type: ignore[arg-type]
        return self.paginator.get_paginated_response(EntrySerializer(page, many=True).data)

    @property
    def paginator(self) -> Any:
        if not hasattr(self, "_paginator"):
            self._paginator = self.pagination_class()
        return self._paginator


def register(router: Any) -> list[Any]:
    from django.urls import re_path

    return [
        re_path(
            r"^history/(?P<kind>[a-z]+)/(?P<object_id>[0-9]{1,18})/?$",
            HistoryView.as_view(),
            name="history",
        )
    ]
