"""The decision log's API (F-65; runs/decisions.py): `GET /api/v1/decisions`,
newest first, read-only, with the permission `takt_runs.view_schedulerdecision`
(a user's or his token's; a job's token has no access). Filters: `job` (an
id; 0 is cluster-wide), `kind` (repeatable), `since` (inclusive) and
`until` (exclusive), ISO 8601 times compared in UTC. A query parameter that
is none of these nor `limit`/`offset` is refused with a 400 naming it: a
typo must not widen the answer to every decision. The log's stream is
drained first, so the answer holds what was decided a moment ago."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from rest_framework import mixins, serializers, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from jobs.api.base import CappedCountPagination, TaktApi
from jobs.strict_input import field_refusals
from runs.api.views import RUN_ID_MAX, RunIdFilter, UtcDateTimeFilter
from runs.decisions import KINDS, drain_quietly
from runs.models import SchedulerDecision

PAGING = ("limit", "offset")


class DecisionSerializer(serializers.ModelSerializer):
    job = serializers.IntegerField(source="job_id", help_text="The job's id; 0: all jobs.")
    run = serializers.IntegerField(source="run_id", allow_null=True)
    trigger = serializers.IntegerField(source="trigger_id", allow_null=True)

    class Meta:
        model = SchedulerDecision
        fields = ("id", "at", "kind", "job", "run", "trigger", "detail")
        read_only_fields = fields


class DecisionFilter(filters.FilterSet):
    job = RunIdFilter(
        field_name="job_id", min_value=0, max_value=RUN_ID_MAX, help_text="A job's id; 0: all jobs."
    )
    kind = filters.MultipleChoiceFilter(choices=[(k, k) for k in KINDS])
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = SchedulerDecision
        fields = ("job", "kind", "since", "until")


class DecisionViewSet(TaktApi, mixins.ListModelMixin, viewsets.GenericViewSet):
    """The scheduler's decisions, newest first (runs/decisions.py lists
    the kinds and what each detail says)."""

    serializer_class = DecisionSerializer
    filterset_class = DecisionFilter
    pagination_class = CappedCountPagination

    def get_queryset(self) -> QuerySet[SchedulerDecision]:
        return SchedulerDecision.objects.order_by("-id")

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        known = [*DecisionFilter.base_filters, *PAGING]
        refusals = field_refusals(request.query_params.keys(), known)
        if refusals:
            raise ValidationError(refusals)
        drain_quietly()
        return super().list(request, *args, **kwargs)


def register(router: Any) -> list[Any]:
    router.register("decisions", DecisionViewSet, basename="decision")
    return []
