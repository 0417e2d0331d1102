"""Writes and validation for jobs and triggers.

One validation path serves the admin, model validation, commands and the
Python API: `validate_trigger` turns the pure core's TriggerError into a
ValidationError keyed by the model field it names.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef

from . import registry
from . import triggers as core
from .models import Job, Trigger
from .policies import (
    CatchupPick,
    JobKind,
    MissedRunPolicy,
    OverlapPolicy,
    TimeoutAction,
    TriggerKind,
)

log = logging.getLogger("takt.jobs")

SCHEDULE_FIELDS = (
    "kind",
    "cron_expression",
    "timezone",
    "interval_seconds",
    "interval_anchor",
    "start_at",
    "run_at",
)


def trigger_spec(trigger: Trigger) -> core.TriggerSpec:
    """The pure-core view of a saved (already validated) trigger."""
    if trigger.kind == TriggerKind.CRON:
        return core.CronSpec(trigger.cron_expression, trigger.timezone or settings.TIME_ZONE)
    if trigger.kind == TriggerKind.INTERVAL:
        return core.IntervalSpec(
            timedelta(seconds=trigger.interval_seconds or 0),
            core.IntervalAnchor(trigger.interval_anchor),
            trigger.start_at,
        )
    if trigger.run_at is None:
        raise ValueError("a once trigger needs run_at")
    return core.OnceSpec(trigger.run_at)


def trigger_description(trigger: Trigger) -> str:
    try:
        return core.describe(trigger_spec(trigger))
    except (ValueError, core.TriggerError):
        return f"{trigger.kind} trigger (incomplete)"


def validate_job(job: Job) -> None:
    """Job-level checks beyond the field validators. Raises ValidationError
    naming the field."""
    if job.kind == JobKind.CALLABLE and job.target and not registry.is_known(job.target):
        known = ", ".join(registry.registered_names()[:20]) or "none"
        raise ValidationError(
            {
                "target": f"no job callable or Celery task is registered as {job.target!r} (registered: {known})"
            }
        )
    if not isinstance(job.params, dict):
        raise ValidationError({"params": 'must be a JSON object, e.g. {"name": "value"}'})
    try:
        json.dumps(job.params, allow_nan=False)
    except ValueError:
        raise ValidationError(
            {"params": "must be valid JSON: NaN and Infinity are not allowed"}
        ) from None
    _validate_policies(job)


def overlap_rules(job: Job) -> Any:
    """The job's overlap policy for runs.transitions (a pure module)."""
    from runs.transitions import Overlap, OverlapRules

    return OverlapRules(Overlap(job.overlap_policy), job.max_instances, job.max_buffered)


def retry_rules(job: Job) -> Any:
    from runs.transitions import RetryRules

    names = tuple(n.strip() for n in job.non_retryable_exceptions.replace(",", "\n").splitlines())
    return RetryRules(
        max_retries=job.max_retries,
        base=timedelta(seconds=job.retry_backoff_s),
        factor=job.retry_backoff_factor,
        max_delay=timedelta(seconds=job.retry_backoff_max_s),
        jitter=job.retry_jitter,
        retry_on_timeout=job.retry_on_timeout,
        non_retryable=tuple(n for n in names if n),
    )


def _validate_policies(job: Job) -> None:
    """The overlap, retry and catch-up settings together (the pure core's
    checks, so the admin, the API and the commands agree)."""
    from runs.transitions import validate_overlap_rules, validate_retry_rules

    if job.overlap_policy not in OverlapPolicy.values:
        raise ValidationError({"overlap_policy": f"unknown overlap policy {job.overlap_policy!r}"})
    for field, choices in (
        ("missed_run_policy", MissedRunPolicy),
        ("catchup_pick", CatchupPick),
        ("timeout_action", TimeoutAction),
    ):
        if getattr(job, field) not in choices.values:
            raise ValidationError({field: f"unknown value {getattr(job, field)!r}"})
    if job.catchup_window_s is not None and job.catchup_window_s < 0:
        raise ValidationError({"catchup_window_s": "must not be negative"})
    try:
        validate_overlap_rules(overlap_rules(job))
        validate_retry_rules(retry_rules(job))
    except core.TriggerError as exc:
        raise ValidationError({exc.field: exc.message}) from None


