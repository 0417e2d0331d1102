"""Writes and validation for jobs and triggers.

One validation path serves the admin, model validation, commands and the
Python API: `validate_trigger` turns the pure core's TriggerError into a
ValidationError keyed by the model field it names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone as dj_timezone

from jobs import registry
from jobs import triggers as core
from jobs.calendars import calendar_days
from jobs.models import ALL_WEEKDAYS, HolidayCalendar, Job, Trigger
from jobs.policies import (
    CalendarRuleChoice,
    JobKind,
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
    "calendar_rule",
    "at_time",
    "day_of_month",
    "month",
    "weekdays",
    "window_start",
    "window_end",
)
# The pure core's TriggerError fields that are named differently on the model.
ERROR_FIELDS = {
    "rule": "calendar_rule",
    "at": "at_time",
    "day": "day_of_month",
    "excluded_dates": "exclude_calendars",
}
# Years around now whose holidays a trigger skips: the past year (catch-up)
# to 5 years ahead (the pure core looks at most MAX_GAP, ~5 years, ahead).
EXCLUSION_YEARS = (-1, 5)
_RULES_WITH_DAY = (CalendarRuleChoice.DAY_OF_MONTH, CalendarRuleChoice.DATE)
_PENDING = "_pending_calendars"


def _invalid(exc: core.TriggerError) -> ValidationError:
    return ValidationError({ERROR_FIELDS.get(exc.field, exc.field): exc.message})


def trigger_spec(trigger: Trigger, *, now: datetime | None = None) -> core.TriggerSpec:
    """The pure-core view of a trigger. Cron, interval and calendar triggers
    carry Constraints when something restricts them (weekdays other than all
    seven, a window, or excluded days), read in the trigger's time zone (the
    server's by default). Excluded days are those of its calendars in the
    years around `now` (EXCLUSION_YEARS; default: the clock): the staged
    calendars (`stage_exclude_calendars`) if any, else the stored ones; an
    unsaved trigger has none. A once trigger ignores weekdays and calendars.

    Raises ValueError for an unknown kind or a once trigger without run_at,
    ValidationError("weekdays") for a weekday that is not 0..6."""
    zone = trigger.timezone or settings.TIME_ZONE
    if trigger.kind == TriggerKind.ONCE:
        if trigger.run_at is None:
            raise ValueError("a once trigger needs run_at")
        return core.OnceSpec(trigger.run_at)
    constraints = trigger_constraints(trigger, now=now)
    if trigger.kind == TriggerKind.CRON:
        return core.CronSpec(trigger.cron_expression, zone, constraints)
    if trigger.kind == TriggerKind.INTERVAL:
        return core.IntervalSpec(
            timedelta(seconds=trigger.interval_seconds or 0),
            core.IntervalAnchor(trigger.interval_anchor),
            trigger.start_at,
            zone,
            constraints,
        )
    if trigger.kind == TriggerKind.CALENDAR:
        # Day and month left over from another rule (hidden in the admin) are ignored.
        rule = trigger.calendar_rule
        return core.CalendarSpec(
            rule,  # type: ignore[arg-type]  # checked by the pure core
            trigger.at_time,  # type: ignore[arg-type]  # None: "at" is required
            zone,
            trigger.day_of_month if rule in _RULES_WITH_DAY else None,
            trigger.month if rule == CalendarRuleChoice.DATE else None,
            constraints,
        )
    raise ValueError(f"unknown trigger kind {trigger.kind!r}")


def trigger_weekdays(trigger: Trigger) -> frozenset[int]:
    """The weekdays stored as digits ("01234" = Monday to Friday). Raises
    ValidationError("weekdays") for another character or none at all."""
    for char in trigger.weekdays:
        if char not in ALL_WEEKDAYS:
            raise ValidationError(
                {"weekdays": f"{char!r} is not a weekday: use 0 (Monday) to 6 (Sunday)"}
            )
    if not trigger.weekdays:
        raise ValidationError({"weekdays": "choose at least one weekday"})
    return frozenset(int(char) for char in trigger.weekdays)


def trigger_constraints(
    trigger: Trigger, *, now: datetime | None = None
) -> core.Constraints | None:
    """The trigger's weekdays, window and excluded days; None when they
    restrict nothing. Not checked here (see core.validate_spec)."""
    weekdays = trigger_weekdays(trigger)
    calendars = trigger_calendars(trigger)
    excluded = frozenset[date]()
    if calendars:
        excluded = _days_of(calendars, exclusion_years(now or dj_timezone.now()))
    start, end = trigger.window_start, trigger.window_end
    if len(weekdays) == 7 and start is None and end is None and not excluded:
        return None
    return core.Constraints(weekdays, start, end, excluded)


def trigger_description(trigger: Trigger) -> str:
    try:
        return core.describe(trigger_spec(trigger))
    except (ValueError, core.TriggerError, ValidationError):
        return f"{trigger.kind} trigger (incomplete)"


# --- excluded days (F-105) ----------------------------------------------------


def exclusion_years(now: datetime) -> range:
    """The years whose holidays a trigger skips, around aware `now`."""
    return range(now.year + EXCLUSION_YEARS[0], now.year + EXCLUSION_YEARS[1] + 1)


def stage_exclude_calendars(trigger: Trigger, calendars: Iterable[HolidayCalendar]) -> None:
    """Make validation and the next save see `calendars` as the trigger's
    excluded calendars before the many-to-many rows are written (a form
    saves them after the trigger). If they differ from the stored ones the
    save recomputes next_run_at, as for any schedule edit."""
    setattr(trigger, _PENDING, list(calendars))


def trigger_calendars(trigger: Trigger) -> list[HolidayCalendar]:
    """The staged calendars if any; else the stored ones (one query, none
    for a trigger whose `has_exclusions` is unset or that is unsaved)."""
    pending: list[HolidayCalendar] | None = getattr(trigger, _PENDING, None)
    if pending is not None:
        return pending
    if trigger.pk is None or not trigger.has_exclusions:
        return []
    return list(trigger.exclude_calendars.all())


def excluded_dates(trigger: Trigger, years: range) -> frozenset[date]:
    """The days of the trigger's excluded calendars in `years` (see
    `trigger_calendars`); empty for a trigger without calendars. Raises
    ValidationError for a calendar stored without validation."""
    return _days_of(trigger_calendars(trigger), years)


def _days_of(calendars: list[HolidayCalendar], years: range) -> frozenset[date]:
    days: set[date] = set()
    for calendar in calendars:
        days.update(calendar_days(calendar, years))
    return frozenset(days)


def resolve_calendars(names: list[str]) -> list[HolidayCalendar]:
    """Holiday calendars by name, in the order given (for the API and
    imports). Raises ValidationError on "exclude_calendars" naming the first
    unknown name."""
    found = {c.name: c for c in HolidayCalendar.objects.filter(name__in=names)}
    for name in names:
        if name not in found:
            raise ValidationError({"exclude_calendars": f"unknown calendar {name!r}"})
    return [found[name] for name in names]


def set_exclude_calendars(
    trigger: Trigger, calendars: Iterable[HolidayCalendar], *, now: datetime
) -> None:
    """Replace a saved trigger's excluded calendars and recompute its
    next_run_at from `now` (a once trigger keeps its own), in one
    transaction. Raises ValidationError, and changes nothing, if the trigger
    would then never fire ("exclude_calendars") or is invalid otherwise."""
    if trigger.pk is None:
        raise ValueError("save the trigger before setting its calendars")
    calendars = list(calendars)
    stage_exclude_calendars(trigger, calendars)
    validate_trigger(trigger, now=now)
    if trigger.kind != TriggerKind.ONCE:
        trigger.next_run_at = _first_fire(trigger_spec(trigger, now=now), now=now)
    trigger.has_exclusions = bool(calendars)
    with transaction.atomic():
        trigger.exclude_calendars.set(calendars)
        Trigger.objects.filter(pk=trigger.pk).update(
            next_run_at=trigger.next_run_at, has_exclusions=trigger.has_exclusions
        )


def refresh_next_run(trigger: Trigger, *, now: datetime) -> datetime | None:
    """Bring a saved trigger in step with its stored calendars after they
    (or their days) changed without `set_exclude_calendars`: set
    `has_exclusions` and, unless the trigger is due (next_run_at <= now:
    the beat claims that time and computes the next one with the new
    days), recompute next_run_at from `now`. A trigger that would never
    fire again gets no next run (logged). Returns the stored next_run_at."""
    calendars = list(trigger.exclude_calendars.all())
    stage_exclude_calendars(trigger, calendars)
    changes: dict[str, Any] = {"has_exclusions": bool(calendars)}
    old = trigger.next_run_at
    due = old is not None and old <= now
    if trigger.kind != TriggerKind.ONCE and not due:
        extra = {"job_id": trigger.job_id, "trigger_id": trigger.pk}
        try:
            spec = trigger_spec(trigger, now=now)
            changes["next_run_at"] = core.compute_first_fire(spec, now=now)
        except (ValueError, core.TriggerError, ValidationError):
            log.exception("trigger %s cannot be evaluated; it is parked", trigger.pk, extra=extra)
            changes["next_run_at"] = None
        else:
            if changes["next_run_at"] is None:
                log.warning("trigger %s never fires again", trigger.pk, extra=extra)
    # Compare-and-set: if the beat advanced next_run_at meanwhile, it did so
    # with the new calendars already (the flag is written in the same update).
    if not Trigger.objects.filter(pk=trigger.pk, next_run_at=old).update(**changes):
        Trigger.objects.filter(pk=trigger.pk).update(has_exclusions=changes["has_exclusions"])
    trigger.refresh_from_db(fields=["next_run_at", "has_exclusions"])
    return trigger.next_run_at


def refresh_calendar_triggers(trigger_ids: Iterable[int], *, now: datetime) -> int:
    """`refresh_next_run` for each of these triggers: call after a holiday
    calendar's days changed or it was deleted. Returns how many."""
    triggers = list(Trigger.objects.filter(pk__in=list(trigger_ids)))
    for trigger in triggers:
        refresh_next_run(trigger, now=now)
    return len(triggers)


