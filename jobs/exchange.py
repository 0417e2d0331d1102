"""Jobs as data (F-74): `export_jobs`, and the reading of one job
definition that `import_jobs` (jobs.importing) and jobs declared in code
(F-75, jobs.declared) share.

The format is JobSerializer's, one shape with the REST API: a list of jobs,
each with every editable Job field and its `triggers` (every editable
Trigger field, `exclude_calendars` as calendar names). References are by
name: a concurrency group and a result variable by their names, a job
(`parent`, `upstream_job`) by its key, else its id. Read-only state
(next_run_at, runs_done, ...) is left out of an export and ignored on
import; `id` is exported for reference. A definition is complete: a field it
omits takes the model's default, and omitted `triggers` means none.

Reading a definition has two steps, so that every path refuses the same
input with the admin's message on the same field:

1. `parse_definition`: JobSerializer converts the types (dates, calendar
   names, choices); unknown fields are refused (a typo must not vanish).
2. `plan_job`: jobs.definitions.plan_definition validates with the models'
   full_clean() and matches the triggers against the stored ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml
from django.db.models import Model, QuerySet

from jobs.definitions import (
    JOB_FIELDS,
    TRIGGER_FIELDS,
    DefinitionInvalid,
    DefinitionPlan,
    plan_definition,
)
from jobs.documents import DocumentRefused, load_document
from jobs.errors import TaktError
from jobs.models import Job
from jobs.policies import TriggerKind
from jobs.references import Resolver, reference_of, stored_job
from jobs.serializers import (
    JOB_RELATIONS,
    RETIRED_JOB_FIELDS,
    JobSerializer,
    TriggerSerializer,
)
from jobs.specs import trigger_description

FORMATS = ("yaml", "json")
EXPORT_TRIGGER_FIELDS = (*TRIGGER_FIELDS, "exclude_calendars")


class InvalidDefinition(TaktError, ValueError):
    """One or more job definitions were refused. `problems` holds
    (where, field, message) triples; str() is one line per problem, e.g.
    ``TAKT_JOBS['nightly'].triggers[0].cron_expression: minute: 61 ...``."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        self.problems = problems
        super().__init__("\n".join(_line(*p) for p in problems))

    @property
    def fields(self) -> list[str]:
        return [f for _, f, _ in self.problems]


def _line(where: str, field_path: str, message: str) -> str:
    return f"{where}{field_path}: {message}" if field_path else f"{where.rstrip('.: ')}: {message}"


# --- one definition -----------------------------------------------------------------


class _Reader(JobSerializer):
    """JobSerializer's fields and type conversion without its validate():
    the rules are applied by plan_job, against the job this definition
    matched (the serializer's own check refuses edits to code-managed jobs,
    which the sync of declared jobs makes). Read-only fields (an export's
    `id`) are dropped, not refused (jobs.strict_input)."""

    read_only_input = "ignore"

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return attrs


@dataclass
class Definition:
    """A parsed job definition: `values` for every field in JOB_FIELDS,
    `triggers` as plan_definition takes them, and the `id` it was exported
    with (if any)."""

    values: dict[str, Any]
    triggers: list[dict[str, Any]]
    id: Any = None


def parse_definition(raw: Any, *, where: str, resolve: Resolver = stored_job) -> Definition:
    """Convert one job in the export format. Raises InvalidDefinition naming
    `where` and the field (also for fields the format does not know, and
    those it no longer has: RETIRED_JOB_FIELDS). References to jobs go
    through `resolve` (jobs.references; a Pending one is left in the
    values)."""
    if not isinstance(raw, dict):
        raise InvalidDefinition([(where, "", f"expected a mapping of fields, got {raw!r}")])
    job_fields, trigger_fields = set(_Reader().fields), set(TriggerSerializer().fields)
    problems = [
        (where, name, RETIRED_JOB_FIELDS.get(name, "unknown field"))
        for name in raw
        if name not in job_fields
    ]
    triggers_raw = raw.get("triggers")
    if isinstance(triggers_raw, list):
        for i, entry in enumerate(triggers_raw):
            if isinstance(entry, dict):
                unknown = [n for n in entry if n not in trigger_fields]
                problems += [(where, f"triggers[{i}].{n}", "unknown field") for n in unknown]
    if "interval_minutes" in raw and "triggers" in raw:
        problems.append((where, "interval_minutes", "give either interval_minutes or triggers"))
    if problems:
        raise InvalidDefinition(problems)
    reader = _Reader(data=raw, context={"resolve_job": resolve})
    if not reader.is_valid():
        raise InvalidDefinition([(where, path, msg) for path, msg in _walk(reader.errors, "")])
    data = dict(reader.validated_data)
    triggers = [_trigger_entry(t) for t in data.pop("triggers", [])]
    minutes = data.pop("interval_minutes", None)
    if minutes is not None:
        triggers = [{"kind": TriggerKind.INTERVAL, "interval_seconds": minutes * 60}]
    blank = Job()
    values = {name: data.get(name, getattr(blank, name)) for name in JOB_FIELDS}
    return Definition(values, triggers, raw.get("id"))


