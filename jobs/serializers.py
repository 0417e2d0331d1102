"""The API's shapes for jobs, triggers and run requests.

JobSerializer is also the export format of `export_jobs` and the input of
`import_jobs` and of jobs declared in code (F-75): one shape everywhere.
DRF converts types; the rules are the admin's, applied by
jobs.definitions.plan_definition (model full_clean), so the API never
validates a field differently from the admin.

References travel as names, so that an export means the same on another
installation: a concurrency group and a result variable by name, a job
(`parent`, a dependency's `upstream_job`) by its key, else its id
(jobs.references).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Min, Model
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, gettext_noop
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

from jobs import audit, capabilities
from jobs.core.triggers import ANCHOR_ALIASES, DEPENDENCY_STATUSES
from jobs.definitions import (
    JOB_FIELDS,
    OPERATOR_FIELDS,
    TRIGGER_FIELDS,
    django_errors,
    plan_definition,
    save_definition,
)
from jobs.models import ConcurrencyGroup, HolidayCalendar, Job, ResultVariable, Trigger
from jobs.policies import IntervalAnchorChoice, TriggerKind
from jobs.references import reference_of, stored_job
from jobs.scripts import SUPERUSERS_ONLY, may_write_scripts, touches_scripts
from jobs.specs import trigger_description
from jobs.strict_input import StrictInput

INTERVAL_MINUTES_MAX = 43200  # 30 days, the longest interval a trigger takes
# Another name of interval_minutes on input: the migration manual's (its
# curl sends {"auto_sync_interval_minutes": 60}).
INTERVAL_ALIAS = "auto_sync_interval_minutes"
# The relations a job names (by name or key): fetch them with the jobs.
JOB_RELATIONS = ("concurrency_group", "result_variable", "condition_variable", "parent")
# Job fields that are gone, with what replaces them: a definition that still
# has one is refused with this (an old export must not lose it silently).
RETIRED_JOB_FIELDS = {
    "allowed_during_maintenance": gettext_noop(
        "no longer a job field: the maintenance allow-list is code's (F-29). Register the"
        ' job\'s function with @takt_job("name", allowed_during_maintenance=True) instead'
    ),
}


class ModelRulesSerializer(StrictInput, serializers.ModelSerializer):
    """Converts types only: ranges, lengths and the models' validators are
    left to the model's full_clean (jobs.definitions), so the API refuses
    a value with the admin's words, not with a second set of rules. A
    field it does not write is refused (jobs.strict_input)."""

    def build_standard_field(self, field_name: str, model_field: Any) -> tuple[Any, dict[str, Any]]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        for rule in ("min_value", "max_value", "max_length", "validators"):
            kwargs.pop(rule, None)
        return field_class, kwargs


class AuditNote(serializers.Serializer):
    """Mixed in first by the serializers of audited objects (F-120): an
    optional `note`, kept with the change in the object's history
    (jobs.audit), never stored on the object."""

    note = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=audit.NOTE_MAX_LENGTH,
        help_text="Why: kept with this change in the object's history (not on the object).",
    )
    _audit_note = ""

    def to_internal_value(self, data: Any) -> Any:
        values = super().to_internal_value(data)
        self._audit_note = values.pop("note", "").strip()
        return values

    def save(self, **kwargs: Any) -> Any:
        with audit.noting(self._audit_note) if self._audit_note else nullcontext():
            return super().save(**kwargs)


# A relation named by its name: the refusals, by what it names.
BY_NAME_ERRORS = {
    "concurrency group": {
        "does_not_exist": gettext_lazy("no concurrency group is named {value!r}"),
        "invalid": gettext_lazy("give the concurrency group's name"),
    },
    "result variable": {
        "does_not_exist": gettext_lazy("no result variable is named {value!r}"),
        "invalid": gettext_lazy("give the result variable's name"),
    },
}


class ByName(serializers.SlugRelatedField):
    """A concurrency group or result variable named by its name (any case:
    names are unique whatever the case)."""

    def __init__(self, model: type[Model], what: str, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(
            slug_field="name",
            queryset=model._default_manager.all(),
            error_messages=BY_NAME_ERRORS[what],
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            return self.get_queryset().get(name__iexact=data)
        except ObjectDoesNotExist:
            self.fail("does_not_exist", value=data)


@extend_schema_field(
    {
        "oneOf": [{"type": "string"}, {"type": "integer"}],
        "nullable": True,
        "description": "A job: its key (a string), or its id (an integer) when it has no key.",
    }
)
class JobReference(serializers.Field):
    """A job named by its key (a string) or its id (an integer); written
    out as the key when the job has one, else the id. Resolved by the
    context's `resolve_job` (jobs.references; default: the stored jobs)."""

    default_error_messages = {
        "invalid": gettext_lazy("give a job's key (a string) or id (an integer)")
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, int | str) or data == "":
            self.fail("invalid")
        resolve = self.context.get("resolve_job", stored_job)
        try:
            return resolve(data)
        except LookupError as exc:
            raise serializers.ValidationError(str(exc.args[0])) from None

    def to_representation(self, value: Job) -> Any:
        return reference_of(value)