def delete_calendars(calendars: QuerySet[HolidayCalendar], *, now: datetime) -> int:
    """Delete holiday calendars; the triggers that skipped their days fire
    on them again (their next_run_at is recomputed). Returns how many."""
    with transaction.atomic():
        ids = list(
            Trigger.objects.filter(exclude_calendars__in=calendars).values_list("pk", flat=True)
        )
        n, _ = calendars.delete()
        refresh_calendar_triggers(set(ids), now=now)
    return int(n)


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
    _validate_notify(job.notify)


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


NOTIFY_EVENTS = ("start", "end", "failure", "long_run")


def notify_events(job: Job) -> list[str]:
    """The events the job asks to be told about (Job.notify["on"]); anything
    malformed counts as none (the setting is validated when saved)."""
    notify = getattr(job, "notify", None) or {}
    on = notify.get("on", []) if isinstance(notify, dict) else []
    return [str(event) for event in on] if isinstance(on, list) else []


def long_run_seconds(job: Job) -> float:
    """Job.notify["long_run_s"], or 0 when unset."""
    notify = getattr(job, "notify", None) or {}
    return float(notify.get("long_run_s") or 0) if isinstance(notify, dict) else 0.0


def _validate_notify(notify: Any) -> None:
    """F-63: {"on": ["start", "end", "failure", "long_run"], "long_run_s": 600}."""
    if notify in (None, {}):
        return
    if not isinstance(notify, dict) or set(notify) - {"on", "long_run_s"}:
        raise ValidationError(
            {
                "notify": 'expected {"on": ["start", "end", "failure", "long_run"], "long_run_s": 600}'
            }
        )
    on = notify.get("on", [])
    if not isinstance(on, list) or any(e not in NOTIFY_EVENTS for e in on):
        raise ValidationError({"notify": f"'on' lists events from {', '.join(NOTIFY_EVENTS)}"})
    seconds = notify.get("long_run_s")
    if "long_run" in on and (
        not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 1
    ):
        raise ValidationError(
            {"notify": "'long_run' needs 'long_run_s', a whole number of seconds ≥ 1"}
        )


