"""The jobs API (F-41, F-42): jobs with their triggers, starting a run, the
queue switch. Views only translate HTTP: the writes are jobs.definitions,
jobs.services, runs.queue and runs.services.enqueue_job."""

from __future__ import annotations

from typing import Any

from django.db.models import Min, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from heartbeats.queue_status import queue_status
from jobs import capabilities, services
from jobs.api.auth import caller, is_user, job_token
from jobs.api.base import TaktApi, extend_schema
from jobs.api.preview import SchedulePreviewView
from jobs.api.starting import check_may_start
from jobs.errors import JobNotFound
from jobs.models import Job, QueueState
from jobs.policies import JobKind
from jobs.scripts import SUPERUSERS_ONLY, may_write_scripts
from jobs.serializers import JOB_RELATIONS, JobSerializer, RunRequestSerializer
from jobs.strict_input import StrictInput, refuse_any_body
from jobs.validation import check_caller_params
from runs import queue
from runs.api.views import RunSerializer  # the API is glue over all apps, like the admin
from runs.services import enqueue_job


class JobFilter(filters.FilterSet):
    name = filters.CharFilter(lookup_expr="icontains", help_text="Part of the name.")
    key = filters.CharFilter()
    target = filters.CharFilter()
    concurrency_group = filters.CharFilter(
        field_name="concurrency_group__name",
        lookup_expr="iexact",
        help_text="The name of its concurrency group (any case).",
    )
    parent = filters.CharFilter(
        method="filter_parent", help_text="Its parent job's id or key: that job's children."
    )

    class Meta:
        model = Job
        fields = ("enabled", "paused", "kind", "queue", "code_managed", "exclusive")

    def filter_parent(self, jobs: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        if value.isdigit():
            return jobs.filter(Q(parent_id=int(value)) | Q(parent__key=value))
        return jobs.filter(parent__key=value)


class PauseSerializer(StrictInput):
    note = serializers.CharField(required=False, allow_blank=True, default="")
    until = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="Resume by itself then."
    )


