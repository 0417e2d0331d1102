"""A job with its triggers as one definition: validated and written together.

The REST API, `import_jobs` and the sync of jobs declared in code (F-75)
all write jobs through here, and validation is the admin's: each model's
full_clean(), i.e. the field validators plus jobs.validation.validate_job and
validate_trigger. So every path refuses the same input with the same message
on the same field, and a refused definition writes nothing.

1. `plan_definition` applies the new values to the job (in memory) and
   matches the new trigger list against the stored triggers: an entry with
   an `id` updates that trigger; one without an id reuses a stored trigger
   with the same schedule (so an import or a sync keeps next_run_at and the
   missed-run state); the rest are new, and stored triggers nobody matched
   are deleted. Every object is validated; errors are collected per field
   and per trigger (DefinitionInvalid.errors:
   {"triggers": {"1": {"cron_expression": […]}}}, the refused entries by
   index, as DRF reports nested lists).
2. `save_definition` writes the plan in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext

from jobs.command_fields import CommandFields
from jobs.core import triggers as core
from jobs.models import HolidayCalendar, Job, Trigger
from jobs.policies import TriggerKind
from jobs.specs import SCHEDULE_FIELDS, stage_exclude_calendars

# Fields a definition carries, derived from the models so a new field
# round-trips through export and import without being listed here.
_EDITABLE = [f.name for f in Job._meta.concrete_fields if f.editable and not f.primary_key]
# A command job's fields (inherited from jobs.command_fields, so listed
# first by the model) follow `params` and `args`, where a reader of an export looks.
_COMMAND = [f.name for f in CommandFields._meta.get_fields()]
_REST = [n for n in _EDITABLE if n not in _COMMAND]
_AT = _REST.index("args") + 1
JOB_FIELDS = tuple(_REST[:_AT] + _COMMAND + _REST[_AT:])
TRIGGER_FIELDS = tuple(
    f.name
    for f in Trigger._meta.concrete_fields
    if f.editable and not f.primary_key and f.name != "job"
)
# What an operator may still change on a job declared in code.
OPERATOR_FIELDS = frozenset({"enabled", "paused", "pause_note", "paused_until"})


class DefinitionInvalid(ValidationError):
    """A refused definition. `errors` keeps the structure: {field:
    [messages], "triggers": {"<index>": {field: [messages]}} for refused triggers}
    (a plain ValidationError would flatten the per-trigger dicts)."""

    def __init__(self, errors: dict[str, Any]) -> None:
        flat = {k: v for k, v in errors.items() if k != "triggers"}
        if "triggers" in errors:
            flat["triggers"] = [
                f"trigger {index}: {field}: {' '.join(msgs)}"
                for index, entry in errors["triggers"].items()
                for field, msgs in entry.items()
            ]
        super().__init__(flat)
        self.errors = errors


@dataclass
class TriggerPlan:
    trigger: Trigger
    calendars: list[HolidayCalendar]


@dataclass
class DefinitionPlan:
    job: Job
    triggers: list[TriggerPlan] | None  # None: leave the stored triggers alone
    delete: list[Trigger] = field(default_factory=list)
    pause_changed: bool = False  # `paused` is set and differs from the stored job's

    @property
    def creates(self) -> bool:
        return self.job.pk is None


def _schedule_key(values: dict[str, Any], calendars: list[HolidayCalendar]) -> tuple[Any, ...]:
    upstream = values.get("upstream_job")
    dependency = values.get("kind") == TriggerKind.DEPENDENCY
    return (
        *(values.get(name) for name in (*SCHEDULE_FIELDS, "enabled", "jitter_seconds")),
        tuple(sorted(c.pk for c in calendars)),
        # A dependency's "schedule": the job it follows and the ends it takes.
        getattr(upstream, "pk", upstream) if dependency else None,
        tuple(sorted(set(values.get("upstream_statuses") or ["succeeded"]))) if dependency else (),
    )


def _stored_key(trigger: Trigger) -> tuple[Any, ...]:
    values = {name: getattr(trigger, name) for name in TRIGGER_FIELDS if name != "upstream_job"}
    values["upstream_job"] = trigger.upstream_job_id  # no query for the job itself
    return _schedule_key(values, list(trigger.exclude_calendars.all()))


def plan_definition(
    job: Job | None,
    values: dict[str, Any],
    triggers: list[dict[str, Any]] | None,
    *,
    now: datetime,
    past_once_fired: bool = False,
) -> DefinitionPlan:
    """Apply `values` (job fields) and `triggers` (a list of trigger field
    dicts, `exclude_calendars` as HolidayCalendar objects, optional `id`) to
    `job` or a new job, in memory, and validate everything. Raises
    DefinitionInvalid naming the fields; changes nothing stored.

    A new once trigger whose time has passed is refused, as in the admin;
    with `past_once_fired` (imports: a job exported after its once trigger
    fired) it is taken as fired: stored, with no next run."""
    job = job if job is not None else Job()
    pause_changed = "paused" in values and (job.pk is None or job.paused != values["paused"])
    stored_parent = job.parent_id
    for name, value in values.items():
        setattr(job, name, value)
    errors: dict[str, Any] = {}
    try:
        job.full_clean()
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if triggers is None and "parent" not in errors and job.parent_id not in (None, stored_parent):
        # Becoming a child with its triggers left as they are: each trigger
        # is validated only when it is written, so look at the stored ones.
        enabled = job.triggers.filter(enabled=True).count() if job.pk is not None else 0
        if enabled:
            errors["parent"] = [
                f"job #{job.pk} has {enabled} enabled trigger(s), and a child takes no trigger"
                " of its own (it runs only as part of its parent's run): disable or delete"
                ' them in the same change (e.g. "triggers": [])'
            ]
    plan = DefinitionPlan(job, None, pause_changed=pause_changed)
    if triggers is not None:
        plan.triggers, plan.delete, trigger_errors = _plan_triggers(
            job, triggers, now=now, past_once_fired=past_once_fired
        )
        if any(trigger_errors):
            # As DRF reports a nested list: only the refused entries, by index.
            errors["triggers"] = {str(i): e for i, e in enumerate(trigger_errors) if e}
    if errors:
        raise DefinitionInvalid(errors)
    return plan


def _plan_triggers(
    job: Job, entries: list[dict[str, Any]], *, now: datetime, past_once_fired: bool = False
) -> tuple[list[TriggerPlan], list[Trigger], list[dict[str, list[str]]]]:
    unmatched = {t.pk: t for t in job.triggers.all()} if job.pk is not None else {}
    stored_keys = {pk: _stored_key(t) for pk, t in unmatched.items()}  # one read each
    defaults = _defaults()
    plans: list[TriggerPlan] = []
    errors: list[dict[str, list[str]]] = []
    for entry in entries:
        entry = dict(entry)
        calendars = list(entry.pop("exclude_calendars", []) or [])
        trigger_id = entry.pop("id", None)
        trigger: Trigger | None = None
        if trigger_id is not None:
            trigger = unmatched.pop(trigger_id, None)
            if trigger is None:
                errors.append(
                    {"id": [gettext("job has no trigger with id %(id)s") % {"id": trigger_id}]}
                )
                continue
        else:
            wanted = _schedule_key({**defaults, **_normalised(entry)}, calendars)
            pk = next((pk for pk in unmatched if stored_keys[pk] == wanted), None)
            trigger = unmatched.pop(pk) if pk is not None else None
        trigger = trigger or Trigger()
        if trigger.pk is None:
            trigger.job = job if job.pk is not None else None  # type: ignore[assignment]
        for name, value in entry.items():
            setattr(trigger, name, value)
        stage_exclude_calendars(trigger, calendars)
        if past_once_fired and trigger.pk is None and _fired_once(trigger, now=now):
            # Validation refuses a once time in the past only when it is
            # new or changed: present this one as stored already.
            trigger._loaded_values = {"run_at": trigger.run_at}  # type: ignore[attr-defined]
        try:
            trigger.full_clean(exclude=["job"])
        except ValidationError as exc:
            errors.append(exc.message_dict)
            continue
        if job.pk is None and job.parent_id is not None and trigger.enabled:
            # Trigger.clean checks this against a saved job only.
            errors.append({"kind": [_CHILD_TAKES_NO_TRIGGER.format(parent=job.parent_id)]})
            continue
        errors.append({})
        plans.append(TriggerPlan(trigger, calendars))
    return plans, list(unmatched.values()), errors


_CHILD_TAKES_NO_TRIGGER = (
    "the new job is a child of job #{parent}: it runs only as part of its parent's run and"
    " takes no trigger of its own (disable or delete this trigger, or clear its parent)"
)


def _fired_once(trigger: Trigger, *, now: datetime) -> bool:
    run_at = trigger.run_at
    return trigger.kind == TriggerKind.ONCE and isinstance(run_at, datetime) and run_at <= now


def _normalised(entry: dict[str, Any]) -> dict[str, Any]:
    """The spellings validation stores (canonical zone, tidy cron, sorted
    weekdays), so that `europe/berlin` matches a stored `Europe/Berlin`.
    A value that does not parse is left for validation to refuse."""
    entry = dict(entry)
    try:
        if entry.get("timezone"):
            entry["timezone"] = core.canonical_timezone(entry["timezone"])
        if entry.get("cron_expression"):
            entry["cron_expression"] = core.normalize_cron(entry["cron_expression"])
    except (core.TriggerError, TypeError, ValueError):
        pass
    if isinstance(entry.get("weekdays"), str):
        entry["weekdays"] = "".join(sorted(set(entry["weekdays"])))
    return entry


def _defaults() -> dict[str, Any]:
    blank = Trigger()
    return {name: getattr(blank, name) for name in TRIGGER_FIELDS}


def save_definition(plan: DefinitionPlan, *, by: str, now: datetime) -> Job:
    """Write a validated plan in one transaction. A pause that the plan
    turns on records `by` and `now` (F-104); one it lifts clears the
    pause's end and failure streak, as the admin does. The change is on the
    audit trail (jobs.audit) of whichever entry point called.
    Who may write script jobs is the caller's check (jobs.scripts)."""
    job = plan.job
    with transaction.atomic():
        if plan.pause_changed and job.paused:
            job.paused_by, job.paused_at = by[:150], now
        elif plan.pause_changed:
            job.paused_until, job.consecutive_failures = None, 0
        job.save()  # also sets its triggers' `active`
        if plan.triggers is not None:
            for doomed in plan.delete:
                doomed.delete()
            for item in plan.triggers:
                item.trigger.job = job
                item.trigger.save()
                item.trigger.exclude_calendars.set(item.calendars)
    return job


def django_errors(exc: ValidationError) -> Any:
    """A Django ValidationError as the API's error data: {field: [messages]}
    ("__all__" as "detail"), a DefinitionInvalid with its nested triggers."""
    if isinstance(exc, DefinitionInvalid):
        return {("detail" if k == "__all__" else k): v for k, v in exc.errors.items()}
    if hasattr(exc, "error_dict"):
        return {
            ("detail" if field == "__all__" else field): messages
            for field, messages in exc.message_dict.items()
        }
    return {"detail": " ".join(exc.messages)}
