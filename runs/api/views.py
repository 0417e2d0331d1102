"""The run history API (F-41, F-50): list with filters, retrieve with output,
cancel (`POST /api/v1/runs/<id>/cancel`, runs.cancel.cancel_run) and re-run
(`POST /api/v1/runs/<id>/rerun`, runs.rerun.rerun).

Runs are made by the scheduler, `enqueue_job()` and
`POST /api/v1/jobs/<id>/run`. A token scoped to a job sees that job's runs
only (so another installation can follow the run it started), and cancels
them where it may start the job (its API trigger permission admits tokens).
Users cancel with the permissions `takt_runs.cancel_run` and `takt_runs.view_run`;
a re-run needs `takt_runs.view_run` and whatever starting the job through
the API needs (jobs.api.views.check_may_start)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from jobs.api.auth import is_user, job_token
from jobs.api.base import CappedCountPagination, TaktApi, extend_schema
from jobs.api.starting import check_may_start
from jobs.policies import ApiTriggerPermission
from jobs.strict_input import refuse_any_body
from jobs.validation import check_caller_params
from runs.cancel import RedisUnreachable, RunNotCancellable, RunNotFound, cancel_run
from runs.models import Run, RunStatus, RunTrigger
from runs.rerun import RunNotRerunnable
from runs.rerun import rerun as rerun_run


class RunSerializer(serializers.ModelSerializer):
    job_name = serializers.CharField(source="job.name", read_only=True)
    cause = serializers.PrimaryKeyRelatedField(
        read_only=True,
        allow_null=True,
        help_text="The run whose end started this one (trigger `dependency`), or the parent"
        " run it is part of (trigger `parent`); null: none.",
    )

    class Meta:
        model = Run
        fields = (
            "id",
            "job",
            "job_name",
            "status",
            "trigger",
            "source_trigger",
            "priority",
            "params",
            "scheduled_for",
            "enqueued_at",
            "published_at",
            "started_at",
            "finished_at",
            "duration_s",
            "attempt",
            "retry_of",
            "rerun_of",
            "cause",
            "worker",
            "result_code",
            "result",
            "message",
            "missed_count",
            "dedupe_key",
            "held",
            "waiting_for",
            "cancelled_by",
            "output",
        )
        read_only_fields = fields
        extra_kwargs = {
            "waiting_for": {
                "help_text": "What a held run waits for: a slot of its concurrency group"
                " (`group`), every group to be free (`exclusive`), a slot under"
                " TAKT_MAX_CONCURRENCY (`limit`); empty: its job or the queue."
            }
        }


class RunListSerializer(RunSerializer):
    """A run without its output (retrieve one run for that)."""

    class Meta(RunSerializer.Meta):
        fields = tuple(f for f in RunSerializer.Meta.fields if f != "output")
        read_only_fields = fields


class UtcDateTimeFilter(filters.IsoDateTimeFilter):
    """An ISO 8601 time, compared in UTC: any offset the parser accepts
    (up to ±23:59) reaches the database as UTC (PostgreSQL refuses
    offsets beyond ±15:59)."""

    def filter(self, qs: QuerySet[Run], value: datetime | None) -> QuerySet[Run]:
        if value is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                name = next((n for n, f in self.parent.filters.items() if f is self), "")
                raise ValidationError(
                    {name or self.field_name: [gettext("out of range")]}
                ) from None
        return super().filter(qs, value)


RUN_ID_MAX = 2**63 - 1  # a bigint: larger would be an error in PostgreSQL


class RunIdFilter(filters.NumberFilter):
    """A run's id: a whole number (NumberFilter takes decimals)."""

    field_class = forms.IntegerField


class RunFilter(filters.FilterSet):
    status = filters.MultipleChoiceFilter(choices=RunStatus.choices)
    trigger = filters.MultipleChoiceFilter(choices=RunTrigger.choices)
    enqueued_after = UtcDateTimeFilter(field_name="enqueued_at", lookup_expr="gte")
    enqueued_before = UtcDateTimeFilter(field_name="enqueued_at", lookup_expr="lt")
    scheduled_after = UtcDateTimeFilter(field_name="scheduled_for", lookup_expr="gte")
    scheduled_before = UtcDateTimeFilter(field_name="scheduled_for", lookup_expr="lt")
    finished_after = UtcDateTimeFilter(field_name="finished_at", lookup_expr="gte")
    finished_before = UtcDateTimeFilter(field_name="finished_at", lookup_expr="lt")
    cause = RunIdFilter(
        field_name="cause_id",
        min_value=1,
        max_value=RUN_ID_MAX,
        help_text="The runs this run caused: a parent run's children (trigger `parent`) and"
        " the runs its end started (trigger `dependency`).",
    )

    class Meta:
        model = Run
        fields = ("job", "status", "trigger", "dedupe_key")


