"""Result variables at run time (F-32): a job's condition checked (and
consumed) as its run starts, and the result code written by the runs of a
job that writes one: -1 when it starts, its code when it ends (in the
transaction that records the end), -1003 when it runs past its timeout and
goes on.

Every change is a compare-and-set or a single UPDATE, so two beats and any
number of workers agree: two dependants consuming one result cannot both
start (the second one's UPDATE … WHERE value IN (accepted) changes no row).
Each change is written to the decision log (`variable_changed`).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from jobs import audit
from jobs.models import Job, ResultVariable
from jobs.variables import PENDING
from runs.core.start import Condition, condition_message, condition_met, condition_text
from runs.decisions import Decision, record
from runs.models import Run, RunStatus

log = logging.getLogger("takt.variables")

# The result code a run's end writes when its job gave none (F-32's codes).
END_CODES = {
    RunStatus.SUCCEEDED: 0,
    RunStatus.FAILED: 1,
    RunStatus.TIMED_OUT: -1002,
    RunStatus.LOST: -1004,
    RunStatus.CANCELLED: -1005,
}
TIMED_OUT_RUNNING = -1003


def job_condition(job: Job, name: str = "") -> Condition | None:
    if job.condition_variable_id is None:
        return None
    accepted = tuple(v for v in (job.condition_values or []) if isinstance(v, int))
    return Condition(name, accepted, bool(job.condition_consume))


def check_condition(job: Job) -> tuple[str, dict[str, object]] | None:
    """A read of the job's condition for a run about to be created (the
    beat, a dependency, "Run now"): None when it holds (or the job has
    none), else why not, as an English template and its parameters
    (runs.core.start.condition_message: stored as `template % params`,
    shown translated). The start checks again (`take_condition`)."""
    if job.condition_variable_id is None:
        return None
    row = ResultVariable.objects.filter(pk=job.condition_variable_id).values_list("name", "value")
    name, value = row.first() or ("?", None)
    condition = job_condition(job, name)
    assert condition is not None
    return None if condition_met(condition, value) else condition_message(condition, value)


def take_condition(run: Run, *, now: datetime) -> str | None:
    """Step 6 of a start (runs/core/start.py): None when the job has no
    condition, the run is a retry (its first try met it), or the variable
    holds an accepted value (then, with "consume", set back to -1 by
    compare-and-set: of two runs consuming one value exactly one wins).
    Else why not; the variable is left as it was."""
    job = run.job
    if job.condition_variable_id is None or run.trigger == "retry":
        return None
    row = ResultVariable.objects.filter(pk=job.condition_variable_id).values_list("name", "value")
    name, value = row.first() or ("?", None)
    condition = job_condition(job, name)
    assert condition is not None
    if not condition_met(condition, value):
        return condition_text(condition, value)
    if not condition.consume:
        return None
    taken = ResultVariable.objects.filter(
        pk=job.condition_variable_id, value__in=condition.accepted
    ).update(value=PENDING, changed_at=now, changed_by_run=run.pk, changed_by="")
    if not taken:  # another run consumed it between the read and now
        return condition_text(condition, PENDING) + " (another run consumed it)"
    _changed(run.job_id, run.pk, name, value, PENDING, "consumed by its start")
    return None


def write_result(run: Run, code: int, *, now: datetime) -> None:
    """Set the variable the run's job writes (if any) to `code`. Call in the
    transaction that records what the code stands for."""
    variable_id = run.job.result_variable_id
    if variable_id is None:
        return
    row = ResultVariable.objects.filter(pk=variable_id).values_list("name", "value").first()
    if row is None:
        return
    ResultVariable.objects.filter(pk=variable_id).update(
        value=code, changed_at=now, changed_by_run=run.pk, changed_by=""
    )
    name, old = row
    _changed(run.job_id, run.pk, name, old, code, "")


def set_variable(variable: ResultVariable, value: int, *, by: str, now: datetime) -> None:
    """An operator sets a variable by hand (the admin, the API)."""
    old = ResultVariable.objects.filter(pk=variable.pk).values_list("value", flat=True).first()
    with transaction.atomic():
        ResultVariable.objects.filter(pk=variable.pk).update(
            value=value, changed_at=now, changed_by_run=None, changed_by=by[:200]
        )
        variable.value, variable.changed_at, variable.changed_by_run = value, now, None
        variable.changed_by = by[:200]
        # On the audit trail (F-120): an update() sends no signal. A run's
        # own writes of its result code are not: they are the runs'.
        audit.record_now(variable)
    record(
        [
            Decision(
                "variable_changed",
                0,
                detail=f"variable {variable.name!r}: {old} → {value}, set by {by}",
                at=now,
            )
        ]
    )


def _changed(job_id: int, run_id: int, name: str, old: int | None, new: int, why: str) -> None:
    detail = f"variable {name!r}: {old} → {new}" + (f" ({why})" if why else "")
    decision = Decision("variable_changed", job_id, run_id, detail=detail)
    transaction.on_commit(lambda: record([decision]))
    log.info("run %s: %s", run_id, detail, extra={"job_id": job_id, "run_id": run_id})