# A fire time claimed at most this late is on time, not missed (F-24).
MISFIRE_GRACE = timedelta(seconds=60)


def missed_run_rules(job: Job, *, coalesce_until: datetime | None = None) -> Any:
    """The job's missed-run policy for jobs.scheduling (F-24, F-102). Fire
    times up to `coalesce_until` (the last queue resume) are caught up once,
    whatever the policy (F-28). Values are checked by the pure core's
    validate_missed_run_rules, which also turns them into its enums."""
    from jobs.scheduling import MissedRunRules

    window = job.catchup_window_s
    return MissedRunRules(
        policy=job.missed_run_policy,  # type: ignore[arg-type]
        pick=job.catchup_pick,  # type: ignore[arg-type]
        max_runs=job.catchup_max_runs,
        window=None if window is None else timedelta(seconds=window),
        grace=MISFIRE_GRACE,
        coalesce_until=coalesce_until,
    )


def _validate_policies(job: Job) -> None:
    """The overlap, retry and catch-up settings together (the pure core's
    checks, so the admin, the API and the commands agree)."""
    from jobs.scheduling import validate_missed_run_rules
    from runs.transitions import validate_overlap_rules, validate_retry_rules

    if job.overlap_policy not in OverlapPolicy.values:
        raise ValidationError({"overlap_policy": f"unknown overlap policy {job.overlap_policy!r}"})
    if job.timeout_action not in TimeoutAction.values:
        raise ValidationError({"timeout_action": f"unknown value {job.timeout_action!r}"})
    try:
        validate_missed_run_rules(missed_run_rules(job))
        validate_overlap_rules(overlap_rules(job))
        validate_retry_rules(retry_rules(job))
    except core.TriggerError as exc:
        raise ValidationError({exc.field: exc.message}) from None