class JobViewSet(
    TaktApi,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Jobs and their triggers. PATCH changes only the fields it names;
    `triggers` replaces the trigger list; `interval_minutes` sets the
    schedule to one interval (null: none)."""

    serializer_class = JobSerializer
    filterset_class = JobFilter
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    job_token_actions = ("run",)
    # Starting a run is governed by the job's API trigger permission (F-42).
    action_perms: dict[str, list[str]] = {
        "run": [],
        "pause": ["takt_jobs.change_job"],
        "resume": ["takt_jobs.change_job"],
    }

    def get_queryset(self) -> QuerySet[Job]:
        return (
            Job.objects.annotate(
                _next_run=Min("triggers__next_run_at", filter=Q(triggers__active=True))
            )
            .select_related(*JOB_RELATIONS)
            .prefetch_related("triggers__exclude_calendars", "triggers__upstream_job")
            .order_by("id")
        )

    def perform_destroy(self, instance: Job) -> None:
        if instance.code_managed:
            raise serializers.ValidationError(
                {"code_managed": [_("this job is declared in code: remove it there")]}
            )
        if instance.kind == JobKind.SCRIPT and not may_write_scripts(self.request.user):
            raise PermissionDenied({"kind": [_(SUPERUSERS_ONLY)]})
        lacking = capabilities.missing(self.request.user, capabilities.needed_by_job(instance))
        if lacking:
            raise PermissionDenied(capabilities.refusals(lacking))
        instance.delete()

    @extend_schema(
        request=RunRequestSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description=(
                    "A repeat with the same key within TAKT_DEDUPE_WINDOW_SECONDS returns"
                    " the first run (200) instead of starting another (F-43)."
                ),
            )
        ],
        responses={
            201: OpenApiResponse(RunSerializer, description="A new run"),
            200: OpenApiResponse(
                RunSerializer, description="The run made earlier with this Idempotency-Key"
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def run(self, request: Request, pk: str | None = None) -> Response:
        """Start a run now (or at `run_at`), as the job's API trigger
        permission allows: `off` refuses everyone, `authenticated` admits
        users and this job's tokens, `token` only this job's tokens."""
        job = self._job(pk)
        check_may_start(request, job)
        body = RunRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if isinstance(body.validated_data.get("params"), dict):
            # Which params a caller may set is the job's (caller_params).
            check_caller_params(job, body.validated_data["params"])
        key = request.headers.get("Idempotency-Key", "").strip()
        if len(key) > 200:
            raise serializers.ValidationError({"Idempotency-Key": [_("at most 200 characters")]})
        run = enqueue_job(job, dedupe_key=key or None, **body.validated_data)
        replayed = getattr(run, "deduplicated", False)
        response = Response(
            RunSerializer(run, context={"request": request}).data,
            status=status.HTTP_200_OK if replayed else status.HTTP_201_CREATED,
        )
        if key:
            response["Idempotent-Replayed"] = "true" if replayed else "false"
        return response

    def _job(self, pk: str | None) -> Job:
        job = Job.objects.filter(pk=pk).first() if str(pk).isdigit() else None
        if job is None:
            token = job_token(self.request)
            if token is not None and not is_user(self.request):
                # Do not tell a job token which other jobs exist.
                raise PermissionDenied(
                    _("this token is for job #%(id)s only") % {"id": token.job_id}
                )
            raise JobNotFound(_("no job with id %(id)r") % {"id": pk})
        return job

    @extend_schema(request=PauseSerializer, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str | None = None) -> Response:
        """Pause the job with a note (F-104); a paused job is not scheduled."""
        job = self.get_object()
        body = PauseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        until = body.validated_data["until"]
        if until is not None and until <= timezone.now():
            raise serializers.ValidationError({"until": [_("must be in the future")]})
        services.pause_job(
            job.pk,
            note=body.validated_data["note"],
            by=caller(request),
            now=timezone.now(),
            until=until,
        )
        return Response(JobSerializer(self.get_object(), context={"request": request}).data)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        """Lift the job's pause; missed fire times follow its missed-run policy."""
        job = self.get_object()
        refuse_any_body(request.data)
        services.resume_job(job.pk)
        return Response(JobSerializer(self.get_object(), context={"request": request}).data)


CLOCK_SKEW_HELP = (
    "Seconds its own clock was ahead of the database's (negative: behind) when it last"
    " reported; null: it does not measure it (TAKT_CLOCK=local, SQLite reports 0)."
)


class LiveBeatSerializer(serializers.Serializer):
    name = serializers.CharField()
    scheduler_enabled = serializers.BooleanField(help_text="Its TAKT_SCHEDULER_ENABLED.")
    clock_skew_s = serializers.FloatField(allow_null=True, help_text=CLOCK_SKEW_HELP)
    last_seen_at = serializers.DateTimeField()


class LiveWorkerSerializer(serializers.Serializer):
    name = serializers.CharField()
    concurrency = serializers.IntegerField()
    queues = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="The queues it consumes (-Q); null: a worker of an older Takt did not say.",
    )
    clock_skew_s = serializers.FloatField(allow_null=True, help_text=CLOCK_SKEW_HELP)
    last_seen_at = serializers.DateTimeField()


class LockFileSerializer(serializers.Serializer):
    path = serializers.CharField()
    host = serializers.CharField()


