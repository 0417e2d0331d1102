"""`/api/v1/schedule/preview` (F-19): the next fire times of a trigger
before it is saved, for the admin's trigger form and for scripts.

GET with the trigger's fields as query parameters, or POST them as JSON
(what the admin does as the operator types). The fields and their errors
are those of a trigger in `/api/v1/jobs` (`triggers[]`); nothing is stored.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.api.base import TaktApi, extend_schema
from jobs.definitions import django_errors
from jobs.preview import MAX_COUNT, preview_trigger
from jobs.serializers import TriggerSerializer


class PreviewRequestSerializer(TriggerSerializer):
    count = serializers.IntegerField(
        required=False, default=5, min_value=1, max_value=MAX_COUNT, help_text="How many (1-50)."
    )
    after = serializers.DateTimeField(
        required=False, help_text="Fire times after this instant (default: now)."
    )

    class Meta(TriggerSerializer.Meta):
        fields = (*TriggerSerializer.Meta.fields, "count", "after")


class PreviewSerializer(serializers.Serializer):
    description = serializers.CharField(help_text="The schedule in words.")
    timezone = serializers.CharField(help_text="The zone the trigger reads its times in.")
    fire_times = serializers.ListField(
        child=serializers.DateTimeField(default_timezone=UTC),
        help_text="The next fire times, in UTC.",
    )
    enabled = serializers.BooleanField()
    jitter_seconds = serializers.IntegerField(
        help_text="Each run is delayed by a random 0 to this many seconds (not in fire_times)."
    )


def _flat_query(request: Request) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key in request.query_params:
        if key == "format":  # DRF's choice of renderer, not a trigger's field
            continue
        values = request.query_params.getlist(key)
        data[key] = values if key == "exclude_calendars" else values[-1]
    return data


class SchedulePreviewView(TaktApi, APIView):
    """Check a schedule: the next fire times of a trigger, in UTC, and the
    schedule in words; errors name the field, as saving would."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="schedule_preview",
        parameters=[
            OpenApiParameter("kind", str, description="cron, interval, once or calendar"),
            OpenApiParameter("cron_expression", str),
            OpenApiParameter("timezone", str),
            OpenApiParameter("interval_seconds", int),
            OpenApiParameter("run_at", str, description="ISO 8601"),
            OpenApiParameter("count", int, description="1-50, default 5"),
        ],
        responses={200: PreviewSerializer},
    )
    def get(self, request: Request) -> Response:
        return self._preview(_flat_query(request))

    @extend_schema(
        operation_id="schedule_preview_post",
        request=PreviewRequestSerializer,
        responses={200: PreviewSerializer},
    )
    def post(self, request: Request) -> Response:
        return self._preview(request.data)

    def _preview(self, data: Any) -> Response:
        incoming = PreviewRequestSerializer(data=data)
        incoming.is_valid(raise_exception=True)
        values = dict(incoming.validated_data)
        count = values.pop("count", 5)
        after = values.pop("after", None)
        trigger_id = values.pop("id", None)
        calendars = values.pop("exclude_calendars", None)
        try:
            preview = preview_trigger(
                values,
                calendars=calendars,
                trigger_id=trigger_id,
                count=count,
                now=timezone.now(),
                after=after,
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(django_errors(exc)) from None
        body = {
            "description": preview.description,
            "timezone": preview.timezone,
            "fire_times": preview.fire_times,
            "enabled": preview.enabled,
            "jitter_seconds": preview.jitter_s,
        }
        return Response(PreviewSerializer(body).data)
