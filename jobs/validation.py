"""Validation of jobs and triggers, and the schedule a trigger stores.

One validation path serves the admin, model validation (Job.clean,
Trigger.clean), commands and the Python API: `validate_job` and
`validate_trigger` turn the pure core's TriggerError into a ValidationError
keyed by the model field it names. `apply_schedule` sets a trigger's
next_run_at and `active` before it is saved (Trigger.save)."""

from __future__ import annotations

import fnmatch
import json
import os
import socket
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from jobs import registry
from jobs.coordination import validate_coordination, validate_trigger_links
from jobs.core import triggers as core
from jobs.core.missed import validate_missed_run_rules
from jobs.core.rules import validate_overlap_rules, validate_retry_rules
from jobs.core.script import check_script
from jobs.core.system import validate_system
from jobs.core.watch import printable, root_problem, takes
from jobs.errors import InvalidInput
from jobs.i18n import error_text
from jobs.policies import (
    ALL_WEEKDAYS,
    BUILTIN_KEYS,
    JobKind,
    OverlapPolicy,
    TimeoutAction,
    TriggerKind,
    reserved_target,
)
from jobs.specs import (
    NOTIFY_EVENTS,
    SCHEDULE_FIELDS,
    command_spec,
    missed_run_rules,
    overlap_rules,
    retry_rules,
    stage_exclude_calendars,
    staged_calendars,
    trigger_calendars,
    trigger_spec,
    trigger_weekdays,
)

if TYPE_CHECKING:
    from jobs.models import HolidayCalendar, Job, Trigger

SCRIPTS_OFF = gettext_noop(
    "script jobs are off on this installation: set TAKT_SCRIPTS_ENABLED=true to allow them"
    " (superusers only; see docs/job-kinds.md)"
)
# The pure core's TriggerError fields that are named differently on the model.
ERROR_FIELDS = {
    "rule": "calendar_rule",
    "at": "at_time",
    "day": "day_of_month",
    "excluded_dates": "exclude_calendars",
}


def _invalid(exc: core.TriggerError) -> ValidationError:
    return ValidationError({ERROR_FIELDS.get(exc.field, exc.field): error_text(exc)})


def validate_job(job: Job) -> None:
    """Job-level checks beyond the field validators. Raises ValidationError
    naming the field."""
    if job.kind not in JobKind.values:
        raise ValidationError(
            {
                "kind": _("unknown kind %(kind)r (one of %(kinds)s)")
                % {"kind": job.kind, "kinds": ", ".join(JobKind.values)}
            }
        )
    if (
        job.kind == JobKind.CALLABLE
        and reserved_target(job.target or "")
        and not (job.code_managed and job.key in BUILTIN_KEYS)
    ):
        raise ValidationError(
            {
                "target": _("%(target)r is Takt's or Celery's own: no job may name it")
                % {"target": job.target}
            }
        )
    _validate_caller_params(job)
    if job.kind == JobKind.COMMAND:
        _validate_command(job)
    elif job.kind == JobKind.SYSTEM:
        _validate_system(job)
    elif job.kind == JobKind.SCRIPT:
        _validate_script(job)
    elif not job.target:
        raise ValidationError(
            {
                "target": _(
                    "a callable job needs its target: a name registered with @takt_job,"
                    " or a Celery task name"
                )
            }
        )
    # A disabled job may name a task not registered (yet): import_celery_beat
    # brings such a PeriodicTask over disabled, for the record; enabling it
    # in the editor checks again, and a run of it fails naming the target.
    if (
        job.kind == JobKind.CALLABLE
        and job.enabled
        and job.target
        and not registry.is_known(job.target)
    ):
        known = ", ".join(registry.registered_names()[:20]) or _("none")
        raise ValidationError(
            {
                "target": _(
                    "no job callable or Celery task is registered as %(target)r"
                    " (registered: %(known)s)"
                )
                % {"target": job.target, "known": known}
            }
        )
    if not isinstance(job.params, dict):
        raise ValidationError({"params": _('must be a JSON object, e.g. {"name": "value"}')})
    _strict_json(job.params, "params")
    _bounded(job.params, "params", kind=job.kind)
    _validate_args(job)
    _validate_policies(job)
    _validate_notify(job.notify)
    validate_coordination(job)