def _required(trigger: Trigger) -> None:
    missing = {
        TriggerKind.CRON: ("cron_expression", trigger.cron_expression),
        TriggerKind.INTERVAL: ("interval_seconds", trigger.interval_seconds),
        TriggerKind.ONCE: ("run_at", trigger.run_at),
    }.get(TriggerKind(trigger.kind))
    if missing is not None and missing[1] in (None, ""):
        raise ValidationError({missing[0]: f"required for a {trigger.kind} trigger"})


def validate_trigger(trigger: Trigger, *, now: datetime) -> None:
    """Check a trigger's fields and normalise them in place (canonical time
    zone, tidy cron). Raises ValidationError naming the field. A once time in
    the past is refused only when it is new or was changed, so an old once
    trigger does not block saving its job."""
    if trigger.kind not in TriggerKind.values:
        raise ValidationError({"kind": f"unknown trigger kind {trigger.kind!r}"})
    _required(trigger)
    if trigger.interval_seconds is not None and trigger.kind == TriggerKind.INTERVAL:
        if not 1 <= trigger.interval_seconds <= 30 * 86400:
            raise ValidationError(
                {"interval_seconds": "must be between 1 second and 30 days (2592000 s)"}
            )
    try:
        if trigger.timezone:
            trigger.timezone = core.canonical_timezone(trigger.timezone)
        if trigger.kind == TriggerKind.CRON:
            trigger.cron_expression = core.normalize_cron(trigger.cron_expression)
        spec = trigger_spec(trigger)
        if isinstance(spec, core.OnceSpec) and not _changed(trigger, "run_at"):
            return
        core.validate_spec(spec, now=now)
    except core.TriggerError as exc:
        raise ValidationError({exc.field: exc.message}) from None


def _changed(trigger: Trigger, field: str) -> bool:
    loaded = getattr(trigger, "_loaded_values", None)
    if loaded is None:
        return True
    old, new = loaded.get(field), getattr(trigger, field)
    if isinstance(old, datetime) and isinstance(new, datetime):
        # Forms post times back without microseconds: compare whole seconds.
        return old.replace(microsecond=0) != new.replace(microsecond=0)
    return bool(old != new)


def schedule_changed(trigger: Trigger) -> bool:
    return any(_changed(trigger, f) for f in SCHEDULE_FIELDS)


def apply_schedule(trigger: Trigger, *, now: datetime) -> None:
    """Set `next_run_at` and `active` before a trigger is saved. A new or
    re-timed trigger gets its first fire time after `now`; an unchanged one
    keeps its next_run_at, so re-enabling catches a past time up once (F-27)."""
    if trigger.pk is None or schedule_changed(trigger):
        try:
            # Triggers made in code skip full_clean(): store canonical spellings anyway.
            if trigger.timezone:
                trigger.timezone = core.canonical_timezone(trigger.timezone)
            if trigger.kind == TriggerKind.CRON:
                trigger.cron_expression = core.normalize_cron(trigger.cron_expression)
            trigger.next_run_at = core.compute_first_fire(trigger_spec(trigger), now=now)
        except core.TriggerError as exc:
            raise ValidationError({exc.field: exc.message}) from None
    job = trigger.job if trigger.job_id else None
    runnable = job is not None and job.enabled and not job.paused
    trigger.active = bool(trigger.enabled and runnable)


def sync_trigger_activity(job_ids: list[int]) -> None:
    """Set the triggers' `active` flag to "trigger enabled, job enabled, job
    not paused"; call after any change of Job.enabled or Job.paused
    (Job.save() does)."""
    runnable = Exists(Job.objects.filter(pk=OuterRef("job_id"), enabled=True, paused=False))
    Trigger.objects.filter(job_id__in=job_ids, enabled=True).update(active=runnable)
    Trigger.objects.filter(job_id__in=job_ids, enabled=False).update(active=False)


