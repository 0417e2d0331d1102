"""Every write to a run. State changes are compare-and-set: an UPDATE
filtered on the expected old status, whose row count says who won."""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext

from jobs.errors import (
    ChildJob,
    ConditionNotMet,
    InvalidInput,
    JobNotFound,
    MaintenanceMode,
    QueuePaused,
)
from jobs.i18n import translated
from jobs.models import Job, Trigger
from jobs.policies import INTERNAL_TARGETS
from jobs.specs import allowed_in_maintenance
from jobs.validation import check_params_size
from runs import decisions
from runs.clock import now as shared_now
from runs.core.admission import Admission, Decision
from runs.core.messages import MAINTENANCE_REFUSAL
from runs.models import Run, RunStatus, RunTrigger
from runs.overlap import admit, cancel_active_runs, revoke_after_commit
from runs.publish import publish_after_commit
from runs.queue import lock_file_present
from runs.statements import cas_update, insert_run, insert_run_if_idle, job_activity
from runs.variables import check_condition

log = logging.getLogger("takt.runs")


def default_priority(job: Job, trigger: str) -> int:
    """F-22: manual and API runs go one step ahead of the job's scheduled
    runs (0 runs first; a job at 0 keeps 0)."""
    if trigger in (RunTrigger.MANUAL, RunTrigger.API):
        return max(job.priority - 1, 0)
    return job.priority


def create_run(
    job: Job,
    *,
    trigger: str,
    now: datetime,
    scheduled_for: datetime | None = None,
    params: dict[str, Any] | None = None,
    priority: int | None = None,
    dedupe_key: str = "",
    cause: Run | None = None,
    source_trigger: Trigger | None = None,
    rerun_of: Run | None = None,
    refuse: bool = True,
) -> Run:
    """Insert one run as the job's overlap policy admits it (F-23): queued,
    queued and held (waiting for the running run), or `skipped` with the
    reason; a `cancel_other` run cancels the job's other active runs. The
    caller publishes a queued, unheld, due run after commit. A run for a
    later time is admitted when it starts (the worker's lock check).

    A request (`refuse`, "Run now", the API, enqueue_job) raises
    MaintenanceMode or QueuePaused when it cannot start; a run the engine
    starts by itself (a dependency, a parent's child) is recorded instead:
    `skipped` with the maintenance refusal, or queued for the worker to hold
    while the queue is paused. `cause`: the run that started this one;
    `rerun_of`: the ended run an operator runs again (runs/rerun.py)."""
    scheduled_for = scheduled_for or now
    links = {"cause": cause, "source_trigger": source_trigger, "rerun_of": rerun_of}
    decision = Decision(Admission.QUEUE)
    if scheduled_for <= now and _admitted_when_idle(job):
        run = _new_run(job, trigger, decision, now=now, scheduled_for=scheduled_for,
                       params=params, priority=priority, dedupe_key=dedupe_key,
                       links=links)  # fmt: skip
        if insert_run_if_idle(run, now=now):  # the common case: one round trip
            return run
    if scheduled_for <= now:
        running, waiting, paused, maintenance = job_activity(job.pk, now=now)
        allowed = allowed_in_maintenance(job)
        if (maintenance or lock_file_present()) and not allowed:
            if refuse:
                detail = f"maintenance mode: a {trigger} request"
                decisions.record([decisions.Decision("refused", job.pk, detail=detail, at=now)])
                raise MaintenanceMode(
                    gettext(
                        "maintenance mode is on: job #%(id)s is not allowed to start during"
                        " maintenance (manage.py maintenance_mode off ends it)"
                    )
                    % {"id": job.pk}
                )
            decision = Decision(Admission.SKIP, MAINTENANCE_REFUSAL)
        elif paused and not allowed and refuse:
            raise QueuePaused(
                gettext(
                    "the queue is paused: no run is enqueued until it resumes"
                    " (manage.py resume_queue resumes it)"
                )
            )
        else:
            decision = admit(job, running=running, waiting=waiting)
        if decision.admission is not Admission.SKIP:
            unmet = check_condition(job)  # the start checks again (runs/variables.py)
            if unmet is not None and refuse:
                reason = translated(*unmet)
                raise ConditionNotMet(
                    gettext("job #%(id)s: %(reason)s") % {"id": job.pk, "reason": reason}
                )
            if unmet is not None:
                decision = Decision(Admission.SKIP, unmet[0] % unmet[1])  # stored: English
    skipped = decision.admission is Admission.SKIP
    run = _new_run(job, trigger, decision, now=now, scheduled_for=scheduled_for, params=params,
                   priority=priority, dedupe_key=dedupe_key, links=links)  # fmt: skip
    with transaction.atomic() if decision.admission is Admission.REPLACE else nullcontext():
        insert_run(run)
        if decision.admission is Admission.REPLACE:
            revoke_after_commit(
                cancel_active_runs(
                    job.pk, keep=run.pk, now=now, reason=f"cancelled: replaced by run #{run.pk}"
                )
            )
    if skipped:
        log.info(
            "run %s of job %s skipped: %s",
            run.pk,
            job.pk,
            decision.reason,
            extra={"job_id": job.pk, "run_id": run.pk},
        )
    return run


