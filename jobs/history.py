"""The audit trail read back (F-120): an object's history as entries, each
with when, what, who, from where, the note and the fields before and after
(the admin's History page, jobs.admin.history, and the API's history
endpoints, jobs.api.history). The rows are written by jobs.audit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.audit import history_of
from jobs.core.script import script_diff
from jobs.models import Job, Trigger

ACTIONS = {"+": "create", "~": "change", "-": "delete"}
ACTION_LABELS = {"create": _("created"), "change": _("changed"), "delete": _("deleted")}


# Long texts whose change is shown as a unified diff besides before and after.
DIFFED_FIELDS = frozenset({"script"})


@dataclass(frozen=True)
class Change:
    field: str
    label: str
    before: Any
    after: Any
    diff: str = ""  # a unified diff, for a script (F-02 `script`)


@dataclass
class Entry:
    id: int
    at: datetime
    model: str  # the model's name, e.g. "job", "trigger"
    object_id: int
    object_text: str
    action: str  # create, change, delete
    source: str
    by: str
    note: str
    changes: list[Change]

    @property
    def action_label(self) -> str:
        return str(ACTION_LABELS[self.action])


def _value(record: Any, field: models.Field[Any, Any]) -> Any:
    value = getattr(record, field.attname)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _changes(record: Any, previous: Any) -> list[Change]:
    fields = [
        f
        for f in record.instance_type._meta.concrete_fields
        if hasattr(record, f.attname) and not f.primary_key
    ]
    found = []
    for field in fields:
        after = None if record.history_type == "-" else _value(record, field)
        before = None if previous is None else _value(previous, field)
        if record.history_type == "-" or before == after:
            continue
        if previous is None and after in (None, "", [], {}):
            continue
        diff = ""
        if field.name in DIFFED_FIELDS:
            diff = script_diff(
                before or "",
                after or "",
                label=f"{record.instance_type._meta.model_name} #{record.id}",
            )
        found.append(Change(field.name, str(field.verbose_name), before, after, diff))
    return found


def _entry(record: Any, previous: Any) -> Entry:
    return Entry(
        id=record.history_id,
        at=record.history_date,
        model=record.instance_type._meta.model_name,
        object_id=record.id,
        object_text=str(record.instance),
        action=ACTIONS[record.history_type],
        source=record.audit_source,
        by=record.audit_by or (record.history_user.get_username() if record.history_user else ""),
        note=record.history_change_reason or "",
        changes=_changes(record, previous),
    )


def _entries(rows: models.QuerySet[Any]) -> list[Entry]:
    """Entries of the rows (of one model, any objects), each against the
    previous row of its object. A save that changed no recorded field and
    has no note (a form saved as it was; a change of a field left out of
    the record) is passed over."""
    rows = rows.select_related("history_user").order_by("history_id")  # in writing order
    last: dict[int, Any] = {}
    found = []
    for record in rows:
        entry = _entry(record, last.get(record.id))
        last[record.id] = record
        if entry.action != "change" or entry.changes or entry.note:
            found.append(entry)
    return found


def history_rows(model: type[models.Model], object_id: int) -> models.QuerySet[Any]:
    return history_of(model).objects.filter(id=object_id)  # type: ignore[no-any-return]


def entries_for(model: type[models.Model], object_id: int) -> list[Entry]:
    """An object's history, newest first; a job's includes its triggers'
    (the editor changes them with the job)."""
    found = _entries(history_rows(model, object_id))
    if model is Job:
        found += _entries(history_of(Trigger).objects.filter(job_id=object_id))
    return sorted(found, key=lambda e: (e.at, e.id), reverse=True)