_REQUIRED = {
    TriggerKind.CRON: ("cron_expression",),
    TriggerKind.INTERVAL: ("interval_seconds",),
    TriggerKind.ONCE: ("run_at",),
    TriggerKind.CALENDAR: ("calendar_rule", "at_time"),
}


def _required(trigger: Trigger) -> None:
    for field in _REQUIRED.get(TriggerKind(trigger.kind), ()):
        if getattr(trigger, field) in (None, ""):
            article = "an" if trigger.kind[:1] in "aeiou" else "a"
            raise ValidationError({field: f"required for {article} {trigger.kind} trigger"})


def validate_trigger(trigger: Trigger, *, now: datetime) -> None:
    """Check a trigger's fields and normalise them in place (canonical time
    zone, tidy cron, sorted weekdays). Raises ValidationError naming the
    model field (the pure core's "rule", "at", "day" and "excluded_dates"
    become "calendar_rule", "at_time", "day_of_month" and
    "exclude_calendars"). A once time in the past is refused only when it is
    new or was changed, so an old once trigger does not block saving its
    job. A cron, interval or calendar trigger must fire after `now`: one
    whose constraints allow none of its fire times is refused."""
    if trigger.kind not in TriggerKind.values:
        raise ValidationError({"kind": f"unknown trigger kind {trigger.kind!r}"})
    _required(trigger)
    if trigger.interval_seconds is not None and trigger.kind == TriggerKind.INTERVAL:
        if not 1 <= trigger.interval_seconds <= 30 * 86400:
            raise ValidationError(
                {"interval_seconds": "must be between 1 second and 30 days (2592000 s)"}
            )
    if trigger.kind == TriggerKind.ONCE:
        # A once trigger runs at its date and time: weekdays do not apply
        # (the admin hides them), so an empty choice is not an error.
        trigger.weekdays = trigger.weekdays or ALL_WEEKDAYS
    else:
        trigger.weekdays = "".join(str(day) for day in sorted(trigger_weekdays(trigger)))
    if trigger.kind == TriggerKind.ONCE and (trigger.window_start or trigger.window_end):
        raise ValidationError(
            {"window_start": "a once trigger runs at its date and time: leave the window empty"}
        )
    try:
        core.validate_jitter(trigger.jitter_seconds)
        if trigger.timezone:
            trigger.timezone = core.canonical_timezone(trigger.timezone)
        if trigger.kind == TriggerKind.CRON:
            trigger.cron_expression = core.normalize_cron(trigger.cron_expression)
        spec = trigger_spec(trigger, now=now)
        if isinstance(spec, core.OnceSpec) and not _changed(trigger, "run_at"):
            return
        _first_fire(core.validate_spec(spec, now=now), now=now)
    except core.TriggerError as exc:
        raise _invalid(exc) from None