class RunEnded(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = gettext_lazy("the run has ended")


class RedisDown(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = gettext_lazy("Redis cannot be reached")


CANCEL_REFUSED = inline_serializer(
    "CancelRefused",
    {"status": serializers.ListField(child=serializers.CharField())},
)
RERUN_REFUSED = inline_serializer(
    "RerunRefused",
    {"status": serializers.ListField(child=serializers.CharField())},
)
SERVICE_UNAVAILABLE = inline_serializer("ServiceUnavailable", {"detail": serializers.CharField()})


def canceller(request: Request) -> str:
    """Who cancels, as Run.cancelled_by records it: the user's name, or
    `token:<name>` for a job's token without a user."""
    if is_user(request):
        return str(request.user.get_username())
    return f"token:{getattr(request.auth, 'name', '?')}"


class RunViewSet(TaktApi, viewsets.ReadOnlyModelViewSet):
    """Runs, newest first. Filter by job, status (repeatable), trigger,
    time (`enqueued_after=2026-11-30T08:00:00Z` …, after inclusive, before
    exclusive) and `cause` (a parent run's children, a run's dependants).
    The list leaves out `output`; one run has it."""

    filterset_class = RunFilter
    pagination_class = CappedCountPagination
    job_token_actions = ("list", "retrieve", "cancel", "rerun")
    action_perms: dict[str, list[str]] = {
        "cancel": ["takt_runs.view_run", "takt_runs.cancel_run"],
        "rerun": ["takt_runs.view_run"],  # and what starting its job needs
    }

    def get_queryset(self) -> QuerySet[Run]:
        runs = Run.objects.select_related("job").order_by("-enqueued_at", "-id")
        token = job_token(self.request)
        if token is not None and not is_user(self.request):
            runs = runs.filter(job_id=token.job_id)
        if self.action == "list":
            runs = runs.defer("output")
        return runs

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return RunListSerializer if self.action == "list" else RunSerializer

    @extend_schema(
        request=None,
        responses={
            200: OpenApiResponse(RunSerializer, description="The run, now cancelled"),
            409: OpenApiResponse(
                CANCEL_REFUSED,
                description="The run has ended: only a queued or running run can be cancelled",
            ),
            503: OpenApiResponse(
                SERVICE_UNAVAILABLE, description="Redis cannot be reached: nothing was changed"
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel a queued or running run. A running run loses its job's
        lock at once and its process is told to stop (SIGUSR1, then SIGKILL
        after TAKT_CANCEL_GRACE_SECONDS if it goes on); it ends `cancelled`
        with `cancelled_by`, and the job's next fire time runs as usual."""
        run = self.get_object()
        refuse_any_body(request.data)
        token = job_token(request)
        if token is not None and not is_user(request):
            permission = run.job.api_trigger_permission
            if permission == ApiTriggerPermission.OFF:
                raise PermissionDenied(
                    {
                        "api_trigger_permission": [
                            gettext(
                                "a job's token cancels its runs only where it may start the"
                                " job (API trigger permission 'authenticated' or 'token')"
                            )
                        ]
                    }
                )
        try:
            cancelled = cancel_run(run.pk, by=canceller(request), now=timezone.now())
        except RunNotFound as exc:
            raise NotFound(str(exc)) from None
        except RunNotCancellable as exc:
            raise RunEnded({"status": [str(exc)]}) from None
        except RedisUnreachable as exc:
            raise RedisDown(str(exc)) from None
        return Response(RunSerializer(cancelled, context={"request": request}).data)

    @extend_schema(
        request=None,
        responses={
            201: OpenApiResponse(RunSerializer, description="The new run, linked by rerun_of"),
            409: OpenApiResponse(
                RERUN_REFUSED,
                description="The run is still queued or running, or one of Takt's own"
                " operations; or the job cannot start now (queue paused, maintenance,"
                " condition not met)",
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, pk: str | None = None) -> Response:
        """Run an ended run again: a new `manual` run of its job with the
        run's params, linked to it (`rerun_of`), admitted as a run request
        is. The caller must be allowed to start the job through the API,
        and to set the params the run had beyond the job's own now."""
        run = self.get_object()
        refuse_any_body(request.data)
        check_may_start(request, run.job)
        own = run.job.params or {}
        check_caller_params(run.job, {k: v for k, v in run.params.items() if own.get(k) != v})
        try:
            new = rerun_run(run)
        except RunNotRerunnable as exc:
            raise RunEnded({"status": [str(exc)]}) from None
        return Response(
            RunSerializer(new, context={"request": request}).data, status=status.HTTP_201_CREATED
        )


def register(router: Any) -> list[Any]:
    router.register("runs", RunViewSet, basename="run")
    return []
