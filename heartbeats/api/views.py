"""The heartbeats and alerts API (F-41, F-60..F-62).

    GET   /api/v1/heartbeats              filters: state, paused, name (part), job, kind
    GET   /api/v1/heartbeats/<id>
    PATCH /api/v1/heartbeats/<id>         paused; deadline_s, grace_s,
                                          alert_after_failures, reminder_s
                                          (a job's heartbeat takes its deadline from the job)
    GET   /api/v1/alerts                  filters: severity, seen, resolved, key
    GET   /api/v1/alerts/<id>
    POST  /api/v1/alerts/<id>/seen

`POST /api/v1/heartbeats/<name>` is an outside process's ping
(heartbeats.api.ping), not a write to the heartbeat with that id: the path is
shared, so `heartbeat_or_ping` sends a POST to the ping and everything else
to HeartbeatViewSet.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Case, CharField, QuerySet, Value, When
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt
from django_filters import rest_framework as filters
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from heartbeats.alerts import mark_seen
from heartbeats.api.ping import ping_view
from heartbeats.core.pings import PROCESS_PREFIXES
from heartbeats.core.status import compute_deadline_at, operations_label
from heartbeats.models import STATE_CHOICES, Alert, AlertSeverity, Heartbeat
from jobs.api.base import TaktApi, extend_schema
from jobs.strict_input import StrictInput, refuse_any_body

KIND_CHOICES = [
    ("job", "A job's heartbeat"),
    ("outside", "An outside process that pings"),
    ("process", "A Takt worker or beat"),
]
# What PATCH may change; a job's heartbeat takes its deadline from the job.
OUTSIDE_SETTINGS = ("deadline_s", "grace_s", "alert_after_failures", "reminder_s")
JOB_SETTINGS = ("grace_s", "alert_after_failures", "reminder_s")


# The refusals, as jobs.api.errors shapes them: {"<field>": ["…"]} or {"detail": "…"}.
REFUSED = {
    401: OpenApiResponse(description="No or a wrong API token"),
    403: OpenApiResponse(description="Without the model permission, or a job-scoped token"),
}
INVALID = {400: OpenApiResponse(description="Errors by field: {field: [message, …]}")}
NOT_FOUND = {404: OpenApiResponse(description="No such id")}


def _kind() -> Case:
    return Case(
        When(job__isnull=False, then=Value("job")),
        *(When(name__startswith=prefix, then=Value("process")) for prefix in PROCESS_PREFIXES),
        default=Value("outside"),
        output_field=CharField(),
    )


class HeartbeatSerializer(serializers.ModelSerializer):
    kind = serializers.ChoiceField(choices=KIND_CHOICES, read_only=True)
    deadline_at = serializers.SerializerMethodField(
        help_text="When it turns overdue (then late, and down after the grace); null: never."
    )
    operations_state = serializers.SerializerMethodField(
        help_text="The operations page's state: Overdue, Last run failed, OK, or no report yet."
    )

    class Meta:
        model = Heartbeat
        fields = (
            "id",
            "name",
            "kind",
            "job",
            "state",
            "operations_state",
            "paused",
            "deadline_s",
            "grace_s",
            "deadline_at",
            "alert_after_failures",
            "reminder_s",
            "last_run_at",
            "last_success_at",
            "last_started_at",
            "last_status",
            "last_result",
            "last_run_id",
            "run_count",
            "failure_count",
            "consecutive_failures",
            "updated_at",
        )
        read_only_fields = fields

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_deadline_at(self, beat: Heartbeat) -> str | None:
        started = beat.last_started_at
        deadline_at = compute_deadline_at(
            last_run_at=beat.last_run_at,
            last_started_at=started,
            # An outside process's start ping after its last report.
            running=started is not None
            and (beat.last_run_at is None or started > beat.last_run_at),
            deadline_s=beat.deadline_s,
        )
        return (
            None
            if deadline_at is None
            else serializers.DateTimeField().to_representation(deadline_at)
        )

    def get_operations_state(self, beat: Heartbeat) -> str:
        return operations_label(
            last_run_at=beat.last_run_at,
            last_status=beat.last_status,
            deadline_s=beat.deadline_s,
            now=self.context.get("now") or timezone.now(),
        )


class HeartbeatChangeSerializer(StrictInput, serializers.ModelSerializer):
    # The answer's other fields: refused as read-only, not as unknown.
    shown_read_only = tuple(
        f for f in HeartbeatSerializer.Meta.fields if f not in ("paused", *OUTSIDE_SETTINGS)
    )

    class Meta:
        model = Heartbeat
        fields = ("paused", *OUTSIDE_SETTINGS)
        extra_kwargs = {"paused": {"required": False}}


class HeartbeatFilter(filters.FilterSet):
    name = filters.CharFilter(lookup_expr="icontains", help_text="Part of the name.")
    state = filters.ChoiceFilter(choices=STATE_CHOICES, help_text="As last computed.")
    kind = filters.ChoiceFilter(choices=KIND_CHOICES)

    class Meta:
        model = Heartbeat
        fields = ("state", "paused", "job")


@extend_schema_view(
    list=extend_schema(responses={200: HeartbeatSerializer(many=True), **INVALID, **REFUSED}),
    retrieve=extend_schema(responses={200: HeartbeatSerializer, **NOT_FOUND, **REFUSED}),
)
class HeartbeatViewSet(
    TaktApi,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Heartbeats of jobs, outside processes and Takt's own processes.
    `state` is as the overdue check last computed it (heartbeats.core.status)."""

    serializer_class = HeartbeatSerializer
    filterset_class = HeartbeatFilter
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self) -> QuerySet[Heartbeat]:
        return Heartbeat.objects.annotate(kind=_kind()).order_by("name", "id")

    @extend_schema(
        request=HeartbeatChangeSerializer,
        responses={200: HeartbeatSerializer, **INVALID, **NOT_FOUND, **REFUSED},
    )
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Change the fields given, checked as the admin checks them (the
        model's full_clean); errors name the field."""
        beat = self.get_object()
        body = HeartbeatChangeSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        changes = dict(body.validated_data)
        allowed = ("paused", *(JOB_SETTINGS if beat.job_id else OUTSIDE_SETTINGS))
        refused = {
            field: [gettext("set by the job (its heartbeat deadline)")]
            for field in changes
            if field not in allowed
        }
        if refused:
            raise serializers.ValidationError(refused)
        for field, value in changes.items():
            setattr(beat, field, value)
        beat.full_clean()  # a Django ValidationError: 400 naming the field (jobs.api.errors)
        if changes:
            # Only these columns: a ping or the overdue check may be writing the others.
            Heartbeat.objects.filter(pk=beat.pk).update(**changes, updated_at=timezone.now())
        return Response(self._fresh(beat.pk))

    def _fresh(self, pk: int) -> Any:
        return HeartbeatSerializer(
            self.get_queryset().get(pk=pk), context=self.get_serializer_context()
        ).data


class AlertSerializer(serializers.ModelSerializer):
    resolved = serializers.SerializerMethodField(help_text="Whether it has recovered.")

    class Meta:
        model = Alert
        fields = (
            "id",
            "key",
            "severity",
            "title",
            "message",
            "count",
            "first_seen_at",
            "last_seen_at",
            "seen",
            "resolved",
            "resolved_at",
            "notified_at",
        )
        read_only_fields = fields

    def get_resolved(self, alert: Alert) -> bool:
        return alert.resolved_at is not None


class AlertFilter(filters.FilterSet):
    severity = filters.ChoiceFilter(choices=AlertSeverity.choices)
    resolved = filters.BooleanFilter(
        field_name="resolved_at", lookup_expr="isnull", exclude=True, help_text="Recovered or open."
    )

    class Meta:
        model = Alert
        fields = ("severity", "seen", "key")


@extend_schema_view(
    list=extend_schema(responses={200: AlertSerializer(many=True), **INVALID, **REFUSED}),
    retrieve=extend_schema(responses={200: AlertSerializer, **NOT_FOUND, **REFUSED}),
)
class AlertViewSet(TaktApi, viewsets.ReadOnlyModelViewSet):
    """Alerts, most recently seen first: one per key; a repeat raises its
    count and marks it unseen again (F-62)."""

    serializer_class = AlertSerializer
    filterset_class = AlertFilter
    action_perms = {"seen": ["takt_heartbeats.change_alert"]}

    def get_queryset(self) -> QuerySet[Alert]:
        return Alert.objects.order_by("-last_seen_at", "-id")

    @extend_schema(request=None, responses={200: AlertSerializer, **NOT_FOUND, **REFUSED})
    @action(detail=True, methods=["post"])
    def seen(self, request: Request, pk: str | None = None) -> Response:
        """Mark the alert as seen (an operator looked at it); a repeat of
        the alert marks it unseen again."""
        alert = self.get_object()
        refuse_any_body(request.data)
        mark_seen([alert.pk])
        alert.refresh_from_db()
        return Response(AlertSerializer(alert, context=self.get_serializer_context()).data)


heartbeat_detail = HeartbeatViewSet.as_view(
    {"get": "retrieve", "patch": "partial_update"}, detail=True, basename="heartbeat"
)


@csrf_exempt  # the ping needs none; the viewset checks CSRF for session users itself
def heartbeat_or_ping(request: HttpRequest, name: str) -> HttpResponse:
    """`/api/v1/heartbeats/<name>`: a POST is an outside process's ping;
    another method on an id (an integer) reads or changes that heartbeat,
    and on a name is refused by the ping (405)."""
    if request.method == "POST" or not name.removeprefix("-").isdigit():
        return ping_view(request, name)
    response: HttpResponse = heartbeat_detail(request, pk=name)
    return response


def register(router: Any) -> list[Any]:
    """The heartbeats app's routes. The ping (and `heartbeat_or_ping`) is
    routed in scheduler_project.urls, ahead of these."""
    router.register("heartbeats", HeartbeatViewSet, basename="heartbeat")
    router.register("alerts", AlertViewSet, basename="alert")
    return []
