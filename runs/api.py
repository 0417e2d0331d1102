"""The run history API (F-41, F-50): list with filters, retrieve with output.

Read-only: runs are made by the scheduler, `enqueue_job()` and
`POST /api/v1/jobs/<id>/run`. A token scoped to a job sees that job's runs
only (so another installation can follow the run it started)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError

from jobs.api.auth import is_user, job_token

from .models import Run, RunStatus, RunTrigger


class RunSerializer(serializers.ModelSerializer):
    job_name = serializers.CharField(source="job.name", read_only=True)

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
            "worker",
            "result_code",
            "result",
            "message",
            "missed_count",
            "dedupe_key",
            "held",
            "output",
        )
        read_only_fields = fields


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
                raise ValidationError({name or self.field_name: ["out of range"]}) from None
        return super().filter(qs, value)


class RunFilter(filters.FilterSet):
    status = filters.MultipleChoiceFilter(choices=RunStatus.choices)
    trigger = filters.MultipleChoiceFilter(choices=RunTrigger.choices)
    enqueued_after = UtcDateTimeFilter(field_name="enqueued_at", lookup_expr="gte")
    enqueued_before = UtcDateTimeFilter(field_name="enqueued_at", lookup_expr="lt")
    scheduled_after = UtcDateTimeFilter(field_name="scheduled_for", lookup_expr="gte")
    scheduled_before = UtcDateTimeFilter(field_name="scheduled_for", lookup_expr="lt")
    finished_after = UtcDateTimeFilter(field_name="finished_at", lookup_expr="gte")
    finished_before = UtcDateTimeFilter(field_name="finished_at", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ("job", "status", "trigger", "dedupe_key")


class RunViewSet(viewsets.ReadOnlyModelViewSet):
    """Runs, newest first. Filter by job, status (repeatable), trigger and
    time (`enqueued_after=2026-11-30T08:00:00Z` …, after inclusive, before
    exclusive). The list leaves out `output`; one run has it."""

    filterset_class = RunFilter
    job_token_actions = ("list", "retrieve")

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


def register(router: Any) -> list[Any]:
    router.register("runs", RunViewSet, basename="run")
    return []