def check_params_size(value: Any, field: str = "params", *, kind: str = "") -> None:
    """Params (or args) are bounded: as compact JSON in UTF-8 they may
    take at most TAKT_MAX_PARAMS_BYTES. Called wherever params are
    written: a job's validation (the admin, the API, imports, config as
    code) and every run started with params (enqueue_job, the API's run).
    For a command job (`kind`), whose params become its environment
    variables, the message says so. Raises InvalidInput naming `field`."""
    limit = settings.TAKT_MAX_PARAMS_BYTES
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    size = len(text.encode("utf-8", errors="replace"))
    if size > limit:
        said = {"limit": limit, "size": size}
        if kind == JobKind.COMMAND and field == "params":
            message = _(
                "at most %(limit)s bytes as JSON (TAKT_MAX_PARAMS_BYTES), got %(size)s:"
                " a command job gets its params as environment variables (TAKT_PARAMS and"
                " TAKT_PARAM_<NAME>), which the operating system also bounds"
            )
        else:
            message = _("at most %(limit)s bytes as JSON (TAKT_MAX_PARAMS_BYTES), got %(size)s")
        raise InvalidInput(field, message % said)


def _bounded(value: Any, field: str, *, kind: str = "") -> None:
    try:
        check_params_size(value, field, kind=kind)
    except InvalidInput as exc:
        raise ValidationError({field: exc.message}) from None