ACCEPTED_VALUES_WORDS = gettext_lazy("give the accepted values as whole numbers, e.g. [0, 200]")


class WholeNumbers(serializers.ListField):
    """A condition's accepted values: a list of whole numbers (no strings,
    no booleans: JSON and YAML have numbers)."""

    child = serializers.IntegerField()

    def to_internal_value(self, data: Any) -> list[int]:
        if not isinstance(data, list) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in data
        ):
            raise serializers.ValidationError(ACCEPTED_VALUES_WORDS)
        return list(data)


@extend_schema_field(
    {"type": "array", "items": {"type": "string", "enum": list(DEPENDENCY_STATUSES)}}
)
class RunEnds(serializers.ListField):
    """A dependency's statuses; which ones count is the model's rule."""

    child = serializers.CharField()


class AnchorChoice(serializers.ChoiceField):
    """An interval's anchor: one of the choices, or an old name
    (jobs.core.triggers.ANCHOR_ALIASES: `from_enqueue` is `fixed_rate`)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str):
            data = ANCHOR_ALIASES.get(data, data)
        return super().to_internal_value(data)


class TriggerSerializer(ModelRulesSerializer):
    id = serializers.IntegerField(
        required=False, help_text="Given: update that trigger. Omitted: a new trigger."
    )
    exclude_calendars = serializers.SlugRelatedField(
        many=True,
        slug_field="name",
        queryset=HolidayCalendar.objects.all(),
        required=False,
        error_messages={"does_not_exist": gettext_lazy("no holiday calendar is named {value!r}")},
        help_text="Names of holiday calendars whose days it skips.",
    )
    upstream_job = JobReference(
        help_text="Dependency: the job whose end starts this one (its key, else its id)."
    )
    upstream_statuses = RunEnds(
        required=False,
        help_text='Dependency: the ends that start this job (default ["succeeded"]).',
    )
    interval_anchor = AnchorChoice(
        choices=IntervalAnchorChoice.choices,
        required=False,
        help_text=(
            "Interval: `fixed_rate` (on the grid start_at + k × N; the default),"
            " `after_enqueue` (N after the beat enqueued the previous run: it drifts by how late"
            " that was), `from_start`, `from_finish` (N after the previous run's start or end)."
            " `from_enqueue`, the grid's old name, is accepted as `fixed_rate`."
        ),
    )
    description = serializers.SerializerMethodField(help_text="The schedule in words.")

    class Meta:
        model = Trigger
        fields = (
            "id",
            *TRIGGER_FIELDS,
            "exclude_calendars",
            "description",
            "next_run_at",
            "last_fired_at",
            "missed_count",
        )
        read_only_fields = ("next_run_at", "last_fired_at", "missed_count")

    def get_description(self, obj: Trigger) -> str:
        return trigger_description(obj)


# Kept by Takt, shown read-only: the pause's who and when, counters, times.
JOB_STATE = (
    "code_managed",
    "paused_by",
    "paused_at",
    "consecutive_failures",
    "runs_done",
    "dropped_retries",
    "created_at",
    "updated_at",
)


class JobSerializer(AuditNote, ModelRulesSerializer):
    """A job with its triggers. Writing `triggers` replaces the job's list
    (entries with an `id` update that trigger); writing `interval_minutes`
    sets the schedule to one interval trigger (null: no schedule)."""

    triggers = TriggerSerializer(many=True, required=False)
    concurrency_group = ByName(
        ConcurrencyGroup,
        "concurrency group",
        help_text="The name of its concurrency group (F-31); null: none.",
    )
    result_variable = ByName(
        ResultVariable,
        "result variable",
        help_text="The name of the variable its runs write their result code to (F-32).",
    )
    condition_variable = ByName(
        ResultVariable,
        "result variable",
        help_text="The name of the variable that must hold an accepted value before it starts.",
    )
    condition_values = WholeNumbers(
        required=False, help_text="The values of condition_variable that let it start."
    )
    parent = JobReference(
        help_text="Its parent job (F-04), by key (else id): it then runs only as its part."
    )
    interval_minutes = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=INTERVAL_MINUTES_MAX,
        help_text=(
            "The schedule as one interval trigger, in minutes (1 to 43200). Writing it replaces"
            " the job's triggers; null removes the schedule. Read: the interval when the job has"
            " exactly one trigger, an interval of whole minutes; else null."
        ),
    )
    auto_sync_interval_minutes = serializers.IntegerField(
        write_only=True,
        required=False,
        allow_null=True,
        min_value=1,
        max_value=INTERVAL_MINUTES_MAX,
        help_text=(
            "Another name of interval_minutes (input only). Given with interval_minutes,"
            " both must say the same."
        ),
    )
    next_run_at = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = (
            "id",
            *JOB_FIELDS,
            "triggers",
            "interval_minutes",
            INTERVAL_ALIAS,
            "next_run_at",
            *JOB_STATE,
            "note",
        )
        read_only_fields = JOB_STATE
        extra_kwargs = {
            "key": {"validators": []},  # uniqueness: model validation, one message
            "script": {"trim_whitespace": False},  # a script's source as written
        }

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_next_run_at(self, obj: Job) -> Any:
        value = getattr(obj, "_next_run", None)
        if value is None and not hasattr(obj, "_next_run"):
            value = obj.triggers.filter(active=True).aggregate(at=Min("next_run_at"))["at"]
        return serializers.DateTimeField().to_representation(value) if value else None

    def to_representation(self, instance: Job) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["interval_minutes"] = interval_minutes_of(data["triggers"])
        return data

    def to_internal_value(self, data: Any) -> Any:
        retired = sorted(set(RETIRED_JOB_FIELDS) & set(data)) if isinstance(data, dict) else []
        if retired:
            raise serializers.ValidationError(
                {name: [gettext(RETIRED_JOB_FIELDS[name])] for name in retired}
            )
        attrs = super().to_internal_value(data)
        if INTERVAL_ALIAS in attrs:
            _take_interval_alias(attrs, with_triggers=isinstance(data, dict) and "triggers" in data)
        return attrs

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        triggers = attrs.pop("triggers", None)
        has_interval = "interval_minutes" in attrs
        minutes = attrs.pop("interval_minutes", None)
        if has_interval and triggers is not None:
            raise serializers.ValidationError(
                {
                    "interval_minutes": [
                        gettext("give either interval_minutes or triggers, not both")
                    ]
                }
            )
        if has_interval:
            triggers = self._interval_triggers(minutes)
        code_only = set(attrs) - OPERATOR_FIELDS if self.instance else set()
        if (
            self.instance is not None
            and self.instance.code_managed
            and (code_only or triggers is not None)
        ):
            field = sorted(code_only)[0] if code_only else "triggers"
            raise serializers.ValidationError(
                {field: [gettext("this job is declared in code (code_managed): change it there")]}
            )
        self._check_scripts(attrs, triggers)
        try:
            plan = plan_definition(self.instance, attrs, triggers, now=timezone.now())
        except DjangoValidationError as exc:
            raise serializers.ValidationError(django_errors(exc)) from None
        self._check_capabilities(attrs, triggers, plan)
        return {"plan": plan}

    def _check_capabilities(self, attrs: dict[str, Any], triggers: Any, plan: Any) -> None:
        """What the job can do, before and after the change, needs the
        caller's capabilities (jobs.capabilities): 403 naming the field.
        Only the operator's fields (enabled, the pause) need none. Without
        a request (an import) the importer checks (jobs.importing)."""
        request = self.context.get("request")
        if request is None:
            return
        if self.instance is not None and triggers is None and set(attrs) <= OPERATOR_FIELDS:
            return
        needed = capabilities.needed_by_plan(plan) | capabilities.needed_by_job(self.instance)
        lacking = capabilities.missing(request.user, needed)
        if lacking:
            raise PermissionDenied(capabilities.refusals(lacking))

    def _check_scripts(self, attrs: dict[str, Any], triggers: list[Any] | None) -> None:
        """Through the API only a superuser creates or changes a script job
        (F-02 `script`): 403 naming `kind`. Enabling or pausing one (only
        OPERATOR_FIELDS) stays an operator's. Without a request (an
        import) the importer checks (jobs.importing)."""
        request = self.context.get("request")
        stored = self.instance.kind if self.instance is not None else None
        if request is None or not touches_scripts(stored, attrs.get("kind")):
            return
        if stored is not None and triggers is None and set(attrs) <= OPERATOR_FIELDS:
            return
        if not may_write_scripts(request.user):
            raise PermissionDenied({"kind": [gettext(SUPERUSERS_ONLY)]})

    def _interval_triggers(self, minutes: int | None) -> list[dict[str, Any]]:
        if minutes is None:
            return []
        current = list(self.instance.triggers.all()) if self.instance is not None else []
        if len(current) == 1 and current[0].kind == TriggerKind.INTERVAL:
            return [{"id": current[0].pk, "interval_seconds": minutes * 60}]
        return [
            {
                "kind": TriggerKind.INTERVAL,
                "interval_seconds": minutes * 60,
                "interval_anchor": IntervalAnchorChoice.AFTER_ENQUEUE,
            }
        ]

    def create(self, validated_data: dict[str, Any]) -> Job:
        return save_definition(validated_data["plan"], by=self._by(), now=timezone.now())

    def update(self, instance: Job, validated_data: dict[str, Any]) -> Job:
        return save_definition(validated_data["plan"], by=self._by(), now=timezone.now())

    def _by(self) -> str:
        request = self.context.get("request")
        if request is not None and request.user.is_authenticated:
            return f"{request.user.get_username()} (API)"
        return str(self.context.get("by", "API"))


def _take_interval_alias(attrs: dict[str, Any], *, with_triggers: bool) -> None:
    """Move auto_sync_interval_minutes to interval_minutes in `attrs`; both
    given with different values, or the alias with `triggers`, is refused."""
    minutes = attrs.pop(INTERVAL_ALIAS)
    if "interval_minutes" in attrs and attrs["interval_minutes"] != minutes:
        message = gettext(
            "interval_minutes and auto_sync_interval_minutes name one setting:"
            " give one of them, or both with the same value"
        )
        raise serializers.ValidationError(
            {"interval_minutes": [message], INTERVAL_ALIAS: [message]}
        )
    if with_triggers:
        raise serializers.ValidationError(
            {
                INTERVAL_ALIAS: [
                    gettext("give either auto_sync_interval_minutes or triggers, not both")
                ]
            }
        )
    attrs["interval_minutes"] = minutes


def interval_minutes_of(triggers: list[dict[str, Any]]) -> int | None:
    if len(triggers) != 1 or triggers[0]["kind"] != TriggerKind.INTERVAL:
        return None
    seconds = triggers[0]["interval_seconds"]
    return seconds // 60 if seconds and seconds % 60 == 0 else None


class RunRequestSerializer(StrictInput):
    """The body of POST /api/v1/jobs/<id>/run (all optional)."""

    params = serializers.JSONField(
        required=False, help_text="Merged over the job's params (a JSON object)."
    )
    priority = serializers.IntegerField(required=False, min_value=0, max_value=9)
    run_at = serializers.DateTimeField(
        required=False, help_text="Start at this time instead of now (with a time zone)."
    )