def _admitted_when_idle(job: Job) -> bool:
    """Whether a run of `job` due now would be queued if the job had no
    active run and the queue were open: then `insert_run_if_idle` decides it
    in the INSERT itself. Not for a job with a condition (its variable is
    read first) nor while the maintenance lock file exists."""
    if job.condition_variable_id is not None or lock_file_present():
        return False
    return admit(job, running=0, waiting=0).admission is Admission.QUEUE


def _new_run(
    job: Job,
    trigger: str,
    decision: Decision,
    *,
    now: datetime,
    scheduled_for: datetime,
    params: dict[str, Any] | None,
    priority: int | None,
    dedupe_key: str,
    links: dict[str, Any],
) -> Run:
    skipped = decision.admission is Admission.SKIP
    return Run(
        job=job,
        trigger=trigger,
        status=RunStatus.SKIPPED if skipped else RunStatus.QUEUED,
        held=decision.admission is Admission.HOLD,
        priority=default_priority(job, trigger) if priority is None else priority,
        params=job.params if params is None else params,
        scheduled_for=scheduled_for,
        enqueued_at=now,
        finished_at=now if skipped else None,
        message=f"skipped: {decision.reason}" if skipped else "",
        dedupe_key=dedupe_key,
        **links,  # cause, source_trigger, rerun_of
    )