def _strict_json(value: Any, field: str) -> None:
    """JSON as the standard has it: Python's NaN and Infinity are refused."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValidationError(
            {field: _("must be valid JSON: NaN and Infinity are not allowed")}
        ) from None


ARGS_FOR_CELERY_ONLY = gettext_noop("only a Celery task target takes positional arguments")


def _validate_args(job: Job) -> None:
    """Positional arguments: a JSON list, and non-empty only for a callable
    job whose target is a Celery task (an @takt_job function gets the run's
    context, a command, system or script job its own inputs)."""
    if not isinstance(job.args, list):
        raise ValidationError({"args": _('must be a JSON list, e.g. [1, "x"]')})
    _strict_json(job.args, "args")
    _bounded(job.args, "args")
    if not job.args:
        return
    if job.kind != JobKind.CALLABLE:
        raise ValidationError(
            {
                "args": _(
                    "only a Celery task target takes positional arguments: a %(kind)s job takes none"
                )
                % {"kind": job.kind}
            }
        )
    # A target not registered (a disabled job's) is taken for a Celery task.
    if registry.is_known(job.target) and not registry.is_celery_task(job.target):
        raise ValidationError(
            {
                "args": _(
                    "only a Celery task target takes positional arguments: %(target)r is"
                    " registered with @takt_job and gets the run's context (give it params)"
                )
                % {"target": job.target}
            }
        )


CALLER_PARAMS_MAX = 100


def _validate_caller_params(job: Job) -> None:
    keys = job.caller_params
    if not isinstance(keys, list) or not all(
        isinstance(k, str) and 0 < len(k) <= 100 for k in keys
    ):
        raise ValidationError(
            {"caller_params": _('a list of param names, e.g. ["date"], or ["*"] for any')}
        )
    if len(keys) > CALLER_PARAMS_MAX:
        raise ValidationError(
            {"caller_params": _("at most %(max)d names") % {"max": CALLER_PARAMS_MAX}}
        )
    fixed = sorted(set(keys) & registry.job_only_params(job.target or ""))
    if job.kind == JobKind.CALLABLE and fixed:
        raise ValidationError(
            {
                "caller_params": _("%(target)s takes %(keys)s from the job only")
                % {"target": job.target, "keys": ", ".join(fixed)}
            }
        )


def check_caller_params(job: Job, params: dict[str, Any]) -> None:
    """A caller's run params (the API's) may name only the keys the job's
    `caller_params` allow, and none its target takes from the job only.
    Raises InvalidInput naming `params.<key>`."""
    allowed = set(job.caller_params or [])
    fixed = registry.job_only_params(job.target or "") if job.kind == JobKind.CALLABLE else set()
    for key in params:
        if key in fixed:
            raise InvalidInput(
                f"params.{key}",
                _("%(target)s takes it from the job only, not from a caller")
                % {"target": job.target},
            )
        if "*" not in allowed and key not in allowed:
            taken = ", ".join(sorted(allowed)) or _("none")
            raise InvalidInput(
                f"params.{key}",
                _("this job does not take it from a caller (its caller params: %(keys)s)")
                % {"keys": taken},
            )


def _validate_command(job: Job) -> None:
    """F-02 `command`: the pure core's checks, the working directory looked
    up on this machine."""
    try:
        command_spec(job, is_dir=os.path.isdir)
    except core.TriggerError as exc:
        raise ValidationError({exc.field: error_text(exc)}) from None


def _validate_script(job: Job) -> None:
    """F-02 `script`: only while TAKT_SCRIPTS_ENABLED, and its source must
    compile (line and column of a syntax error in the message)."""
    if not settings.TAKT_SCRIPTS_ENABLED:
        raise ValidationError({"kind": _(SCRIPTS_OFF)})
    try:
        check_script(job.script)
    except core.TriggerError as exc:
        raise ValidationError({exc.field: error_text(exc)}) from None


def _validate_system(job: Job) -> None:
    """F-02 `system`: a built-in function with the params it takes."""
    try:
        validate_system(job.target, job.params if isinstance(job.params, dict) else {})
    except core.TriggerError as exc:
        raise ValidationError({exc.field: error_text(exc)}) from None


def _validate_notify(notify: Any) -> None:
    """F-63: {"on": ["start", "end", "failure", "long_run"], "long_run_s": 600}."""
    if notify in (None, {}):
        return
    if not isinstance(notify, dict) or set(notify) - {"on", "long_run_s"}:
        raise ValidationError(
            {
                "notify": _(
                    'expected {"on": ["start", "end", "failure", "long_run"], "long_run_s": 600}'
                )
            }
        )
    on = notify.get("on", [])
    if not isinstance(on, list) or any(e not in NOTIFY_EVENTS for e in on):
        raise ValidationError(
            {
                "notify": _("'on' lists events from %(events)s")
                % {"events": ", ".join(NOTIFY_EVENTS)}
            }
        )
    seconds = notify.get("long_run_s")
    if "long_run" in on and (
        not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 1
    ):
        raise ValidationError(
            {"notify": _("'long_run' needs 'long_run_s', a whole number of seconds ≥ 1")}
        )


def _validate_policies(job: Job) -> None:
    """The overlap, retry and catch-up settings together (the pure core's
    checks, so the admin, the API and the commands agree)."""
    if job.overlap_policy not in OverlapPolicy.values:
        raise ValidationError(
            {
                "overlap_policy": _("unknown overlap policy %(policy)r")
                % {"policy": job.overlap_policy}
            }
        )
    if job.timeout_action not in TimeoutAction.values:
        raise ValidationError(
            {"timeout_action": _("unknown value %(value)r") % {"value": job.timeout_action}}
        )
    try:
        validate_missed_run_rules(missed_run_rules(job))
        validate_overlap_rules(overlap_rules(job))
        validate_retry_rules(retry_rules(job))
    except core.TriggerError as exc:
        raise ValidationError({exc.field: error_text(exc)}) from None


_REQUIRED = {
    TriggerKind.CRON: ("cron_expression",),
    TriggerKind.INTERVAL: ("interval_seconds",),
    TriggerKind.ONCE: ("run_at",),
    TriggerKind.CALENDAR: ("calendar_rule", "at_time"),
    TriggerKind.DEPENDENCY: ("upstream_job",),
    TriggerKind.FILE: ("watch_folder",),
}
_REQUIRED_FOR = {
    TriggerKind.CRON: gettext_noop("required for a cron trigger"),
    TriggerKind.INTERVAL: gettext_noop("required for an interval trigger"),
    TriggerKind.ONCE: gettext_noop("required for a once trigger"),
    TriggerKind.CALENDAR: gettext_noop("required for a calendar trigger"),
    TriggerKind.DEPENDENCY: gettext_noop("required for a dependency trigger"),
    TriggerKind.FILE: gettext_noop("required for a file trigger"),
}
# Kinds that run at no time of day of their own: weekdays and windows do not apply.
_UNTIMED = (TriggerKind.ONCE, TriggerKind.DEPENDENCY, TriggerKind.FILE)


def _required(trigger: Trigger) -> None:
    for field in _REQUIRED.get(TriggerKind(trigger.kind), ()):
        if getattr(trigger, field if field != "upstream_job" else "upstream_job_id") in (None, ""):
            raise ValidationError({field: _(_REQUIRED_FOR[trigger.kind])})


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
        raise ValidationError({"kind": _("unknown trigger kind %(kind)r") % {"kind": trigger.kind}})
    _required(trigger)
    if trigger.interval_seconds is not None and trigger.kind == TriggerKind.INTERVAL:
        if not 1 <= trigger.interval_seconds <= 30 * 86400:
            raise ValidationError(
                {"interval_seconds": _("must be between 1 second and 30 days (2592000 s)")}
            )
    if trigger.kind in _UNTIMED:
        # A once trigger runs at its date and time, a dependency when another
        # job ends: weekdays do not apply (the admin hides them), so an
        # empty choice is not an error.
        trigger.weekdays = trigger.weekdays or ALL_WEEKDAYS
    else:
        trigger.weekdays = "".join(str(day) for day in sorted(trigger_weekdays(trigger)))
    if trigger.kind in _UNTIMED and (trigger.window_start or trigger.window_end):
        if trigger.kind == TriggerKind.ONCE:
            text = _("a once trigger runs at its date and time: leave the window empty")
        elif trigger.kind == TriggerKind.FILE:
            text = _("a file trigger fires when a file arrives: leave the window empty")
        else:
            text = _("a dependency trigger has no time: leave the window empty")
        raise ValidationError({"window_start": text})
    if trigger.kind == TriggerKind.DEPENDENCY:  # in their canonical order, each once
        try:
            statuses = core.check_dependency_statuses(trigger.upstream_statuses or ["succeeded"])
        except core.TriggerError as exc:
            raise _invalid(exc) from None
        trigger.upstream_statuses = list(statuses)
    else:  # left over from another kind (the admin hides them)
        trigger.upstream_job, trigger.upstream_statuses = None, []
    if trigger.kind == TriggerKind.FILE:
        _check_watch(trigger)
    else:  # left over from another kind
        trigger.watch_folder, trigger.watch_pattern, trigger.watch_recursive = "", "*", False
        trigger.settle_seconds = 2
    validate_trigger_links(trigger)
    try:
        core.validate_jitter(trigger.jitter_seconds)
        if trigger.timezone:
            trigger.timezone = core.canonical_timezone(trigger.timezone)
        if trigger.kind == TriggerKind.CRON:
            trigger.cron_expression = core.normalize_cron(trigger.cron_expression)
        spec = trigger_spec(trigger, now=now)
        if isinstance(spec, core.OnceSpec) and not _changed(trigger, "run_at"):
            return
        first_fire(core.validate_spec(spec, now=now), now=now)
    except core.TriggerError as exc:
        raise _invalid(exc) from None


def _check_watch(trigger: Trigger) -> None:
    """A file trigger (F-16): the pure checks (absolute folder, a pattern for
    a name, the settle time), then that the folder is there and readable on
    this machine; the folder and pattern are stored tidied."""
    try:
        spec = core.validate_spec(trigger_spec(trigger), now=datetime.now(UTC))
    except core.TriggerError as exc:
        raise _invalid(exc) from None
    assert isinstance(spec, core.FileSpec)
    trigger.watch_folder, trigger.watch_pattern = spec.folder, spec.pattern
    problem = folder_problem(spec.folder)
    if problem:
        raise ValidationError({"watch_folder": problem})


def folder_problem(folder: str) -> str | None:
    """Why a watcher could not watch `folder` on this machine, if it could
    not: first whether it may (the folder with its links resolved inside
    TAKT_WATCH_ROOTS, or no system folder when that is unset), so the answer
    says nothing about what exists where it may not look; then whether it
    is there and readable."""
    real = os.path.realpath(folder)
    roots = [os.path.realpath(root) for root in settings.TAKT_WATCH_ROOTS]
    refused = root_problem(real, roots)
    if refused:
        shown = folder if real == folder else f"{folder} ({real})"
        return _(refused) % {"folder": printable(shown), "roots": ":".join(roots)}
    if not os.path.exists(folder):
        return _("%(folder)s does not exist on %(host)s") % {
            "folder": folder,
            "host": socket.gethostname(),
        }
    if not os.path.isdir(folder):
        return _("%(folder)s is a file, not a folder") % {"folder": folder}
    if not os.access(folder, os.R_OK | os.X_OK):
        return _("%(folder)s is not readable by the user Takt runs as (uid %(uid)s)") % {
            "folder": folder,
            "uid": os.getuid(),
        }
    return None


def watch_warnings(trigger: Trigger, *, limit: int = 10_000) -> list[str]:
    """What is likely wrong with a file trigger that is not refused: a
    pattern that matches none of the files in the folder now (warned, as a
    folder may be empty until the first file comes)."""
    if trigger.kind != TriggerKind.FILE or folder_problem(trigger.watch_folder):
        return []
    warnings = []
    job = trigger.job if trigger.job_id else None
    if job is not None and job.overlap_policy in (OverlapPolicy.SKIP, OverlapPolicy.BUFFER_ONE):
        warnings.append(
            f"the job's overlap policy is '{job.overlap_policy}': a file that arrives while"
            " its run for another file is active is recorded skipped; 'buffer_all' runs"
            " each file in turn"
        )
    spec = trigger_spec(trigger)
    assert isinstance(spec, core.FileSpec)
    names: list[str] = []
    for root, dirs, files in os.walk(spec.folder):
        names += [os.path.join(root, name) for name in files]
        if not spec.recursive or len(names) > limit:
            break
        dirs[:] = [d for d in dirs if not d.startswith(".")]
    if not names or any(takes(spec, path) for path in names):
        return warnings
    folded = [
        path
        for path in names
        if fnmatch.fnmatch(os.path.basename(path).lower(), spec.pattern.lower())
    ]
    hint = (
        f"; names are matched case-sensitively, and {len(folded)} would match"
        f" ignoring case (e.g. {printable(os.path.basename(folded[0]))})"
        if folded
        else ""
    )
    return [
        *warnings,
        f"no file in {spec.folder} matches {spec.pattern} now ({len(names)} file(s)"
        f" there){hint}: the trigger waits for one that does",
    ]


def first_fire(spec: core.TriggerSpec, *, now: datetime) -> datetime | None:
    """compute_first_fire, refusing a repeating trigger that never fires.
    validate_spec catches constraints that allow nothing; this catches a
    fixed-rate interval without start_at whose phase (set by `now`) misses
    them, e.g. every 24 hours from 12:00 with a window 08:00-09:00. Raises
    ValidationError on "window_start", else "weekdays", else
    "exclude_calendars"."""
    first = core.compute_first_fire(spec, now=now)
    if first is not None or isinstance(spec, core.OnceSpec | core.AfterSpec | core.FileSpec):
        return first
    if spec.constraints is None:
        return first
    constraints = spec.constraints
    if constraints.window_start is not None:
        field = "window_start"
        text = _("never fires: none of its fire times after now falls inside the window")
    elif len(constraints.weekdays) < 7:
        field = "weekdays"
        text = _("never fires: none of its fire times after now falls on the chosen weekdays")
    else:
        field = "exclude_calendars"
        text = _("never fires: none of its fire times after now falls outside the excluded days")
    if isinstance(spec, core.IntervalSpec) and spec.start_at is None:
        text = _("%(problem)s: set start_at to a time it may fire at, which fixes the phase") % {
            "problem": text
        }
    raise ValidationError({field: text})


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
    pending: list[HolidayCalendar] | None = staged_calendars(trigger)
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
    `first_fire`)."""
    if trigger.pk is None or schedule_changed(trigger):
        if trigger.pk is not None and staged_calendars(trigger) is None:
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
            trigger.next_run_at = first_fire(trigger_spec(trigger, now=now), now=now)
        except core.TriggerError as exc:
            raise _invalid(exc) from None
    job = trigger.job if trigger.job_id else None
    runnable = job is not None and job.enabled and not job.paused and job.parent_id is None
    trigger.active = bool(trigger.enabled and runnable)