def _trigger_entry(validated: Any) -> dict[str, Any]:
    # Stored triggers are matched by schedule, never by an id from elsewhere.
    return {k: v for k, v in dict(validated).items() if k != "id"}


def _walk(errors: Any, path: str) -> Iterator[tuple[str, str]]:
    """DRF's nested error data as (field path, message) pairs."""
    if isinstance(errors, dict):
        for key, value in errors.items():
            if isinstance(key, int) or str(key).isdigit():  # a nested list's entries by index
                yield from _walk(value, f"{path}[{key}]")
                continue
            name = "" if key in ("non_field_errors", "__all__") else str(key)
            yield from _walk(value, f"{path}.{name}" if path and name else path or name)
    elif isinstance(errors, list) and all(isinstance(e, str) for e in errors):
        for message in errors:
            yield path, str(message)
    elif isinstance(errors, list):
        for i, item in enumerate(errors):
            yield from _walk(item, f"{path}[{i}]")
    else:
        yield path, str(errors)


def plan_job(
    job: Job | None, definition: Definition, *, where: str, now: datetime
) -> DefinitionPlan:
    """Validate `definition` against `job` (None: a new job) with the
    admin's rules and return the plan. Raises InvalidDefinition naming the
    field (for triggers: `triggers[i].field`). Writes nothing."""
    try:
        return plan_definition(
            job, dict(definition.values), definition.triggers, now=now, past_once_fired=True
        )
    except DefinitionInvalid as exc:
        problems = [(where, path, message) for path, message in _walk(exc.errors, "")]
        raise InvalidDefinition(problems) from None


def plan_changes(before: dict[str, Any], plan: DefinitionPlan) -> list[str]:
    """What `plan` changes on the job whose JOB_FIELDS were `before`, one
    line each: ``priority: 5 → 3``, ``trigger added: every day at 03:00``;
    for a new job, the fields off their defaults: ``priority: 3``."""
    lines = [
        f"{name}: {_show(getattr(plan.job, name))}"
        if plan.creates
        else f"{name}: {_show(before[name])} → {_show(getattr(plan.job, name))}"
        for name in JOB_FIELDS
        if before[name] != getattr(plan.job, name)
    ]
    lines += [f"trigger removed: {trigger_description(t)}" for t in plan.delete]
    lines += [
        f"trigger added: {trigger_description(t.trigger)}"
        for t in plan.triggers or []
        if t.trigger.pk is None
    ]
    return lines


def job_state(job: Job | None) -> dict[str, Any]:
    blank = job if job is not None else Job()
    return {name: getattr(blank, name) for name in JOB_FIELDS}


def _show(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Job):
        return repr(reference_of(value))
    if isinstance(value, Model):  # a concurrency group or result variable: its name
        return repr(str(value))
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)


# --- export -----------------------------------------------------------------------


def export_queryset(
    keys: Iterable[str] = (), *, include_code_managed: bool = False
) -> QuerySet[Job]:
    """The jobs to export, in a stable order: those with `keys` (all must
    exist, else InvalidDefinition), or every job; jobs declared in code only
    when asked for by key or with `include_code_managed`."""
    keys = list(keys)
    jobs = (
        Job.objects.order_by("name", "id")
        .select_related(*JOB_RELATIONS)
        .prefetch_related("triggers__exclude_calendars", "triggers__upstream_job")
    )
    if keys:
        missing = sorted(
            set(keys) - set(Job.objects.filter(key__in=keys).values_list("key", flat=True))
        )
        if missing:
            raise InvalidDefinition([("--key ", "", f"no job has the key {k!r}") for k in missing])
        return jobs.filter(key__in=keys)
    return jobs if include_code_managed else jobs.filter(code_managed=False)


def export_data(jobs: Iterable[Job]) -> list[dict[str, Any]]:
    """The jobs in the export format, as plain lists, dicts and scalars."""
    exported = []
    for data in JobSerializer(list(jobs), many=True).data:
        entry = {"id": data["id"], **{name: data[name] for name in JOB_FIELDS}}
        entry["triggers"] = [{n: t[n] for n in EXPORT_TRIGGER_FIELDS} for t in data["triggers"]]
        exported.append(entry)
    return json.loads(json.dumps(exported))  # plain types: safe_dump refuses DRF's dicts


def dump(data: Any, fmt: str) -> str:
    """`data` as YAML or JSON text; the same data always gives the same text."""
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


def load(text: str, fmt: str) -> Any:
    """Parse YAML (which also reads JSON) or JSON text, within the bounds of
    jobs.documents (size, values, no YAML anchors or aliases). Raises
    InvalidDefinition."""
    try:
        return load_document(text, fmt)
    except DocumentRefused as exc:
        raise InvalidDefinition([("file ", "", str(exc))]) from None
    except (ValueError, yaml.YAMLError) as exc:
        raise InvalidDefinition([("file ", "", f"not valid {fmt.upper()}: {exc}")]) from None


def format_of(path: str, given: str | None) -> str:
    if given:
        return given
    return "json" if path.lower().endswith(".json") else "yaml"