def _check_params(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise InvalidInput("params", f"must be a JSON object (a dict), got {type(params).__name__}")
    try:
        json.dumps(params, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("params", f"must be JSON-serialisable: {exc}") from None
    return params


# Runs only the engine makes: for a fire time, after another run's end, as a child.
ENGINE_TRIGGERS = (
    RunTrigger.SCHEDULE,
    RunTrigger.CATCHUP,
    RunTrigger.DEPENDENCY,
    RunTrigger.PARENT,
)


def enqueue_job(
    job: Job | int,
    *,
    params: dict[str, Any] | None = None,
    priority: int | None = None,
    run_at: datetime | None = None,
    trigger: str = RunTrigger.API,
    dedupe_key: str | None = None,
    now: datetime | None = None,
    rerun_of: Run | None = None,
) -> Run:
    """Start a run of `job` now, or at `run_at` (F-40). Works on disabled jobs
    (like "Run now", F-27). With `dedupe_key` (F-43), the job's run
    enqueued with the same key within TAKT_DEDUPE_WINDOW_SECONDS is
    returned instead of a new one, whatever its status; such a run has
    `run.deduplicated` set to True.

    Raises JobNotFound for an unknown id, ChildJob for a child job (it runs
    only with its parent, F-04), InvalidInput (naming the field) for bad
    params (the merged params larger than TAKT_MAX_PARAMS_BYTES too),
    priority, run_at, trigger or dedupe_key, and for a run due now
    MaintenanceMode, QueuePaused or ConditionNotMet (F-32) when it cannot
    start. `rerun_of`: the ended run this one runs again (runs/rerun.py)."""
    now = now or shared_now()
    if not isinstance(job, Job):
        try:
            job = Job.objects.get(pk=job)
        except (Job.DoesNotExist, ValueError, TypeError):
            raise JobNotFound(f"job: no job with id {job!r}") from None
    if job.parent_id is not None:
        raise ChildJob(
            gettext(
                "job: job #%(id)s is a child of job #%(parent)s: it runs only as part of"
                " its parent's run; start the parent instead"
            )
            % {"id": job.pk, "parent": job.parent_id}
        )
    if params is not None:
        params = {**job.params, **_check_params(params)}
        if job.target not in INTERNAL_TARGETS:
            # Takt's own operations check their params themselves (an
            # import's text has TAKT_IMPORT_MAX_BYTES): no caller sets them.
            check_params_size(params, kind=job.kind)
    if priority is not None and (not isinstance(priority, int) or not 0 <= priority <= 9):
        raise InvalidInput("priority", f"must be a whole number from 0 to 9, got {priority!r}")
    if run_at is not None and (run_at.tzinfo is None or run_at.utcoffset() is None):
        raise InvalidInput("run_at", "must be an aware datetime (with a time zone)")
    if trigger not in RunTrigger.values or trigger in ENGINE_TRIGGERS:
        raise InvalidInput("trigger", f"cannot enqueue with trigger {trigger!r}")
    scheduled_for = max(run_at, now) if run_at else now
    if dedupe_key:
        return _enqueue_once(
            job,
            dedupe_key,
            now=now,
            scheduled_for=scheduled_for,
            trigger=trigger,
            params=params,
            priority=priority,
            rerun_of=rerun_of,
        )
    # Without a dedupe key, each statement commits by itself (no BEGIN and
    # COMMIT round trips); the overlap check is advisory either way; the
    # job lock at start is what holds (runs/execution.py).
    run = create_run(
        job,
        trigger=trigger,
        now=now,
        scheduled_for=scheduled_for,
        params=params,
        priority=priority,
        rerun_of=rerun_of,
    )
    _publish_if_due(run, now=now)
    return run


def _publish_if_due(run: Run, *, now: datetime) -> None:
    if run.status == RunStatus.QUEUED and not run.held and run.scheduled_for <= now:
        publish_after_commit([run])


def run_with_key(job_id: int, key: str) -> Run | None:
    """The job's run holding dedupe `key`, if any (at most one: unique index)."""
    return Run.objects.filter(job_id=job_id, dedupe_key=key).first()


def _enqueue_once(
    job: Job, key: str, *, now: datetime, scheduled_for: datetime, **run_fields: Any
) -> Run:
    """F-43: the run enqueued for `job` with `key` within
    TAKT_DEDUPE_WINDOW_SECONDS (whatever its status; marked
    `run.deduplicated = True`), else a new run with the key.

    1. Look for the job's run with the key. Inside the window: return it.
    2. Else, in one transaction: take the key off an older run (its window
       is over) and insert the new run with it.
    3. The partial unique index on (job, dedupe_key) refuses a second run
       with the key: a concurrent caller that loses the insert goes back
       to 1 and returns the winner's run."""
    if len(key) > 200:
        raise InvalidInput("dedupe_key", "at most 200 characters")
    window = timedelta(seconds=settings.TAKT_DEDUPE_WINDOW_SECONDS)
    for _attempt in range(3):
        existing = run_with_key(job.pk, key)
        if existing is not None and existing.enqueued_at > now - window:
            existing.deduplicated = True  # type: ignore[attr-defined]
            return existing
        try:
            with transaction.atomic():
                if existing is not None:
                    Run.objects.filter(pk=existing.pk, dedupe_key=key).update(dedupe_key="")
                run = create_run(
                    job, now=now, scheduled_for=scheduled_for, dedupe_key=key, **run_fields
                )
                _publish_if_due(run, now=now)
            return run
        except IntegrityError:
            continue
    raise RuntimeError(f"enqueue_job: dedupe key {key!r} of job #{job.pk} kept changing hands")


def start_run(run: Run, *, worker: str, now: datetime) -> bool:
    """queued → running (the worker's claim). False when another delivery
    (or a cancel) got there first: the caller must then do nothing at all.
    An interval anchored on the run's start moves only once the run is
    admitted (runs/starting.admit_start): a claimed run may still be put
    back to wait for a slot or the queue, and has not started then."""
    changes = {"status": RunStatus.RUNNING, "started_at": now, "worker": worker[:255]}
    if not cas_update(run.pk, expected_status=RunStatus.QUEUED, changes=changes):
        return False
    run.status, run.started_at, run.worker = RunStatus.RUNNING, now, worker[:255]
    return True


def waits_for_runs(run: Run) -> bool:
    """Whether the run's job has triggers anchored on its runs; unknown
    (not annotated by the caller) counts as yes."""
    return bool(getattr(run, "waits_for_runs", True))


def save_output(run_id: int, output: str) -> None:
    """Store a running run's output so far (the admin shows it live)."""
    Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(output=output)