def _first_fire(spec: core.TriggerSpec, *, now: datetime) -> datetime | None:
    """compute_first_fire, refusing a repeating trigger that never fires.
    validate_spec catches constraints that allow nothing; this catches a
    fixed-rate interval without start_at whose phase (set by `now`) misses
    them, e.g. every 24 hours from 12:00 with a window 08:00-09:00. Raises
    ValidationError on "window_start", else "weekdays", else
    "exclude_calendars"."""
    first = core.compute_first_fire(spec, now=now)
    if first is not None or isinstance(spec, core.OnceSpec) or spec.constraints is None:
        return first
    constraints = spec.constraints
    if constraints.window_start is not None:
        field, what = "window_start", "inside the window"
    elif len(constraints.weekdays) < 7:
        field, what = "weekdays", "on the chosen weekdays"
    else:
        field, what = "exclude_calendars", "outside the excluded days"
    hint = (
        ": set start_at to a time it may fire at, which fixes the phase"
        if isinstance(spec, core.IntervalSpec) and spec.start_at is None
        else ""
    )
    raise ValidationError(
        {field: f"never fires: none of its fire times after now falls {what}{hint}"}
    )


def _changed(trigger: Trigger, field: str) -> bool:
    loaded = getattr(trigger, "_loaded_values", None)
    if loaded is None:
        return True
    old, new = loaded.get(field), getattr(trigger, field)
    if isinstance(old, datetime) and isinstance(new, datetime):
        # Forms post times back without microseconds: compare whole seconds.
        return old.replace(microsecond=0) != new.replace(microsecond=0)
    return bool(old != new)


def _calendars_changed(trigger: Trigger) -> bool:
    pending: list[HolidayCalendar] | None = getattr(trigger, _PENDING, None)
    if pending is None:
        return False
    if trigger.pk is None:
        return bool(pending)
    stored = set(trigger.exclude_calendars.values_list("pk", flat=True))
    return stored != {calendar.pk for calendar in pending}


def schedule_changed(trigger: Trigger) -> bool:
    """Whether a schedule field or the staged calendars differ from the
    stored trigger (then a save recomputes next_run_at)."""
    return any(_changed(trigger, f) for f in SCHEDULE_FIELDS) or _calendars_changed(trigger)


def apply_schedule(trigger: Trigger, *, now: datetime) -> None:
    """Set `next_run_at`, `active` and `has_exclusions` before a trigger is
    saved. A new or re-timed trigger (changed calendars count) gets its
    first fire time after `now`; an unchanged one keeps its next_run_at, so
    re-enabling catches a past time up once (F-27). Raises ValidationError
    for a trigger the pure core refuses or that never fires (see
    `_first_fire`)."""
    if trigger.pk is None or schedule_changed(trigger):
        if trigger.pk is not None and getattr(trigger, _PENDING, None) is None:
            # This instance's has_exclusions may be older than the stored
            # calendars: read them (one query per schedule edit).
            stage_exclude_calendars(trigger, trigger.exclude_calendars.all())
        trigger.has_exclusions = bool(trigger_calendars(trigger))
        try:
            # Triggers made in code skip full_clean(): store canonical spellings anyway.
            if trigger.timezone:
                trigger.timezone = core.canonical_timezone(trigger.timezone)
            if trigger.kind == TriggerKind.CRON:
                trigger.cron_expression = core.normalize_cron(trigger.cron_expression)
            trigger.next_run_at = _first_fire(trigger_spec(trigger, now=now), now=now)
        except core.TriggerError as exc:
            raise _invalid(exc) from None
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