def set_jobs_enabled(job_ids: list[int], enabled: bool, *, note: str = "") -> int:
    """Enable or disable jobs in bulk (admin actions, API, the run limit).
    `note` (why) is kept in the job's pause note."""
    with transaction.atomic():
        changes: dict[str, Any] = {"enabled": enabled}
        if note:
            changes["pause_note"] = note
        n = Job.objects.filter(pk__in=job_ids).update(**changes)
        sync_trigger_activity(job_ids)
    log.info(
        "jobs %s %s%s", job_ids, "enabled" if enabled else "disabled", f": {note}" if note else ""
    )
    return n


def pause_job(
    job_id: int, *, note: str, by: str, now: datetime, until: datetime | None = None
) -> bool:
    """Pause a job with a note: who, why, until when (F-104). A paused job is
    not scheduled; "Run now" still works. Returns False if it was paused
    already (the first note stays)."""
    with transaction.atomic():
        n = Job.objects.filter(pk=job_id, paused=False).update(
            paused=True, pause_note=note, paused_by=by[:150], paused_at=now, paused_until=until
        )
        sync_trigger_activity([job_id])
    if n:
        log.info("job %s paused by %s: %s", job_id, by, note, extra={"job_id": job_id})
    return bool(n)


def resume_job(job_id: int) -> bool:
    """Lift a job's pause. Its triggers keep their next_run_at: fire times
    that passed meanwhile are caught up as its missed-run policy says."""
    with transaction.atomic():
        n = Job.objects.filter(pk=job_id, paused=True).update(
            paused=False, paused_until=None, consecutive_failures=0
        )
        sync_trigger_activity([job_id])
    if n:
        log.info("job %s resumed", job_id, extra={"job_id": job_id})
    return bool(n)


def resume_due_jobs(*, now: datetime) -> int:
    """Resume the jobs whose pause ran out (paused_until <= now)."""
    ids = list(Job.objects.filter(paused=True, paused_until__lte=now).values_list("pk", flat=True))
    return sum(resume_job(pk) for pk in ids)


RUN_ANCHORS = (core.IntervalAnchor.FROM_START.value, core.IntervalAnchor.FROM_FINISH.value)


def on_run_started(job_id: int, *, started_at: datetime) -> None:
    """A run of the job started: interval triggers anchored `from_start` that
    wait for it (next_run_at NULL) fire next at started_at + N (F-12)."""
    _release_waiting(job_id, {core.IntervalAnchor.FROM_START: started_at})


def on_run_finished(job_id: int, *, started_at: datetime | None, finished_at: datetime) -> None:
    """A run of the job ended (in any status): `from_finish` triggers that
    wait fire next at finished_at + N. A `from_start` trigger still waiting
    was claimed while another run was under way (its run was skipped), so it
    gets started_at + N of the run that ended, which may already be due."""
    _release_waiting(
        job_id,
        {
            core.IntervalAnchor.FROM_FINISH: finished_at,
            core.IntervalAnchor.FROM_START: started_at or finished_at,
        },
    )


def _release_waiting(job_id: int, at_by_anchor: dict[core.IntervalAnchor, datetime]) -> None:
    """One query: the job's interval triggers with these anchors that wait."""
    waiting = Trigger.objects.filter(
        job_id=job_id,
        kind=TriggerKind.INTERVAL,
        interval_anchor__in=[a.value for a in at_by_anchor],
        next_run_at__isnull=True,
    )
    for trigger in waiting:
        at = at_by_anchor[core.IntervalAnchor(trigger.interval_anchor)]
        nxt = core.compute_next_fire(trigger_spec(trigger), after=at, now=at)
        Trigger.objects.filter(pk=trigger.pk, next_run_at__isnull=True).update(next_run_at=nxt)
