"""The coordination API (F-31, F-32): concurrency groups and result variables.

    GET    /api/v1/groups            filter: name (part); each with `holders`,
                                     the runs holding its slots now (Redis)
    POST   /api/v1/groups
    GET    /api/v1/groups/<id>
    PATCH  /api/v1/groups/<id>
    DELETE /api/v1/groups/<id>       409 while a job is in it
    GET    /api/v1/variables         filter: name (part)
    POST   /api/v1/variables
    GET    /api/v1/variables/<id>
    PATCH  /api/v1/variables/<id>    a new `value` is set by runs.variables.set_variable,
                                     recorded as set by the caller
    DELETE /api/v1/variables/<id>    409 while a job writes or reads it

Jobs name their group and variables by name (jobs.serializers). The rules
are the models' full_clean (the admin's, with its words); a name taken
already, in any case, is refused on `name`. Permissions: Django's model
permissions on ConcurrencyGroup and ResultVariable.
"""

from __future__ import annotations

import copy
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Model, ProtectedError, QuerySet
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, gettext_noop
from django_filters import rest_framework as filters
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema_field,
    extend_schema_view,
    inline_serializer,
)
from redis import RedisError
from rest_framework import serializers, status, viewsets
from rest_framework.exceptions import APIException

from jobs.api.auth import caller
from jobs.api.base import TaktApi, extend_schema
from jobs.models import ConcurrencyGroup, Job, ResultVariable
from jobs.serializers import AuditNote, ModelRulesSerializer
from runs.slots import group_key, slot_holders  # the API is glue over all apps
from runs.variables import set_variable

# At most this many jobs are named in a refusal; the rest are counted.
NAMED_JOBS = 20


# The refusal of a name another request took meanwhile, by model.
NAME_TAKEN = {
    "concurrencygroup": gettext_noop("a concurrency group with this name exists already"),
    "resultvariable": gettext_noop("a result variable with this name exists already"),
}