class QueueStatusSerializer(serializers.Serializer):
    next_scheduled = serializers.DateTimeField(allow_null=True)
    scheduler_enabled = serializers.BooleanField(
        help_text="At least one live beat dispatches by schedule (as the beats report it)."
    )
    paused = serializers.BooleanField()
    pause_note = serializers.CharField(allow_blank=True)
    paused_by = serializers.CharField(allow_blank=True)
    paused_at = serializers.DateTimeField(allow_null=True)
    paused_until = serializers.DateTimeField(
        allow_null=True, help_text="The queue resumes by itself then."
    )
    maintenance = serializers.BooleanField()
    maintenance_note = serializers.CharField(allow_blank=True)
    maintenance_lock_file = serializers.BooleanField(
        help_text="Maintenance mode is on because a file of TAKT_MAINTENANCE_LOCK_FILE exists"
        " where a live beat runs."
    )
    maintenance_lock_files = LockFileSerializer(
        many=True, help_text="Each lock file that exists, with the host whose beat sees it."
    )
    max_concurrency = serializers.IntegerField(
        allow_null=True,
        help_text="The global limit TAKT_MAX_CONCURRENCY: at most this many runs at once"
        " across the cluster (F-34); null: no limit.",
    )
    pool_size = serializers.IntegerField(
        help_text="Runs the live workers can execute at once (their pool sizes added up)."
    )
    active_count = serializers.IntegerField(help_text="Runs running now.")
    queued_count = serializers.IntegerField(help_text="Runs waiting to start.")
    beats = LiveBeatSerializer(many=True, help_text="The beats whose heartbeat is live.")
    workers = LiveWorkerSerializer(many=True, help_text="The workers whose heartbeat is live.")


class QueueSwitchSerializer(StrictInput):
    note = serializers.CharField(required=False, allow_blank=True, default="")
    until = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="Resume by itself then."
    )

    def validate_until(self, value: Any) -> Any:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError(_("must be in the future"))
        return value


class MaintenanceSerializer(StrictInput):
    on = serializers.BooleanField()
    note = serializers.CharField(required=False, allow_blank=True, default="")


class QueueViewSet(TaktApi, viewsets.ViewSet):
    """The queue (F-28, F-29, F-92): its state, pause/resume, maintenance."""

    # ModelPermissions falls back to the model's permissions for a request
    # no action names (an unrouted method): jobs.*_queuestate.
    queryset = QueueState.objects.none()

    action_perms = {
        "status": ["takt_jobs.view_queuestate"],
        "pause": ["takt_jobs.change_queuestate"],
        "resume": ["takt_jobs.change_queuestate"],
        "maintenance": ["takt_jobs.change_queuestate"],
    }

    def _status(self) -> Response:
        return Response(QueueStatusSerializer(queue_status(now=timezone.now())).data)

    @extend_schema(responses=QueueStatusSerializer)
    def status(self, request: Request) -> Response:
        return self._status()

    @extend_schema(request=QueueSwitchSerializer, responses=QueueStatusSerializer)
    def pause(self, request: Request) -> Response:
        body = QueueSwitchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        queue.pause_queue(
            note=body.validated_data["note"],
            by=caller(request),
            until=body.validated_data["until"],
            now=timezone.now(),
        )
        return self._status()

    @extend_schema(request=None, responses=QueueStatusSerializer)
    def resume(self, request: Request) -> Response:
        refuse_any_body(request.data)
        queue.resume_queue(now=timezone.now())
        return self._status()

    @extend_schema(request=MaintenanceSerializer, responses=QueueStatusSerializer)
    def maintenance(self, request: Request) -> Response:
        body = MaintenanceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        queue.set_maintenance(
            body.validated_data["on"], note=body.validated_data["note"], now=timezone.now()
        )
        return self._status()


def register(router: Any) -> list[Any]:
    """The jobs app's routes; returns extra URL patterns (the queue)."""
    from django.urls import re_path

    router.register("jobs", JobViewSet, basename="job")
    queue_routes = [
        ("queue", "status", "get"),
        ("queue/pause", "pause", "post"),
        ("queue/resume", "resume", "post"),
        ("queue/maintenance", "maintenance", "post"),
    ]

    return [
        re_path(rf"^{path}/?$", QueueViewSet.as_view({method: name}), name=f"queue-{name}")
        for path, name, method in queue_routes
    ] + [re_path(r"^schedule/preview/?$", SchedulePreviewView.as_view(), name="schedule-preview")]
