"""The audit row of a change of a script job's source (F-02 `script`):
jobs.scripts sends `script_changed` from every write of a script (the
admin, the API, imports, jobs declared in code); this writes the row of
runs.AuditRecord, with who and the unified diff, in the writer's
transaction, so the change and its row are committed together or not at
all. Connected once, when the runs app is ready."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from jobs.scripts import script_changed
from runs.models import AuditRecord


def record_script_audit(
    sender: Any, *, job_id: int, job_name: str, action: str, diff: str, by: str, **_: Any
) -> None:
    AuditRecord.objects.create(
        recorded_at=timezone.now(),
        action=action,
        count=1,
        first_id=job_id,
        last_id=job_id,
        detail=f"job #{job_id} {job_name!r}\n{diff}",
        by=by[:200],
    )


def connect() -> None:
    script_changed.connect(record_script_audit, weak=False, dispatch_uid="takt.runs.script_audit")