class InUse(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = gettext_lazy("in use by jobs")


IN_USE = OpenApiResponse(
    inline_serializer("InUse", {"jobs": serializers.ListField(child=serializers.CharField())}),
    description="Jobs use it: nothing was deleted (the message names them)",
)


def _jobs_text(jobs: QuerySet[Job]) -> str:
    rows = list(jobs.order_by("name", "pk").values_list("name", "pk")[: NAMED_JOBS + 1])
    text = ", ".join(f"{name!r} (#{pk})" for name, pk in rows[:NAMED_JOBS])
    if len(rows) > NAMED_JOBS:
        text = gettext("%(jobs)s and %(count)s more") % {
            "jobs": text,
            "count": jobs.count() - NAMED_JOBS,
        }
    return text


class ModelCleanSerializer(ModelRulesSerializer):
    """Validated by the model's full_clean on the object as it would be
    saved; the unique name (a constraint on Lower(name), which Django
    reports on no field) is refused on `name`."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        model: type[Model] = self.Meta.model
        candidate = copy.copy(self.instance) if self.instance is not None else model()
        for name, value in attrs.items():
            setattr(candidate, name, value)
        try:
            candidate.full_clean()
        except DjangoValidationError as exc:
            errors = dict(exc.message_dict)
            if "__all__" in errors:
                errors.setdefault("name", []).extend(errors.pop("__all__"))
            raise serializers.ValidationError(errors) from None
        return attrs

    def _save(self, write: Any) -> Any:
        """Run `write` in a transaction; a name another request took
        meanwhile (the database's unique index) is refused on `name`."""
        try:
            with transaction.atomic():
                return write()
        except IntegrityError:
            raise serializers.ValidationError(
                {"name": [gettext(NAME_TAKEN[self.Meta.model._meta.model_name])]}
            ) from None


# --- concurrency groups -------------------------------------------------------------


@extend_schema_field(serializers.ListField(child=serializers.IntegerField(), allow_null=True))
class RunIds(serializers.SerializerMethodField):
    """Run ids read from Redis; null when Redis cannot be reached."""


class GroupSerializer(AuditNote, ModelCleanSerializer):
    """A concurrency group (F-31): its jobs run at most `limit` at a time;
    jobs name it by its name."""

    job_count = serializers.IntegerField(read_only=True, help_text="The jobs in the group.")
    holders = RunIds(
        help_text="The runs holding a slot of the group now (from Redis; null: unreachable)."
    )
    reserved = RunIds(
        help_text="Waiting runs a freed slot is reserved for, to start next (null: unreachable)."
    )

    class Meta:
        model = ConcurrencyGroup
        fields = (
            "id",
            "name",
            "colour",
            "limit",
            "description",
            "job_count",
            "holders",
            "reserved",
            "note",
        )

    def _slots(self, group: ConcurrencyGroup) -> list[tuple[int | None, bool]] | None:
        """The group's slot members, read once per group and request."""
        cache = self.context.setdefault("slots", {})
        if group.pk not in cache:
            if cache.get("down"):
                return None
            try:
                cache[group.pk] = slot_holders(group_key(group.pk))
            except RedisError:
                cache["down"] = True
                return None
        found: list[tuple[int | None, bool]] = cache[group.pk]
        return found

    def get_holders(self, group: ConcurrencyGroup) -> list[int] | None:
        slots = self._slots(group)
        return None if slots is None else [r for r, reserved in slots if r and not reserved]

    def get_reserved(self, group: ConcurrencyGroup) -> list[int] | None:
        slots = self._slots(group)
        return None if slots is None else [r for r, reserved in slots if r and reserved]

    def to_representation(self, instance: ConcurrencyGroup) -> dict[str, Any]:
        if not hasattr(instance, "job_count"):
            instance.job_count = instance.jobs.count()  # type: ignore[attr-defined]
        return super().to_representation(instance)

    def create(self, validated_data: dict[str, Any]) -> ConcurrencyGroup:
        group: ConcurrencyGroup = self._save(
            lambda: ConcurrencyGroup.objects.create(**validated_data)
        )
        return group

    def update(self, instance: ConcurrencyGroup, validated_data: dict[str, Any]) -> Any:
        def write() -> ConcurrencyGroup:
            for name, value in validated_data.items():
                setattr(instance, name, value)
            instance.save()
            return instance

        return self._save(write)


class NameFilter(filters.FilterSet):
    name = filters.CharFilter(lookup_expr="icontains", help_text="Part of the name.")


class GroupFilter(NameFilter):
    class Meta:
        model = ConcurrencyGroup
        fields = ("name",)


@extend_schema_view(destroy=extend_schema(responses={204: None, 409: IN_USE}))
class GroupViewSet(TaktApi, viewsets.ModelViewSet):
    """Concurrency groups (F-31): jobs in one group run at most `limit` at a
    time. `holders` are the runs holding its slots now."""

    serializer_class = GroupSerializer
    filterset_class = GroupFilter
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[ConcurrencyGroup]:
        return ConcurrencyGroup.objects.annotate(job_count=Count("jobs")).order_by("name", "id")

    def perform_destroy(self, instance: ConcurrencyGroup) -> None:
        users = Job.objects.filter(concurrency_group=instance)
        message = gettext_noop(
            "jobs are in this group: %(jobs)s: move them to another group (or none) first"
        )
        _delete_unless_used(instance, users, message)


def _delete_unless_used(instance: Model, users: QuerySet[Job], message: str) -> None:
    """Delete `instance`, or refuse (409 naming the jobs in `message`'s
    %(jobs)s, in the active language)."""
    try:
        with transaction.atomic():
            if not users.exists():
                instance.delete()
                return
    except ProtectedError:  # a job took it up meanwhile
        pass
    raise InUse({"jobs": [gettext(message) % {"jobs": _jobs_text(users)}]})


# --- result variables ---------------------------------------------------------------


# A variable's value is a 32-bit integer column; SQLite would take more.
VALUE_RANGE = (-(2**31), 2**31 - 1)


class VariableSerializer(AuditNote, ModelCleanSerializer):
    """A result variable (F-32): the result code its writers' runs leave in
    it, and what its readers' conditions wait for; jobs name it by its name."""

    value = serializers.IntegerField(
        required=False,
        min_value=VALUE_RANGE[0],
        max_value=VALUE_RANGE[1],
        help_text="Its value now (-1 until a run sets it); a new one set here is recorded as"
        " set by you (changed_by) and in the decision log.",
    )
    writers = serializers.PrimaryKeyRelatedField(
        many=True, read_only=True, help_text="The ids of the jobs whose runs write their code here."
    )
    readers = serializers.PrimaryKeyRelatedField(
        many=True, read_only=True, help_text="The ids of the jobs whose condition reads it."
    )

    class Meta:
        model = ResultVariable
        fields = (
            "id",
            "name",
            "value",
            "description",
            "changed_at",
            "changed_by_run",
            "changed_by",
            "writers",
            "readers",
            "note",
        )
        read_only_fields = ("changed_at", "changed_by_run", "changed_by")
        extra_kwargs = {
            "changed_by_run": {"help_text": "The run that last set it (null: set by hand)."},
            "changed_by": {"help_text": "Who set it by hand, if no run did."},
        }

    def create(self, validated_data: dict[str, Any]) -> ResultVariable:
        value = validated_data.pop("value", None)

        def write() -> ResultVariable:
            variable = ResultVariable.objects.create(**validated_data)
            if value is not None and value != variable.value:
                set_variable(
                    variable, value, by=caller(self.context["request"]), now=timezone.now()
                )
            return variable

        variable: ResultVariable = self._save(write)
        return variable

    def update(self, instance: ResultVariable, validated_data: dict[str, Any]) -> Any:
        value = validated_data.pop("value", None)

        def write() -> ResultVariable:
            for name, new in validated_data.items():
                setattr(instance, name, new)
            if validated_data:
                instance.save(update_fields=list(validated_data))
            stored = ResultVariable.objects.filter(pk=instance.pk).values_list("value", flat=True)
            if value is not None and value != stored.first():
                set_variable(
                    instance, value, by=caller(self.context["request"]), now=timezone.now()
                )
            return instance

        return self._save(write)


class VariableFilter(NameFilter):
    class Meta:
        model = ResultVariable
        fields = ("name",)


@extend_schema_view(destroy=extend_schema(responses={204: None, 409: IN_USE}))
class VariableViewSet(TaktApi, viewsets.ModelViewSet):
    """Result variables (F-32): the result code a job's runs write, and the
    value another job's condition waits for. PATCH `value` to set it by
    hand (e.g. -1 to hold the jobs waiting for 0)."""

    serializer_class = VariableSerializer
    filterset_class = VariableFilter
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[ResultVariable]:
        return ResultVariable.objects.prefetch_related("writers", "readers").order_by("name", "id")

    def perform_destroy(self, instance: ResultVariable) -> None:
        users = Job.objects.filter(pk__in=instance.writers.values("pk")) | Job.objects.filter(
            pk__in=instance.readers.values("pk")
        )
        message = gettext_noop("jobs write or read this variable: %(jobs)s: change them first")
        _delete_unless_used(instance, users, message)


def register(router: Any) -> list[Any]:
    router.register("groups", GroupViewSet, basename="group")
    router.register("variables", VariableViewSet, basename="variable")
    return []
